"""The radstack web console: static assets served at ``/`` and ``/console/…`` plus the small JSON
endpoints under ``/radstack/v1/…`` that Druid's API does not have (see docs/console.md).

Include it in the serving app with ``app.include_router(serving.console.router)``.
"""

from serving.console.router import router

__all__ = ["router"]
