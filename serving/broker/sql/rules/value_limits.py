"""No function builds a value larger than ``server.max_string_bytes``: the per-value part of a query's
memory budget (the process-wide part is :mod:`serving.broker.queries.memory_guard`).

A function whose result can outgrow its arguments gets a check *before* DuckDB builds the value: the
largest size its arguments allow is compared with the limit, and past it DuckDB's ``error()`` fails the
query with Druid's resource-limit error (400) — at planning time when the arguments are constants, else
per row. Composition cannot escape: every step of ``x || x || …`` or of a chain of CTEs is checked, so no
intermediate value is ever larger than the limit (``SELECT REPEAT('x', 2000000000)`` once held the server
at 13 GB; ``REPLACE(REPEAT('a', 1048576), 'a', REPEAT('b', 1000))`` built 1 G characters).

The bound of each function, in bytes (strings) or :func:`array_bytes` (arrays: their JSON text):

* ``REPEAT(s, n)``: ``|s| × n``; ``LPAD``/``RPAD(s, n, p)``: ``n``;
* ``REPLACE(s, a, b)``: ``|s| + (|s| / |a|) × |b|``, and where that passes the limit ``|s| + occurrences ×
  |b|`` (occurrences counted by a replace that only shrinks); ``|s| × (1 + |b|)`` when ``s`` is itself
  checked; nothing when ``b`` is a literal no longer than a literal ``a``;
* ``REGEXP_REPLACE(s, p, r)``: ``(|s| + 1) × (|r| + 1) + |s| × backreferences(r)``;
* ``||`` (and ``TEXTCAT``, which rules/strings.py writes as one), ``CONCAT``, ``CONCAT_WS``: the sum of the parts (and separators);
* ``ARRAY_CONCAT``, ``ARRAY_APPEND``, ``ARRAY_PREPEND``: the sum of the parts;
* ``STRING_FORMAT``: its largest width or precision (:func:`width_guard`).

Not checked here: the ``MV_*`` functions (their arguments keep their multi-value form for
rules/multi_value.py) and ``ARRAY_TO_STRING`` (DuckDB wants its separator constant, so it joins at most
separator × elements of an array whose own size was checked); the memory guard bounds what they build.

The check is placed on an argument (``CASE WHEN bound > limit THEN error(…) ELSE arg END``), so the
node keeps its type for the rules that translate it later. Aggregates (``ARRAY_AGG``, ``STRING_AGG``)
honour their size argument in :mod:`aggregate_sizes`; what they accumulate on the way is the memory
guard's to stop.
"""

from __future__ import annotations

from sqlglot import exp

from radstack.sql_text import value_limit_message
from serving.broker.sql.rules import anonymous_name
from serving.broker.sql.timeexpr import call
from serving.broker.sql.translation_context import TranslationContext

#: meta key: the SQL of the largest size a checked node's value can have (what its check compared)
_BOUND = "value_bytes"
#: a function this rule does not know is taken to give at most this many times its arguments (UPPER of
#: some characters grows 3×), plus a little
_OPAQUE_FACTOR, _OPAQUE_EXTRA = 4, 64


def _bigint(e: exp.Expression) -> exp.Expression:
    return exp.Cast(this=e, to=exp.DataType.build("BIGINT"))


def text_bytes(e: exp.Expression) -> exp.Expression:
    """The UTF-8 bytes of ``e`` as text (0 for NULL)."""
    return call("COALESCE", call("STRLEN", exp.Cast(this=e.copy(), to=exp.DataType.build("TEXT"))),
                exp.Literal.number(0))


def array_bytes(e: exp.Expression) -> exp.Expression:
    """About what the array ``e`` holds: the length of its JSON text (each element's text plus a few bytes)."""
    return call("COALESCE", call("STRLEN", exp.Cast(this=call("TO_JSON", e.copy()), to=exp.DataType.build("TEXT"))),
                exp.Literal.number(0))


def _is_error(e: exp.Expression) -> bool:
    return anonymous_name(e) == "ERROR"


def _checked_inside(e: exp.Expression) -> bool:
    return any(_is_error(n) for n in e.walk())


