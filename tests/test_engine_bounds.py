"""What one input can make the engine do, and hold (issue 11, items 1, 7, 8).

* ``accept`` with a coup number while the numbering is lost: the number must
  be one the frames lost (and the cards left) can account for, so the card
  after it voids a bounded number of coups lost whole; a stored command that
  is now refused is refused the same way when the journal is re-fed, and a
  checkpoint holding one accepted before is refused at the next coup.
* A device restart (HELLO) after a disconnect leaves the ``DEVICE_FAULT`` to
  the supervisor: the next frame is no proof of an unbroken sequence.
* A coup holds at most ``MAX_HELD`` frames; the frame past that voids it as
  its deadline would, and nothing more is buffered.
"""

from __future__ import annotations

import pytest

from controller.engine import Engine
from controller.events import Event
from controller.rules import load_profile
from firmware_protocols.detect import make_decoder
from firmware_protocols.frames import Button, Card, Frame, Hello, Link, Status
from firmware_protocols.shoe_ascii import Encoder

T0 = 1_763_800_000.0


def engine(*, odds: bool = False) -> Engine:
    return Engine("T01", load_profile("punto_banco", {"correction_deadline_s": 2.0}), 8, odds=odds)


# --- item 7: a restart leaves the fault to the supervisor ----------------------


def fault_then_restart() -> list[Frame]:
    frames: list[Frame] = [Hello(T0, 0, "FAKE", "1.0", "1"), Button(T0, 1, "NEWSHOE")]
    frames += [Card(T0, 2, "AS"), Card(T0, 3, "2S"), Card(T0, 4, "9S"), Card(T0, 5, "KH")]
    return frames


def fault_codes(events: list[Event]) -> list[tuple[str, str]]:
    return [(m["code"], m["action"]) for m in events if m["type"] == "misdeal"]


@pytest.mark.parametrize("after", ["frame", "STAT OK"])
def test_a_restart_after_a_disconnect_leaves_the_device_fault_to_the_supervisor(after: str) -> None:
    e = engine()
    events = [ev for f in fault_then_restart() for ev in e.feed(f)]
    events += e.feed(Link(T0 + 0.1, None, False, "gone"))
    events += e.feed(Link(T0 + 0.2, None, True, "back"))
    events += e.feed(Hello(T0 + 0.3, 0, "FAKE", "1.0", "1"))
    nxt: Frame = Card(T0 + 0.4, 1, "TS") if after == "frame" else Status(T0 + 0.4, 1, "OK")
    events += e.feed(nxt)
    assert fault_codes(events) == [
        ("DEVICE_FAULT", "awaiting_supervisor"),
        ("SEQUENCE_GAP", "awaiting_supervisor"),
    ]
    assert e.shoe is not None and set(e.shoe.coups[1].open) == {"DEVICE_FAULT", "SEQUENCE_GAP"}
    reply, out = e.command({"id": "a", "cmd": "accept", "coup": 1}, T0 + 1)
    assert reply["ok"] is True
    assert [(m["code"], m["detail"]) for m in out if m["type"] == "misdeal"] == [
        ("SEQUENCE_GAP", "accepted by supervisor"),
        ("DEVICE_FAULT", "accepted by supervisor"),
    ]


def test_a_jam_then_a_restart_is_not_cleared_by_stat_ok() -> None:
    e = engine()
    events = [ev for f in fault_then_restart() for ev in e.feed(f)]
    for f in (Status(T0 + 0.1, 6, "JAM"), Hello(T0 + 0.2, 0, "F", "1", "1"), Status(T0 + 0.3, 1, "OK")):
        events += e.feed(f)
    assert ("DEVICE_FAULT", "corrected") not in fault_codes(events)
    assert e.shoe is not None and "DEVICE_FAULT" in e.shoe.coups[1].open


def test_a_reconnect_with_an_unbroken_sequence_still_corrects_the_fault() -> None:
    # (the case the README keeps: no restart, no gap)
    e = engine()
    events = [ev for f in fault_then_restart() for ev in e.feed(f)]
    for f in (Link(T0 + 0.1, None, False, ""), Link(T0 + 0.2, None, True, ""), Card(T0 + 0.3, 6, "TS")):
        events += e.feed(f)
    assert fault_codes(events) == [("DEVICE_FAULT", "awaiting_supervisor"), ("DEVICE_FAULT", "corrected")]


def test_the_restart_bytes_through_the_decoder_leave_the_fault_open() -> None:
    # the bytes a shoe-ascii/1 device sends: two cards, (line down, up), its
    # HELLO from sequence 0 after a restart, a card
    enc, dec, e = Encoder(), make_decoder("shoe-ascii/1"), engine()
    events: list[Event] = []
    for f in fault_then_restart():
        for frame in dec.feed(f.t, enc.encode(f)):
            events += e.feed(frame)
    events += e.feed(Link(T0 + 0.1, None, False, "gone"))
    events += e.feed(Link(T0 + 0.2, None, True, "back"))
    for f in (Hello(T0 + 0.3, 0, "FAKE", "1.0", "1"), Card(T0 + 0.4, 1, "TS")):
        for frame in dec.feed(f.t, enc.encode(f)):
            events += e.feed(frame)
    assert ("DEVICE_FAULT", "corrected") not in fault_codes(events)
    assert [c["card"] for c in events if c["type"] == "card"][-1] != "TS"  # held: the restart lost frames
