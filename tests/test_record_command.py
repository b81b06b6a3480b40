"""``shoe-controller record``: a device's bytes land in a ``.shoelog``
chunk-exact, with a header that lets a replay run without options."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from controller.shoelog import read_header, read_shoelog
from drivers.fake import FakeShoe

REPO = Path(__file__).resolve().parent.parent


def cli(*args: str) -> list[str]:
    return [sys.executable, "-c", "import sys; from controller.cli import main; sys.exit(main())", *args]


def captured_bytes(path: Path) -> bytes:
    return b"".join(r.data for r in read_shoelog(path) if not isinstance(r, dict))


def test_record_a_fake_device_for_a_duration(tmp_path: Path) -> None:
    config = tmp_path / "fake.yaml"
    config.write_text("table: T07\ndevice: {driver: fake, seed: 3, cards_per_second: 0}\n")
    out = tmp_path / "t07.shoelog"
    done = subprocess.run(
        cli("record", "-c", str(config), "-o", str(out), "--duration", "0.5"),
        cwd=REPO,
        capture_output=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert read_header(out) == {
        "protocol": "shoe-ascii/1",
        "table": "T07",
        "profile": "punto_banco",
        "decks": "8",
    }
    data = captured_bytes(out)
    expected = b"".join(d for _, d in FakeShoe(seed=3, shoes=1).stream())
    assert len(data) > 1000
    assert expected.startswith(data) or data.startswith(expected)


def test_record_a_serial_shoe_until_sigterm(tmp_path: Path) -> None:
    fake = subprocess.Popen(
        cli("fake", "--pty", "--seed", "8", "--cards-per-second", "0", "--shoes", "1", "--decks", "1"),
        cwd=REPO,
        stdout=subprocess.PIPE,
    )
    rec: subprocess.Popen[bytes] | None = None
    try:
        assert fake.stdout is not None
        port = fake.stdout.readline().decode().strip()
        config = tmp_path / "serial.yaml"
        config.write_text(f"table: T02\ndevice: {{driver: serial, port: '{port}', baudrate: 115200}}\n")
        out = tmp_path / "t02.shoelog"
        rec = subprocess.Popen(cli("record", "-c", str(config), "-o", str(out)), cwd=REPO)
        expected = b"".join(d for _, d in FakeShoe(seed=8, shoes=1, decks=1).stream())
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if out.exists() and len(captured_bytes(out)) >= len(expected):
                break
            time.sleep(0.1)
        rec.send_signal(signal.SIGTERM)
        assert rec.wait(timeout=10) == 0
        assert captured_bytes(out) == expected
        records = [r for r in read_shoelog(out) if not isinstance(r, dict)]
        assert all(r.direction == "<" for r in records)
        assert [r.t for r in records] == sorted(r.t for r in records)
    finally:
        for proc in (rec, fake):
            if proc is not None and proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                proc.wait(timeout=10)


def test_record_refuses_a_replay_device(tmp_path: Path) -> None:
    capture = tmp_path / "in.shoelog"
    capture.write_text("# protocol=shoe-ascii/1\n")
    config = tmp_path / "replay.yaml"
    config.write_text(f"table: T01\ndevice: {{driver: replay, file: '{capture}'}}\n")
    done = subprocess.run(
        cli("record", "-c", str(config), "-o", os.devnull), cwd=REPO, capture_output=True, timeout=60
    )
    assert done.returncode == 2
    assert b"device.driver" in done.stderr and b"Traceback" not in done.stderr
