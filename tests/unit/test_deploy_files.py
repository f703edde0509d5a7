"""The scale-out deployment files (deploy/compose, deploy/k8s, deploy/spark). Docker and Kubernetes do not
run here, so the files are checked statically: the compose file's structure (services, dependencies,
volumes, ports, env files) and its consistency with the radstack.yaml it mounts (every key a real
config key, host names and ports matching the services); the Kubernetes manifests against the
bundled Kubernetes JSON schemas (kubernetes-validate, strict) plus selector/port/volume wiring; the
spark-submit wrapper's command."""

from __future__ import annotations

import copy
import re
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest
import yaml

from radstack.config import DEFAULTS, env_overrides, flatten, load_settings
from radstack.spec import load_datasource_spec

REPO = Path(__file__).resolve().parents[2]
COMPOSE_DIR = REPO / "deploy" / "compose"
K8S_DIR = REPO / "deploy" / "k8s"
K8S_VERSION = "1.33.0"
FREE_FORM = ("spark.conf", "kafka.topics", "server.auth.users", "receiver.auth.users")


def known_key(dotted: str) -> bool:
    if any(dotted == f or dotted.startswith(f + ".") for f in FREE_FORM):
        return True
    return dotted in flatten(DEFAULTS)


def check_config_text(text: str, tmp_path: Path) -> Any:
    raw = yaml.safe_load(text)
    unknown = [k for k in flatten(raw) if not known_key(k)]
    assert not unknown, f"keys not in radstack.config DEFAULTS: {unknown}"
    p = tmp_path / "radstack.yaml"
    p.write_text(text)
    return load_settings(p, env={})


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return yaml.safe_load((COMPOSE_DIR / "docker-compose.yml").read_text())


@pytest.fixture
def compose_settings(tmp_path: Path) -> Any:
    return check_config_text((COMPOSE_DIR / "radstack.yaml").read_text(), tmp_path)


def host_port(url: str) -> tuple[str, int]:
    u = urlparse(url if "://" in url else f"x://{url}")
    assert u.hostname and u.port, url
    return u.hostname, u.port


def container_ports(svc: dict[str, Any]) -> set[int]:
    return {int(str(p).split(":")[-1].split("/")[0]) for p in svc.get("ports", [])}


_VAR = re.compile(r"\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-?])([^}]*))?\}|\$([A-Za-z_][A-Za-z0-9_]*)")


def interpolate(value: Any, env: dict[str, str]) -> Any:
    """Compose's variable interpolation (``$$``, ``${V}``, ``${V:-default}``, ``${V-default}``,
    ``${V:?err}``), applied to every string of a loaded compose file as ``docker compose config`` does."""
    if isinstance(value, dict):
        return {k: interpolate(v, env) for k, v in value.items()}
    if isinstance(value, list):
        return [interpolate(v, env) for v in value]
    if not isinstance(value, str):
        return value

    def sub(m: re.Match[str]) -> str:
        if m.group(0) == "$$":
            return "$"
        name = m.group(1) or m.group(4)
        op, arg = m.group(2), m.group(3) or ""
        have = env.get(name)
        if op in (":-", ":?") and not have or op in ("-", "?") and have is None:
            if op.endswith("?"):
                return "<required>"
            return arg
        return have or ""

    return _VAR.sub(sub, value)


def published(svc: dict[str, Any]) -> list[tuple[str, str, str]]:
    """``(host ip, host port, container port)`` of each published port (short and long syntax)."""
    out = []
    for p in svc.get("ports", []):
        if isinstance(p, dict):
            out.append((str(p.get("host_ip", "0.0.0.0")), str(p.get("published", "")), str(p["target"])))
            continue
        parts = str(p).split(":")
        if len(parts) == 1:
            out.append(("0.0.0.0", "(random)", parts[0]))
        elif len(parts) == 2:
            out.append(("0.0.0.0", parts[0], parts[1]))
        else:
            out.append((":".join(parts[:-2]), parts[-2], parts[-1]))
    return out


