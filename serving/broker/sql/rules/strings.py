"""Druid string functions DuckDB spells differently: CONTAINS_STRING, ICONTAINS_STRING, TEXTCAT,
STRLEN, BTRIM, PARSE_LONG, BITWISE_AND/OR/XOR, LISTAGG; and UPPER, which in Druid (Java's
``toUpperCase``) turns ``ß`` into ``SS`` where DuckDB gives ``ẞ``; and REGEXP_EXTRACT, NULL when the
pattern does not match (DuckDB gives ''); and REPEAT, NULL for a count below 1 (DuckDB gives ''); and
REGEXP_REPLACE's replacement, written as Java's
``Matcher.replaceAll`` reads it (``$1`` a group, ``\\$`` a dollar), in RE2's spelling (``\\1``)."""

from __future__ import annotations

from sqlglot import exp

from serving.broker.sql.rules import anonymous_name, call_args
from serving.broker.sql.timeexpr import call
from serving.broker.sql.translation_context import TranslationContext


def strings(node: exp.Expression, ctx: TranslationContext) -> exp.Expression:
    if isinstance(node, exp.Upper):
        return exp.Replace(this=node.copy(), expression=exp.Literal.string("ẞ"), replacement=exp.Literal.string("SS"))
    if isinstance(node, exp.RegexpExtract):
        # the third argument is the capture group (sqlglot reads Druid's as a start position); no match is
        # NULL in Druid, '' in DuckDB (an empty group that matched stays '')
        group = node.args.get("group") or node.args.get("position") or exp.Literal.number(0)
        extract = call("REGEXP_EXTRACT", node.this.copy(), node.expression.copy(), group.copy())
        matches = exp.RegexpLike(this=node.this.copy(), expression=node.expression.copy())
        return exp.Case(ifs=[exp.If(this=matches, true=extract)], default=exp.null())
    if isinstance(node, exp.Repeat) and not node.meta.get("druid_repeat"):
        # REPEAT is NULL for a count below 1; the node stays, so rules/value_limits.py bounds it (a
        # literal count keeps its static bound: only a computed one is wrapped)
        node.meta["druid_repeat"] = True
        times = node.args["times"]
        if isinstance(times, exp.Literal) and not times.is_string:
            # a NULL count (not a NULL in the node's place: REPEAT(STRING_AGG(…), 0) still aggregates)
            if float(times.this) < 1:
                node.set("times", exp.cast(exp.null(), "INTEGER"))
            return node
        below_one = exp.LT(this=times.copy(), expression=exp.Literal.number(1))
        node.set("times", exp.Case(ifs=[exp.If(this=below_one, true=exp.null())], default=times.copy()))
        return node
    if isinstance(node, exp.Pad) and not node.meta.get("druid_pad"):
        # Druid's LPAD/RPAD: a length of 0 is NULL (below 0 ''), an empty pad leaves the string as it is
        # (cut to the length); the node stays, so rules/value_limits.py bounds it
        node.meta["druid_pad"] = True
        n, fill = node.expression, node.args.get("fill_pattern")
        literal_n = isinstance(n, exp.Literal) and not n.is_string
        ifs = [] if literal_n and float(n.this) != 0 else [
            exp.If(this=exp.EQ(this=n.copy(), expression=exp.Literal.number(0)), true=exp.null())]
        if fill is not None and not (isinstance(fill, exp.Literal) and fill.is_string and str(fill.this) != ""):
            # only where the pad may be empty: the string is measured (a copy of it, an aggregate even)
            shorter = exp.Least(this=n.copy(), expressions=[call("LENGTH", node.this.copy())])
            ifs.append(exp.If(this=exp.EQ(this=fill.copy(), expression=exp.Literal.string("")), true=shorter))
        if not ifs:
            return node
        node.set("expression", exp.cast(exp.Case(ifs=ifs, default=n.copy()), "INTEGER"))
        return node
    if isinstance(node, exp.StrPosition) and node.args.get("position") is not None \
            and not node.meta.get("druid_position"):
        # POSITION(n IN h FROM k) is Java's indexOf(n, k - 1) + 1: a start below 1 is 1; past the end only
        # an empty needle is found (at the end) — each clamp only where it can matter (k a literal ≥ 1, n
        # a non-empty literal need none; the position is copied into each)
        node.meta["druid_position"] = True
        start, needle = node.args["position"], node.args.get("substr")
        if not (isinstance(start, exp.Literal) and not start.is_string and float(start.this) >= 1):
            below = exp.LT(this=start.copy(), expression=exp.Literal.number(1))
            start = exp.Case(ifs=[exp.If(this=below, true=exp.Literal.number(1))], default=start.copy())
        if not (isinstance(needle, exp.Literal) and needle.is_string and str(needle.this) != ""):
            end = exp.Add(this=call("LENGTH", node.this.copy()), expression=exp.Literal.number(1))
            past = exp.GT(this=start.copy(), expression=end.copy())
            start = exp.Case(ifs=[exp.If(this=past, true=end)], default=start.copy())
        node.set("position", start)
        return node
    if isinstance(node, exp.RegexpReplace):
        replacement = node.args.get("replacement")
        if isinstance(replacement, exp.Literal) and replacement.is_string:
            node.set("replacement", exp.Literal.string(re2_replacement(str(replacement.this))))
        return node
    name = anonymous_name(node)
    if name is None:
        return node
    if name == "CONTAINS_STRING":
        a, b = call_args(node, (2,), name)
        return call("CONTAINS", a, b)
    if name == "ICONTAINS_STRING":
        a, b = call_args(node, (2,), name)
        return call("CONTAINS", exp.Lower(this=a), exp.Lower(this=b))
    if name == "TEXTCAT":
        a, b = call_args(node, (2,), name)
        return exp.DPipe(this=a, expression=b)
    if name == "STRLEN":
        (a,) = call_args(node, (1,), name)
        return call("LENGTH", a)
    if name == "BTRIM":
        args = call_args(node, (1, 2), name)
        return call("TRIM", *args)
    if name == "PARSE_LONG":  # with a radix: rules/scalar_udfs.py
        # Java's Long.parseLong: a sign and digits, nothing else (' 12', '1.5', '1_000' are NULL)
        (text,) = call_args(node, (1,), name)
        text = exp.cast(text, "VARCHAR")
        digits = call("REGEXP_FULL_MATCH", text.copy(), exp.Literal.string("[+-]?[0-9]+"))
        return exp.Case(ifs=[exp.If(this=digits, true=exp.TryCast(this=text, to=exp.DataType.build("BIGINT")))])
    if name in ("BITWISE_AND", "BITWISE_OR", "BITWISE_XOR"):
        a, b = call_args(node, (2,), name)
        a = exp.cast(a, exp.DataType.build("BIGINT"))
        b = exp.cast(b, exp.DataType.build("BIGINT"))
        if name == "BITWISE_AND":
            return exp.paren(exp.BitwiseAnd(this=a, expression=b), copy=False)
        if name == "BITWISE_OR":
            return exp.paren(exp.BitwiseOr(this=a, expression=b), copy=False)
        return call("XOR", a, b)
    if name == "LISTAGG":
        args = call_args(node, (1, 2), name)
        return call("STRING_AGG", args[0], args[1] if len(args) > 1 else exp.Literal.string(","))
    return node


