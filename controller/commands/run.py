"""``shoe-controller run [-c config.yaml]``: the daemon."""

from __future__ import annotations

import argparse

from controller import logs
from controller.config import default_config, load_config
from controller.daemon import run_daemon


def run(args: argparse.Namespace) -> int:
    logs.setup()
    cfg = load_config(args.config) if args.config else default_config()
    return run_daemon(cfg)
