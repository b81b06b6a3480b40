"""End to end over a real serial line: the fake shoe (``shoe-controller fake
--pty``, its own process) deals a whole 8-deck shoe on a pseudo-terminal,
and what the controller publishes is compared with the fake's own record of
what it dealt (its ``--log``, written by a dealer that shares no code with
the engine).

Two readers: the serial driver, the protocol's decoder and a fresh engine
in this process, wired as the daemon wires them (so the link events of an
unplug can be watched), and the real daemon (``shoe-controller run``) with
a serial device and a JSON-lines output.

A shoe is dealt in seconds, well inside the 120 s correction deadline, and
the engine notices time passing only on a frame or a tick. The in-process
reader keeps what came while the shoe was dealt (the live view: once frames
are lost, every later frame is held, nothing after it is settled), then
ticks the engine past every deadline, as the daemon's clock would: each
held coup is void and the frames after its RESULT are dealt on.

Waiting is generous and bounded, timings are never asserted, and every
process started here is stopped (SIGTERM, then SIGKILL) whatever happens.
"""

from __future__ import annotations

import collections
import contextlib
import json
import select
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from controller.engine import Engine
from controller.events import Event
from controller.rules import load_profile
from drivers.base import LinkEvent
from drivers.serial import SerialDriver
from firmware_protocols.detect import make_decoder
from firmware_protocols.frames import Link

REPO = Path(__file__).resolve().parent.parent
PROTOCOLS = ("shoe-ascii/1", "shoe-bin/1", "angel-eye/2")
DECKS = 8
#: Upper bound for anything to happen; a whole shoe normally takes seconds.
PATIENCE = 90.0

#: More deadlines than any shoe here can open.
MAX_DEADLINES = 1000


def cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "controller.cli", *args]


def stop(proc: subprocess.Popen[bytes]) -> int:
    """SIGTERM, then SIGKILL if it does not go; its exit code."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=15)
    return proc.returncode


def tail(path: Path) -> str:
    return path.read_text(errors="replace")[-2000:] if path.exists() else ""


def wait_for(what: str, predicate: Callable[[], bool], *, logs: tuple[Path, ...] = ()) -> None:
    deadline = time.monotonic() + PATIENCE
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}\n" + "\n".join(tail(p) for p in logs))
        time.sleep(0.05)


@dataclass
class FakeShoeProcess:
    proc: subprocess.Popen[bytes]
    port: str  # the pty's stable path
    log: Path  # the fake's record, JSON lines
    stderr: Path

    def coups(self) -> list[dict[str, Any]]:
        """The fake's record of every coup it dealt, in order."""
        lines = [json.loads(x) for x in self.log.read_text().splitlines() if x.strip()]
        return [x for x in lines if x["record"] == "coup"]

    def exited(self) -> bool:
        return self.proc.poll() is not None


@contextlib.contextmanager
def fake_shoe_on_a_pty(
    tmp_path: Path, protocol: str, seed: int, faults: str = "", cards_per_second: float = 0
) -> Iterator[FakeShoeProcess]:
    """``shoe-controller fake --pty`` dealing one shoe (by default as fast as the reader reads)."""
    log, stderr = tmp_path / "fake.jsonl", tmp_path / "fake.stderr"
    cmd = cli("fake", "--pty", "--seed", str(seed), "--protocol", protocol, "--decks", str(DECKS))
    cmd += ["--shoes", "1", "--cards-per-second", str(cards_per_second), "--log", str(log)]
    if faults:
        cmd += ["--faults", faults]
    with stderr.open("wb") as err:
        proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=err)
    try:
        assert proc.stdout is not None
        ready, _, _ = select.select([proc.stdout], [], [], PATIENCE)
        assert ready, f"the fake shoe printed no pty path\n{tail(stderr)}"
        port = proc.stdout.readline().decode().strip()
        assert port.startswith("/"), f"not a path: {port!r}\n{tail(stderr)}"
        yield FakeShoeProcess(proc, port, log, stderr)
    finally:
        stop(proc)


# --- reading the port in this process ---------------------------------------------


