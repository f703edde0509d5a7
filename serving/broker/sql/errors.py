"""Druid's SQL errors (message styles of Druid's Calcite planner) as :class:`serving.errors.DruidError`."""

from __future__ import annotations

from serving.errors import DruidError, shown_name


def parse_error(message: str) -> DruidError:
    """A statement that does not parse (Druid: ``Incorrect syntax near …``), 400."""
    return DruidError(message, category="INVALID_INPUT", error_code="invalidInput",
                      context={"legacyErrorCode": "SQL parse failed"})


def validation_error(message: str) -> DruidError:
    """A statement that parses but cannot be planned (unknown table/column/function), 400."""
    return DruidError(message, category="INVALID_INPUT", error_code="invalidInput",
                      context={"legacyErrorCode": "Plan validation failed"})


def column_not_found(name: str) -> DruidError:
    return validation_error(f"Column '{shown_name(name)}' not found in any table")


def unknown_function(name: str, nargs: int) -> DruidError:
    sig = ", ".join(["<ANY>"] * nargs)
    return validation_error(f"No match found for function signature {name.upper()}({sig})")


def read_only(what: str) -> DruidError:
    return validation_error(
        f"{what} is not supported: the SQL API is read-only (SELECT statements only)"
    )


def unsupported(message: str) -> DruidError:
    """A Druid feature this broker does not implement, 501."""
    return DruidError(message, category="UNSUPPORTED", error_code="unsupported",
                      context={"legacyErrorCode": "Unsupported operation"})