# ---- docker compose ------------------------------------------------------------------------------


def test_compose_has_the_cluster(compose: dict[str, Any]) -> None:
    services = compose["services"]
    for name in ("kafka", "postgres", "minio", "namenode", "datanode", "spark-master", "spark-worker-1",
                 "spark-worker-2", "airflow-apiserver", "airflow-scheduler", "radstack-serve",
                 "radstack-receiver", "radstack-archiver", "radstack-stream", "zookeeper", "druid-coordinator",
                 "druid-broker", "druid-historical", "druid-middlemanager", "druid-router"):
        assert name in services, name
        svc = services[name]
        assert svc.get("image"), f"{name} has no image"
        assert svc.get("command") or svc.get("entrypoint") or name in ("postgres", "kafka", "zookeeper"), name
    assert services["kafka"]["environment"]["KAFKA_PROCESS_ROLES"] == "broker,controller"  # KRaft
    for name, svc in services.items():
        if name.startswith("druid-") or name == "zookeeper":
            assert svc.get("profiles") == ["druid"], name
        if name in ("namenode", "datanode"):
            assert svc.get("profiles") == ["hdfs"], name


def test_compose_references_resolve(compose: dict[str, Any]) -> None:
    services = compose["services"]
    declared = set(compose.get("volumes") or {})
    used: set[str] = set()
    host_ports: list[str] = []
    for name, svc in services.items():
        for dep in svc.get("depends_on") or {}:
            assert dep in services, f"{name} depends on unknown service {dep}"
            if "profiles" in services[dep]:
                assert set(services[dep]["profiles"]) <= set(svc.get("profiles") or []), \
                    f"{name} depends on {dep}, which only runs with profile(s) {services[dep]['profiles']}"
        for v in svc.get("volumes") or []:
            src = str(v).split(":")[0]
            if src.startswith((".", "/")):
                assert (COMPOSE_DIR / src).resolve().exists(), f"{name}: bind mount {src} does not exist"
            else:
                used.add(src)
        for f in [svc["env_file"]] if isinstance(svc.get("env_file"), str) else svc.get("env_file") or []:
            assert (COMPOSE_DIR / f).is_file(), f"{name}: env_file {f} missing"
        host_ports += [port for _, port, _ in published(interpolate(svc, {}))]
    assert used <= declared, f"undeclared volumes {used - declared}"
    assert declared <= used, f"unused volumes {declared - used}"
    assert len(host_ports) == len(set(host_ports)), f"host port clash: {sorted(host_ports)}"


def test_compose_secrets_come_from_env_file(compose: dict[str, Any]) -> None:
    text = (COMPOSE_DIR / "docker-compose.yml").read_text()
    required = set(re.findall(r"\$\{([A-Z_]+)(?::[?-][^}]*)?\}", text))
    example = {ln.split("=")[0] for ln in (COMPOSE_DIR / ".env.example").read_text().splitlines()
               if ln and not ln.startswith("#")}
    assert required <= example, f"variables not in .env.example: {required - example}"
    for name, svc in compose["services"].items():
        env = svc.get("environment") or {}
        for key, value in (env.items() if isinstance(env, dict) else []):
            if re.search(r"PASSWORD|SECRET|ACCESS_KEY|SECRETKEY|ACCESSKEY", key, re.I) or "://" in str(value) and "@" in str(value):
                assert "${" in str(value), f"{name}: {key} holds a literal secret"