@dataclass
class Reading:
    events: list[Event] = field(default_factory=list)  # while the shoe was dealt, then at the deadlines
    links: list[LinkEvent] = field(default_factory=list)
    stats: collections.Counter[str] = field(default_factory=collections.Counter)
    reconnects: int = 0
    live: int = 0  # how many of ``events`` came while the shoe was dealt

    def of_type(self, type_: str, *, live: bool = False) -> list[Event]:
        return [e for e in (self.events[: self.live] if live else self.events) if e["type"] == type_]

    def actions(self, coup: int, code: str, *, live: bool = False) -> list[str]:
        return [
            e["action"] for e in self.of_type("misdeal", live=live) if e["coup"] == coup and e["code"] == code
        ]


def let_deadlines_pass(engine: Engine) -> list[Event]:
    """Tick the engine just past its next correction deadline until none is left."""
    events: list[Event] = []
    for _ in range(MAX_DEADLINES):
        if (dl := engine.next_deadline()) is None:
            return events
        events += engine.tick(dl + 1)
    raise AssertionError(f"a correction deadline still open after {MAX_DEADLINES} ticks")


def read_the_shoe(fake: FakeShoeProcess, protocol: str) -> Reading:
    """Serial driver -> decoder -> engine, as the daemon wires them, until the
    fake has dealt its shoe and gone (it leaves only once every byte it sent
    has been read, so the last link down marks the end of the stream); then
    every correction deadline passes."""
    driver = SerialDriver(fake.port, 115200, backoff_initial=0.05, backoff_max=0.5)
    decoder = make_decoder(protocol)
    engine = Engine("T01", load_profile("punto_banco"), DECKS)
    reading = Reading()
    deadline = time.monotonic() + PATIENCE
    driver.open()
    try:
        while not (fake.exited() and not driver.is_up):
            assert time.monotonic() < deadline, f"the shoe was not over in time\n{tail(fake.stderr)}"
            item = driver.read(0.2)
            if item is None:
                continue
            if isinstance(item, LinkEvent):
                reading.links.append(item)
                reading.events += engine.feed(Link(item.t, None, item.up, item.detail))
            else:
                for frame in decoder.feed(*item):
                    reading.events += engine.feed(frame)
    finally:
        driver.close()
    reading.live = len(reading.events)
    reading.events += let_deadlines_pass(engine)
    reading.stats.update(decoder.stats)
    reading.reconnects = driver.reconnects
    return reading


# --- comparing with the fake's record -------------------------------------------------


def as_dealt(coups: list[dict[str, Any]]) -> list[tuple[int, list[str], list[str], str, bool]]:
    return [(c["coup"], c["player"], c["banker"], c["winner"], c["natural"]) for c in coups]


def as_settled(results: list[Event]) -> list[tuple[int, list[str], list[str], str, bool]]:
    return [
        (r["coup"], r["player"]["cards"], r["banker"]["cards"], r["winner"], r["natural"]) for r in results
    ]


def assert_the_whole_shoe_settled_as_dealt(events: list[Event], dealt: list[dict[str, Any]]) -> None:
    assert len(dealt) > 60, "a whole 8-deck shoe"
    results = [e for e in events if e["type"] == "coup.result"]
    assert as_settled(results) == as_dealt(dealt)
    assert [e for e in events if e["type"] in ("misdeal", "coup.void", "security.alert")] == []
    (ended,) = [e for e in events if e["type"] == "shoe.ended"]
    assert ended["coups"] == len(dealt)
    assert ended["tally"] == {w: sum(c["winner"] == w for c in dealt) for w in ("player", "banker", "tie")}


# --- 1. a whole shoe, every protocol ---------------------------------------------------


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_whole_shoe_read_off_the_serial_port_settles_every_coup_as_the_shoe_dealt_it(
    tmp_path: Path, protocol: str
) -> None:
    with fake_shoe_on_a_pty(tmp_path, protocol, seed=21) as fake:
        reading = read_the_shoe(fake, protocol)
        assert stop(fake.proc) == 0
        dealt = fake.coups()
    assert_the_whole_shoe_settled_as_dealt(reading.events, dealt)
    assert {k: n for k, n in reading.stats.items() if k not in ("frames", "duplicate") and n} == {}
    assert [link.up for link in reading.links] == [False]  # only the end: the fake left


