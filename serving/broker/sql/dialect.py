"""The Druid SQL dialect as sqlglot should read it (sqlglot's own ``druid`` dialect, tightened).

Calcite-style functions whose argument order sqlglot would misread (``TIMESTAMPADD``,
``TIMESTAMPDIFF``, ``DIV``) are kept as anonymous calls so the rewrite rules see them as written.
"""

from __future__ import annotations

import sqlglot
from sqlglot import exp
from sqlglot.dialects.dialect import NormalizationStrategy
from sqlglot.dialects.druid import Druid
from sqlglot.errors import ParseError, TokenError
from sqlglot.parsers.druid import DruidParser
from sqlglot.tokens import TokenType

from serving.broker.sql.errors import parse_error, validation_error


def _anonymous(name: str):  # type: ignore[no-untyped-def]
    return lambda args: exp.Anonymous(this=name, expressions=args)


def _pi(parser: DruidParser) -> exp.Expression:
    """``PI`` is niladic in Druid (Calcite), as ``CURRENT_DATE`` is; ``PI()`` is read too."""
    parser._match_pair(TokenType.L_PAREN, TokenType.R_PAREN)
    return exp.Pi()


#: where the parser leaves ``ARRAY_AGG``'s size argument (``serving/broker/sql/rules/aggregate_sizes.py``)
MAX_SIZE_BYTES = "druid_max_size_bytes"


def _array_agg(args: list[exp.Expression]) -> exp.Expression:
    """``ARRAY_AGG(expr[, size])`` / ``ARRAY_AGG(DISTINCT expr[, size])``: sqlglot drops the size (or
    keeps it inside the DISTINCT); it is kept in the node's meta instead."""
    first, size = (args[0] if args else exp.Null()), (args[1] if len(args) > 1 else None)
    if isinstance(first, exp.Distinct) and len(first.expressions) > 1:
        first, size = exp.Distinct(expressions=[first.expressions[0]]), first.expressions[1]
    node = exp.ArrayAgg(this=first)
    if size is not None:
        node.meta[MAX_SIZE_BYTES] = size
    return node


def _position(parser: DruidParser) -> exp.Expression:
    """``POSITION(needle IN haystack [FROM start])`` (Calcite's form; sqlglot reads no FROM)."""
    position = parser._parse_position()
    if position.args.get("position") is None and parser._match(TokenType.FROM):
        position.set("position", parser._parse_bitwise())
    return position


def _percent_remainder(**_operands: exp.Expression) -> exp.Expression:
    # Calcite's default conformance, which Druid keeps, has no '%' operator (MOD(a, b) is the function)
    raise validation_error("Percent remainder '%' is not allowed under the current SQL conformance level")


class DruidSqlParser(DruidParser):
    FACTOR = {**DruidParser.FACTOR, TokenType.MOD: _percent_remainder}
    NO_PAREN_FUNCTION_PARSERS = {**DruidParser.NO_PAREN_FUNCTION_PARSERS, "PI": _pi}
    FUNCTION_PARSERS = {**DruidParser.FUNCTION_PARSERS, "POSITION": _position}
    FUNCTIONS = {
        **DruidParser.FUNCTIONS,
        "TIMESTAMPADD": _anonymous("TIMESTAMPADD"),
        "TIMESTAMPDIFF": _anonymous("TIMESTAMPDIFF"),
        "DIV": _anonymous("DIV"),
        "ARRAY_AGG": _array_agg,
    }


class DruidSql(Druid):
    NORMALIZATION_STRATEGY = NormalizationStrategy.CASE_SENSITIVE
    Parser = DruidSqlParser

    class Tokenizer(Druid.tokenizer_class):  # type: ignore[name-defined,misc]
        # DIV is a function in Druid, not MySQL's integer-division operator.
        KEYWORDS = {k: v for k, v in Druid.tokenizer_class.KEYWORDS.items() if k != "DIV"}


def parse(sql: str) -> list[exp.Expression]:
    """Parse Druid SQL into statements; a syntax error becomes Druid's 400 ``Incorrect syntax``."""
    try:
        statements = sqlglot.parse(sql, read=DruidSql)
    except ParseError as e:
        first = e.errors[0] if e.errors else {}
        near = first.get("highlight") or ""
        line, col = first.get("line"), first.get("col")
        where = f" at line {line}, column {col}" if line is not None else ""
        raise parse_error(f"Incorrect syntax near '{near}'{where}") from e
    except TokenError as e:
        raise parse_error(f"Incorrect syntax: {e}") from e
    return [s for s in statements if s is not None]
