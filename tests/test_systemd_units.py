"""The shipped systemd units: they pass `systemd-analyze verify`, keep their
service contract (notify, watchdog, restart) and stay hardened to an
exposure of at most 2.0 by `systemd-analyze security --offline=true`."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
UNITS = {
    "shoe-controller.service": "shoe-controller.service",
    "shoe-controller@.service": "shoe-controller@T01.service",  # a template is checked as an instance
}
MAX_EXPOSURE = 2.0


def analyze() -> str:
    tool = shutil.which("systemd-analyze")
    if tool is None:
        pytest.skip("systemd-analyze is not installed")
    return tool


def installed_copy(tmp_path: Path, unit: str) -> Path:
    """The unit under its instance name, with ExecStart pointed at a binary
    that exists here (verify refuses a missing one)."""
    text = (REPO / "systemd" / unit).read_text()
    assert "ExecStart=/usr/bin/shoe-controller " in text
    path = tmp_path / UNITS[unit]
    path.write_text(text.replace("/usr/bin/shoe-controller", shutil.which("true") or "/bin/true"))
    return path


def directives(unit: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for line in (REPO / "systemd" / unit).read_text().splitlines():
        if "=" in line and not line.startswith(("#", "[")):
            key, value = line.split("=", 1)
            out.setdefault(key.strip(), []).append(value.strip())
    return out


@pytest.mark.parametrize("unit", list(UNITS))
def test_unit_passes_systemd_analyze_verify(unit: str, tmp_path: Path) -> None:
    tool = analyze()
    path = installed_copy(tmp_path, unit)
    result = subprocess.run([tool, "verify", str(path)], capture_output=True, text=True)
    ours = [line for line in (result.stdout + result.stderr).splitlines() if path.name in line]
    assert result.returncode == 0 and not ours, result.stdout + result.stderr


@pytest.mark.parametrize("unit", list(UNITS))
def test_unit_exposure_is_at_most_2(unit: str, tmp_path: Path) -> None:
    tool = analyze()
    if "--offline" not in subprocess.run([tool, "security", "--help"], capture_output=True, text=True).stdout:
        pytest.skip("this systemd-analyze has no security --offline")
    path = installed_copy(tmp_path, unit)
    result = subprocess.run([tool, "security", "--offline=true", str(path)], capture_output=True, text=True)
    match = re.search(r"Overall exposure level for \S+: (\d+(?:\.\d+)?)", result.stdout)
    assert match, result.stdout + result.stderr
    assert float(match.group(1)) <= MAX_EXPOSURE, result.stdout


@pytest.mark.parametrize("unit", list(UNITS))
def test_unit_is_a_notify_service_with_a_watchdog_and_restart_on_failure(unit: str) -> None:
    d = directives(unit)
    assert d["Type"] == ["notify"] and d["NotifyAccess"] == ["main"]
    assert d["WatchdogSec"] == ["30"]
    assert d["Restart"] == ["on-failure"] and d["RestartSec"] == ["2"]
    assert d["DevicePolicy"] == ["closed"]
    assert "dialout" in d["SupplementaryGroups"]


def test_template_instances_have_their_own_config_and_state() -> None:
    d = directives("shoe-controller@.service")
    assert d["ExecStart"] == ["/usr/bin/shoe-controller run -c %E/shoe-controller/%i.yaml"]
    assert d["StateDirectory"] == ["shoe-controller/%i"]
    assert d["WorkingDirectory"] == ["%S/shoe-controller/%i"]
