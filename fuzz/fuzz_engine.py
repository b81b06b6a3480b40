"""Fuzz target: a table session (frames of every kind, supervisor commands,
ticks; see ``fuzz.ops``) fed to an engine set up by the input's first
bytes (profile, decks, coup boundary, cut-card rule, extra-card policy,
demo coups, burn rule, odds and roads on or off).

Invariants: those of ``fuzz.invariants.EngineChecker`` (the engine never
raises; every event matches its schema; seq +1 per event, none lost; no
card invented; no coup both settled and void; no result while a misdeal is
open; settlement keys are the profile's bets, null for a demo coup; a
failed command changes nothing), checked after every step and after a
final tick far past every deadline.
"""

from __future__ import annotations

import sys

from fuzz import _harness

with _harness.instrumented():
    from controller.commands_schema import CommandError, parse_command
    from controller.engine import Engine
    from fuzz import corpus, ops
    from fuzz.invariants import EngineChecker, make_engine

TOKENS = [bytes([k]) for k in range(16)] + [b"\x0e\x01\x01", b"\x0e\x02\x01", b"\x0f\x40", b"\x06", b"\x07"]


def engine_for(setup: ops.Setup) -> Engine:
    return make_engine(setup.profile, setup.decks, setup.rules, odds=setup.odds, roads=setup.roads)


def run_session(data: bytes) -> EngineChecker:
    setup, steps = ops.steps(data)
    checker = EngineChecker(engine_for(setup))
    t = ops.T0
    for step in steps:
        t = step.t
        if step.frame is not None:
            checker.feed(step.frame)
        elif step.command is not None:
            try:
                cmd = parse_command(step.command)
            except CommandError:
                continue
            checker.command(cmd, t)
        else:
            checker.tick(t)
    checker.finish(t + 100_000.0)
    return checker


def test_one_input(data: bytes) -> None:
    run_session(data[:2048])


if __name__ == "__main__":
    _harness.main(test_one_input, corpus.engine_seeds, TOKENS, sys.argv)
