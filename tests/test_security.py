"""The shuffler's order is a secret (docs/operations.md, MQTT): it never appears in
an event, a JSON line, a journalled event or a log line; only its SHA-256
commitment is published. Checked by grepping everything a run wrote."""

from __future__ import annotations

import io
import json
import threading
import time
from pathlib import Path

import structlog
import yaml

from controller.config import load_config
from controller.daemon import Daemon
from controller.journal import Journal
from drivers.fake import FakeDriver, FakeShoe
from firmware_protocols.frames import ShuffleOrder
from firmware_protocols.shoe_ascii import Decoder


def test_the_shuffler_order_never_leaves_the_controller(tmp_path: Path) -> None:
    cfg_path = tmp_path / "c.yaml"
    cfg_path.write_text(
        yaml.safe_dump(
            {
                "table": "T01",
                "decks": 1,
                "device": {"driver": "fake"},
                "journal": str(tmp_path / "j.sqlite3"),
                "outputs": {"stdout": True, "jsonl": str(tmp_path / "events.jsonl")},
            }
        )
    )
    fake = FakeShoe(seed=9, decks=1, shoes=1, shuffler=True, cut_card_min=30)
    logs = io.StringIO()
    structlog.configure(
        processors=[structlog.processors.JSONRenderer()],
        logger_factory=structlog.PrintLoggerFactory(file=logs),
    )
    out = io.StringIO()
    daemon = Daemon(load_config(cfg_path), driver=FakeDriver(fake, 0), stdout=out)
    runner = threading.Thread(target=daemon.run)
    runner.start()
    deadline = time.monotonic() + 60
    while '"shoe.ended"' not in out.getvalue() and time.monotonic() < deadline:
        time.sleep(0.05)
    daemon.request_stop()
    runner.join(30)
    structlog.reset_defaults()

    # the same fake dealt to the end (the daemon's may be stopped before it
    # records its shoe: that happens after the shoe's last frame is read)
    same = FakeShoe(seed=9, decks=1, shoes=1, shuffler=True, cut_card_min=30)
    stream = b"".join(d for _, d in same.stream())
    commitment = same.shoes[0]["shuffle_commit"]
    events = [json.loads(x) for x in out.getvalue().splitlines()]
    assert any(e["type"] == "shoe.ended" for e in events)
    started = next(e for e in events if e["type"] == "shoe.started")
    assert started["shuffle_commit"] == commitment, "the commitment is published"

    dealt = [e["card"] for e in events if e["type"] == "card"]
    # the order itself, recovered from the fake's own ORD frames
    order: list[str] = []
    for frame in Decoder().feed(0.0, stream):
        if isinstance(frame, ShuffleOrder):
            order.extend(c for c in frame.cards if c is not None)
    assert len(order) == 52
    undealt = order[len(dealt) :]
    assert len(undealt) >= 6, "cards behind the cut card were never dealt"
    with Journal(tmp_path / "j.sqlite3") as j:
        journalled = "\n".join(p.json for p in j.events_since(0))
    written = {
        "stdout": out.getvalue(),
        "jsonl": (tmp_path / "events.jsonl").read_text(),
        "journal events": journalled,
        "logs": logs.getvalue(),
    }
    secrets = [",".join(order), "ORD,"] + [
        sep.join(q + c + q for c in undealt[i : i + 3])
        for i in range(len(undealt) - 2)
        for q, sep in (("", ","), ('"', ","))
    ]
    for where, text in written.items():
        for secret in secrets:
            assert secret not in text, f"{where} reveals part of the shuffler's order: {secret!r}"
