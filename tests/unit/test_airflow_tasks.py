"""The DAGs' check command (``python -m batch.airflow_tasks check``): a metadata store that does not answer
is "not closed yet" (exit 75, the sensor pokes again), not a crash that fails the run."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from batch import airflow_tasks

WEB = """dataSchema:
  dataSource: web
  timestampSpec: {column: timestamp, format: iso}
  dimensionsSpec: {dimensions: [page]}
  granularitySpec: {segmentGranularity: hour, queryGranularity: none, rollup: false}
processing: {topics: [web]}
"""


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # nothing listens once it is closed


def _home(tmp_path: Path, metadata_url: str | None) -> Path:
    (tmp_path / "datasources").mkdir()
    (tmp_path / "datasources" / "web.yaml").write_text(WEB)
    cfg = tmp_path / "radstack.yaml"
    cfg.write_text(f"home: {tmp_path}\n" + (f"metadata: {{url: '{metadata_url}'}}\n" if metadata_url else ""))
    return cfg


def test_check_pokes_again_when_the_store_does_not_answer(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = _home(tmp_path, f"postgresql+psycopg://radstack@127.0.0.1:{_closed_port()}/radstack?connect_timeout=2")
    rc = airflow_tasks.main(["check", "--datasource", "web", "--interval", "2026-11-20T00/2026-11-20T01",
                             "--config", str(cfg)])  # fmt: skip
    assert rc == airflow_tasks.EX_TEMPFAIL
    assert "the metadata store did not answer: OperationalError" in capsys.readouterr().out


def test_check_says_not_closed_without_a_watermark(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = _home(tmp_path, None)
    rc = airflow_tasks.main(["check", "--datasource", "web", "--interval", "2026-11-20T00/2026-11-20T01",
                             "--config", str(cfg)])  # fmt: skip
    assert rc == airflow_tasks.EX_TEMPFAIL
    assert "topic 'web' has no archiver watermark" in capsys.readouterr().out
