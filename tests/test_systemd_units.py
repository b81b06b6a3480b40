"""The shipped systemd units: they pass `systemd-analyze verify` (as shipped,
and as deploy/install.sh installs them into a temporary root), keep their
service contract (notify, watchdog, restart; the daemon really sends READY,
WATCHDOG and STOPPING) and stay hardened to an exposure of at most 2.0 by
`systemd-analyze security --offline=true`."""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import uuid
from pathlib import Path

import psycopg
import pytest
import yaml

from tests.conftest import BrokerFactory, StagedInstall

REPO = Path(__file__).resolve().parent.parent
UNITS = {
    "shoe-controller.service": "shoe-controller.service",
    "shoe-controller@.service": "shoe-controller@T01.service",  # a template is checked as an instance
}
MAX_EXPOSURE = 2.0
#: Where deploy/install.sh puts the program; the units' ExecStart names it.
EXEC = "/opt/shoe-controller/bin/shoe-controller"


def analyze() -> str:
    tool = shutil.which("systemd-analyze")
    if tool is None:
        pytest.skip("systemd-analyze is not installed")
    return tool


def installed_copy(tmp_path: Path, unit: str) -> Path:
    """The unit under its instance name, with ExecStart pointed at a binary
    that exists here (verify refuses a missing one)."""
    text = (REPO / "systemd" / unit).read_text()
    assert f"ExecStart={EXEC} " in text
    path = tmp_path / UNITS[unit]
    path.write_text(text.replace(EXEC, shutil.which("true") or "/bin/true"))
    return path


def directives(unit: str) -> dict[str, list[str]]:
    return directives_of((REPO / "systemd" / unit).read_text())


