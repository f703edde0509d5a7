"""Keep the Druid cluster's configuration in step with radstack's, for the datasources ``druid.datasources``
names: one :func:`sync` looks at each and changes only what differs.

* **Supervisor.** Druid's Kafka supervisor on the datasource's processed topic
  (:func:`~radstack.druid_cluster.specs.kafka_supervisor_spec`) is posted when radstack has a spec for the
  datasource and Druid has no supervisor, or the generated spec changed since radstack last posted it (a
  hash kept in radstack's metadata store); suspended while radstack's own supervisor of the datasource is
  suspended (resumed with it); terminated when radstack no longer has the datasource.
* **Retention rules** set in radstack (``/druid/coordinator/v1/rules/{ds}``) are posted to Druid's
  coordinator when they differ from Druid's.
* **Compaction**: radstack's compaction config (``/druid/coordinator/v1/config/compaction``) is posted as
  Druid's auto-compaction config: ``skipOffsetFromLatest``, the first tier's granularity (Druid has one per
  datasource; radstack's older tiers are radstack's own), ``metricsSpec``/``dimensionsSpec`` and the tuning;
  a config deleted in radstack is deleted in Druid.

The radstack server runs it every ``druid.sync_period_seconds`` (its coordinator's ``druid_sync`` duty);
``radctl druid sync`` runs it once. A Druid that is down is reported, never raised to the caller's loop.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass, field
from typing import Any

import orjson

from radstack.config import Settings
from radstack.druid_cluster.specs import DruidSpecError, kafka_supervisor_spec
from radstack.druid_cluster.submit import DruidApiError, OverlordClient, druid_client
from radstack.spec import DatasourceSpec
from radstack.storage.compaction.config import load_compaction_configs
from radstack.storage.metadata import MetadataStore
from radstack.storage.supervisors import datasource_catalog, load_supervisors

log = logging.getLogger(__name__)

__all__ = ["SyncReport", "sync", "druid_compaction_config", "STATE_KEY"]

#: radstack's state key: datasource → hashes of what was last posted ({"supervisor", "rules", "compaction"})
STATE_KEY = "druid.sync"


@dataclass
class SyncReport:
    """What one pass did per datasource (``actions``), and what it could not (``errors``)."""

    actions: dict[str, list[str]] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)

    def did(self, datasource: str, action: str) -> None:
        self.actions.setdefault(datasource, []).append(action)
        log.info("druid sync: %s: %s", datasource, action)

    def to_json(self) -> dict[str, Any]:
        return {"actions": self.actions, "errors": self.errors}


def _hash(value: Any) -> str:
    return hashlib.sha256(orjson.dumps(value, option=orjson.OPT_SORT_KEYS)).hexdigest()[:16]


def druid_compaction_config(raw: dict[str, Any], granularity: dict[str, Any] | None) -> dict[str, Any]:
    """radstack's compaction config (Druid's fields plus radstack's ``tiers``) as Druid's auto-compaction config."""
    out = {k: v for k, v in raw.items() if k in (
        "dataSource", "skipOffsetFromLatest", "metricsSpec", "dimensionsSpec", "tuningConfig", "taskPriority",
        "inputSegmentSizeBytes", "taskContext", "transformSpec", "ioConfig")}
    if granularity is not None:
        out["granularitySpec"] = granularity
    return out


def supervisor_spec(settings: Settings, spec: DatasourceSpec) -> dict[str, Any]:
    bootstrap = settings.druid.kafka_bootstrap_servers or settings.kafka.clients_bootstrap
    return kafka_supervisor_spec(spec, bootstrap_servers=bootstrap,
                                 task_duration=settings.druid.supervisor_task_duration)


def _sync_supervisor(settings: Settings, client: OverlordClient, spec: DatasourceSpec | None, name: str,
                     suspended: bool, state: dict[str, Any], report: SyncReport) -> None:
    current = client.supervisor_spec(name)
    if spec is None or not spec.processing.topics:
        if current is not None and state.get("supervisor"):
            client.supervisor_action(name, "terminate")
            state.pop("supervisor", None)
            report.did(name, "supervisor terminated (radstack no longer has the datasource)")
        return
    wanted = supervisor_spec(settings, spec)
    digest = _hash(wanted)
    if current is None or state.get("supervisor") != digest:
        client.submit_supervisor(wanted)
        state["supervisor"] = digest
        report.did(name, "supervisor posted" if current is None else "supervisor updated (the spec changed)")
        current = client.supervisor_spec(name)
    druid_suspended = bool((current or {}).get("suspended"))
    if suspended and not druid_suspended:
        client.supervisor_action(name, "suspend")
        report.did(name, "supervisor suspended")
    elif not suspended and druid_suspended:
        client.supervisor_action(name, "resume")
        report.did(name, "supervisor resumed")


def _sync_rules(md: MetadataStore, client: OverlordClient, name: str, state: dict[str, Any], report: SyncReport) -> None:
    rules = md.get_rules(name)
    if rules is None:
        return
    digest = _hash(rules)  # Druid answers its own form of the rules (defaults added): compare what was posted
    if state.get("rules") != digest or not client.rules(name):
        client.set_rules(name, rules)
        state["rules"] = digest
        report.did(name, f"{len(rules)} retention rule(s) posted")


def _sync_compaction(client: OverlordClient, name: str, configs: dict[str, Any], state: dict[str, Any],
                     report: SyncReport) -> None:
    config = configs.get(name)
    if config is None:
        if state.pop("compaction", None):
            client.delete_compaction_config(name)
            report.did(name, "compaction config deleted")
        return
    first = config.tiers[0] if config.tiers else None
    gran = first.granularity_json(first.rollup is not False) if first is not None else None
    wanted = druid_compaction_config(config.to_json(), gran)
    digest = _hash(wanted)
    if state.get("compaction") != digest or client.compaction_config(name) is None:
        client.set_compaction_config(wanted)
        state["compaction"] = digest
        report.did(name, "compaction config posted")


def sync(settings: Settings, md: MetadataStore, client: OverlordClient | None = None) -> SyncReport:
    """One pass over ``druid.datasources`` (see the module's docstring)."""
    report = SyncReport()
    if not settings.druid.overlord_url or not settings.druid.datasources:
        return report
    own = client is None
    client = client or druid_client(settings.druid)
    try:
        catalog = datasource_catalog(settings, md)
        supervisors = load_supervisors(md)
        configs = load_compaction_configs(md)
        states: dict[str, Any] = dict(md.get_state(STATE_KEY, {}) or {})
        for name in settings.druid.datasources:
            state = dict(states.get(name) or {})
            sup = supervisors.get(name)
            try:
                _sync_supervisor(settings, client, catalog.get(name), name, bool(sup and sup.suspended), state, report)
                _sync_rules(md, client, name, state, report)
                _sync_compaction(client, name, configs, state, report)
            except (DruidApiError, DruidSpecError) as e:
                report.errors[name] = str(e)
                log.warning("druid sync: %s: %s", name, e)
            states[name] = state
        md.put_state(STATE_KEY, states)
    finally:
        if own:
            client.close()
    return report
