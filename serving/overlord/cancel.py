"""The signal a running Overlord task raises when it is shut down (``POST …/task/{id}/shutdown``)."""

from __future__ import annotations


class TaskCancelled(Exception):
    """The task was shut down."""
