"""The one base of mistakes a user can fix (a bad option, a missing config file, an interval that does not
parse): ``radctl`` prints the message alone and exits 2 (``--debug`` shows the traceback). Each layer
keeps its own error type (``ConfigError``, ``TimeParseError``, ``SpecError`` …) and also derives it from
:class:`UserError`."""

from __future__ import annotations


class UserError(Exception):
    """A mistake in what the user asked for, told in words the user can act on."""
