"""Run a command as a person at a terminal sees it: stdout on a
pseudo-terminal, read to the end (every byte until the command exits and
the terminal reports end of file), so no test reads a line cut in two."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path


def on_a_terminal(
    argv: Sequence[str], cwd: Path | None = None, timeout: float = 120, env: dict[str, str] | None = None
) -> tuple[int, str]:
    """(exit code, what it wrote on the terminal, with \\r\\n as \\n) of a
    command that ends by itself; stderr is discarded."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        list(argv), stdout=slave, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, cwd=cwd, env=env
    )
    os.close(slave)
    out = bytearray()
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.5)
            if not ready:
                if proc.poll() is not None:
                    # exited: what it wrote is already readable, or never will be
                    ready, _, _ = select.select([master], [], [], 0)
                    if not ready:
                        break
                continue
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the last descriptor of the other side closed
                break
            if not chunk:
                break
            out += chunk
        else:
            proc.kill()
            raise AssertionError(
                f"{argv[:3]} did not end within {timeout:g} s; so far: {bytes(out[-2000:])!r}"
            )
        code = proc.wait(30)
    finally:
        os.close(master)
    return code, out.decode().replace("\r\n", "\n")
