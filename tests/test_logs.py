"""One log format per process, as an operator meets it: JSON lines on
stderr when a program reads it (journald), readable ``[log]`` lines on a
terminal, whoever logs (structlog or the standard library's loggers);
progress on a terminal with no event output; a line saying "stopping"."""

from __future__ import annotations

import io
import json
import logging
import os
import pty
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import structlog

from controller import logs

SCRIPT = Path(sys.executable).with_name("shoe-controller")


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def _both(stream: io.StringIO) -> list[str]:
    logs.setup(stream=stream)
    try:
        structlog.get_logger("t").warning("signing key made", key_id="ab12")
        logging.getLogger("controller.outputs.mqtt").warning("mqtt: cannot connect to %s; retrying", "h:1")
        logging.getLogger("controller.outputs.mqtt").debug("below the level: not written")
    finally:
        logs.setup()  # back to the process's stderr
    return stream.getvalue().splitlines()


def test_structlog_and_stdlib_loggers_write_the_same_json_lines_off_a_terminal() -> None:
    lines = _both(io.StringIO())
    assert len(lines) == 2, lines
    a, b = (json.loads(line) for line in lines)
    assert (a["event"], a["level"], a["key_id"]) == ("signing key made", "warning", "ab12")
    assert (b["event"], b["level"], b["logger"]) == (
        "mqtt: cannot connect to h:1; retrying",
        "warning",
        "controller.outputs.mqtt",
    )
    assert a["timestamp"].endswith("Z") and b["timestamp"].endswith("Z")


def test_on_a_terminal_every_log_line_is_one_readable_line_set_apart() -> None:
    lines = _both(_Terminal())
    assert len(lines) == 2, lines
    assert lines[0].startswith("[log] ") and lines[0].endswith(" warning  signing key made (key_id=ab12)")
    assert lines[1].startswith("[log] ") and lines[1].endswith(
        " warning  mqtt: cannot connect to h:1; retrying"
    )
    assert not any("\x1b[" in line for line in lines)  # no colour between the coup lines


def _on_a_terminal_until(
    argv: list[str], cwd: Path, marks: list[bytes], timeout: float = 60
) -> tuple[str, int]:
    """stdout and stderr on one pseudo-terminal; SIGINT once ``marks[0]``
    shows, then read to the end; (everything written, exit code)."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(argv, stdout=slave, stderr=slave, stdin=subprocess.DEVNULL, cwd=cwd)
    os.close(slave)
    out = b""
    sent = False
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.5)
            if ready:
                try:
                    chunk = os.read(master, 65536)
                except OSError:
                    break
                if not chunk:
                    break
                out += chunk
            elif proc.poll() is not None:
                break
            if not sent and all(m in out for m in marks):
                proc.send_signal(signal.SIGINT)
                sent = True
        code = proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(master)
    assert sent, out.decode(errors="replace")[-2000:]
    return out.decode().replace("\r\n", "\n"), code


def test_the_daemon_with_no_event_output_says_it_deals_on_a_terminal_and_says_stopping(
    tmp_path: Path,
) -> None:
    cfg = tmp_path / "config.yaml"
    cfg.write_text(
        "table: T01\ndevice: {driver: fake, seed: 4, cards_per_second: 20}\n"
        f"journal: {tmp_path / 'journal.sqlite3'}\nodds: false\noutputs: {{stdout: false}}\n"
    )
    out, code = _on_a_terminal_until([str(SCRIPT), "run", "-c", str(cfg)], tmp_path, [b" dealing ("])
    assert code == 0
    lines = out.splitlines()
    assert all(line.startswith("[log] ") for line in lines), lines
    dealing = next(line for line in lines if " info     dealing (" in line)
    assert "last=coup " in dealing and "cards=" in dealing
    assert lines[-1].endswith(" info     stopping (reason=SIGINT, table=T01)"), lines[-3:]


def test_the_board_says_at_once_that_its_broker_is_out_of_reach_and_says_stopping(tmp_path: Path) -> None:
    import socket

    ports = []
    for _ in range(2):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            ports.append(s.getsockname()[1])  # nothing listens there once closed
    closed, listen = ports
    cfg = tmp_path / "board.yaml"
    cfg.write_text(
        f"mqtt: {{host: 127.0.0.1, port: {closed}}}\ntables: [{{table: T01}}]\nlisten: 127.0.0.1:{listen}\n"
    )
    started = time.monotonic()
    out, code = _on_a_terminal_until(
        [str(SCRIPT), "board", "-c", str(cfg)],
        tmp_path,
        [b"cannot reach the broker", b" on http://"],
        timeout=30,
    )
    assert time.monotonic() - started < 20
    assert code == 0
    lines = out.splitlines()
    assert all(line.startswith("[log] ") for line in lines), lines
    assert lines[0].endswith(f" info     board: tables T01 on http://127.0.0.1:{listen}/"), lines
    assert any(f"board: cannot reach the broker at 127.0.0.1:{closed}: " in line for line in lines), lines
    assert lines[-1].endswith(" info     board: stopping (SIGINT)"), lines[-3:]