def test_compose_is_closed_by_default(compose: dict[str, Any], compose_settings: Any) -> None:
    """Resolved as ``docker compose config`` resolves it: with the default environment every published
    port is on 127.0.0.1; with RADSTACK_PUBLISH_ADDRESS=0.0.0.0 only services that require
    authentication move; Kafka's plaintext listener, WebHDFS and the Spark master/UI are not published."""
    with_auth = {"radstack-serve": compose_settings.server.auth.enabled,
                 "radstack-receiver": compose_settings.receiver.auth.enabled}
    assert with_auth == {"radstack-serve": True, "radstack-receiver": True}
    assert compose_settings.server.auth.generate_admin and compose_settings.receiver.auth.generate_admin
    for env, wide in (({}, set()), ({"RADSTACK_PUBLISH_ADDRESS": "0.0.0.0"}, {"radstack-serve", "radstack-receiver"})):
        services = interpolate(compose, env)["services"]
        for name, svc in services.items():
            for ip, port, _ in published(svc):
                if name in wide:
                    assert with_auth[name], f"{name} is published on {ip} without auth"
                else:
                    assert ip == "127.0.0.1", f"{name} publishes {port} on {ip or 'every address'}"
    services = compose["services"]
    for name in ("kafka", "namenode", "datanode", "spark-master", "spark-worker-1"):
        assert not services[name].get("ports"), f"{name} must not be published"
    assert "EXTERNAL" not in str(services["kafka"]["environment"])
    assert "127.0.0.1" in (COMPOSE_DIR / ".env.example").read_text()


def test_the_compose_resolver_reads_what_compose_reads() -> None:
    env = {"A": "x", "E": ""}
    assert interpolate("${A}:${B:-d}:${E:-e}:${E-f}:$$A:${C:?boom}", env) == "x:d:e::$A:<required>"
    assert published({"ports": ["8080", "1:2", "127.0.0.1:3:4", {"target": 5, "published": 6}]}) == [
        ("0.0.0.0", "(random)", "8080"), ("0.0.0.0", "1", "2"), ("127.0.0.1", "3", "4"), ("0.0.0.0", "6", "5")]


def test_compose_radstack_yaml_matches_services(compose: dict[str, Any], compose_settings: Any) -> None:
    s, services = compose_settings, compose["services"]
    assert s.server.port in container_ports(services["radstack-serve"])
    assert s.receiver.port in container_ports(services["radstack-receiver"])
    assert s.server.host == s.receiver.host == "0.0.0.0"  # reachable from other containers
    host, port = host_port(s.kafka.bootstrap_servers)
    assert host == "kafka" and f"PLAINTEXT://:{port}" in services["kafka"]["environment"]["KAFKA_LISTENERS"]
    assert s.kafka.embedded is False
    assert host_port(s.deep_storage.endpoint_url) == ("minio", 9000)
    mc = " ".join(services["minio-init"]["command"])
    assert f"local/{s.deep_storage.bucket}" in mc, "the bucket radstack uses is not created"
    host, port = host_port(s.spark.master)
    assert host == "spark-master" and f"--port {port}" in " ".join(services["spark-master"]["command"])
    assert all(f"spark://spark-master:{port}" in " ".join(services[w]["command"])
               for w in ("spark-worker-1", "spark-worker-2"))
    assert host_port(s.airflow.url)[0] == "airflow-apiserver"
    home = str(s.home)
    for name in ("radstack-serve", "radstack-receiver", "radstack-archiver", "radstack-stream"):
        svc = services[name]
        env = svc["environment"]
        assert env["RADSTACK_CONFIG"] == "/etc/radstack/radstack.yaml"
        assert any(str(v).endswith(":/etc/radstack/radstack.yaml:ro") for v in svc["volumes"])
        assert any(str(v).split(":")[1] == home for v in svc["volumes"]), f"{name}: home is not a volume"
        # every RADSTACK_* variable names a real key (unknown ones would be ignored silently)
        for var in env:
            if var.startswith("RADSTACK_") and var != "RADSTACK_CONFIG":
                assert env_overrides({var: "x" if "URL" in var or "PASSWORD" in var else "2g"}), var
        url = urlparse(str(env["RADSTACK_METADATA__URL"]).replace("${POSTGRES_PASSWORD:?set POSTGRES_PASSWORD in .env}", "pw"))
        assert (url.hostname, url.port, url.path) == ("postgres", 5432, "/" + services["postgres"]["environment"]["POSTGRES_DB"])
    # the datasource specs the services read are real specs
    for mount in services["radstack-serve"]["volumes"]:
        src, dst = str(mount).split(":")[:2]
        if dst == s.datasources.dir:
            specs = list((COMPOSE_DIR / src).resolve().glob("*.yaml"))
            assert specs and all(load_datasource_spec(p).name for p in specs)
            break
    else:
        pytest.fail("datasources.dir is not mounted")


