"""What a posted supervisor becomes: its window period and event id, and its place in the catalog the
batch side reads (the archiver, the rebuild DAG, `radctl backfill`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from radstack.config import load_settings
from radstack.spec import load_datasource_spec
from radstack.storage.metadata import MetadataStore
from radstack.storage.supervisors import (
    SupervisorError,
    SupervisorRecord,
    datasource_catalog,
    datasource_spec,
    datasource_spec_from_supervisor,
    merge_catalog,
    save_supervisor,
)

SCHEMA = {"dataSource": "wiki", "timestampSpec": {"column": "time", "format": "iso"},
          "dimensionsSpec": {"dimensions": ["page"]}, "granularitySpec": {"segmentGranularity": "hour"}}


def supervisor(**io: Any) -> dict[str, Any]:
    return {"type": "kafka", "spec": {"dataSchema": SCHEMA, "ioConfig": {"topic": "wiki-edits", **io}}}


def test_late_message_rejection_period_is_the_window_period() -> None:
    ds = datasource_spec_from_supervisor(supervisor(lateMessageRejectionPeriod="PT30M"))
    assert ds["processing"] == {"topics": ["wiki-edits"], "windowPeriod": "PT30M"}
    assert load_datasource_spec(ds).processing.window_period.iso() == "PT30M"


def test_the_processing_extension_sets_the_event_id_and_nothing_else() -> None:
    spec = {**supervisor(), "processing": {"eventId": "edit_id"}}
    assert datasource_spec_from_supervisor(spec)["processing"] == {"topics": ["wiki-edits"], "eventId": "edit_id"}
    for bad in ({"lookups": [{"name": "x", "uri": "file:///etc/passwd"}]}, {"topics": ["other"]}, "eventId"):
        with pytest.raises(SupervisorError) as e:
            datasource_spec_from_supervisor({**supervisor(), "processing": bad})
        assert e.value.field == "processing"


def _settings(tmp_path: Path) -> Any:
    return load_settings(env={"RADSTACK_HOME": str(tmp_path)})


def test_the_catalog_holds_the_supervisors_and_files_keep_what_they_stream(tmp_path: Path) -> None:
    settings = _settings(tmp_path)
    assert datasource_catalog(settings) == {}  # a fresh home: no metadata store yet, no error
    settings.datasources_dir.mkdir(parents=True)
    (settings.datasources_dir / "batch_only.yaml").write_text(yaml.safe_dump({"dataSchema": {**SCHEMA, "dataSource": "batch_only"}}))
    (settings.datasources_dir / "streamed.yaml").write_text(yaml.safe_dump(
        {"dataSchema": {**SCHEMA, "dataSource": "streamed"}, "processing": {"topics": ["from-file"]}}))
    with MetadataStore.from_settings(settings) as md:
        for name in ("wiki", "batch_only", "streamed"):
            raw = supervisor()
            raw["spec"]["dataSchema"] = {**SCHEMA, "dataSource": name}
            raw["spec"]["ioConfig"]["topic"] = f"{name}-topic"
            save_supervisor(md, SupervisorRecord(id=name, spec=raw, datasource=datasource_spec_from_supervisor(raw)))
        catalog = datasource_catalog(settings, md)
        topics = {name: list(spec.processing.topics) for name, spec in catalog.items()}
        assert topics == {"wiki": ["wiki-topic"], "batch_only": ["batch_only-topic"], "streamed": ["from-file"]}
        assert datasource_spec(settings, "wiki", md).data_schema.segment_granularity is not None
        with pytest.raises(KeyError, match="supervisors in the metadata store"):
            datasource_spec(settings, "nope", md)
    assert datasource_catalog(settings).keys() == catalog.keys()  # opens the store itself


def test_merge_keeps_the_files_when_there_are_no_supervisors() -> None:
    spec = load_datasource_spec({"dataSchema": SCHEMA})
    assert merge_catalog({"wiki": spec}, {}) == {"wiki": spec}