def bound(e: exp.Expression, measure: object = text_bytes) -> exp.Expression:
    """The largest size ``e``'s value can have, as SQL, without copying any checked value: a checked node
    answers the bound it was checked against; a subtree with no check inside is measured (a copy of a
    column or of a small expression); anything else is bounded from its parts (:data:`_OPAQUE_FACTOR`).
    So nested checks stay linear in the statement, never exponential: every bound below writes the bound
    of each argument once."""
    known = e.meta.get(_BOUND)
    if known is not None:
        return known.copy()
    if isinstance(e, exp.Literal):
        return exp.Literal.number(len(str(e.this).encode()) if e.is_string else 32)
    if isinstance(e, exp.Null):
        return exp.Literal.number(0)
    if not _checked_inside(e):
        return measure(e)  # type: ignore[operator]
    if isinstance(e, exp.Case) and len(e.args.get("ifs") or []) == 1 and _is_error(e.args["ifs"][0].args["true"]):
        return bound(e.args["default"], measure)  # a check placed on an argument
    parts = [bound(c, measure) for c in e.iter_expressions() if not isinstance(c, exp.DataType)]
    return exp.Add(this=_mul(_sum(parts) if parts else exp.Literal.number(0),
                                expression=exp.Literal.number(_OPAQUE_FACTOR)),
                   expression=exp.Literal.number(_OPAQUE_EXTRA))


def _literal_text(e: exp.Expression) -> str | None:
    return str(e.this) if isinstance(e, exp.Literal) and e.is_string else None


def _mul(a: exp.Expression, expression: exp.Expression) -> exp.Expression:
    """``(a) * (b)``: sqlglot does not parenthesize a sum under a product by itself."""
    return exp.Mul(this=exp.Paren(this=a), expression=exp.Paren(this=expression))


def _div(a: exp.Expression, expression: exp.Expression) -> exp.Expression:
    return exp.IntDiv(this=exp.Paren(this=a), expression=exp.Paren(this=expression))


def _sum(parts: list[exp.Expression]) -> exp.Expression:
    total = parts[0]
    for p in parts[1:]:
        total = exp.Add(this=total, expression=p)
    return total


def _guard(arg: exp.Expression, size: exp.Expression, ctx: TranslationContext, name: str) -> exp.Expression:
    """``arg``, or DuckDB's ``error(…)`` when ``size`` exceeds the limit (folded when constant)."""
    message = exp.Literal.string(value_limit_message(name, ctx.max_string_bytes))
    over = exp.GT(this=_bigint(size), expression=exp.Literal.number(ctx.max_string_bytes))
    guarded = exp.Case(ifs=[exp.If(this=over, true=exp.Anonymous(this="error", expressions=[message]))],
                       default=arg.copy())
    if arg.type is not None:  # the rules after this one read the argument's type (a scalar in ARRAY_CONCAT …)
        guarded.type = arg.type.copy()
    return guarded


def _check(node: exp.Expression, key: str, size: exp.Expression, ctx: TranslationContext, name: str) -> None:
    """Check ``node`` before it is built: its argument ``key`` guarded by ``size``, remembered as its bound."""
    node.meta[_BOUND] = size.copy()
    node.set(key, _guard(node.args[key], size, ctx, name))


def _is_literal(e: exp.Expression) -> bool:
    return isinstance(e, exp.Literal | exp.Null)


def _replace_bound(node: exp.Expression, limit: int) -> exp.Expression | None:
    s, old, new = node.this, node.expression, node.args.get("replacement")
    if new is None:
        return None
    old_text, new_text = _literal_text(old), _literal_text(new)
    if old_text is not None and new_text is not None and len(new_text.encode()) <= len(old_text.encode()):
        return None  # it can only shrink
    if _checked_inside(s):  # not copied (its bound once): every position may be an occurrence
        return _mul(bound(s), expression=exp.Add(this=exp.Literal.number(1), expression=bound(new)))
    # |s| + (|s| / |a|) × |b| is cheap and never less; where it passes the limit, the occurrences are
    # counted exactly by a replace that only shrinks (DuckDB's CASE runs that only for those rows)
    per = call("GREATEST", text_bytes(old), exp.Literal.number(1))
    cheap = exp.Add(this=text_bytes(s), expression=_div(_mul(text_bytes(s), expression=bound(new)), expression=per))
    shrunk = exp.Replace(this=s.copy(), expression=old.copy(), replacement=exp.Literal.string(""))
    occurrences = _div(exp.Sub(this=text_bytes(s), expression=text_bytes(shrunk)), expression=per.copy())
    exact = exp.Add(this=text_bytes(s), expression=_mul(occurrences, expression=bound(new)))
    return exp.Case(ifs=[exp.If(this=exp.LTE(this=cheap, expression=exp.Literal.number(limit)), true=cheap.copy())],
                    default=exact)


def _regexp_replace_bound(node: exp.Expression) -> exp.Expression | None:
    s, r = node.this, node.args.get("replacement")
    if r is None:
        return None
    literal = _literal_text(r)
    refs: exp.Expression = (exp.Literal.number(literal.count("$") + literal.count("\\")) if literal is not None
                            else bound(r))
    # (|s| + 1)(|r| + 1) + |s| × refs, with the bound of s written once (nested checks stay linear)
    per = exp.Add(this=exp.Add(this=bound(r), expression=exp.Literal.number(1)), expression=refs)
    return exp.Add(this=_mul(bound(s), expression=per),
                   expression=exp.Add(this=bound(r), expression=exp.Literal.number(1)))


