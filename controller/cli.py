"""The ``shoe-controller`` command line (SPEC section 6).

Argument definitions live here; each subcommand's work lives in
``controller.commands.<name>`` and is imported only when that subcommand
runs, so ``shoe-controller replay`` does not pay for paho or pyusb.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from controller import __version__
from controller.errors import ExpectedError


def _build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="shoe-controller", description="Baccarat card-reading shoe controller.")
    p.add_argument("--version", action="version", version=f"shoe-controller {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    run = sub.add_parser("run", help="run the daemon (no config: fake shoe, events on stdout)")
    run.add_argument("-c", "--config", help="config YAML (SPEC section 7)")

    rp = sub.add_parser("replay", help="replay .shoelog captures through the engine")
    rp.add_argument("files", nargs="+", metavar="FILE")
    rp.add_argument("--profile", help="punto_banco | ez_baccarat | baccarat_27 | path to a profile YAML")
    rp.add_argument("--decks", type=int, help="1..12")
    rp.add_argument("--table", help="table id (default: from the file, else T01)")
    rp.add_argument("--protocol", help="override the capture's protocol")
    rp.add_argument("--realtime", action="store_true", help="pace the replay by the file's timestamps")
    rp.add_argument("--odds", action="store_true", help="emit odds.update events")
    rp.add_argument("--roads", action="store_true", help="emit roads events after every coup")
    rp.add_argument("--out", choices=["jsonl", "mqtt"], default="jsonl")
    rp.add_argument("-c", "--config", help="config YAML (for --out mqtt)")
    rp.add_argument("--no-progress", action="store_true", help="never draw a progress bar")

    fk = sub.add_parser("fake", help="run a fake shoe")
    fk.add_argument("--pty", action="store_true", help="speak on a pseudo-terminal; prints its path first")
    fk.add_argument("--seed", type=int, default=1)
    fk.add_argument("--protocol", default="shoe-ascii/1")
    fk.add_argument("--cards-per-second", type=float, default=2.0)
    fk.add_argument("--faults", default="", help='e.g. "gap:0.01,garbage:0.05,extra:0.02"')
    fk.add_argument("--decks", type=int, default=8)
    fk.add_argument("--shoes", type=int, default=0, help="stop after N shoes (0 = forever)")
    fk.add_argument("--log", help="write the fake shoe's own record of what it dealt (JSON lines)")

    rec = sub.add_parser("record", help="capture a device's bytes to a .shoelog")
    rec.add_argument("-c", "--config", required=True)
    rec.add_argument("-o", "--output", required=True)
    rec.add_argument("--duration", type=float, default=0.0, help="stop after N seconds (0 = until SIGINT)")

    cc = sub.add_parser("check-config", help="validate a config file")
    cc.add_argument("file")

    od = sub.add_parser("odds", help="exact probabilities and house edge of every bet")
    od.add_argument("--decks", type=int, default=8)
    od.add_argument("--profile", default="punto_banco")
    od.add_argument("--remove", default="", help="cards to remove, e.g. 7H,7S,KD")
    od.add_argument("--json", action="store_true")

    rd = sub.add_parser("roads", help="scoreboard roads of the last shoe in a capture")
    rd.add_argument("file")
    rd.add_argument("--svg", metavar="OUT")
    rd.add_argument("--profile")
    rd.add_argument("--decks", type=int)

    ctl = sub.add_parser("ctl", help="send a supervisor command through the broker")
    ctl.add_argument("action", choices=["void", "enter-card", "accept", "new-shoe", "end-shoe"])
    ctl.add_argument("-c", "--config", required=True)
    ctl.add_argument("--coup", type=int)
    ctl.add_argument("--card")
    ctl.add_argument("--reason", default="")
    ctl.add_argument("--timeout", type=float, default=10.0)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    parser = _build_parser()
    args = parser.parse_args(argv)
    module_name = args.command.replace("-", "_")
    try:
        module = importlib.import_module(f"controller.commands.{module_name}")
    except ModuleNotFoundError as exc:
        if exc.name == f"controller.commands.{module_name}":
            print(f"shoe-controller: '{args.command}' is not available in this build", file=sys.stderr)
            return 2
        raise
    try:
        return int(module.run(args))
    except ExpectedError as exc:
        print(f"shoe-controller {args.command}: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
