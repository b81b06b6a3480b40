"""Bounds on files from outside that were read whole before: a config, a
profile, a password file and a capture line, each
read up to its bound and refused one byte past it, with one line on stderr
and exit code 2, never a traceback or a file read whole into memory."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from controller.config import MAX_CONFIG_BYTES, MAX_PASSWORD_FILE_BYTES, load_config
from controller.errors import ConfigError
from controller.rules import MAX_PROFILE_BYTES, load_profile
from controller.shoelog import MAX_LINE, ShoelogError, read_header, read_shoelog

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def padded(text: str, size: int) -> str:
    """``text`` followed by a YAML comment, exactly ``size`` bytes long."""
    pad = size - len(text.encode()) - 3
    return text + "\n#" + "x" * pad + "\n"


def test_a_config_of_exactly_the_bound_loads_and_one_byte_more_is_refused(tmp_path: Path) -> None:
    base = (EXAMPLES / "config.yaml").read_text()
    path = tmp_path / "c.yaml"
    path.write_text(padded(base, MAX_CONFIG_BYTES))
    assert path.stat().st_size == MAX_CONFIG_BYTES
    assert load_config(path).table == "T01"
    path.write_text(padded(base, MAX_CONFIG_BYTES + 1))
    with pytest.raises(ConfigError, match=f"larger than {MAX_CONFIG_BYTES} bytes"):
        load_config(path)
    r = subprocess.run(
        [sys.executable, "-m", "controller.cli", "check-config", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 2 and "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_a_config_that_never_ends_is_refused_at_the_bound() -> None:
    with pytest.raises(ConfigError, match="larger than"):
        load_config("/dev/zero")


def test_a_profile_of_exactly_the_bound_loads_and_one_byte_more_is_refused(tmp_path: Path) -> None:
    from importlib import resources

    base = resources.files("controller").joinpath("profiles", "punto_banco.yaml").read_text("utf-8")
    path = tmp_path / "p.yaml"
    path.write_text(padded(base, MAX_PROFILE_BYTES))
    assert load_profile(str(path)).name
    path.write_text(padded(base, MAX_PROFILE_BYTES + 1))
    with pytest.raises(ConfigError, match=f"larger than {MAX_PROFILE_BYTES} bytes"):
        load_profile(str(path))


def test_a_password_file_is_read_up_to_its_bound(tmp_path: Path) -> None:
    secret = tmp_path / "pass"
    cfg = yaml.safe_load((EXAMPLES / "config.yaml").read_text())
    cfg["outputs"]["mqtt"].update(username="u", password_file=str(secret))
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(cfg))
    secret.write_text("s3cret\n" + "#" * (MAX_PASSWORD_FILE_BYTES - 7))
    secret.chmod(0o600)
    mqtt = load_config(path).outputs.mqtt
    assert mqtt is not None and mqtt.password() == "s3cret"
    secret.write_text("s3cret\n" + "#" * (MAX_PASSWORD_FILE_BYTES - 6))
    with pytest.raises(ConfigError, match=r"password_file.*larger than"):
        mqtt.password()


def test_a_command_key_file_is_read_up_to_the_same_bound(tmp_path: Path) -> None:
    secret = tmp_path / "key"
    cfg = yaml.safe_load((EXAMPLES / "config.yaml").read_text())
    cfg["outputs"]["mqtt"].update(command_key_file=str(secret))
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(cfg))
    secret.write_text("k" * (MAX_PASSWORD_FILE_BYTES - 1) + "\n")
    secret.chmod(0o600)
    mqtt = load_config(path).outputs.mqtt
    assert mqtt is not None and mqtt.command_key() == b"k" * (MAX_PASSWORD_FILE_BYTES - 1)
    secret.write_text("k" * (MAX_PASSWORD_FILE_BYTES + 1))
    with pytest.raises(ConfigError, match=r"command_key_file.*larger than"):
        mqtt.command_key()


def test_a_capture_line_of_the_bound_is_read_and_a_longer_one_is_refused(tmp_path: Path) -> None:
    head = "1763800000.000 < hex:"
    room = MAX_LINE - len(head) - 1  # the newline counts
    path = tmp_path / "c.shoelog"
    path.write_text("# protocol=shoe-ascii/1\n" + head + "ab" * (room // 2) + "\n")
    records = [r for r in read_shoelog(path) if not isinstance(r, dict)]
    assert len(records[0].data) == room // 2
    path.write_text("# protocol=shoe-ascii/1\n" + head + "ab" * (room // 2 + 1) + "\n")
    with pytest.raises(ShoelogError, match=f":2: line longer than {MAX_LINE}"):
        list(read_shoelog(path))
    with pytest.raises(ShoelogError, match="line longer than"):
        read_header(path)
    r = subprocess.run(
        [sys.executable, "-m", "controller.cli", "replay", "--no-progress", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 2 and "Traceback" not in r.stderr and "line longer than" in r.stderr
