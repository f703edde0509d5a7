"""Input-source security: a task may read only the places the settings allow (serving/input_policy.py).

Each hostile spec below was accepted before this check existed (the task API read /etc/shadow,
/proc/self/environ and radstack.yaml, fetched loopback URLs, and sent an environment variable as a
password)."""

from __future__ import annotations

import http.server
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from radstack.config import Settings
from serving.input_policy import InputForbidden, check_url
from serving.overlord.input_sources import check_input_source, resolve_input_source


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    home = tmp_path / "home"
    (home / "data").mkdir(parents=True)
    (home / "data" / "ok.json").write_text('{"ts": "2020-01-01T00:00:00Z"}\n')
    (home / "radstack.yaml").write_text("server:\n  auth:\n    users: [{name: a, password: secret}]\n")
    return Settings.model_validate({"home": str(home)})


HOSTILE_LOCAL = [
    {"type": "local", "files": ["/etc/shadow"]},
    {"type": "local", "files": ["/proc/self/environ"]},
    {"type": "local", "baseDir": "/etc", "filter": "passwd"},
    {"type": "local", "baseDir": "../../../../../../../../etc", "filter": "*"},
    {"type": "local", "files": ["{home}/data/../radstack.yaml"]},
    {"type": "local", "baseDir": "{home}", "filter": "radstack.yaml"},
    {"type": "local", "files": ["{home}/data/../../home/radstack.yaml"]},
]


@pytest.mark.parametrize("spec", HOSTILE_LOCAL)
def test_local_outside_the_allowed_dirs_is_refused(settings: Settings, spec: dict[str, Any]) -> None:
    spec = {k: ([f.format(home=settings.home) for f in v] if isinstance(v, list) else
                v.format(home=settings.home) if isinstance(v, str) else v) for k, v in spec.items()}
    with pytest.raises(InputForbidden, match="ingestion.local.allowed_dirs|radstack's own state"):
        check_input_source(spec, settings)


def test_local_inside_the_data_dir_is_allowed(settings: Settings) -> None:
    spec = {"type": "local", "baseDir": str(settings.data_dir), "filter": "*.json"}
    check_input_source(spec, settings)
    assert [Path(e.name).name for e in resolve_input_source(spec, settings)] == ["ok.json"]


def test_the_examples_are_allowed_by_default(settings: Settings) -> None:
    check_input_source({"type": "local", "baseDir": "examples/rollup-tutorial", "filter": "*.json"}, settings)