def value_limits(node: exp.Expression, ctx: TranslationContext) -> exp.Expression:
    if ctx.max_string_bytes <= 0:  # server.max_string_bytes 0: no limit
        return node
    name = anonymous_name(node)
    if isinstance(node, exp.Repeat):
        times = node.args["times"]
        _check(node, "times", _mul(bound(node.this), expression=_bigint(times.copy())), ctx, "REPEAT")
    elif isinstance(node, exp.Pad):
        _check(node, "expression", node.expression.copy(), ctx, "LPAD" if node.args.get("is_left") else "RPAD")
    elif isinstance(node, exp.Replace):
        size = _replace_bound(node, ctx.max_string_bytes)
        if size is not None:
            _check(node, "this", size, ctx, "REPLACE")
    elif isinstance(node, exp.RegexpReplace):
        size = _regexp_replace_bound(node)
        if size is not None:
            _check(node, "this", size, ctx, "REGEXP_REPLACE")
    elif isinstance(node, exp.DPipe | exp.Concat | exp.ConcatWs):
        parts = [node.this, node.expression] if isinstance(node, exp.DPipe) else list(node.expressions)
        _check_parts(node, parts, [bound(p) for p in parts], ctx, "CONCAT")
    elif name == "DRUID_STRING_FORMAT":  # rules/scalar_udfs.py wrote it (a plain %s pattern became PRINTF)
        node.set("expressions", [width_guard(node.expressions[0], ctx), *node.expressions[1:]])
    elif isinstance(node, exp.ArrayConcat | exp.ArrayAppend | exp.ArrayPrepend):
        parts = [node.this, *node.expressions] if isinstance(node, exp.ArrayConcat) else [node.this, node.expression]
        _check_parts(node, parts, [bound(p, array_bytes) for p in parts], ctx,
                     {exp.ArrayConcat: "ARRAY_CONCAT", exp.ArrayAppend: "ARRAY_APPEND"}.get(type(node), "ARRAY_PREPEND"))
    return node


#: a conversion of Java's String.format: its width (group 1) and precision (group 2)
_CONVERSION = r"%(?:[0-9]+[$])?[-#+ 0,(]*([0-9]*)(?:[.]([0-9]+))?[a-zA-Z%]"


def width_guard(pattern: exp.Expression, ctx: TranslationContext) -> exp.Expression:
    """The ``STRING_FORMAT`` pattern, checked: no width or precision past the limit (a ``%900000000s``
    pads every value to 900 MB). Folded at planning time for a literal pattern."""
    widths = [call("REGEXP_EXTRACT_ALL", pattern.copy(), exp.Literal.string(_CONVERSION), exp.Literal.number(g))
              for g in (1, 2)]
    x = exp.to_identifier("__w")
    as_number = exp.Lambda(this=call("COALESCE", exp.TryCast(this=exp.column("__w"), to=exp.DataType.build("DOUBLE")),
                                     exp.Literal.number(0)), expressions=[x])
    largest = call("GREATEST", *(call("COALESCE", call("LIST_MAX", call("LIST_TRANSFORM", w, as_number.copy())),
                                      exp.Literal.number(0)) for w in widths))
    return _guard(pattern, largest, ctx, "STRING_FORMAT")


def _check_parts(node: exp.Expression, parts: list[exp.Expression], sizes: list[exp.Expression],
                 ctx: TranslationContext, name: str) -> None:
    """Check ``node`` by the sum of its parts' ``sizes``, placed on its first part (nothing when all are
    literals: the statement's text bounds them)."""
    if not parts or all(_is_literal(p) for p in parts):
        return
    total = _sum(sizes)
    node.meta[_BOUND] = total.copy()
    parts[0].replace(_guard(parts[0], total, ctx, name))


# ---- what this rule declares (serving/broker/sql/rule_registry.py) ----
FUNCTION_RULE = value_limits
#: the node classes it rewrites besides the anonymous calls of ACCEPTS (the rest pass it by)
HANDLES: tuple[type[exp.Expression], ...] = (exp.ArrayAppend, exp.ArrayConcat, exp.ArrayPrepend, exp.Concat, exp.ConcatWs, exp.DPipe, exp.Pad, exp.RegexpReplace, exp.Repeat, exp.Replace)
#: anonymous calls it also reads though another rule translates them
READS = frozenset({'DRUID_STRING_FORMAT'})
EMITS = frozenset({"ERROR", "STRLEN", "COALESCE", "TO_JSON", "GREATEST", "REGEXP_EXTRACT_ALL", "LIST_MAX",
                   "LIST_TRANSFORM"})
