"""``protocol: auto``: the first bytes decide the protocol, nothing is lost
while deciding, and noise gets a clear no rather than a guess."""

from __future__ import annotations

import io
import random
from pathlib import Path

import pytest
import yaml

from controller.config import load_config
from controller.daemon import Daemon
from controller.events import dumps
from controller.replay import ReplayOptions, replay_events
from drivers.fake import FakeShoe
from firmware_protocols.detect import AutoDecoder, make_decoder
from tests.support.signed import unsigned

PROTOCOLS = ["shoe-ascii/1", "shoe-bin/1", "angel-eye/2"]


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_auto_decodes_exactly_what_the_right_decoder_decodes(protocol: str) -> None:
    chunks = list(FakeShoe(seed=2, protocol=protocol, decks=1, shoes=1).stream())
    rng = random.Random(4)
    noise = bytes(rng.randrange(256) for _ in range(7)).replace(b"$", b"").replace(b"\xa5", b"")
    auto, plain = AutoDecoder(), make_decoder(protocol)
    got = auto.feed(0.0, noise) + [f for t, d in chunks for f in auto.feed(t, d)]
    want = plain.feed(0.0, noise) + [f for t, d in chunks for f in plain.feed(t, d)]
    assert auto.protocol == protocol
    assert got == want and len(got) > 50


def test_noise_is_never_taken_for_a_protocol_and_is_bounded() -> None:
    rng = random.Random(1)
    auto = AutoDecoder(limit=1024)
    for _ in range(50):
        junk = bytes(rng.choice(b"hello world \r\n 0123") for _ in range(100))
        assert auto.feed(0.0, junk) == []
    assert auto.protocol is None
    assert auto.held <= 1024 + 100
    assert auto.stats["undetected"] >= 5000 - 1124


def test_daemon_with_protocol_auto_deals_an_angel_eye_capture(tmp_path: Path) -> None:
    capture = Path(__file__).parent / "captures" / "angel_eye_coup.shoelog"
    cfg_path = tmp_path / "c.yaml"
    cfg_path.write_text(
        yaml.safe_dump(
            {
                "table": "T01",
                "device": {"driver": "replay", "file": str(capture), "protocol": "auto"},
                "journal": str(tmp_path / "j.sqlite3"),
                "odds": False,
                "outputs": {"stdout": True},
            }
        )
    )
    out = io.StringIO()
    assert Daemon(load_config(cfg_path), stdout=out, stop_at_eof=True).run() == 0
    want = "".join(dumps(e) + "\n" for e in replay_events(capture, ReplayOptions(roads=True)))
    assert unsigned(out.getvalue()) == want  # the daemon's events are signed
