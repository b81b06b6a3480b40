"""``shoe-controller fake``: run the fake shoe (docs/operations.md, Command line).

With ``--pty`` the shoe speaks on a pseudo-terminal whose path (a stable
symlink, valid across simulated unplugs) is the first line of stdout;
without it the raw byte stream goes to stdout. Either way shoe follows shoe
(``--shoes N`` stops after N) at ``--cards-per-second`` (0 = as fast as the
reader takes them). SIGTERM, SIGINT and SIGHUP end it cleanly with exit
code 0, the pty's symlink removed (after ``kill -9`` it cannot be: the
serial driver refuses a symlink older than the pty it points to).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from types import FrameType
from typing import Any

from controller.errors import RuntimeFailure, UsageError
from drivers.fake import FakeShoe, check_cards_per_second, serve_pty, write_stream


class _Terminated(Exception):
    """SIGTERM, SIGINT or SIGHUP arrived: stop serving, exit 0."""


def _raise_terminated(signum: int, frame: FrameType | None) -> None:
    raise _Terminated(signal.Signals(signum).name)


def run(args: argparse.Namespace) -> int:
    try:
        check_cards_per_second(args.cards_per_second)
    except ValueError as exc:
        raise UsageError(f"--cards-per-second: {exc}") from None
    if args.shoes < 0:
        raise UsageError("--shoes must be >= 0 (0 = forever)")
    try:
        fake = FakeShoe(
            seed=args.seed,
            protocol=args.protocol,
            decks=args.decks,
            faults=args.faults,
            shoes=args.shoes,
            cards_per_second=args.cards_per_second,
            log=args.log,
            record=False,  # dealt for as long as it runs; nobody reads the record
        )
    except ValueError as exc:
        raise UsageError(str(exc)) from None

    previous: dict[int, Any] = {
        signum: signal.signal(signum, _raise_terminated)
        for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
    }
    try:
        if args.pty:

            def announce(path: str) -> None:
                sys.stdout.write(path + "\n")
                sys.stdout.flush()

            serve_pty(fake, args.cards_per_second, announce)
        else:
            write_stream(fake, sys.stdout.buffer, args.cards_per_second)
    except (_Terminated, KeyboardInterrupt):
        pass
    except BrokenPipeError:
        # The reader went away. Point stdout at /dev/null so the interpreter's
        # final flush does not complain about the broken pipe.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except OSError as exc:
        raise RuntimeFailure(f"{exc.filename or 'fake shoe'}: {exc.strerror or exc}") from None
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    return 0