def test_compose_druid_and_hdfs_config() -> None:
    env = dict(ln.split("=", 1) for ln in (COMPOSE_DIR / "druid.env").read_text().splitlines()
               if ln and not ln.startswith("#"))
    loads = yaml.safe_load(env["druid_extensions_loadList"])
    for ext in ("druid-kafka-indexing-service", "druid-parquet-extensions", "druid-hdfs-storage",
                "druid-s3-extensions", "postgresql-metadata-storage"):
        assert ext in loads
    db = env["druid_metadata_storage_connector_connectURI"].rsplit("/", 1)[1]
    assert f"CREATE DATABASE {db} " in (COMPOSE_DIR / "postgres-init.sql").read_text()
    assert env["druid_zk_service_host"] == "zookeeper"
    hadoop = (COMPOSE_DIR / "hadoop.env").read_text()
    assert "fs.defaultFS=hdfs://namenode:8020" in hadoop


def test_the_config_checker_can_fail(tmp_path: Path) -> None:
    with pytest.raises(AssertionError, match="server.prot"):
        check_config_text("server:\n  prot: 1\n", tmp_path)


# ---- kubernetes ----------------------------------------------------------------------------------


def k8s_docs() -> list[tuple[str, dict[str, Any]]]:
    out = []
    for f in sorted(K8S_DIR.glob("*.yaml")):
        for doc in yaml.safe_load_all(f.read_text()):
            if doc:
                out.append((f.name, doc))
    return out


def test_k8s_manifests_validate_against_the_schemas() -> None:
    import kubernetes_validate

    docs = [(f, d) for f, d in k8s_docs() if d["kind"] != "Kustomization"]
    assert {d["kind"] for _, d in docs} >= {"Namespace", "ConfigMap", "Deployment", "Service"}
    for _f, d in docs:
        kubernetes_validate.validate(d, K8S_VERSION, strict=True)
    # and the validator does reject a broken manifest
    bad = copy.deepcopy(next(d for _, d in docs if d["kind"] == "Deployment"))
    bad["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy_typo"] = "Always"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(bad, K8S_VERSION, strict=True)


def test_k8s_wiring(tmp_path: Path) -> None:
    docs = k8s_docs()
    kustom = next(d for _, d in docs if d["kind"] == "Kustomization")
    assert sorted(kustom["resources"]) == sorted(f.name for f in K8S_DIR.glob("*.yaml") if f.name != "kustomization.yaml")
    configmaps = {d["metadata"]["name"]: d for _, d in docs if d["kind"] == "ConfigMap"}
    deployments = [d for _, d in docs if d["kind"] == "Deployment"]
    settings = check_config_text(configmaps["radstack-config"]["data"]["radstack.yaml"], tmp_path)
    # the datasource ConfigMap is the example spec, not a drifting copy
    for name, text in configmaps["radstack-datasources"]["data"].items():
        assert yaml.safe_load(text) == yaml.safe_load((REPO / "examples" / "ads" / name).read_text())
    pods = {}
    for d in deployments:
        tpl = d["spec"]["template"]
        assert d["spec"]["selector"]["matchLabels"].items() <= tpl["metadata"]["labels"].items()
        spec = tpl["spec"]
        vols = {v["name"]: v for v in spec["volumes"]}
        for c in spec["containers"]:
            assert c["image"] == "radstack"
            for m in c.get("volumeMounts", []):
                assert m["name"] in vols, f"{d['metadata']['name']}: mount {m['name']} has no volume"
            env = {e["name"]: e for e in c.get("env", [])}
            assert env["RADSTACK_CONFIG"]["value"] == "/etc/radstack/radstack.yaml"
            for var in env:
                if var.startswith("RADSTACK_") and var != "RADSTACK_CONFIG":
                    assert env_overrides({var: "[]" if var.endswith("__USERS") else "x"}), var
            pods[d["metadata"]["name"]] = (tpl["metadata"]["labels"], {p["name"]: p["containerPort"] for p in c.get("ports", [])})
        for v in vols.values():
            if "configMap" in v:
                assert v["configMap"]["name"] in configmaps
    assert pods["radstack-serve"][1]["http"] == settings.server.port
    assert pods["radstack-receiver"][1]["http"] == settings.receiver.port
    for _, svc in ((f, d) for f, d in docs if d["kind"] == "Service"):
        matches = [p for labels, p in pods.values() if svc["spec"]["selector"].items() <= labels.items()]
        assert len(matches) == 1, f"service {svc['metadata']['name']} selects {len(matches)} deployments"
        for port in svc["spec"]["ports"]:
            assert port["targetPort"] in matches[0], f"{svc['metadata']['name']}: no container port {port['targetPort']}"


