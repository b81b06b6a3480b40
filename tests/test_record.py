"""Record, then replay: ``shoe-controller record`` captures a serial shoe
(the fake shoe on a pseudo-terminal) to a ``.shoelog``, and replaying that
capture settles exactly the coups the shoe dealt, as far as the capture
holds them (docs/devices.md, Captures: "a recorded table session replays byte for
byte").

The capture is cut by ``--duration`` in the middle of the shoe: the coups
whose RESULT made it into the file are settled as dealt, the coup cut in
half is not settled at all.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
import yaml

from controller.replay import ReplayOptions, replay_events
from controller.shoelog import Record, read_shoelog
from drivers.fake import FakeShoe
from firmware_protocols.detect import make_decoder
from firmware_protocols.frames import Button, DeviceResult
from tests.test_end_to_end import (
    DECKS,
    PATIENCE,
    PROTOCOLS,
    REPO,
    as_dealt,
    as_settled,
    cli,
    fake_shoe_on_a_pty,
    stop,
    tail,
)

#: A whole shoe takes about 7 s at this pace, so a 3 s capture ends mid-shoe.
CARDS_PER_SECOND = 60
DURATION = 3.0
SEED = 31
HEX_RECORD = re.compile(r"\d+\.\d{3} < hex:(?:[0-9a-f]{2})+")


def record_config(tmp_path: Path, port: str, protocol: str) -> Path:
    cfg = {
        "table": "T05",
        "decks": DECKS,
        "device": {"driver": "serial", "port": port, "baudrate": 115200, "protocol": protocol},
    }
    path = tmp_path / "record.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def coups_completed(protocol: str, data: bytes) -> int:
    """How many coups' boundaries (the dealer's RESULT, an Angel Eye's own
    result) ``data`` holds."""
    frames = make_decoder(protocol).feed(0.0, data)
    return sum(
        1 for f in frames if isinstance(f, DeviceResult) or (isinstance(f, Button) and f.name == "RESULT")
    )


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_recorded_serial_shoe_replays_to_the_coups_the_shoe_dealt(tmp_path: Path, protocol: str) -> None:
    capture = tmp_path / "t05.shoelog"
    with fake_shoe_on_a_pty(tmp_path, protocol, SEED, cards_per_second=CARDS_PER_SECOND) as fake:
        config = record_config(tmp_path, fake.port, protocol)
        done = subprocess.run(
            cli("record", "-c", str(config), "-o", str(capture), "--duration", str(DURATION)),
            cwd=REPO,
            capture_output=True,
            timeout=PATIENCE,
        )
        assert done.returncode == 0, done.stderr.decode(errors="replace")
        assert stop(fake.proc) == 0, tail(fake.stderr)  # the log is complete once it has gone
        logged = fake.coups()

    # The header names everything a replay needs; every read is one hex record.
    lines = capture.read_text(encoding="utf-8").splitlines()
    assert lines[0] == f"# protocol={protocol} table=T05 profile=punto_banco decks={DECKS}"
    assert [line for line in lines[1:] if not HEX_RECORD.fullmatch(line)] == []
    records = [r for r in read_shoelog(capture) if isinstance(r, Record)]
    reads = re.search(rb"(\d+) reads, (\d+) bytes", done.stderr)
    assert reads is not None, done.stderr
    captured = b"".join(r.data for r in records)
    assert (len(records), len(captured)) == (int(reads[1]), int(reads[2]))
    assert [r.t for r in records] == sorted(r.t for r in records)

    # Byte for byte what the shoe sent, from its first byte: nothing lost, added or reordered.
    sent = b"".join(data for _, data in FakeShoe(SEED, protocol, DECKS, shoes=1).stream())
    assert 0 < len(captured) < len(sent), "the capture ends mid-shoe"
    assert sent.startswith(captured)

    # Replayed: the coups fully captured settle as the shoe dealt them, and nothing else does.
    complete = coups_completed(protocol, captured)
    assert complete >= 1
    results = [e for e in replay_events(capture, ReplayOptions()) if e["type"] == "coup.result"]
    assert as_settled(results) == as_dealt(logged[:complete])
    assert {e["table"] for e in results} == {"T05"}