def daemon_config(tmp_path: Path, port: str, protocol: str) -> Path:
    cfg = {
        "table": "T01",
        "profile": "punto_banco",
        "decks": DECKS,
        "device": {"driver": "serial", "port": port, "baudrate": 115200, "protocol": protocol},
        "journal": str(tmp_path / "journal.sqlite3"),
        "odds": False,
        "outputs": {"stdout": False, "jsonl": str(tmp_path / "events.jsonl")},
    }
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def jsonl(path: Path) -> list[Event]:
    if not path.exists():
        return []
    # the daemon may be half-way through a line
    return [json.loads(x) for x in path.read_text().splitlines(keepends=True) if x.endswith("\n")]


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_the_daemon_on_a_serial_shoe_publishes_every_coup_as_the_shoe_dealt_it(
    tmp_path: Path, protocol: str
) -> None:
    events_path, daemon_log = tmp_path / "events.jsonl", tmp_path / "daemon.stderr"
    with fake_shoe_on_a_pty(tmp_path, protocol, seed=22) as fake:
        config = daemon_config(tmp_path, fake.port, protocol)
        with daemon_log.open("wb") as err:
            daemon = subprocess.Popen(
                cli("run", "-c", str(config)), cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=err
            )
        try:
            wait_for(
                "the daemon to publish shoe.ended",
                lambda: any(e["type"] == "shoe.ended" for e in jsonl(events_path)),
                logs=(daemon_log, fake.stderr),
            )
        finally:
            stop(daemon)
        assert daemon.returncode == 0, tail(daemon_log)
        wait_for("the fake shoe to leave", fake.exited, logs=(fake.stderr,))
        dealt = fake.coups()
    events = jsonl(events_path)
    assert_the_whole_shoe_settled_as_dealt(events, dealt)
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))


# --- 2. unplug and replug mid-shoe ------------------------------------------------------

UNPLUGS = [
    # Seed 3: three unplugs mid-coup; two lose card frames, one loses nothing.
    # The second loss comes while the frames after the first are held; the
    # engine does not report it as a SEQUENCE_GAP of its coup once they are
    # released (GAP_WHILE_HELD_IS_FORGOTTEN in test_fault_codes.py), but
    # that coup is void all the same: only two of its cards are left.
    ("shoe-ascii/1", 3),
    ("shoe-bin/1", 3),
    ("angel-eye/2", 3),
    # Seed 5: the first unplug loses a coup's last card and its RESULT.
    ("shoe-ascii/1", 5),
]
_unplugged: dict[tuple[str, int], tuple[Reading, list[dict[str, Any]]]] = {}


@pytest.fixture
def unplugged(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str, int], Any]:
    """The reading and the fake's record of a shoe unplugged now and then (each dealt once)."""

    def get(protocol: str, seed: int) -> tuple[Reading, list[dict[str, Any]]]:
        if (protocol, seed) not in _unplugged:
            with fake_shoe_on_a_pty(
                tmp_path_factory.mktemp("unplugged"), protocol, seed, faults="disconnect:0.05"
            ) as fake:
                reading = read_the_shoe(fake, protocol)
                assert stop(fake.proc) == 0
                _unplugged[protocol, seed] = (reading, fake.coups())
        return _unplugged[protocol, seed]

    return get


def unplugs_of(dealt: list[dict[str, Any]]) -> list[tuple[int, dict[str, Any]]]:
    """``(coup, fault)`` for each unplug, in order."""
    return [(c["coup"], f) for c in dealt for f in c["faults"] if f["kind"] == "disconnect"]


def lossy(dealt: list[dict[str, Any]]) -> set[int]:
    """The coups that lost frames while the shoe was unplugged."""
    return {c["coup"] for c in dealt for f in c["faults"] if f["kind"] == "disconnect_lost"}


