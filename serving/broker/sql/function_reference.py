"""Every function of Druid 33's SQL reference, listed once: its group (and the reference page that
documents it), Druid's signature, the rule for its result type, and a call template the differential
corpus fills with LONG, DOUBLE, STRING, NULL and TIME arguments.

Sources: the pages of :data:`GROUPS` (Druid 33.0.0 docs, ``docs/querying/sql-*.md`` in apache/druid) and
Druid 33's own ``INFORMATION_SCHEMA.ROUTINES`` (``tests/integration/test_druid_functions.py`` checks that
every routine Druid lists is here). Whether radstack implements a function is not declared here: it is
probed from the translator (:mod:`serving.broker.sql.function_registry`), so this table cannot claim
what the code does not do.

Return-type rules (:mod:`serving.broker.sql.type_rules` applies them): ``INTEGER`` (a LONG Druid types
``INTEGER`` in SQL), ``ARG2`` (the second argument's type), ``LONG``, ``DOUBLE``, ``STRING``,
``BOOLEAN``, ``TIMESTAMP``, ``ARRAY`` (an array of the argument's element type), ``STRING_ARRAY``,
``JSON`` (``COMPLEX<json>``), ``COMPLEX`` (a sketch), ``ARG`` (the first argument's type), ``ARG_ELEMENT``
(the array argument's element type), ``NUMERIC`` (LONG when every numeric argument is LONG, else DOUBLE),
``COMMON`` (the least restrictive type of the arguments), ``SUM`` (LONG over LONG, DOUBLE otherwise).

Template placeholders: ``{n}`` a number (LONG or DOUBLE column, literal or NULL), ``{l}`` a LONG,
``{d}`` a DOUBLE, ``{s}`` a string (column, literal or NULL), ``{c}`` a string column, ``{t}`` a timestamp,
``{i}`` a small integer literal, ``{p}`` an ISO period, ``{u}`` a time unit keyword, ``{a}`` a string
array, ``{v}`` a string literal (Druid plans the element argument of array functions as a constant: a
column there fails inside Druid 33 with a 500), ``{x}`` any scalar.
"""

from __future__ import annotations

from dataclasses import dataclass

DOCS = "https://druid.apache.org/docs/33.0.0/querying/"

#: group → (title, the reference page and anchor that documents it)
GROUPS: dict[str, tuple[str, str]] = {
    "numeric": ("Scalar, numeric", "sql-scalar.md#numeric-functions"),
    "string": ("Scalar, string", "sql-scalar.md#string-functions"),
    "time": ("Scalar, date and time", "sql-scalar.md#date-and-time-functions"),
    "reduction": ("Scalar, reduction", "sql-scalar.md#reduction-functions"),
    "ip": ("Scalar, IP address", "sql-scalar.md#ip-address-functions"),
    "sketch": ("Scalar, sketch", "sql-scalar.md#sketch-functions"),
    "other": ("Scalar, other", "sql-scalar.md#other-scalar-functions"),
    "array": ("Array", "sql-array-functions.md"),
    "multi_value": ("Multi-value string", "sql-multivalue-string-functions.md"),
    "json": ("JSON", "sql-json-functions.md"),
    "aggregation": ("Aggregation", "sql-aggregations.md"),
    "window": ("Window", "sql-window-functions.md#window-function-reference"),
}

