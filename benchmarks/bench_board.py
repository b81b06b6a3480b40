"""The roadmap display (controller/board): what one change costs the board.

A whole 8-deck shoe is dealt by the fake shoe through the real engine; its
events are fed to the board's state model as the MQTT messages they would
be. Timed: applying one message (median, p99 over every message of the
shoe), building the view's JSON for a browser at the end of the shoe (the
largest view: every road full), and fanning one change out to
``limits.max_clients`` (64) browsers' queues. Also the size of that view.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import time
from typing import Any

from controller.board.app import Hub
from controller.board.config import parse_board_config
from controller.board.state import TableState
from controller.engine import Engine
from controller.rules import load_profile
from drivers.fake import FakeShoe
from firmware_protocols.detect import make_decoder

CLIENTS = 64


def _messages() -> list[tuple[str, bytes]]:
    engine = Engine("T01", load_profile("ez_baccarat"), 8, odds=True, roads=True)
    decoder = make_decoder("shoe-ascii/1")
    out: list[tuple[str, bytes]] = []
    for t, data in FakeShoe(seed=7, decks=8, shoes=1).stream():
        for frame in decoder.feed(t, data):
            for ev in engine.feed(frame):
                payload = json.dumps(ev).encode()
                out.append((f"baccarat/T01/{ev['type'].replace('.', '/')}", payload))
                if ev["type"] == "odds.update":
                    out.append(("baccarat/T01/odds", payload))
    return out


def run() -> list[dict[str, Any]]:
    messages = _messages()
    state = TableState("T01", odds=True)
    times = []
    for topic, payload in messages:
        t0 = time.perf_counter()
        state.apply(topic, payload)
        times.append(time.perf_counter() - t0)
    times.sort()
    coups = state.view()["tally"]["coups"]
    t0 = time.perf_counter()
    n = 50
    for _ in range(n):
        view = json.dumps(state.view(), separators=(",", ":"))
    view_ms = (time.perf_counter() - t0) / n * 1000

    cfg = parse_board_config(
        f"mqtt: {{host: h}}\ntables: [{{table: T01}}]\nlimits: {{max_clients: {CLIENTS}}}\n"
    )

    async def fan_out() -> float:
        hub = Hub(cfg)
        hub.loop = asyncio.get_running_loop()
        hub.tables["T01"] = state
        for _ in range(CLIENTS):
            hub.open_stream("T01")
        rounds = 20
        t0 = time.perf_counter()
        for i in range(rounds):
            hub.deliver("T01", "baccarat/T01/status", b"online" if i % 2 else b"offline")
            await asyncio.sleep(0)
        return (time.perf_counter() - t0) / rounds * 1000

    fan_ms = asyncio.run(fan_out())
    note = f"{len(messages)} messages of a whole 8-deck EZ shoe ({coups} coups)"
    median_us = statistics.median(times) * 1e6
    p99_us = times[int(len(times) * 0.99)] * 1e6
    return [
        {"name": "board: apply one MQTT message, median", "value": median_us, "unit": "µs", "note": note},
        {"name": "board: apply one MQTT message, p99", "value": p99_us, "unit": "µs", "note": note},
        {"name": "board: view JSON of a whole shoe", "value": view_ms, "unit": "ms", "target": "< 50",
         "note": f"{len(view)} bytes"},
        {"name": f"board: one change to {CLIENTS} browsers", "value": fan_ms, "unit": "ms", "target": "< 50",
         "note": "view built once, queued for each"},
    ]  # fmt: skip