def re2_replacement(java: str) -> str:
    """A ``Matcher.replaceAll`` replacement (``$n`` is group n, a backslash quotes the next character) in
    RE2's spelling (``\\n`` is group n, ``\\\\`` a backslash, ``$`` itself)."""
    out, i = [], 0
    while i < len(java):
        c = java[i]
        if c == "\\" and i + 1 < len(java):
            nxt = java[i + 1]
            out.append("\\\\" if nxt == "\\" else nxt)
            i += 2
        elif c == "$" and i + 1 < len(java) and java[i + 1].isdigit():
            out.append("\\" + java[i + 1])
            i += 2
        else:
            out.append(c)
            i += 1
    return "".join(out)


# ---- what this rule declares (serving/broker/sql/rule_registry.py) ----
FUNCTION_RULE = strings
#: the node classes it rewrites besides the anonymous calls of ACCEPTS (the rest pass it by)
HANDLES: tuple[type[exp.Expression], ...] = (exp.Pad, exp.RegexpExtract, exp.RegexpReplace, exp.Repeat, exp.StrPosition, exp.Upper)
ACCEPTS = frozenset({"CONTAINS_STRING", "ICONTAINS_STRING", "TEXTCAT", "STRLEN", "BTRIM", "PARSE_LONG", "BITWISE_AND", "BITWISE_OR", "BITWISE_XOR", "LISTAGG"})
EMITS = frozenset({"CONTAINS", "LENGTH", "LISTAGG", "REGEXP_EXTRACT", "REGEXP_FULL_MATCH", "STRING_AGG", "TRIM", "XOR"})
