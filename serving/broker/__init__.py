"""The query broker: segment cache over the timeline, query manager, native JSON queries.

Druid SQL lives in :mod:`serving.broker.sql` on top of :class:`BrokerService`.
"""

from serving.broker.queries.query_manager import QueryManager, RunningQuery
from serving.broker.service import BrokerService

__all__ = ["BrokerService", "QueryManager", "RunningQuery"]
