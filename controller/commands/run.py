"""``shoe-controller run [-c config.yaml] [--json]``: the daemon. Its
stdout output (``outputs.stdout``) is JSON lines, or on a terminal a
readable line per coup unless ``--json`` asks for the JSON there too.

SIGHUP, SIGTERM and SIGINT are caught first, before anything slow (the
daemon's imports, the config, the profile): by default SIGHUP and SIGTERM
end a process, and a ``systemctl reload`` or a logrotate ``postrotate``
may send SIGHUP at any moment, start-up included. What arrives before the
daemon takes over is remembered and acted on once it has.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from types import FrameType


def run(args: argparse.Namespace) -> int:
    stop, hup = threading.Event(), threading.Event()

    def early(signum: int, frame: FrameType | None) -> None:
        (hup if signum == signal.SIGHUP else stop).set()

    for signum in (signal.SIGHUP, signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, early)

    from controller import logs
    from controller.config import default_config, load_config
    from controller.daemon import run_daemon

    logs.setup()
    cfg = load_config(args.config) if args.config else default_config()
    # JSON lines wherever a program reads (a pipe, a file, journald: docs/operations.md,
    # Command line); a line per coup for a person at a terminal, unless asked.
    text = not args.json and sys.stdout.isatty()
    return run_daemon(cfg, early_signals=(stop, hup), stdout_text=text)