#: NAME | group | Druid's signature | result type rule | call template | Druid extension ("" = core)
_TABLE = """
ABS | numeric | ABS(<NUMERIC>) | ARG | ABS({n})
ACOS | numeric | ACOS(<NUMERIC>) | DOUBLE | ACOS({n} / 1000.0)
ASIN | numeric | ASIN(<NUMERIC>) | DOUBLE | ASIN({n} / 1000.0)
ATAN | numeric | ATAN(<NUMERIC>) | DOUBLE | ATAN({n})
ATAN2 | numeric | ATAN2(<NUMERIC>, <NUMERIC>) | DOUBLE | ATAN2({n}, {n})
BITWISE_AND | numeric | BITWISE_AND(expr1, expr2) | LONG | BITWISE_AND({l}, {i})
BITWISE_COMPLEMENT | numeric | BITWISE_COMPLEMENT(expr) | LONG | BITWISE_COMPLEMENT({l})
BITWISE_CONVERT_DOUBLE_TO_LONG_BITS | numeric | BITWISE_CONVERT_DOUBLE_TO_LONG_BITS(expr) | LONG | BITWISE_CONVERT_DOUBLE_TO_LONG_BITS({d})
BITWISE_CONVERT_LONG_BITS_TO_DOUBLE | numeric | BITWISE_CONVERT_LONG_BITS_TO_DOUBLE(expr) | DOUBLE | BITWISE_CONVERT_LONG_BITS_TO_DOUBLE({l})
BITWISE_OR | numeric | BITWISE_OR(expr1, expr2) | LONG | BITWISE_OR({l}, {i})
BITWISE_SHIFT_LEFT | numeric | BITWISE_SHIFT_LEFT(expr1, expr2) | LONG | BITWISE_SHIFT_LEFT({l}, {i})
BITWISE_SHIFT_RIGHT | numeric | BITWISE_SHIFT_RIGHT(expr1, expr2) | LONG | BITWISE_SHIFT_RIGHT({l}, {i})
BITWISE_XOR | numeric | BITWISE_XOR(expr1, expr2) | LONG | BITWISE_XOR({l}, {i})
CEIL | numeric | CEIL(<NUMERIC>) / CEIL(<TIMESTAMP> TO <TIME_UNIT>) | ARG | CEIL({n})
COS | numeric | COS(<NUMERIC>) | DOUBLE | COS({n})
COT | numeric | COT(<NUMERIC>) | DOUBLE | COT({n} + 0.5)
DEGREES | numeric | DEGREES(<NUMERIC>) | DOUBLE | DEGREES({n})
DIV | numeric | DIV(x, y) | LONG | DIV({l}, {i})
EXP | numeric | EXP(<NUMERIC>) | DOUBLE | EXP({n} / 100.0)
FLOOR | numeric | FLOOR(<NUMERIC>) / FLOOR(<TIMESTAMP> TO <TIME_UNIT>) | ARG | FLOOR({n})
HUMAN_READABLE_BINARY_BYTE_FORMAT | numeric | HUMAN_READABLE_BINARY_BYTE_FORMAT(value[, precision]) | STRING | HUMAN_READABLE_BINARY_BYTE_FORMAT({l} * 1000)
HUMAN_READABLE_DECIMAL_BYTE_FORMAT | numeric | HUMAN_READABLE_DECIMAL_BYTE_FORMAT(value[, precision]) | STRING | HUMAN_READABLE_DECIMAL_BYTE_FORMAT({l} * 1000)
HUMAN_READABLE_DECIMAL_FORMAT | numeric | HUMAN_READABLE_DECIMAL_FORMAT(value[, precision]) | STRING | HUMAN_READABLE_DECIMAL_FORMAT({l} * 1000)
LN | numeric | LN(<NUMERIC>) | DOUBLE | LN({n} + 1)
LOG10 | numeric | LOG10(<NUMERIC>) | DOUBLE | LOG10({n} + 1)
MOD | numeric | MOD(x, y) | ARG2 | MOD({l}, {i})
PI | numeric | PI | DOUBLE | PI * {n}
POWER | numeric | POWER(base, exponent) | DOUBLE | POWER({n}, {i})
RADIANS | numeric | RADIANS(expr) | DOUBLE | RADIANS({n})
ROUND | numeric | ROUND(expr[, digits]) | ARG | ROUND({n}, {i})
SAFE_DIVIDE | numeric | SAFE_DIVIDE(x, y) | NUMERIC | SAFE_DIVIDE({n}, {n})
SIN | numeric | SIN(expr) | DOUBLE | SIN({n})
SQRT | numeric | SQRT(<NUMERIC>) | DOUBLE | SQRT({n})
TAN | numeric | TAN(expr) | DOUBLE | TAN({n})
TRUNC | numeric | TRUNC(expr[, digits]) | ARG | TRUNC({n}, {i})
TRUNCATE | numeric | TRUNCATE(expr[, digits]) | ARG | TRUNCATE({n}, {i})
BTRIM | string | BTRIM(<CHARACTER>, [<CHARACTER>]) | STRING | BTRIM({s}, 'a')
CHAR_LENGTH | string | CHAR_LENGTH(expr) | INTEGER | CHAR_LENGTH({s})
CHARACTER_LENGTH | string | CHARACTER_LENGTH(expr) | INTEGER | CHARACTER_LENGTH({s})
CONCAT | string | CONCAT(expr, expr...) | STRING | CONCAT({s}, '-', {x})
CONTAINS_STRING | string | CONTAINS_STRING(<CHARACTER>, <CHARACTER>) | BOOLEAN | CONTAINS_STRING({s}, 'o')
DECODE_BASE64_UTF8 | string | DECODE_BASE64_UTF8(expr) | STRING | DECODE_BASE64_UTF8('aGVsbG8=')
ICONTAINS_STRING | string | ICONTAINS_STRING(<expr>, str) | BOOLEAN | ICONTAINS_STRING({s}, 'O')
LEFT | string | LEFT(expr, [length]) | STRING | LEFT({s}, {i})
LENGTH | string | LENGTH(expr) | INTEGER | LENGTH({s})
LOOKUP | string | LOOKUP(<CHARACTER>, <CHARACTER>[, <CHARACTER>]) | STRING | LOOKUP({s}, 'no_such_lookup', 'missing')
LOWER | string | LOWER(expr) | STRING | LOWER({s})
LPAD | string | LPAD(<CHARACTER>, <INTEGER>, [<CHARACTER>]) | STRING | LPAD({s}, {i} + 8, '*')
LTRIM | string | LTRIM(<CHARACTER>, [<CHARACTER>]) | STRING | LTRIM({s}, 'b')
PARSE_LONG | string | PARSE_LONG(<CHARACTER>, [<INTEGER>]) | LONG | PARSE_LONG(CAST({l} AS VARCHAR))
POSITION | string | POSITION(<CHARACTER> IN <CHARACTER> [FROM <INTEGER>]) | INTEGER | POSITION('o' IN {s})
REGEXP_EXTRACT | string | REGEXP_EXTRACT(<CHARACTER>, <CHARACTER>, [<INTEGER>]) | STRING | REGEXP_EXTRACT({s}, '([a-z]+)', 1)
REGEXP_LIKE | string | REGEXP_LIKE(<CHARACTER>, <CHARACTER>) | BOOLEAN | REGEXP_LIKE({s}, '^[a-m]')
REGEXP_REPLACE | string | REGEXP_REPLACE(<CHARACTER>, <CHARACTER>, <CHARACTER>) | STRING | REGEXP_REPLACE({s}, '[aeiou]', '_')
REPEAT | string | REPEAT(<CHARACTER>, [<INTEGER>]) | STRING | REPEAT({s}, {i})
REPLACE | string | REPLACE(expr, pattern, replacement) | STRING | REPLACE({s}, 'o', '0')
REVERSE | string | REVERSE(expr) | STRING | REVERSE({s})
RIGHT | string | RIGHT(expr, [length]) | STRING | RIGHT({s}, {i})
RPAD | string | RPAD(<CHARACTER>, <INTEGER>, [<CHARACTER>]) | STRING | RPAD({s}, {i} + 3, '-')
RTRIM | string | RTRIM(<CHARACTER>, [<CHARACTER>]) | STRING | RTRIM({s}, 'm')
STRING_FORMAT | string | STRING_FORMAT(pattern[, args...]) | STRING | STRING_FORMAT('%s/%s', {s}, {l})
STRLEN | string | STRLEN(expr) | INTEGER | STRLEN({s})
STRPOS | string | STRPOS(<CHARACTER>, <CHARACTER>) | INTEGER | STRPOS({s}, 'o')
SUBSTR | string | SUBSTR(<CHARACTER>, <INTEGER>, [<INTEGER>]) | STRING | SUBSTR({s}, {i}, {i})
SUBSTRING | string | SUBSTRING(<CHARACTER>, <INTEGER>, [<INTEGER>]) | STRING | SUBSTRING({s}, {i}, {i})
TEXTCAT | string | TEXTCAT(<CHARACTER>, <CHARACTER>) | STRING | TEXTCAT({s}, {s})
TRIM | string | TRIM([BOTH|LEADING|TRAILING] [<chars> FROM] expr) | STRING | TRIM(BOTH 'o' FROM {s})
UPPER | string | UPPER(expr) | STRING | UPPER({s})
CURRENT_DATE | time | CURRENT_DATE | TIMESTAMP | CURRENT_DATE > {t}
CURRENT_TIMESTAMP | time | CURRENT_TIMESTAMP | TIMESTAMP | CURRENT_TIMESTAMP > {t}
DATE_TRUNC | time | DATE_TRUNC(<CHARACTER>, <TIMESTAMP>) | TIMESTAMP | DATE_TRUNC('hour', {t})
EXTRACT | time | EXTRACT(<TIME_UNIT> FROM <TIMESTAMP>) | LONG | EXTRACT({u} FROM {t})
MILLIS_TO_TIMESTAMP | time | MILLIS_TO_TIMESTAMP(millis_expr) | TIMESTAMP | MILLIS_TO_TIMESTAMP(TIMESTAMP_TO_MILLIS({t}) + {l})
TIME_CEIL | time | TIME_CEIL(<TIMESTAMP>, <period>, [<origin>, [<timezone>]]) | TIMESTAMP | TIME_CEIL({t}, {p})
TIME_EXTRACT | time | TIME_EXTRACT(<TIMESTAMP>, [<unit>, [<timezone>]]) | LONG | TIME_EXTRACT({t}, '{u}')
TIME_FLOOR | time | TIME_FLOOR(<TIMESTAMP>, <period>, [<origin>, [<timezone>]]) | TIMESTAMP | TIME_FLOOR({t}, {p})
TIME_FORMAT | time | TIME_FORMAT(<TIMESTAMP>, [<pattern>, [<timezone>]]) | STRING | TIME_FORMAT({t}, 'yyyy-MM-dd HH:mm')
TIME_IN_INTERVAL | time | TIME_IN_INTERVAL(<TIMESTAMP>, <CHARACTER>) | BOOLEAN | TIME_IN_INTERVAL({t}, '2026-01-01T01:00:00Z/PT1H')
TIME_PARSE | time | TIME_PARSE(<string_expr>, [<pattern>, [<timezone>]]) | TIMESTAMP | TIME_PARSE(TIME_FORMAT({t}, 'yyyy-MM-dd HH'), 'yyyy-MM-dd HH')
TIME_SHIFT | time | TIME_SHIFT(<TIMESTAMP>, <period>, <step>, [<timezone>]) | TIMESTAMP | TIME_SHIFT({t}, {p}, {i})
TIMESTAMP_TO_MILLIS | time | TIMESTAMP_TO_MILLIS(<TIMESTAMP>) | LONG | TIMESTAMP_TO_MILLIS({t})
TIMESTAMPADD | time | TIMESTAMPADD(<unit>, <count>, <TIMESTAMP>) | TIMESTAMP | TIMESTAMPADD({u}, {i}, {t})
TIMESTAMPDIFF | time | TIMESTAMPDIFF(<unit>, <TIMESTAMP>, <TIMESTAMP>) | INTEGER | TIMESTAMPDIFF(MINUTE, TIMESTAMP '2026-01-01 00:00:00', {t})
GREATEST | reduction | GREATEST([expr1, ...]) | COMMON | GREATEST({n}, {n})
LEAST | reduction | LEAST([expr1, ...]) | COMMON | LEAST({n}, {n})
IPV4_MATCH | ip | IPV4_MATCH(address, subnet) | BOOLEAN | IPV4_MATCH('192.168.0.' || CAST({l} AS VARCHAR), '192.168.0.0/28')
IPV4_PARSE | ip | IPV4_PARSE(address) | LONG | IPV4_PARSE('10.0.0.' || CAST({l} AS VARCHAR))
IPV4_STRINGIFY | ip | IPV4_STRINGIFY(address) | STRING | IPV4_STRINGIFY({l} + 167772160)
IPV6_MATCH | ip | IPV6_MATCH(address, subnet) | BOOLEAN | IPV6_MATCH('2001:db8::' || CAST({l} AS VARCHAR), '2001:db8::/120')
BLOOM_FILTER_TEST | other | BLOOM_FILTER_TEST(expr, <STRING>) | BOOLEAN | BLOOM_FILTER_TEST({s}, 'AAAAAQAAAAAA') | druid-bloom-filter
CASE | other | CASE expr WHEN value1 THEN result1 [ WHEN ... ] [ ELSE resultN ] END | COMMON | CASE WHEN {n} > 2 THEN {s} ELSE 'other' END
CAST | other | CAST(value AS TYPE) | STRING | CAST({n} AS VARCHAR)
COALESCE | other | COALESCE(expr, expr, ...) | COMMON | COALESCE({s}, 'none')
DECODE_BASE64_COMPLEX | other | DECODE_BASE64_COMPLEX(dataType, expr) | COMPLEX | DECODE_BASE64_COMPLEX('hyperUnique', 'AQAAAA==')
IFNULL | other | IFNULL(expr, expr) | COMMON | IFNULL({s}, 'none')
NULLIF | other | NULLIF(value1, value2) | ARG | NULLIF({s}, {s})
NVL | other | NVL(e1, e2) | COMMON | NVL({s}, 'n/a')
DS_CDF | sketch | DS_CDF(expr, splitPoint0, splitPoint1, ...) | ARRAY | DS_CDF(DS_QUANTILES_SKETCH({n}), 1, 10) | druid-datasketches
DS_GET_QUANTILE | sketch | DS_GET_QUANTILE(expr, fraction) | DOUBLE | DS_GET_QUANTILE(DS_QUANTILES_SKETCH({n}), 0.5) | druid-datasketches
DS_GET_QUANTILES | sketch | DS_GET_QUANTILES(expr, fraction0, fraction1, ...) | ARRAY | DS_GET_QUANTILES(DS_QUANTILES_SKETCH({n}), 0.25, 0.75) | druid-datasketches
DS_HISTOGRAM | sketch | DS_HISTOGRAM(expr, splitPoint0, splitPoint1, ...) | ARRAY | DS_HISTOGRAM(DS_QUANTILES_SKETCH({n}), 1, 10) | druid-datasketches
DS_QUANTILE_SUMMARY | sketch | DS_QUANTILE_SUMMARY(expr) | STRING | DS_QUANTILE_SUMMARY(DS_QUANTILES_SKETCH({n})) | druid-datasketches
DS_RANK | sketch | DS_RANK(expr, value) | DOUBLE | DS_RANK(DS_QUANTILES_SKETCH({n}), 2) | druid-datasketches
DS_TUPLE_DOUBLES_INTERSECT | sketch | DS_TUPLE_DOUBLES_INTERSECT(expr, ..., [nominalEntries]) | COMPLEX | DS_TUPLE_DOUBLES_INTERSECT(DS_TUPLE_DOUBLES({c}, {n}), DS_TUPLE_DOUBLES({c}, {n})) | druid-datasketches
DS_TUPLE_DOUBLES_METRICS_SUM_ESTIMATE | sketch | DS_TUPLE_DOUBLES_METRICS_SUM_ESTIMATE(expr) | ARRAY | DS_TUPLE_DOUBLES_METRICS_SUM_ESTIMATE(DS_TUPLE_DOUBLES({c}, {n})) | druid-datasketches
DS_TUPLE_DOUBLES_NOT | sketch | DS_TUPLE_DOUBLES_NOT(expr, ..., [nominalEntries]) | COMPLEX | DS_TUPLE_DOUBLES_NOT(DS_TUPLE_DOUBLES({c}, {n}), DS_TUPLE_DOUBLES({c}, {n})) | druid-datasketches
DS_TUPLE_DOUBLES_UNION | sketch | DS_TUPLE_DOUBLES_UNION(expr, ..., [nominalEntries]) | COMPLEX | DS_TUPLE_DOUBLES_UNION(DS_TUPLE_DOUBLES({c}, {n}), DS_TUPLE_DOUBLES({c}, {n})) | druid-datasketches
HLL_SKETCH_ESTIMATE | sketch | HLL_SKETCH_ESTIMATE(expr, [round]) | DOUBLE | HLL_SKETCH_ESTIMATE(DS_HLL({c})) | druid-datasketches
HLL_SKETCH_ESTIMATE_WITH_ERROR_BOUNDS | sketch | HLL_SKETCH_ESTIMATE_WITH_ERROR_BOUNDS(expr, [numStdDev]) | ARRAY | HLL_SKETCH_ESTIMATE_WITH_ERROR_BOUNDS(DS_HLL({c})) | druid-datasketches
HLL_SKETCH_TO_STRING | sketch | HLL_SKETCH_TO_STRING(expr) | STRING | HLL_SKETCH_TO_STRING(DS_HLL({c})) | druid-datasketches
HLL_SKETCH_UNION | sketch | HLL_SKETCH_UNION([lgK, tgtHllType], expr0, expr1, ...) | COMPLEX | HLL_SKETCH_ESTIMATE(HLL_SKETCH_UNION(DS_HLL({c}), DS_HLL({c}))) | druid-datasketches
THETA_SKETCH_ESTIMATE | sketch | THETA_SKETCH_ESTIMATE(expr) | DOUBLE | THETA_SKETCH_ESTIMATE(DS_THETA({c})) | druid-datasketches
THETA_SKETCH_ESTIMATE_WITH_ERROR_BOUNDS | sketch | THETA_SKETCH_ESTIMATE_WITH_ERROR_BOUNDS(expr, errorBoundsStdDev) | STRING | THETA_SKETCH_ESTIMATE_WITH_ERROR_BOUNDS(DS_THETA({c}), 1) | druid-datasketches
THETA_SKETCH_INTERSECT | sketch | THETA_SKETCH_INTERSECT([size], expr0, expr1, ...) | COMPLEX | THETA_SKETCH_ESTIMATE(THETA_SKETCH_INTERSECT(DS_THETA({c}), DS_THETA({c}))) | druid-datasketches
THETA_SKETCH_NOT | sketch | THETA_SKETCH_NOT([size], expr0, expr1, ...) | COMPLEX | THETA_SKETCH_ESTIMATE(THETA_SKETCH_NOT(DS_THETA({c}), DS_THETA({c}))) | druid-datasketches
THETA_SKETCH_UNION | sketch | THETA_SKETCH_UNION([size], expr0, expr1, ...) | COMPLEX | THETA_SKETCH_ESTIMATE(THETA_SKETCH_UNION(DS_THETA({c}), DS_THETA({c}))) | druid-datasketches
ARRAY | array | ARRAY[expr1, expr2, ...] | ARRAY | ARRAY[{s}, 'x']
ARRAY_APPEND | array | ARRAY_APPEND(arr1, expr) | ARRAY | ARRAY_APPEND({a}, {v})
ARRAY_CONCAT | array | ARRAY_CONCAT(arr1, arr2) | ARRAY | ARRAY_CONCAT({a}, {a})
ARRAY_CONTAINS | array | ARRAY_CONTAINS(arr, expr) | BOOLEAN | ARRAY_CONTAINS({a}, {v})
ARRAY_LENGTH | array | ARRAY_LENGTH(arr) | INTEGER | ARRAY_LENGTH({a})
ARRAY_OFFSET | array | ARRAY_OFFSET(arr, long) | ARG_ELEMENT | ARRAY_OFFSET(MV_TO_ARRAY({c}), {i})
ARRAY_OFFSET_OF | array | ARRAY_OFFSET_OF(arr, expr) | INTEGER | ARRAY_OFFSET_OF(MV_TO_ARRAY({c}), {v})
ARRAY_ORDINAL | array | ARRAY_ORDINAL(arr, long) | ARG_ELEMENT | ARRAY_ORDINAL(MV_TO_ARRAY({c}), {i})
ARRAY_ORDINAL_OF | array | ARRAY_ORDINAL_OF(arr, expr) | INTEGER | ARRAY_ORDINAL_OF(MV_TO_ARRAY({c}), {v})
ARRAY_OVERLAP | array | ARRAY_OVERLAP(arr1, arr2) | BOOLEAN | ARRAY_OVERLAP({a}, {a})
ARRAY_PREPEND | array | ARRAY_PREPEND(expr, arr) | ARRAY | ARRAY_PREPEND({v}, {a})
ARRAY_QUANTILE | array | ARRAY_QUANTILE(<ARRAY>, <NUMERIC>) | DOUBLE | ARRAY_QUANTILE(ARRAY[{n}, 1, 2], 0.5)
ARRAY_SLICE | array | ARRAY_SLICE(arr, start, end) | ARRAY | ARRAY_SLICE({a}, 0, {i})
ARRAY_TO_MV | array | ARRAY_TO_MV(arr) | STRING | ARRAY_TO_MV({a})
ARRAY_TO_STRING | array | ARRAY_TO_STRING(arr, str) | STRING | ARRAY_TO_STRING({a}, '|')
SCALAR_IN_ARRAY | array | SCALAR_IN_ARRAY(expr, arr) | BOOLEAN | SCALAR_IN_ARRAY({s}, {a})
STRING_TO_ARRAY | array | STRING_TO_ARRAY(str1, str2) | STRING_ARRAY | STRING_TO_ARRAY({s}, 'o')
MV_APPEND | multi_value | MV_APPEND(arr1, expr) | STRING | MV_TO_STRING(MV_APPEND({c}, 'z'), ',')
MV_CONCAT | multi_value | MV_CONCAT(arr1, arr2) | STRING | MV_TO_STRING(MV_CONCAT({c}, {c}), ',')
MV_CONTAINS | multi_value | MV_CONTAINS(arr, expr) | BOOLEAN | MV_CONTAINS({c}, {v})
MV_FILTER_NONE | multi_value | MV_FILTER_NONE(expr, arr) | STRING | MV_FILTER_NONE({c}, ARRAY['bing.com', 'Berlin', 'Druid'])
MV_FILTER_ONLY | multi_value | MV_FILTER_ONLY(expr, arr) | STRING | MV_FILTER_ONLY({c}, ARRAY['bing.com', 'Berlin', 'Druid'])
MV_LENGTH | multi_value | MV_LENGTH(arr) | INTEGER | MV_LENGTH({c})
MV_OFFSET | multi_value | MV_OFFSET(arr, long) | STRING | MV_OFFSET({c}, 0)
MV_OFFSET_OF | multi_value | MV_OFFSET_OF(arr, expr) | INTEGER | MV_OFFSET_OF({c}, {v})
MV_ORDINAL | multi_value | MV_ORDINAL(arr, long) | STRING | MV_ORDINAL({c}, 1)
MV_ORDINAL_OF | multi_value | MV_ORDINAL_OF(arr, expr) | INTEGER | MV_ORDINAL_OF({c}, {v})
MV_OVERLAP | multi_value | MV_OVERLAP(arr1, arr2) | BOOLEAN | MV_OVERLAP({c}, ARRAY['bing.com', 'Berlin', 'Druid'])
MV_PREPEND | multi_value | MV_PREPEND(expr, arr) | STRING | MV_TO_STRING(MV_PREPEND('a', {c}), ',')
MV_SLICE | multi_value | MV_SLICE(arr, start, end) | STRING | MV_TO_STRING(MV_SLICE({c}, 0, 1), ',')
MV_TO_ARRAY | multi_value | MV_TO_ARRAY(str) | STRING_ARRAY | MV_TO_ARRAY({c})
MV_TO_STRING | multi_value | MV_TO_STRING(arr, str) | STRING | MV_TO_STRING({c}, ',')
STRING_TO_MV | multi_value | STRING_TO_MV(str1, str2) | STRING | STRING_TO_MV({s}, 'o')
JSON_KEYS | json | JSON_KEYS(expr, path) | STRING_ARRAY | JSON_KEYS(JSON_OBJECT(KEY 'k' VALUE {x}), '$')
JSON_MERGE | json | JSON_MERGE(expr1, expr2[, expr3 ...]) | JSON | TO_JSON_STRING(JSON_MERGE(JSON_OBJECT(KEY 'a' VALUE {x}), JSON_OBJECT(KEY 'b' VALUE {s})))
JSON_OBJECT | json | JSON_OBJECT(KEY expr1 VALUE expr2[, KEY expr3 VALUE expr4, ...]) | JSON | TO_JSON_STRING(JSON_OBJECT(KEY 'k' VALUE {x}))
JSON_PATHS | json | JSON_PATHS(expr) | STRING_ARRAY | JSON_PATHS(JSON_OBJECT(KEY 'k' VALUE {x}))
JSON_QUERY | json | JSON_QUERY(expr, path) | JSON | TO_JSON_STRING(JSON_QUERY(JSON_OBJECT(KEY 'k' VALUE {x}), '$.k'))
JSON_QUERY_ARRAY | json | JSON_QUERY_ARRAY(expr, path) | ARRAY | ARRAY_LENGTH(JSON_QUERY_ARRAY(JSON_OBJECT(KEY 'k' VALUE {x}), '$.k'))
JSON_VALUE | json | JSON_VALUE(expr, path [RETURNING sqlType]) | STRING | JSON_VALUE(JSON_OBJECT(KEY 'k' VALUE {s}), '$.k')
PARSE_JSON | json | PARSE_JSON(expr) | JSON | TO_JSON_STRING(PARSE_JSON('{"k": ' || CAST({l} AS VARCHAR) || '}'))
TO_JSON_STRING | json | TO_JSON_STRING(expr) | STRING | TO_JSON_STRING({x})
TRY_PARSE_JSON | json | TRY_PARSE_JSON(expr) | JSON | TO_JSON_STRING(TRY_PARSE_JSON({s}))
ANY_VALUE | aggregation | ANY_VALUE(expr, [maxBytesPerValue, [aggregateMultipleValues]]) | ARG | ANY_VALUE({n})
APPROX_COUNT_DISTINCT | aggregation | APPROX_COUNT_DISTINCT(expr) | LONG | APPROX_COUNT_DISTINCT({c})
APPROX_COUNT_DISTINCT_BUILTIN | aggregation | APPROX_COUNT_DISTINCT_BUILTIN(expr) | LONG | APPROX_COUNT_DISTINCT_BUILTIN({c})
APPROX_COUNT_DISTINCT_DS_HLL | aggregation | APPROX_COUNT_DISTINCT_DS_HLL(expr, [<NUMERIC>, <CHARACTER>]) | LONG | APPROX_COUNT_DISTINCT_DS_HLL({c}) | druid-datasketches
APPROX_COUNT_DISTINCT_DS_HLL_UTF8 | aggregation | APPROX_COUNT_DISTINCT_DS_HLL_UTF8(expr, [lgK, [tgtHllType]]) | LONG | APPROX_COUNT_DISTINCT_DS_HLL_UTF8({c}) | druid-datasketches
APPROX_COUNT_DISTINCT_DS_THETA | aggregation | APPROX_COUNT_DISTINCT_DS_THETA(expr, [<NUMERIC>]) | LONG | APPROX_COUNT_DISTINCT_DS_THETA({c}) | druid-datasketches
APPROX_QUANTILE | aggregation | APPROX_QUANTILE(expr, <NUMERIC>, [<NUMERIC>]) | DOUBLE | APPROX_QUANTILE({n}, 0.5) | druid-histogram
APPROX_QUANTILE_DS | aggregation | APPROX_QUANTILE_DS(expr, <NUMERIC>, [<NUMERIC>]) | DOUBLE | APPROX_QUANTILE_DS({n}, 0.5) | druid-datasketches
APPROX_QUANTILE_FIXED_BUCKETS | aggregation | APPROX_QUANTILE_FIXED_BUCKETS(expr, <NUMERIC>, <NUMERIC>, <NUMERIC>, <NUMERIC>, [<CHARACTER>]) | DOUBLE | APPROX_QUANTILE_FIXED_BUCKETS({n}, 0.5, 10, 0, 100) | druid-histogram
ARRAY_AGG | aggregation | ARRAY_AGG([DISTINCT] expr, [<NUMERIC>]) | ARRAY | ARRAY_AGG(DISTINCT {c})
ARRAY_CONCAT_AGG | aggregation | ARRAY_CONCAT_AGG([DISTINCT] expr, [<NUMERIC>]) | ARRAY | ARRAY_CONCAT_AGG(DISTINCT MV_TO_ARRAY({c}))
AVG | aggregation | AVG(<NUMERIC>) | DOUBLE | AVG({n})
BIT_AND | aggregation | BIT_AND(expr) | LONG | BIT_AND({l})
BIT_OR | aggregation | BIT_OR(expr) | LONG | BIT_OR({l})
BIT_XOR | aggregation | BIT_XOR(expr) | LONG | BIT_XOR({l})
BLOOM_FILTER | aggregation | BLOOM_FILTER(expr, <NUMERIC>) | COMPLEX | BLOOM_FILTER({c}, 100) | druid-bloom-filter
COUNT | aggregation | COUNT([DISTINCT] expr) / COUNT(*) | LONG | COUNT({x})
DS_HLL | aggregation | DS_HLL(expr, [lgK, tgtHllType]) | COMPLEX | HLL_SKETCH_ESTIMATE(DS_HLL({c})) | druid-datasketches
DS_QUANTILES_SKETCH | aggregation | DS_QUANTILES_SKETCH(expr, [k]) | COMPLEX | DS_GET_QUANTILE(DS_QUANTILES_SKETCH({n}), 0.5) | druid-datasketches
DS_THETA | aggregation | DS_THETA(expr, [size]) | COMPLEX | THETA_SKETCH_ESTIMATE(DS_THETA({c})) | druid-datasketches
DS_TUPLE_DOUBLES | aggregation | DS_TUPLE_DOUBLES(expr, [nominalEntries]) | COMPLEX | DS_TUPLE_DOUBLES_METRICS_SUM_ESTIMATE(DS_TUPLE_DOUBLES({c}, {n})) | druid-datasketches
EARLIEST | aggregation | EARLIEST(expr, [maxBytesPerValue]) | ARG | EARLIEST({n})
EARLIEST_BY | aggregation | EARLIEST_BY(expr, timestampExpr, [maxBytesPerValue]) | ARG | EARLIEST_BY({n}, __time)
GROUPING | aggregation | GROUPING(expr, expr...) | LONG | GROUPING({c})
LATEST | aggregation | LATEST(expr, [maxBytesPerValue]) | ARG | LATEST({n})
LATEST_BY | aggregation | LATEST_BY(expr, timestampExpr, [maxBytesPerValue]) | ARG | LATEST_BY({n}, __time)
LISTAGG | aggregation | LISTAGG(expr, separator, [size]) | STRING | LISTAGG(DISTINCT {c}, ',')
MAX | aggregation | MAX(expr) | ARG | MAX({n})
MIN | aggregation | MIN(expr) | ARG | MIN({n})
STDDEV | aggregation | STDDEV(expr) | DOUBLE | STDDEV({n}) | druid-stats
STDDEV_POP | aggregation | STDDEV_POP(expr) | DOUBLE | STDDEV_POP({n}) | druid-stats
STDDEV_SAMP | aggregation | STDDEV_SAMP(expr) | DOUBLE | STDDEV_SAMP({n}) | druid-stats
STRING_AGG | aggregation | STRING_AGG(expr, separator, [size]) | STRING | STRING_AGG(DISTINCT {c}, ',')
SUM | aggregation | SUM(expr) | SUM | SUM({n})
TDIGEST_GENERATE_SKETCH | aggregation | TDIGEST_GENERATE_SKETCH(expr, [compression]) | COMPLEX | TDIGEST_GENERATE_SKETCH({n}) | druid-tdigestsketch
TDIGEST_QUANTILE | aggregation | TDIGEST_QUANTILE(expr, quantileFraction, [compression]) | DOUBLE | TDIGEST_QUANTILE({n}, 0.5) | druid-tdigestsketch
VAR_POP | aggregation | VAR_POP(expr) | DOUBLE | VAR_POP({n}) | druid-stats
VAR_SAMP | aggregation | VAR_SAMP(expr) | DOUBLE | VAR_SAMP({n}) | druid-stats
VARIANCE | aggregation | VARIANCE(expr) | DOUBLE | VARIANCE({n}) | druid-stats
CUME_DIST | window | CUME_DIST() | DOUBLE | CUME_DIST()
DENSE_RANK | window | DENSE_RANK() | LONG | DENSE_RANK()
FIRST_VALUE | window | FIRST_VALUE(expr) | ARG | FIRST_VALUE({n})
LAG | window | LAG(expr[, offset]) | ARG | LAG({n}, 1)
LAST_VALUE | window | LAST_VALUE(expr) | ARG | LAST_VALUE({n})
LEAD | window | LEAD(expr[, offset]) | ARG | LEAD({n}, 1)
NTILE | window | NTILE(tiles) | LONG | NTILE(3)
PERCENT_RANK | window | PERCENT_RANK() | DOUBLE | PERCENT_RANK()
RANK | window | RANK() | LONG | RANK()
ROW_NUMBER | window | ROW_NUMBER() | LONG | ROW_NUMBER()
"""