def test_k8s_is_closed_by_default(tmp_path: Path) -> None:
    """Nothing leaves the cluster (Services are ClusterIP, no hostPort or hostNetwork); what binds
    0.0.0.0 in its pod (server, receiver) has authentication on, its users from the Secret."""
    docs = k8s_docs()
    configmaps = {d["metadata"]["name"]: d for _, d in docs if d["kind"] == "ConfigMap"}
    settings = check_config_text(configmaps["radstack-config"]["data"]["radstack.yaml"], tmp_path)
    for _, d in docs:
        if d["kind"] == "Service":
            assert d["spec"].get("type", "ClusterIP") == "ClusterIP", d["metadata"]["name"]
            assert not d["spec"].get("externalIPs")
        if d["kind"] == "Deployment":
            spec = d["spec"]["template"]["spec"]
            assert not spec.get("hostNetwork") and not spec.get("hostPID")
            for c in spec["containers"]:
                assert all("hostPort" not in p for p in c.get("ports", [])), d["metadata"]["name"]
    assert settings.server.host == settings.receiver.host == "0.0.0.0"
    assert settings.server.auth.enabled and settings.receiver.auth.enabled
    deployments = {d["metadata"]["name"]: d for _, d in docs if d["kind"] == "Deployment"}
    for name, var, key in (("radstack-serve", "RADSTACK_SERVER__AUTH__USERS", "server-auth-users"),
                           ("radstack-receiver", "RADSTACK_RECEIVER__AUTH__USERS", "receiver-auth-users")):
        env = {e["name"]: e for e in deployments[name]["spec"]["template"]["spec"]["containers"][0]["env"]}
        assert env[var]["valueFrom"]["secretKeyRef"] == {"name": "radstack-secrets", "key": key}


# ---- spark-submit wrapper ------------------------------------------------------------------------


