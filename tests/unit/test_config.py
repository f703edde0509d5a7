from pathlib import Path

import pytest

from radstack.config import DEFAULTS, ConfigError, env_name, flatten, load_settings


def test_defaults_put_state_under_home(tmp_path: Path) -> None:
    s = load_settings(env={"RADSTACK_HOME": str(tmp_path)})
    assert s.home == tmp_path
    assert s.metadata_url == f"sqlite:///{tmp_path / 'metadata.db'}"
    assert s.deep_storage.type == "local"
    assert s.deep_storage.path == str(tmp_path / "deep-storage")


def test_yaml_file_then_env_override(tmp_path: Path) -> None:
    cfg = tmp_path / "radstack.yaml"
    cfg.write_text("server:\n  port: 9000\nmetadata:\n  url: postgresql://db/radstack\n")
    s = load_settings(cfg, env={"RADSTACK_HOME": str(tmp_path), "RADSTACK_SERVER__PORT": "9100"})
    assert s.server.port == 9100  # the environment wins, typed like the default
    assert s.metadata_url == "postgresql://db/radstack"
    assert s.source == cfg


def test_env_booleans_and_lists(tmp_path: Path) -> None:
    s = load_settings(
        env={
            "RADSTACK_HOME": str(tmp_path),
            "RADSTACK_SERVER__AUTH__ENABLED": "true",
            "RADSTACK_SERVER__AUTH__USERS": "[{name: a, password: b, role: admin}]",
        }
    )
    assert s.server.auth.enabled is True
    assert s.server.auth.users == [{"name": "a", "password": "b", "role": "admin"}]


def test_unknown_top_level_key_is_rejected(tmp_path: Path) -> None:
    cfg = tmp_path / "radstack.yaml"
    cfg.write_text("sever:\n  port: 1\n")
    with pytest.raises(ConfigError, match="sever"):
        load_settings(cfg, env={})


def test_bad_env_value_names_the_variable(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="RADSTACK_SERVER__PORT"):
        load_settings(env={"RADSTACK_HOME": str(tmp_path), "RADSTACK_SERVER__PORT": "eighty"})


def test_every_key_is_documented() -> None:
    """docs/configuration.md lists every key of DEFAULTS with its environment variable."""
    doc = (Path(__file__).resolve().parents[2] / "docs" / "configuration.md").read_text()
    missing = [k for k in flatten(DEFAULTS) if f"`{k}`" not in doc or f"`{env_name(k)}`" not in doc]
    assert not missing, f"undocumented configuration keys: {missing}"