def directives_of(text: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for line in text.splitlines():
        if "=" in line and not line.startswith(("#", "[")):
            key, value = line.split("=", 1)
            out.setdefault(key.strip(), []).append(value.strip())
    return out


def verify(tool: str, path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [tool, "verify", "--man=no", "--generators=no", str(path)], capture_output=True, text=True
    )


@pytest.mark.parametrize("unit", list(UNITS))
def test_unit_passes_systemd_analyze_verify(unit: str, tmp_path: Path) -> None:
    tool = analyze()
    path = installed_copy(tmp_path, unit)
    result = verify(tool, path)
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
    assert d["ExecStart"] == [f"{EXEC} run -c %E/shoe-controller/%i.yaml"]
    assert d["StateDirectory"] == ["shoe-controller/%i"]
    assert d["WorkingDirectory"] == ["%S/shoe-controller/%i"]


@pytest.mark.install
@pytest.mark.parametrize("unit", list(UNITS))
def test_installed_unit_passes_systemd_analyze_verify(
    unit: str, staged_install: StagedInstall, tmp_path: Path
) -> None:
    """The unit as deploy/install.sh installed it under a temporary root.
    Its ExecStart names the program it installed (which exists, executable,
    in the root); verify runs on the host, whose systemd has the targets and
    /bin/kill the unit refers to, so the one path the root changes is
    pointed into the root for it."""
    tool = analyze()
    root = staged_install.root
    installed = root / "usr/local/lib/systemd/system" / unit
    text = installed.read_text()
    (exec_start,) = directives_of(text)["ExecStart"]
    binary = exec_start.split()[0]
    assert binary == EXEC
    staged_binary = root / binary.lstrip("/")
    assert staged_binary.is_file() and os.access(staged_binary, os.X_OK)
    path = tmp_path / UNITS[unit]
    path.write_text(text.replace(binary, str(staged_binary)))
    result = verify(tool, path)
    ours = [line for line in (result.stdout + result.stderr).splitlines() if path.name in line]
    assert result.returncode == 0 and not ours, result.stdout + result.stderr


def test_verify_would_catch_a_unit_whose_program_is_missing(tmp_path: Path) -> None:
    """The check above is not vacuous: a unit naming a program that is not
    there fails verify."""
    tool = analyze()
    text = (REPO / "systemd" / "shoe-controller.service").read_text()
    path = tmp_path / "shoe-controller.service"
    path.write_text(text.replace(EXEC, str(tmp_path / "missing" / "shoe-controller")))
    result = verify(tool, path)
    assert result.returncode != 0 and "is not executable" in result.stdout + result.stderr


@pytest.mark.parametrize("unit", list(UNITS))
def test_unit_is_hardened_for_review(unit: str) -> None:
    """The settings a reviewer looks for, each for a stated reason in the unit."""
    d = directives(unit)
    assert d["User"] == ["shoe-controller"] and d["Group"] == ["shoe-controller"]
    assert d["NoNewPrivileges"] == ["yes"]
    assert d["ProtectSystem"] == ["strict"] and d["ProtectHome"] == ["yes"] and d["PrivateTmp"] == ["yes"]
    assert d["CapabilityBoundingSet"] == [""] and d["AmbientCapabilities"] == [""]
    # The journal and JSON-lines file live in the state directory, the one
    # place ProtectSystem=strict leaves writable (systemd makes it so).
    assert d["StateDirectory"][0].startswith("shoe-controller") and d["StateDirectoryMode"] == ["0700"]
    assert d["WorkingDirectory"][0].startswith("%S/shoe-controller")
    assert d["UMask"] == ["0077"]
    assert set(d["DeviceAllow"]) == {"char-ttyS rw", "char-ttyUSB rw", "char-ttyACM rw", "char-usb_device rw"}
    assert d["ExecReload"] == ["/bin/kill -HUP $MAINPID"]


def test_the_daemon_keeps_the_units_notify_and_watchdog_contract(tmp_path: Path) -> None:
    """Type=notify and WatchdogSec=30 are only honest if the daemon sends
    READY=1 once up, WATCHDOG=1 at least every WATCHDOG_USEC/2 while it runs,
    and STOPPING=1 on SIGTERM: run it with a real notify socket, as systemd
    would, with a short watchdog."""
    cfg = tmp_path / "config.yaml"
    cfg.write_text(yaml.safe_dump({
        "table": "T01",
        "device": {"driver": "fake", "seed": 2, "cards_per_second": 20},
        "journal": str(tmp_path / "journal.sqlite3"),
        "outputs": {"stdout": False},
    }))  # fmt: skip
    name = f"shoe-controller-test-{uuid.uuid4().hex}"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind("\0" + name)  # abstract: systemd's own NOTIFY_SOCKET may be "@..." too
        sock.settimeout(60)
        env = {**os.environ, "NOTIFY_SOCKET": "@" + name, "WATCHDOG_USEC": "400000"}
        proc = subprocess.Popen(
            [sys.executable, "-m", "controller.cli", "run", "-c", str(cfg)],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env,
        )  # fmt: skip
        try:
            messages: list[str] = []
            while sum(m == "WATCHDOG=1" for m in messages) < 3:
                messages.append(sock.recv(4096).decode())
            assert messages[0].startswith("READY=1\n"), messages
            proc.send_signal(signal.SIGTERM)
            while not messages[-1].startswith("STOPPING=1"):
                messages.append(sock.recv(4096).decode())
            assert proc.wait(60) == 0
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            assert proc.stderr is not None
            proc.stderr.close()


# --- the roadmap display's unit (shoe-controller board) ---------------------------

BOARD_UNIT = "shoe-controller-board.service"


def board_copy(tmp_path: Path) -> Path:
    text = (REPO / "systemd" / BOARD_UNIT).read_text()
    assert f"ExecStart={EXEC} board " in text
    path = tmp_path / BOARD_UNIT
    path.write_text(text.replace(EXEC, shutil.which("true") or "/bin/true"))
    return path


def test_board_unit_passes_systemd_analyze_verify(tmp_path: Path) -> None:
    tool = analyze()
    path = board_copy(tmp_path)
    result = verify(tool, path)
    ours = [line for line in (result.stdout + result.stderr).splitlines() if path.name in line]
    assert result.returncode == 0 and not ours, result.stdout + result.stderr


def test_board_unit_exposure_is_at_most_2(tmp_path: Path) -> None:
    tool = analyze()
    if "--offline" not in subprocess.run([tool, "security", "--help"], capture_output=True, text=True).stdout:
        pytest.skip("this systemd-analyze has no security --offline")
    path = board_copy(tmp_path)
    result = subprocess.run([tool, "security", "--offline=true", str(path)], capture_output=True, text=True)
    match = re.search(r"Overall exposure level for \S+: (\d+(?:\.\d+)?)", result.stdout)
    assert match, result.stdout + result.stderr
    assert float(match.group(1)) <= MAX_EXPOSURE, result.stdout


def test_board_unit_is_a_read_only_service_without_devices_or_state() -> None:
    d = directives(BOARD_UNIT)
    assert d["ExecStart"] == [f"{EXEC} board --config %E/shoe-controller/board.yaml"]
    assert d["Type"] == ["exec"] and d["Restart"] == ["on-failure"]
    assert d["User"] == ["shoe-controller"] and d["Group"] == ["shoe-controller"]
    # no shoe, no state of its own: nothing to write, no device to open
    assert "DeviceAllow" not in d and d["PrivateDevices"] == ["yes"] and d["DevicePolicy"] == ["closed"]
    assert "StateDirectory" not in d and "SupplementaryGroups" not in d
    # the journals are read where the daemons keep them, read-only (history
    # needs no write access: tests/test_history.py, on a read-only mount)
    assert not {"ReadWritePaths", "InaccessiblePaths", "TemporaryFileSystem"} & set(d)
    assert d["ProtectSystem"] == ["strict"] and d["NoNewPrivileges"] == ["yes"]
    assert d["CapabilityBoundingSet"] == [""] and d["PrivateUsers"] == ["yes"]
    assert d["RestrictAddressFamilies"] == ["AF_UNIX AF_INET AF_INET6"]


def test_board_unit_verify_would_catch_a_missing_program(tmp_path: Path) -> None:
    tool = analyze()
    text = (REPO / "systemd" / BOARD_UNIT).read_text()
    path = tmp_path / BOARD_UNIT
    path.write_text(text.replace(EXEC, str(tmp_path / "missing" / "shoe-controller")))
    result = verify(tool, path)
    assert result.returncode != 0 and "is not executable" in result.stdout + result.stderr


# --- the floor archiver's unit (shoe-controller archive), a template --------------

ARCHIVE_UNIT = "shoe-controller-archive@.service"
ARCHIVE_INSTANCE = "shoe-controller-archive@1.service"  # a template is checked as an instance
ARCHIVE_CONFIG = "%E/shoe-controller/archive-%i.yaml"


def archive_copy(tmp_path: Path, text: str | None = None) -> Path:
    if text is None:
        text = (REPO / "systemd" / ARCHIVE_UNIT).read_text()
        assert f"ExecStart={EXEC} archive " in text and f"ExecStartPre={EXEC} archive " in text
    path = tmp_path / ARCHIVE_INSTANCE
    path.write_text(text.replace(EXEC, shutil.which("true") or "/bin/true"))
    return path


def test_archive_unit_passes_systemd_analyze_verify(tmp_path: Path) -> None:
    tool = analyze()
    path = archive_copy(tmp_path)
    result = verify(tool, path)
    ours = [line for line in (result.stdout + result.stderr).splitlines() if path.name in line]
    assert result.returncode == 0 and not ours, result.stdout + result.stderr


def test_archive_unit_exposure_is_at_most_2(tmp_path: Path) -> None:
    tool = analyze()
    if "--offline" not in subprocess.run([tool, "security", "--help"], capture_output=True, text=True).stdout:
        pytest.skip("this systemd-analyze has no security --offline")
    path = archive_copy(tmp_path)
    result = subprocess.run([tool, "security", "--offline=true", str(path)], capture_output=True, text=True)
    match = re.search(r"Overall exposure level for \S+: (\d+(?:\.\d+)?)", result.stdout)
    assert match, result.stdout + result.stderr
    assert float(match.group(1)) <= MAX_EXPOSURE, result.stdout


def test_archive_unit_verify_would_catch_a_missing_migrate_program(tmp_path: Path) -> None:
    """Verify checks ExecStartPre too: the check above covers both commands."""
    tool = analyze()
    text = (REPO / "systemd" / ARCHIVE_UNIT).read_text()
    missing = str(tmp_path / "missing" / "shoe-controller")
    text = text.replace(f"ExecStartPre={EXEC}", f"ExecStartPre={missing}")
    result = verify(tool, archive_copy(tmp_path, text))
    assert result.returncode != 0 and "is not executable" in result.stdout + result.stderr


def test_archive_unit_is_reviewed_for_its_contract() -> None:
    """Its config per instance, the migrations before the start, ordering
    after the network (and a local database or broker), a restart that
    never gives up on a database down at boot but never loops on a
    configuration error, no device, no state, no privilege, no secret."""
    d = directives(ARCHIVE_UNIT)
    assert d["ExecStartPre"] == [f"{EXEC} archive --config {ARCHIVE_CONFIG} --migrate"]
    assert d["ExecStart"] == [f"{EXEC} archive --config {ARCHIVE_CONFIG}"]
    assert d["Wants"] == ["network-online.target"]
    assert d["After"][0].split()[0] == "network-online.target" and "postgresql.service" in d["After"][0]
    assert d["Type"] == ["exec"] and d["Restart"] == ["on-failure"]
    assert d["RestartPreventExitStatus"] == ["2"] and d["StartLimitIntervalSec"] == ["0"]
    assert d["User"] == ["shoe-controller"] and d["Group"] == ["shoe-controller"]
    assert "DeviceAllow" not in d and d["PrivateDevices"] == ["yes"] and d["DevicePolicy"] == ["closed"]
    assert "StateDirectory" not in d and "SupplementaryGroups" not in d
    assert (
        d["ProtectSystem"] == ["strict"] and d["ProtectHome"] == ["yes"] and d["NoNewPrivileges"] == ["yes"]
    )
    assert d["CapabilityBoundingSet"] == [""] and d["PrivateUsers"] == ["yes"] and d["UMask"] == ["0077"]
    assert d["RestrictAddressFamilies"] == ["AF_UNIX AF_INET AF_INET6"]
    # credentials live in files the config names, never in the unit
    assert "Environment" not in d and "EnvironmentFile" not in d
    settings = "\n".join(f"{k}={v}" for k, vs in d.items() for v in vs).lower()
    assert "password" not in settings and "pgpass" not in settings and "dsn" not in settings


@pytest.mark.install
def test_installed_archive_unit_passes_systemd_analyze_verify(
    staged_install: StagedInstall, tmp_path: Path
) -> None:
    tool = analyze()
    root = staged_install.root
    text = (root / "usr/local/lib/systemd/system" / ARCHIVE_UNIT).read_text()
    staged_binary = root / EXEC.lstrip("/")
    assert staged_binary.is_file() and os.access(staged_binary, os.X_OK)
    path = tmp_path / ARCHIVE_INSTANCE
    path.write_text(text.replace(EXEC, str(staged_binary)))
    result = verify(tool, path)
    ours = [line for line in (result.stdout + result.stderr).splitlines() if path.name in line]
    assert result.returncode == 0 and not ours, result.stdout + result.stderr


def _unit_command(line: str, confdir: Path) -> list[str]:
    """A unit's command line as systemd would run it for instance 1, with
    %E pointed at ``confdir`` and the program run from this checkout."""
    args = line.replace("%E", str(confdir)).replace("%i", "1").split()
    assert args[0] == EXEC
    return [sys.executable, "-m", "controller.cli", *args[1:]]


@pytest.mark.mqtt
def test_the_archive_units_commands_migrate_then_run_and_stop_cleanly(
    tmp_path: Path, mosquitto: BrokerFactory, pg_dsn: str
) -> None:
    """What the unit promises, run for real (PostgreSQL, Mosquitto): without
    its ExecStartPre the archiver refuses a database whose schema is behind
    with exit 2 (which RestartPreventExitStatus keeps from looping);
    ExecStartPre migrates; ExecStart then archives; SIGTERM (systemctl stop)
    ends it with 0, within TimeoutStopSec."""
    from controller.events import dumps
    from tests.conftest import eventually, mqtt_client
    from tests.support.archiver import BROKER_CONFIG
    from tests.test_archive import card

    broker = mosquitto(config=BROKER_CONFIG)
    confdir = tmp_path / "etc"
    (confdir / "shoe-controller").mkdir(parents=True)
    cfg = {"broker": {"host": broker.host, "port": broker.port, "client_id": "archive-1"}, "dsn": pg_dsn,
           "batch_max_latency_ms": 50}  # fmt: skip
    (confdir / "shoe-controller" / "archive-1.yaml").write_text(yaml.safe_dump(cfg))
    d = directives(ARCHIVE_UNIT)
    pre, start = _unit_command(d["ExecStartPre"][0], confdir), _unit_command(d["ExecStart"][0], confdir)
    (prevented,) = d["RestartPreventExitStatus"]

    behind = subprocess.run(start, capture_output=True, text=True, timeout=120)
    assert str(behind.returncode) == prevented, behind.stderr
    assert "--migrate" in behind.stderr and "Traceback" not in behind.stderr

    migrated = subprocess.run(pre, capture_output=True, text=True, timeout=120)
    assert migrated.returncode == 0 and migrated.stdout.startswith("schema version "), migrated.stderr

    log = tmp_path / "archiver.log"
    with open(log, "wb") as err:
        proc = subprocess.Popen(start, stdout=subprocess.DEVNULL, stderr=err)
    try:
        assert eventually(lambda: "archive.subscribed" in log.read_text(errors="replace"), 60), (
            log.read_text()
        )
        client, _ = mqtt_client(broker)
        try:
            client.publish("baccarat/T01/card", dumps(card(1)).encode(), qos=1).wait_for_publish(10)
        finally:
            client.disconnect()
            client.loop_stop()

        def archived() -> int:
            with psycopg.connect(pg_dsn) as c:
                return int(c.execute("SELECT count(*) FROM event_ids").fetchone()[0])  # type: ignore[index]

        assert eventually(lambda: archived() == 1, 60), log.read_text()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(int(d["TimeoutStopSec"][0])) == 0, log.read_text()[-3000:]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
