"""Fuzz target: bytes as a YAML file through the config loader
(``controller.config.load_config``) and the profile loader
(``controller.rules.load_profile``).

Invariants:

- ``load_config`` raises nothing but ``ConfigError``, and its message
  starts with the file name (docs/operations.md, Command line: a message that names the bad
  key, exit status 2, no traceback);
- a config it accepts keeps the documented ranges (table name, 1-12 decks)
  and its profile with its rule overrides loads, or fails with a
  ``ConfigError`` (what ``check-config`` does);
- ``load_profile`` of the same file raises nothing but ``ConfigError``; a
  profile it accepts has bets, a 10x10 tableau and settles an outcome with
  a net result for every bet.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import tempfile
from pathlib import Path

from fuzz import _harness

with _harness.instrumented():
    from controller.config import load_config
    from controller.errors import ConfigError
    from controller.rules import load_profile, outcome_of
    from fuzz import corpus

TOKENS = [
    b"table: T01\n",
    b"device: {driver: fake}\n",
    b"device:\n  driver: serial\n  port: /dev/ttyS0\n",
    b"profile: ",
    b"decks: ",
    b"rules:\n  ",
    b"burn: fixed:3\n",
    b"outputs:\n  mqtt:\n    host: h\n",
    b"tableau:\n",
    b"bets:\n",
    b"- {when: {winner: tie}, pays: 8}\n",
    b"{",
    b"[",
    b"&a ",
    b"*a",
    b"!!python/object:os.system",
    b"!!binary ",
    b".nan",
    b"0x1234",
    b"~",
    b"\n  ",
]

_dir = Path("/dev/shm") if os.access("/dev/shm", os.W_OK) else Path(tempfile.gettempdir())
_TABLE = re.compile(r"[A-Za-z0-9_-]{1,32}")


class ConfigInvariantError(AssertionError):
    pass


def check_config(path: str) -> None:
    try:
        cfg = load_config(path)
    except ConfigError as exc:
        if not str(exc).startswith(path):
            raise ConfigInvariantError(f"config error message does not name the file: {exc}") from None
        return
    if not _TABLE.fullmatch(cfg.table) or not 1 <= cfg.decks <= 12:
        raise ConfigInvariantError(f"accepted table {cfg.table!r} with {cfg.decks} decks")
    with contextlib.suppress(ConfigError):
        load_profile(cfg.profile, cfg.rules.overrides() or None)


def check_profile(path: str) -> None:
    try:
        profile = load_profile(path)
    except ConfigError:
        return
    tab = profile.tableau
    if not profile.bets or len(tab.banker_draws) != 10 or any(len(row) != 10 for row in tab.banker_draws):
        raise ConfigInvariantError(f"accepted a profile without bets or a whole tableau: {profile!r}")
    settled = profile.settle(outcome_of([1, 2], [3, 4], False, False, False))
    if set(settled) != set(profile.bets):
        raise ConfigInvariantError(f"profile settles {sorted(settled)}, not every bet {sorted(profile.bets)}")


def test_one_input(data: bytes) -> None:
    fd, path = tempfile.mkstemp(suffix=".yaml", dir=_dir)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        check_config(path)
        check_profile(path)
    finally:
        os.unlink(path)


if __name__ == "__main__":
    _harness.main(test_one_input, corpus.config_seeds, TOKENS, sys.argv)