#: Routines Druid lists in INFORMATION_SCHEMA.ROUTINES that are operators, syntax or internal to its
#: planner, not functions of its SQL reference (the check against Druid skips them).
NOT_FUNCTIONS = frozenset({
    "+", "-", "$SUM0", "APPEND", "BETWEEN ASYMMETRIC", "BETWEEN SYMMETRIC", "NOT BETWEEN ASYMMETRIC",
    "NOT BETWEEN SYMMETRIC", "LIKE", "NOT LIKE", "ITEM", "ROW", "Reinterpret", "SEARCH", "SINGLE_VALUE",
    "LITERAL_AGG", "CURRENT_TIME", "LOCALTIME", "LOCALTIMESTAMP", "COMPLEX_DECODE_BASE64",
    "JSON_VALUE_ANY", "JSON_VALUE_BIGINT", "JSON_VALUE_DOUBLE", "JSON_VALUE_VARCHAR", "JSON_VALUE_ARRAY_BIGINT",
    "JSON_VALUE_ARRAY_DOUBLE", "JSON_VALUE_ARRAY_VARCHAR",
})


@dataclass(frozen=True)
class DruidFunction:
    name: str
    group: str
    signature: str
    returns: str
    template: str
    extension: str = ""

    @property
    def aggregate(self) -> bool:
        return self.group == "aggregation"

    @property
    def window(self) -> bool:
        return self.group == "window"

    @property
    def page(self) -> str:
        return DOCS + GROUPS[self.group][1]


def _parse(table: str) -> dict[str, DruidFunction]:
    out: dict[str, DruidFunction] = {}
    for line in table.strip().splitlines():
        parts = [p.strip() for p in line.split(" | ")]
        fn = DruidFunction(*parts)
        assert fn.group in GROUPS and fn.name not in out, line
        out[fn.name] = fn
    return out


#: Druid 33's SQL functions by name.
FUNCTIONS: dict[str, DruidFunction] = _parse(_TABLE)
RETURN_RULES = frozenset({"INTEGER", "ARG2", "LONG", "DOUBLE", "STRING", "BOOLEAN", "TIMESTAMP", "ARRAY", "STRING_ARRAY", "JSON",
                          "COMPLEX", "ARG", "ARG_ELEMENT", "NUMERIC", "COMMON", "SUM"})
