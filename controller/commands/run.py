"""``shoe-controller run [-c config.yaml] [--json]``: the daemon. Its
stdout output (``outputs.stdout``) is JSON lines, or on a terminal a
readable line per coup unless ``--json`` asks for the JSON there too."""

from __future__ import annotations

import argparse
import sys

from controller import logs
from controller.config import default_config, load_config
from controller.daemon import run_daemon


def run(args: argparse.Namespace) -> int:
    logs.setup()
    cfg = load_config(args.config) if args.config else default_config()
    # JSON lines wherever a program reads (a pipe, a file, journald: SPEC
    # section 6); a line per coup for a person at a terminal, unless asked.
    text = not args.json and sys.stdout.isatty()
    return run_daemon(cfg, stdout_text=text)
