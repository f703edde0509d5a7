"""Input-source security: a task may read only the places the settings allow (serving/overlord/input_policy.py).

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
from serving.overlord.input_policy import InputForbidden, check_url
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
    with pytest.raises(InputForbidden, match="ingestion.local.allowed_dirs"):
        check_input_source(spec, settings)


def test_local_inside_the_data_dir_is_allowed(settings: Settings) -> None:
    spec = {"type": "local", "baseDir": str(settings.data_dir), "filter": "*.json"}
    check_input_source(spec, settings)
    assert [Path(e.name).name for e in resolve_input_source(spec, settings)] == ["ok.json"]


def test_the_examples_are_allowed_by_default(settings: Settings) -> None:
    check_input_source({"type": "local", "baseDir": "examples/rollup-tutorial", "filter": "*.json"}, settings)


def test_a_symlink_out_of_an_allowed_dir_is_refused_when_the_task_runs(settings: Settings, tmp_path: Path) -> None:
    secret = tmp_path / "secret.json"
    secret.write_text('{"password": "x"}\n')
    (settings.data_dir / "link.json").symlink_to(secret)
    spec = {"type": "local", "baseDir": str(settings.data_dir), "filter": "*.json"}
    check_input_source(spec, settings)  # the directory itself is allowed ...
    with pytest.raises(InputForbidden, match="secret.json"):
        resolve_input_source(spec, settings)  # ... the file the link points to is not
    with pytest.raises(InputForbidden):
        check_input_source({"type": "local", "files": [str(settings.data_dir / "link.json")]}, settings)


def test_allowed_dirs_replace_the_defaults(tmp_path: Path) -> None:
    s = Settings.model_validate({"home": str(tmp_path), "ingestion": {"local": {"allowed_dirs": [str(tmp_path / "in")]}}})
    check_input_source({"type": "local", "files": [str(tmp_path / "in" / "a.json")]}, s)
    with pytest.raises(InputForbidden):
        check_input_source({"type": "local", "files": [str(tmp_path / "data" / "a.json")]}, s)


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


def test_s3_only_the_deep_storage_bucket_and_endpoint(tmp_path: Path) -> None:
    s = Settings.model_validate({"deep_storage": {"type": "s3", "bucket": "deep", "endpoint_url": "http://127.0.0.1:5000"}})
    check_input_source({"type": "s3", "prefixes": ["s3://deep/raw/"]}, s)
    with pytest.raises(InputForbidden, match="ingestion.s3_buckets"):
        check_input_source({"type": "s3", "uris": ["s3://someone-else/k"]}, s)
    with pytest.raises(InputForbidden, match="ingestion.s3_buckets"):
        check_input_source({"type": "s3", "objects": [{"bucket": "other", "path": "k"}]}, s)
    with pytest.raises(InputForbidden, match="ingestion.s3_endpoints"):
        check_input_source({"type": "s3", "prefixes": ["s3://deep/x/"], "endpointConfig": {"url": "http://127.0.0.1:8888"}}, s)
    with pytest.raises(InputForbidden, match="password_env_variables"):
        check_input_source({"type": "s3", "prefixes": ["s3://deep/x/"], "properties": {
            "accessKeyId": {"type": "environment", "variable": "AWS_SECRET_ACCESS_KEY"}}}, s)
    more = s.with_overrides({"ingestion": {"s3_buckets": ["raw-events"]}})
    check_input_source({"type": "s3", "uris": ["s3://raw-events/in/a.json"]}, more)


def test_hdfs_only_under_the_deep_storage_path() -> None:
    s = Settings.model_validate({"deep_storage": {"type": "hdfs", "path": "/radstack", "namenode_url": "http://nn:9870"}})
    check_input_source({"type": "hdfs", "paths": ["/radstack/input/a.json", "hdfs://nn:9000/radstack/raw"]}, s)
    for bad in ["/etc/hadoop/core-site.xml", "/radstack/../secrets", "/radstackother/x"]:
        with pytest.raises(InputForbidden, match="ingestion.hdfs_paths"):
            check_input_source({"type": "hdfs", "paths": [bad]}, s)
    more = s.with_overrides({"ingestion": {"hdfs_paths": ["/data/events"]}})
    check_input_source({"type": "hdfs", "paths": ["/data/events/2020/a.json"]}, more)


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


def test_a_local_deep_storage_is_readable(settings: Settings) -> None:
    segment = Path(settings.deep_storage.path) / "segments" / "ads" / "data.parquet"
    check_input_source({"type": "local", "files": [str(segment)]}, settings)  # radctl druid submit re-indexes these
    explicit = settings.with_overrides({"ingestion": {"local": {"allowed_dirs": ["/nowhere"]}}})
    check_input_source({"type": "local", "files": [str(segment)]}, explicit)
