"""#50: everything radstack writes is private: the home 0700, every file 0600 — the metadata store and its
WAL (task payloads, supervisor secrets), deep storage, the segment cache, logs (radstack/private_files.py)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from starlette.testclient import TestClient

from operations.server import create_server_app
from tests.fixtures.broker import WIKI_SCHEMA, index_and_publish, wiki_table
from tests.fixtures.server import server_settings


def _open_to_others(root: Path) -> list[str]:
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        for name in [*dirnames, *filenames]:
            path = Path(dirpath) / name
            mode = stat.S_IMODE(path.lstat().st_mode)
            if not path.is_symlink() and mode & 0o077:
                out.append(f"{path.relative_to(root)} {oct(mode)}")
    return out


def test_the_home_and_everything_in_it_are_private(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir(mode=0o755)
    os.chmod(home, 0o755)  # as an older version left it
    old_umask = os.umask(0o022)
    try:
        settings = server_settings(home)
        with TestClient(create_server_app(settings)) as c:
            ctx = c.app.state.ctx  # type: ignore[attr-defined]
            index_and_publish(ctx.metadata, ctx.deep_storage, wiki_table(), WIKI_SCHEMA, version="v1")
            ctx.broker.refresh(force=True)
            assert c.post("/druid/v2/sql", json={"query": "SELECT COUNT(*) AS n FROM wiki"}).json()[0]["n"] > 0
            task = {"type": "index_parallel", "spec": {
                "dataSchema": {"dataSource": "t", "timestampSpec": {"column": "ts"},
                               "dimensionsSpec": {"dimensions": ["d"]}, "granularitySpec": {"segmentGranularity": "day"}},
                "ioConfig": {"inputSource": {"type": "inline", "data": '{"ts": "2020-01-01T00:00:00Z", "d": "x"}'},
                             "inputFormat": {"type": "json"}}}}
            assert c.post("/druid/indexer/v1/task", json=task).status_code == 200
        assert stat.S_IMODE(home.stat().st_mode) == 0o700
        written = [p for p in home.rglob("*") if p.is_file()]
        assert any(p.name.startswith("metadata.db") for p in written) and any(p.suffix == ".parquet" for p in written)
        assert not _open_to_others(home)
    finally:
        os.umask(old_umask)