@pytest.mark.parametrize(("protocol", "seed"), UNPLUGS)
def test_unplugging_the_shoe_mid_coup_is_a_device_fault_and_a_loss_holds_every_later_frame(
    unplugged: Callable[[str, int], tuple[Reading, list[dict[str, Any]]]], protocol: str, seed: int
) -> None:
    """The live view, while the shoe is dealt."""
    reading, dealt = unplugged(protocol, seed)
    unplugs = unplugs_of(dealt)
    assert any(f["lost"] for _, f in unplugs) and any(not f["lost"] for _, f in unplugs)

    # The driver saw each unplug and reconnected; the last drop is the fake leaving.
    assert [link.up for link in reading.links] == [False, True] * len(unplugs) + [False]
    assert reading.reconnects == len(unplugs)
    states = [(e["state"], e["code"]) for e in reading.of_type("device.status") if e["code"] != "HELLO"]
    assert states == [("offline", "DISCONNECTED"), ("online", "CONNECTED")] * len(unplugs) + [
        ("offline", "DISCONNECTED")
    ]
    assert reading.stats["sequence_gap"] == sum(1 for _, f in unplugs if f["lost"])

    # Until frames are lost, each unplug is a DEVICE_FAULT of its coup and,
    # back with an unbroken sequence, dealing resumes.
    first = next(i for i, (_, f) in enumerate(unplugs) if f["lost"])
    for coup, _ in unplugs[:first]:
        assert reading.actions(coup, "DEVICE_FAULT", live=True) == ["awaiting_supervisor", "corrected"], coup
    # The first that loses frames (it unplugs after the 1st-3rd card, so the
    # first frame lost is a card of the coup): a DEVICE_FAULT and a
    # SEQUENCE_GAP of that coup, and from there on every frame is held.
    coup, _ = unplugs[first]
    (lost_first, *_) = [
        f for c in dealt if c["coup"] == coup for f in c["faults"] if f["kind"] == "disconnect_lost"
    ]
    assert lost_first["frame"].startswith("CARD ")
    assert reading.actions(coup, "DEVICE_FAULT", live=True)[:1] == ["awaiting_supervisor"], coup
    gaps = [
        (e["coup"], e["action"]) for e in reading.of_type("misdeal", live=True) if e["code"] == "SEQUENCE_GAP"
    ]
    assert gaps == [(coup, "awaiting_supervisor")]
    assert [e for e in reading.of_type("misdeal", live=True) if e["action"] == "void"] == []
    assert as_settled(reading.of_type("coup.result", live=True)) == as_dealt(
        [c for c in dealt if c["coup"] < coup]
    )


@pytest.mark.parametrize(
    ("protocol", "seed"),
    UNPLUGS,
)
def test_unplugging_the_shoe_mid_coup_never_settles_a_coup_with_cards_it_did_not_deal(
    unplugged: Callable[[str, int], tuple[Reading, list[dict[str, Any]]]], protocol: str, seed: int
) -> None:
    """Once every deadline has passed: a coup that lost frames is void, and
    every other coup is settled exactly as dealt, late or not. Where a
    coup's RESULT went with the frames lost, the coup after it may be void
    too (nothing tells where the held coup ended), but never misnumbered."""
    reading, dealt = unplugged(protocol, seed)
    results = as_settled(reading.of_type("coup.result"))
    assert [r for r in results if r not in as_dealt(dealt)] == []  # never other cards, never renumbered
    assert {r[0] for r in results}.isdisjoint(lossy(dealt))
    assert lossy(dealt) <= {e["coup"] for e in reading.of_type("coup.void")}
    lost_result = {c["coup"] + 1 for c in dealt for f in c["faults"] if f.get("frame") == "RESULT"}
    unsettled = {c["coup"] for c in dealt} - lossy(dealt) - {r[0] for r in results}
    (ended,) = reading.of_type("shoe.ended")
    numbering_lost = [
        a["coup"] for a in reading.of_type("security.alert") if a["code"] == "COUP_NUMBERING_LOST"
    ]
    if protocol == "angel-eye/2" and numbering_lost:
        # An Angel Eye's seq is a short cycle: seconds off the line may hide
        # whole cycles, so the loss is of unknown size and no later coup can
        # be numbered (each void until a supervisor's accept), nor counted
        (first,) = numbering_lost
        assert first in lossy(dealt)
        assert unsettled <= lost_result | {c["coup"] for c in dealt if c["coup"] >= first}
        assert ended["coups_exact"] is False
        return
    assert unsettled <= lost_result
    assert ended["coups"] == len(dealt)