def test_a_relative_path_is_read_against_the_checkout_not_the_servers_directory(
        settings: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Druid reads a relative baseDir against its installation directory; radstack against the checkout
    # (ingestion.local.base_dir), whatever directory the server was started in (#51)
    monkeypatch.chdir(tmp_path)
    spec = {"type": "local", "baseDir": "examples/rollup-tutorial", "filter": "rollup-data.json"}
    check_input_source(spec, settings)
    assert [Path(e.name).name for e in resolve_input_source(spec, settings)] == ["rollup-data.json"]
    with pytest.raises(InputForbidden):  # .. out of the allowed directories is still refused
        check_input_source({"type": "local", "baseDir": "examples/../radstack", "filter": "*"}, settings)
    moved = Settings.model_validate({"home": str(tmp_path / "home"), "ingestion": {"local": {
        "base_dir": str(tmp_path), "allowed_dirs": [str(tmp_path / "in")]}}})
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.json").write_text("{}\n")
    check_input_source({"type": "local", "baseDir": "in", "filter": "*.json"}, moved)


def test_a_symlink_out_of_an_allowed_dir_is_refused_when_the_task_runs(settings: Settings, tmp_path: Path) -> None:
    secret = tmp_path / "secret.json"
    secret.write_text('{"password": "x"}\n')
    (settings.data_dir / "link.json").symlink_to(secret)
    spec = {"type": "local", "baseDir": str(settings.data_dir), "filter": "*.json"}
    check_input_source(spec, settings)  # the directory itself is allowed ...
    with pytest.raises(InputForbidden, match="link.json") as e:
        resolve_input_source(spec, settings)  # ... the file the link points to is not
    assert "secret.json" not in str(e.value)  # and where it points is not told
    with pytest.raises(InputForbidden):
        check_input_source({"type": "local", "files": [str(settings.data_dir / "link.json")]}, settings)


def test_allowed_dirs_replace_the_defaults(tmp_path: Path) -> None:
    s = Settings.model_validate({"home": str(tmp_path / "home"), "ingestion": {"local": {"allowed_dirs": [str(tmp_path / "in")]}}})
    check_input_source({"type": "local", "files": [str(tmp_path / "in" / "a.json")]}, s)
    with pytest.raises(InputForbidden):
        check_input_source({"type": "local", "files": [str(tmp_path / "home" / "data" / "a.json")]}, s)


@pytest.mark.parametrize("url", [
    "http://127.0.0.1:8888/status/health",
    "http://localhost:8888/druid/v2",
    "http://[::1]/x",
    "http://[::ffff:127.0.0.1]/x",
    "http://2130706433/x",  # 127.0.0.1 written as one number
    "http://0.0.0.0/x",
    "http://169.254.169.254/latest/meta-data/",  # cloud metadata
    "http://10.1.2.3/x",
    "http://192.168.0.1/x",
    "http://[fd00::1]/x",
    "http://224.0.0.1/x",
])
def test_http_to_non_public_addresses_is_refused(settings: Settings, url: str) -> None:
    with pytest.raises(InputForbidden, match="ingestion.http.allowed_hosts"):
        check_input_source({"type": "http", "uris": [url]}, settings)


@pytest.mark.parametrize("url", ["file:///etc/passwd", "ftp://example.com/x", "gopher://example.com/"])
def test_http_with_other_protocols_is_refused(settings: Settings, url: str) -> None:
    with pytest.raises(InputForbidden, match="allowed_protocols"):
        check_url(url, settings)


def test_http_to_a_public_address_is_allowed(settings: Settings) -> None:
    check_url("http://93.184.215.14/data.json", settings)
    check_url("https://[2606:4700::1111]/x", settings)


def test_allowed_hosts_and_private_addresses_opt_in(tmp_path: Path) -> None:
    hosts = Settings.model_validate({"ingestion": {"http": {"allowed_hosts": ["127.0.0.1"]}}})
    check_url("http://127.0.0.1:9/x", hosts)
    with pytest.raises(InputForbidden):
        check_url("http://10.0.0.1/x", hosts)
    private = Settings.model_validate({"ingestion": {"http": {"allow_private_addresses": True}}})
    check_url("http://10.0.0.1/x", private)
    https_only = Settings.model_validate({"ingestion": {"http": {"allowed_protocols": ["https"]}}})
    with pytest.raises(InputForbidden, match="allowed_protocols"):
        check_url("http://93.184.215.14/x", https_only)


def test_environment_passwords_need_the_allow_list(settings: Settings) -> None:
    spec = {"type": "http", "uris": ["https://93.184.215.14/x"], "httpAuthenticationUsername": "u",
            "httpAuthenticationPassword": {"type": "environment", "variable": "HOME"}}
    with pytest.raises(InputForbidden, match="ingestion.password_env_variables"):
        check_input_source(spec, settings)
    allowed = settings.with_overrides({"ingestion": {"password_env_variables": ["HOME"]}})
    check_input_source(spec, allowed)
    plain = dict(spec, httpAuthenticationPassword={"type": "default", "password": "p"})
    check_input_source(plain, settings)


def test_s3_only_listed_buckets_and_never_deep_storage(tmp_path: Path) -> None:
    s = Settings.model_validate({"deep_storage": {"type": "s3", "bucket": "deep", "endpoint_url": "http://127.0.0.1:5000"},
                                 "ingestion": {"s3_buckets": ["raw-events"]}})
    check_input_source({"type": "s3", "uris": ["s3://raw-events/in/a.json"]}, s)
    for spec in ({"type": "s3", "prefixes": ["s3://deep/raw/"]},  # the archive
                 {"type": "s3", "uris": ["s3://deep/segments/ads/x/data.parquet"]},
                 {"type": "s3", "objects": [{"bucket": "deep", "path": "metadata/x"}]}):
        with pytest.raises(InputForbidden, match="'druid' input source"):
            check_input_source(spec, s)
    with pytest.raises(InputForbidden, match="ingestion.s3_buckets"):
        check_input_source({"type": "s3", "uris": ["s3://someone-else/k"]}, s)
    with pytest.raises(InputForbidden, match="ingestion.s3_buckets"):
        check_input_source({"type": "s3", "objects": [{"bucket": "other", "path": "k"}]}, s)
    with pytest.raises(InputForbidden, match="ingestion.s3_endpoints"):
        check_input_source({"type": "s3", "prefixes": ["s3://raw-events/x/"], "endpointConfig": {"url": "http://127.0.0.1:8888"}}, s)
    with pytest.raises(InputForbidden, match="password_env_variables"):
        check_input_source({"type": "s3", "prefixes": ["s3://raw-events/x/"], "properties": {
            "accessKeyId": {"type": "environment", "variable": "AWS_SECRET_ACCESS_KEY"}}}, s)
    # deep storage under a prefix: the rest of its bucket is an ordinary input place, the prefix never
    prefixed = Settings.model_validate({"deep_storage": {"type": "s3", "bucket": "deep", "path": "radstack"}})
    check_input_source({"type": "s3", "uris": ["s3://deep/input/a.json"]}, prefixed)
    for uri in ("s3://deep/radstack/raw/t/x.parquet", "s3://deep/", "s3://deep/radstack"):
        with pytest.raises(InputForbidden, match="deep storage"):
            check_input_source({"type": "s3", "prefixes": [uri]}, prefixed)


def test_hdfs_only_listed_paths_and_never_deep_storage() -> None:
    s = Settings.model_validate({"deep_storage": {"type": "hdfs", "path": "/radstack", "namenode_url": "http://nn:9870"},
                                 "ingestion": {"hdfs_paths": ["/data/events"]}})
    check_input_source({"type": "hdfs", "paths": ["/data/events/2020/a.json", "hdfs://nn:9000/data/events/b"]}, s)
    for bad in ["/etc/hadoop/core-site.xml", "/data/events/../../secrets", "/radstackother/x"]:
        with pytest.raises(InputForbidden, match="ingestion.hdfs_paths"):
            check_input_source({"type": "hdfs", "paths": [bad]}, s)
    everything = s.with_overrides({"ingestion": {"hdfs_paths": ["/"]}})  # even a prefix that covers it
    for own in ["/radstack/segments/ads", "hdfs://nn:9000/radstack/raw", "/", "/data/../radstack/x"]:
        with pytest.raises(InputForbidden, match="'druid' input source"):
            check_input_source({"type": "hdfs", "paths": [own]}, everything)


class _Redirect(http.server.BaseHTTPRequestHandler):
    target = ""

    def do_GET(self) -> None:  # noqa: N802
        self.send_response(302)
        self.send_header("Location", self.target)
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def redirector() -> Iterator[int]:
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Redirect)
    _Redirect.target = f"http://127.0.0.1:{srv.server_address[1]}/secret"
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield srv.server_address[1]
    srv.shutdown()
    srv.server_close()


