"""Window frames as Druid (Calcite) reads and checks them, before DuckDB sees them.

* A frame with one bound is Calcite's shorthand: ``ROWS n PRECEDING`` / ``ROWS UNBOUNDED PRECEDING`` /
  ``ROWS CURRENT ROW`` end at the current row; ``ROWS n FOLLOWING`` and ``ROWS UNBOUNDED FOLLOWING``
  *start* at the current row (``BETWEEN CURRENT ROW AND …``), where DuckDB reads a lone bound as the
  start and refuses a frame that starts after its current-row end.
* Refused as Druid refuses them (400): ``UNBOUNDED FOLLOWING`` as the lower bound, ``UNBOUNDED
  PRECEDING`` as the upper bound, a lower bound after the upper one (``FOLLOWING … AND CURRENT ROW``
  or ``… PRECEDING``, ``CURRENT ROW AND n PRECEDING``), a negative or non-integer offset, and ``RANGE``
  with an offset (Druid's RANGE frames are ``UNBOUNDED`` or ``CURRENT ROW`` only).
"""

from __future__ import annotations

from sqlglot import exp

from serving.broker.sql.errors import validation_error
from serving.broker.sql.translation_context import TranslationContext

_CURRENT = "CURRENT ROW"
_UNBOUNDED = "UNBOUNDED"


def _offset(bound: object) -> int | None:
    """The row count of ``n PRECEDING``/``n FOLLOWING`` (None for UNBOUNDED / CURRENT ROW)."""
    if bound in (_UNBOUNDED, _CURRENT, None):
        return None
    if isinstance(bound, exp.Literal) and not bound.is_string and str(bound.this).isdigit():
        return int(str(bound.this))
    text = bound.sql() if isinstance(bound, exp.Expression) else str(bound)
    raise validation_error(f"Window frame offset [{text}] must be a non-negative integer literal")


def _rank(bound: object, side: str | None) -> tuple[int, int]:
    """Where a bound sits, for ordering the two ends: (-2 unbounded preceding, -1 preceding, 0 current,
    1 following, 2 unbounded following), then the offset."""
    if bound == _CURRENT:
        return (0, 0)
    n = _offset(bound)
    sign = -1 if side == "PRECEDING" else 1
    if n is None:
        return (2 * sign, 0)
    return (sign, sign * n)


def window_frames(node: exp.Expression, _ctx: TranslationContext) -> exp.Expression:
    if not isinstance(node, exp.WindowSpec) or not node.args.get("kind"):
        return node
    kind = str(node.args["kind"]).upper()
    start, start_side = node.args.get("start"), node.args.get("start_side")
    end, end_side = node.args.get("end"), node.args.get("end_side")
    if end is None:  # Calcite's one-bound shorthand
        if start_side == "FOLLOWING":
            start, start_side, end, end_side = _CURRENT, None, start, "FOLLOWING"
        else:
            end, end_side = _CURRENT, None
    lower, upper = _rank(start, start_side), _rank(end, end_side)
    if lower[0] == 2:
        raise validation_error("UNBOUNDED FOLLOWING cannot be specified for the lower frame boundary")
    if upper[0] == -2:
        raise validation_error("UNBOUNDED PRECEDING cannot be specified for the upper frame boundary")
    if (lower[0] > 0 and upper[0] <= 0) or (lower[0] == 0 and upper[0] < 0):
        raise validation_error(
            f"Window frame {kind} lower bound ({_text(start, start_side)}) comes after its upper bound "
            f"({_text(end, end_side)})")
    if kind == "RANGE" and (_offset(start) is not None or _offset(end) is not None):
        raise validation_error("Order By with RANGE clause currently supports only UNBOUNDED or CURRENT ROW. "
                               "Use ROWS clause instead.")
    node.set("start", start)
    node.set("start_side", start_side)
    node.set("end", end)
    node.set("end_side", end_side)
    return node


def _text(bound: object, side: str | None) -> str:
    b = bound.sql() if isinstance(bound, exp.Expression) else str(bound)
    return f"{b} {side}" if side else b


# ---- what this rule declares (serving/broker/sql/rule_registry.py) ----
FUNCTION_RULE = window_frames
#: the node classes it rewrites besides the anonymous calls of ACCEPTS (the rest pass it by)
HANDLES: tuple[type[exp.Expression], ...] = (exp.WindowSpec,)
