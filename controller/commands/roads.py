"""``shoe-controller roads FILE.shoelog [--svg OUT]`` (docs/operations.md, Command line): the
scoreboard roads of the last shoe in a capture.

The capture is replayed through the engine (``--profile`` / ``--decks``
override its header, as for ``replay``). The last ``shoe.started`` names
the shoe; its ``coup.result`` events, in order, make the roads. Demo coups
are left out: they are dealt but not settled (Article II.2) and a
scoreboard shows the game, so they never reach it. Void coups have no
result and are left out too (a coup voided after its result, should that
ever happen, is removed again).

Without ``--svg`` the roads are printed as one JSON object with the
``roads`` event's five keys (shapes in ``controller.roads``), or, on a
terminal (unless ``--json``), drawn as text (``controller.roads.render_text``,
coloured unless ``NO_COLOR`` is set); with ``--svg`` the SVG drawing is
written to OUT and a one-line summary goes to stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Iterable, Mapping
from typing import Any

from controller.errors import RuntimeFailure
from controller.replay import ReplayOptions, replay_events
from controller.roads import build_roads, render_svg, render_text
from controller.shoelog import open_capture
from controller.textsafe import visible


def last_shoe_coups(events: Iterable[Mapping[str, Any]]) -> tuple[str | None, list[Mapping[str, Any]]]:
    """The id of the last shoe started and its settled, non-demo coup
    results in order (a corrected coup's latest ``coup.corrected``)."""
    shoe: str | None = None
    results: dict[int, Mapping[str, Any]] = {}
    started = False
    for ev in events:
        kind = ev.get("type")
        if kind == "shoe.started":
            shoe, results, started = ev.get("shoe"), {}, True
        elif not started or ev.get("shoe") != shoe:
            continue
        elif kind == "coup.result" and not ev.get("demo"):
            results[int(ev["coup"])] = ev
        elif kind == "coup.corrected" and int(ev["coup"]) in results:
            results[int(ev["coup"])] = ev  # a supervisor's correction: the result in force
        elif kind == "coup.void":
            results.pop(int(ev["coup"]), None)
    return (shoe if started else None), [results[n] for n in sorted(results)]


def run(args: argparse.Namespace) -> int:
    path = args.file
    open_capture(path).close()
    opts = ReplayOptions(profile=args.profile, decks=args.decks)
    shoe, coups = last_shoe_coups(replay_events(path, opts))
    if shoe is None:
        raise RuntimeFailure(f"{path}: no shoe was started in this capture, so there are no roads")
    roads = build_roads(coups)
    if args.svg:
        title = f"Shoe {shoe}: {len(coups)} coups"
        try:
            with open(args.svg, "w", encoding="utf-8") as fh:
                fh.write(render_svg(roads, title))
        except OSError as exc:
            raise RuntimeFailure(f"cannot write {args.svg}: {exc.strerror}") from None
        print(visible(f"roads: shoe {shoe}, {len(coups)} coups, drawn to {args.svg}"), file=sys.stderr)
    elif sys.stdout.isatty() and not args.json:
        # a person at a terminal: the roads drawn (docs: Command line)
        colour = not os.environ.get("NO_COLOR")  # no-color.org: set and not empty
        sys.stdout.write(render_text(roads, visible(f"shoe {shoe}: {len(coups)} coups"), colour=colour))
    else:
        json.dump(roads, sys.stdout, separators=(",", ":"))
        sys.stdout.write("\n")
    return 0