def test_every_redirect_hop_is_checked(redirector: int) -> None:
    # "localhost" is allowed by name; its redirect to 127.0.0.1 (not allowed by name) is refused
    s = Settings.model_validate({"ingestion": {"http": {"allowed_hosts": ["localhost"]}}})
    spec = {"type": "http", "uris": [f"http://localhost:{redirector}/start"]}
    check_input_source(spec, s)
    (entity,) = resolve_input_source(spec, s)
    with pytest.raises(InputForbidden, match="127.0.0.1"):
        entity.open()


def test_the_task_api_answers_403_with_the_setting(server_client: Any) -> None:
    task = {"type": "index_parallel", "spec": {
        "dataSchema": {"dataSource": "x", "timestampSpec": {"column": "ts"}, "dimensionsSpec": {"dimensions": []},
                       "granularitySpec": {"segmentGranularity": "day"}},
        "ioConfig": {"inputSource": {"type": "local", "files": ["/proc/self/environ"]}, "inputFormat": {"type": "json"}}}}
    r = server_client.post("/druid/indexer/v1/task", json=task)
    assert r.status_code == 403, r.text
    body = r.json()
    assert body["category"] == "FORBIDDEN" and "ingestion.local.allowed_dirs" in body["errorMessage"]
    assert os.environ["PATH"] not in r.text  # nothing of the environment comes back
    task["spec"]["ioConfig"]["inputSource"] = {"type": "http", "uris": ["http://127.0.0.1:8888/status/health"]}
    r = server_client.post("/druid/indexer/v1/task", json=task)
    assert r.status_code == 403 and "ingestion.http.allowed_hosts" in r.json()["errorMessage"]
    assert server_client.get("/druid/indexer/v1/tasks").json() == []


def test_radstacks_own_state_is_never_a_local_input(settings: Settings, tmp_path: Path) -> None:
    """Deep storage (segments, the raw archive), the segment cache and the metadata store, even when an
    allowed directory contains them: the ``druid`` input source (READ on the datasource) is the way in."""
    ds = Path(settings.deep_storage.path)
    for target in (ds / "segments" / "ads" / "data.parquet", ds / "raw" / "wiki", settings.home / "metadata.db",
                   settings.home / "segment-cache" / "x.parquet", settings.home / "deep-storage"):
        for s in (settings, settings.with_overrides({"ingestion": {"local": {"allowed_dirs": ["/"]}}})):
            with pytest.raises(InputForbidden, match="'druid' input source"):
                check_input_source({"type": "local", "files": [str(target)]}, s)
    elsewhere = settings.with_overrides({"deep_storage": {"path": str(tmp_path / "deep")},
                                         "ingestion": {"local": {"allowed_dirs": [str(tmp_path)]}}})
    with pytest.raises(InputForbidden, match="'druid' input source"):
        check_input_source({"type": "local", "baseDir": str(tmp_path / "deep" / "segments"), "filter": "*"}, elsewhere)
    check_input_source({"type": "local", "files": [str(settings.data_dir / "ok.json")]}, elsewhere.with_overrides(
        {"ingestion": {"local": {"allowed_dirs": [str(settings.home)]}}}))  # {home}/data stays readable


def test_a_refusal_never_shows_where_a_symlink_points(settings: Settings, tmp_path: Path) -> None:
    link = settings.data_dir / "innocent"
    link.symlink_to("/proc/self/cwd")
    with pytest.raises(InputForbidden) as e:
        check_input_source({"type": "local", "files": [str(link)]}, settings)
    message = str(e.value).split(" is outside")[0]  # the rest lists the allowed directories
    assert str(link) in message and os.getcwd() not in message.replace(str(link), "")