def test_spark_submit_wrapper_dry_run(tmp_path: Path) -> None:
    script = REPO / "deploy" / "spark" / "submit-rebuild.py"
    env = {"RADSTACK_HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}
    res = subprocess.run([sys.executable, str(script), "-c", str(COMPOSE_DIR / "radstack.yaml"), "-d", "ads",
                          "-i", "2026-01-01T00/PT1H", "--dry-run"], capture_output=True, text=True, env=env, timeout=60)
    assert res.returncode == 0, res.stderr
    cmd = res.stdout.split()
    assert cmd[:3] == ["spark-submit", "--master", "spark://spark-master:7077"]
    assert cmd[cmd.index("--py-files") + 1] == "/opt/radstack/dist/radstack-py.zip"
    assert "spark.hadoop.fs.s3a.endpoint=http://minio:9000" in cmd
    i = cmd.index("--datasource")
    assert cmd[i - 1].endswith("batch/rebuild_job.py") and cmd[i:i + 4] == ["--datasource", "ads", "--interval", "2026-01-01T00/PT1H"]
    local = tmp_path / "local.yaml"
    local.write_text("spark:\n  master: local[2]\n")
    res = subprocess.run([sys.executable, str(script), "-c", str(local), "-d", "ads", "-i", "2026-01-01/P1D", "--dry-run"],
                         capture_output=True, text=True, env=env, timeout=60)
    assert res.returncode == 2 and "local master" in res.stderr


@pytest.mark.slow
def test_build_package_makes_wheel_and_zip(tmp_path: Path) -> None:
    res = subprocess.run(["bash", str(REPO / "deploy" / "spark" / "build-package.sh"), str(tmp_path)],
                         capture_output=True, text=True, timeout=300, env={"PYTHON": sys.executable, "PATH": "/usr/bin:/bin"})
    assert res.returncode == 0, res.stderr[-3000:]
    wheel = next(tmp_path.glob("radstack-*.whl"))
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
    for mod in ("radstack/config/settings.py", "radstack/druid_cluster/specs.py", "batch/rebuild_job.py", "realtime/receiver/app.py"):
        assert mod in names, mod
    with zipfile.ZipFile(tmp_path / "radstack-py.zip") as zf:
        assert "batch/rebuild_job.py" in zf.namelist() and "serving/app.py" in zf.namelist()


# ---- #50: what the image and the manifests give away -------------------------------------------


def test_the_image_leaves_out_secrets_and_runs_unprivileged() -> None:
    ignored = {line.strip() for line in (REPO / ".dockerignore").read_text().splitlines()
               if line.strip() and not line.startswith("#")}
    assert {".env", "**/.env", "deploy/compose/.env", ".git", ".venv", ".venv-*"} <= ignored
    assert ".env" in (REPO / ".gitignore").read_text().splitlines()
    dockerfile = (REPO / "deploy/compose/Dockerfile").read_text().splitlines()
    users = [line.split(None, 1)[1].strip() for line in dockerfile if line.startswith("USER ")]
    assert users and users[-1].split(":")[0] not in ("root", "0")
    last_run = max(i for i, line in enumerate(dockerfile) if line.startswith("RUN "))
    assert max(i for i, line in enumerate(dockerfile) if line.startswith("USER ")) > last_run


def test_radstack_spark_and_druid_never_get_the_object_stores_root_credentials(compose: dict[str, Any]) -> None:
    for name, svc in compose["services"].items():
        env = svc.get("environment") or {}
        values = " ".join(str(v) for v in (env.values() if isinstance(env, dict) else env))
        if name not in ("minio", "minio-init"):
            assert "MINIO_ROOT" not in values, name
    init = " ".join(compose["services"]["minio-init"]["command"])
    assert "mc admin user add" in init and "radstack-rw" in init and "arn:aws:s3:::radstack/*" in init


def test_k8s_containers_are_hardened_and_ingress_is_denied_by_default() -> None:
    docs = k8s_docs()
    for _, d in docs:
        if d["kind"] != "Deployment":
            continue
        pod = d["spec"]["template"]["spec"]
        assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] != 0
        assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
        assert pod.get("automountServiceAccountToken") is False
        for c in pod["containers"]:
            sc = c["securityContext"]
            assert sc["allowPrivilegeEscalation"] is False and sc["readOnlyRootFilesystem"] is True, d["metadata"]["name"]
            assert sc["capabilities"]["drop"] == ["ALL"] and not sc["capabilities"].get("add")
            assert "/tmp" in {m["mountPath"] for m in c["volumeMounts"]}  # the only writable places
    policies = {d["metadata"]["name"]: d for _, d in docs if d["kind"] == "NetworkPolicy"}
    deny = policies["default-deny-ingress"]["spec"]
    assert deny["podSelector"] == {} and deny["policyTypes"] == ["Ingress"] and not deny.get("ingress")
    opened = {p["port"] for d in policies.values() for rule in d["spec"].get("ingress", []) for p in rule["ports"]}
    assert opened == {8888, 8200, 8201}
