"""The soak and fault campaign harness.

One campaign is a whole table session under attack:

* the fake shoe (``shoe-controller fake --pty``, its own process) deals
  shoe after shoe on a pseudo-terminal with every fault kind of the fake
  shoe (docs/devices.md, The fake shoe) enabled at random, writing its own
  record of what it dealt
  (``--log``: one JSON line per coup, with the faults it injected);
* the daemon (``shoe-controller run``, a subprocess) reads the pty through
  the serial driver and publishes to a real Mosquitto;
* an independent subscriber (persistent session, QoS 1) records every
  message the broker hands it;
* meanwhile the harness stops and restarts the broker, ``kill -9``-s the
  daemon and starts it again, and the fake's ``disconnect`` fault closes
  and reopens the pty (every daemon restart also closes and reopens the
  port from the reader's side).

At the end :func:`analyse` accounts for every coup the fake dealt and
checks the delivery guarantees of docs/events.md and docs/operations.md, MQTT (see
:meth:`Report.problems` for the exact list).

How a coup is accounted for. The fake is deterministic, so the harness
replays it in process (:func:`build_reference`) and knows every frame it
put on the line intact and the coup each belongs to. Decoding the
journal's inputs tells which of them reached the daemon: the others were
lost on the line (bytes the fake wrote while the daemon was being killed),
a *line loss* of their coup. Each ``card`` event is then traced to the card
frame it reports, so every daemon coup is known by the fake coups its cards
came from, whatever number it carries. A fake coup is *settled* (a
``coup.result`` with exactly its hands under its number), *RENUMBERED* (its
hands under another number), *MIS-SETTLED* (a result mixing it with other
cards), *void*, *lost* (none of its cards arrived, and the daemon reported
the gap), *UNRESOLVED* (its cards reached a coup with neither result nor
void after every deadline) or *UNACCOUNTED*. The misdeal and void codes of
its daemon coup(s) must be explained by its faults (:data:`CODES_FOR_FAULT`),
its line losses, and what spills over from the coups around it.
"""

from __future__ import annotations

import bisect
import collections
import contextlib
import getpass
import itertools
import json
import os
import random
import select
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

import yaml

from controller.journal import Journal
from drivers.fake import Disconnect, FakeShoe
from firmware_protocols.detect import make_decoder
from firmware_protocols.frames import Card, Frame, SequenceGap, Status
from tests.conftest import Broker, Received, Subscriber, free_port, subscribe

TABLE = "T01"
PREFIX = "baccarat"

#: Every fault kind of the fake shoe (docs/devices.md, The fake shoe), tuned so that most coups are clean:
#: about one coup in eight carries a fault that makes a misdeal.
#: ``wronghand`` is listed for completeness; only an Angel Eye can misplace
#: a card, so on ``shoe-ascii/1`` the fake never injects it.
DEFAULT_FAULTS = (
    "garbage:0.02,badck:0.005,gap:0.005,unread:0.01,extra:0.01,premature:0.01,"
    "wronghand:0.01,faceup:0.01,jam:0.005,disconnect:0.003,foreign:0.003"
)

#: The broker's config for a campaign: Mosquitto's own defaults, except the
#: queue kept for an offline persistent subscriber, raised to what the
#: shipped ``deploy/mosquitto/mosquitto.conf`` sets (the default 1000 can be
#: overrun by the backlog the daemon sends right after an outage, before the
#: subscriber has reconnected: the broker would drop it, not the daemon).
BROKER_CONFIG = "listener @PORT@ 127.0.0.1\nallow_anonymous true\nmax_queued_messages 10000\n"

#: The dealing errors (docs/dealing-errors.md) each fault of the fake's record may
#: show as. ``line_lost`` is not a fault of the fake: frames it sent intact
#: that never reached the journal (the daemon was dead or being killed).
CODES_FOR_FAULT: dict[str, frozenset[str]] = {
    "garbage": frozenset(),  # dropped and counted by the decoder
    "faceup": frozenset(),  # valid (Article IV), flagged on the card
    "badck": frozenset({"SEQUENCE_GAP"}),
    "gap": frozenset({"SEQUENCE_GAP"}),
    "disconnect_lost": frozenset({"SEQUENCE_GAP"}),
    "line_lost": frozenset({"SEQUENCE_GAP", "DEVICE_FAULT"}),
    "unread": frozenset({"UNREAD_CARD"}),
    "extra": frozenset({"EXTRA_CARD"}),
    "premature": frozenset({"PREMATURE_RESULT"}),
    "wronghand": frozenset({"WRONG_HAND"}),
    "jam": frozenset({"DEVICE_FAULT"}),
    "disconnect": frozenset({"DEVICE_FAULT"}),
    "foreign": frozenset({"FOREIGN_CARD"}),
    "exhausted": frozenset({"SHOE_EXHAUSTED"}),
    # an Angel Eye reports an unread card only as an error (the shoe goes
    # into error mode until the dealer clears it): a device fault too
    "error_mode": frozenset({"DEVICE_FAULT"}),
}
#: Faults that lose frames: the engine may hold the *next* coup for them too
#: (a frame lost after a complete tableau: that coup stands, the next waits).
LOSS_KINDS = frozenset({"badck", "gap", "disconnect_lost", "line_lost"})

#: topics that carry no event: retained snapshots, the table's signing keys
#: and the archive's mark, which a live subscriber gets
#: with retain unset when published while it is connected
NON_EVENT_TOPICS = frozenset(
    f"{PREFIX}/{TABLE}/{t}" for t in ("status", "shoe/state", "odds", "keys", "archive/mark")
)


class CampaignError(RuntimeError):
    """The campaign itself could not run (a process would not start, a
    timeout): distinct from what it found wrong with the system."""


@dataclass(frozen=True)
class Settings:
    """What one campaign does. Disruptions are spread over the run by
    coups dealt: daemon kills within 10-45 % (so that the daemon that runs
    the second half is never killed and its memory can be judged), broker
    restarts within 10-90 %."""

    coups: int = 300
    seed: int = 11
    protocol: str = "shoe-ascii/1"
    decks: int = 8
    faults: str = DEFAULT_FAULTS
    cards_per_second: float = 200.0
    broker_restarts: int = 2
    daemon_kills: int = 2
    correction_deadline_s: float = 2.0
    odds: bool = True
    broker_down_s: tuple[float, float] = (0.5, 2.0)
    daemon_down_s: tuple[float, float] = (0.2, 1.0)
    rss_interval_s: float = 0.5
    #: Allowed RSS growth of the last daemon over the second half of the run.
    rss_growth_limit_mb: float = 3.0
    timeout_s: float = 3600.0


# --- what the fake shoe sends ---------------------------------------------------


@dataclass(frozen=True, slots=True)
class SentFrame:
    """A frame the fake put on the line intact, and the coup it belongs to
    (``(shoe, coup)``; ``(shoe, 0)``: before the shoe's first coup)."""

    key: tuple[int, int]
    frame: Frame


@dataclass
class Reference:
    """The fake's session replayed in process: same seed, faults and bytes."""

    shoes: list[dict[str, Any]]
    coups: list[dict[str, Any]]
    frames: list[SentFrame]


def build_reference(settings: Settings) -> Reference:
    """Deal in process, frame for frame, what ``shoe-controller fake`` with
    the same options sends, up to the first whole shoe that brings the
    coups dealt to ``settings.coups``.

    The fake is deterministic (its cards and its faults come from the
    seed), so the stream is bit-identical to the fake process's. Each frame
    is attributed to the coup being dealt when it was sent, read from the
    fake's ``_coup`` (private, but the only place that knows)."""
    fake = FakeShoe(settings.seed, settings.protocol, settings.decks, settings.faults)
    decoder = make_decoder(settings.protocol)
    frames: list[SentFrame] = []
    items = fake.events()  # a generator: closed below, which ends the fake's log
    try:
        for item in items:
            if fake.shoes and sum(s["coups"] for s in fake.shoes) >= settings.coups:
                break  # this item already belongs to the next shoe
            if isinstance(item, Disconnect):
                continue
            coup = fake._coup  # the coup this chunk was sent in (private: only it knows)
            # outside a coup: HELLO, NEWSHOE, the exposed and burned cards of
            # the shoe being dealt (shoe records are written at its end)
            key = (int(coup["shoe"]), int(coup["coup"])) if coup is not None else (len(fake.shoes) + 1, 0)
            frames += [
                SentFrame(key, replace(f, t=0.0))
                for f in decoder.feed(*item)
                if not isinstance(f, SequenceGap)
            ]
    finally:
        close = getattr(items, "close", None)
        if close is not None:
            close()
    return Reference(list(fake.shoes), list(fake.coups), frames)


def journalled_frames(journal: Path, protocol: str) -> list[Frame]:
    """Every frame the daemon decoded from what it journalled, in order (the
    same bytes, split the same way, as its own decoder saw across restarts)."""
    decoder = make_decoder(protocol)
    out: list[Frame] = []
    with Journal(journal) as j:
        for rec in j.inputs_since(0):
            if rec.kind == "rx":
                out += [
                    replace(f, t=0.0) for f in decoder.feed(rec.t, rec.data) if not isinstance(f, SequenceGap)
                ]
    return out


def match_frames(sent: list[SentFrame], received: list[Frame], window: int = 5000) -> tuple[list[bool], int]:
    """Which sent frames arrived (in order), and how many received frames
    match none of the next ``window`` sent ones (invented or reordered)."""
    arrived = [False] * len(sent)
    i = 0
    unexpected = 0
    for frame in received:
        for j in range(i, min(len(sent), i + window)):
            if sent[j].frame == frame:
                arrived[j] = True
                i = j + 1
                break
        else:
            unexpected += 1
    return arrived, unexpected


# --- processes ------------------------------------------------------------------


def cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "controller.cli", *args]


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONUNBUFFERED": "1"}


def _tail(path: Path, n: int = 3000) -> str:
    return path.read_text(errors="replace")[-n:] if path.exists() else ""


def stop_process(proc: subprocess.Popen[bytes], timeout: float = 30.0) -> int:
    """SIGTERM, then SIGKILL if it does not go; its exit code."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout)
    return proc.returncode


class FakeLog:
    """The fake's ``--log``, read incrementally (it grows during the run)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._offset = 0
        self._partial = b""
        self.coups = 0

    def poll(self) -> int:
        """Coups recorded so far."""
        try:
            with self.path.open("rb") as f:
                f.seek(self._offset)
                data = f.read()
        except FileNotFoundError:
            return self.coups
        self._offset += len(data)
        lines = (self._partial + data).split(b"\n")
        self._partial = lines.pop()
        self.coups += sum(1 for x in lines if x.startswith(b'{"record": "coup"'))
        return self.coups

    def records(self) -> list[dict[str, Any]]:
        return [json.loads(x) for x in self.path.read_text().splitlines() if x.strip()]


class FakeShoeProcess:
    """``shoe-controller fake --pty`` dealing ``shoes`` shoes, then leaving
    (once its reader has taken every byte)."""

    def __init__(self, settings: Settings, shoes: int, workdir: Path) -> None:
        self.log = FakeLog(workdir / "fake.jsonl")
        self.stderr = workdir / "fake.stderr"
        cmd = cli(
            "fake",
            "--pty",
            "--seed",
            str(settings.seed),
            "--protocol",
            settings.protocol,
            "--decks",
            str(settings.decks),
            "--faults",
            settings.faults,
            "--shoes",
            str(shoes),
            "--cards-per-second",
            str(settings.cards_per_second),
            "--log",
            str(self.log.path),
        )
        with self.stderr.open("wb") as err:
            self.proc = subprocess.Popen(cmd, cwd=workdir, stdout=subprocess.PIPE, stderr=err, env=_env())
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], 60)
        line = self.proc.stdout.readline().decode().strip() if ready else ""
        if not line.startswith("/"):
            stop_process(self.proc)
            raise CampaignError(f"the fake shoe printed no pty path ({line!r})\n{_tail(self.stderr)}")
        self.port = line

    def running(self) -> bool:
        return self.proc.poll() is None

    def stop(self) -> int:
        rc = stop_process(self.proc)
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        return rc


class DaemonProcess:
    """``shoe-controller run -c CONFIG``, restartable; every incarnation's
    stderr goes to one file."""

    def __init__(self, config: Path, workdir: Path) -> None:
        self.config = config
        self.workdir = workdir
        self.stderr = workdir / "daemon.stderr"
        self.proc: subprocess.Popen[bytes] | None = None
        self.incarnation = 0
        self.exit_codes: list[int] = []

    def start(self) -> None:
        with self.stderr.open("ab") as err:
            self.proc = subprocess.Popen(
                cli("run", "-c", str(self.config)),
                cwd=self.workdir,
                stdout=subprocess.DEVNULL,
                stderr=err,
                env=_env(),
            )
        self.incarnation += 1

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None and self.proc.poll() is None else None

    def died(self) -> int | None:
        """The exit code if the daemon ended on its own, else None."""
        return None if self.proc is None else self.proc.poll()

    def kill9(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.exit_codes.append(self.proc.wait(30))
        self.proc = None

    def stop(self) -> int:
        assert self.proc is not None
        rc = stop_process(self.proc, timeout=60)
        self.exit_codes.append(rc)
        self.proc = None
        return rc


def read_rss_kb(pid: int) -> int | None:
    """VmRSS of a process in kB from /proc (psutil is not a dependency)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        return None
    return None


@dataclass(frozen=True, slots=True)
class RssSample:
    t: float  # seconds since the campaign started
    incarnation: int
    coups: int  # coups the fake had dealt
    kb: int


class RssSampler(threading.Thread):
    """Samples the current daemon's RSS every ``interval`` seconds."""

    def __init__(self, daemon: DaemonProcess, progress: Callable[[], int], interval: float) -> None:
        super().__init__(name="rss-sampler", daemon=True)
        self._daemon = daemon
        self._progress = progress
        self._interval = interval
        self._halt = threading.Event()
        self._t0 = time.monotonic()
        self.samples: list[RssSample] = []

    def run(self) -> None:
        while not self._halt.wait(self._interval):
            pid, incarnation = self._daemon.pid, self._daemon.incarnation
            kb = read_rss_kb(pid) if pid is not None else None
            if kb is not None:
                self.samples.append(RssSample(time.monotonic() - self._t0, incarnation, self._progress(), kb))

    def stop(self) -> None:
        self._halt.set()
        if self.is_alive():
            self.join(5)


# --- broker and subscriber (standalone twins of tests/conftest.py's fixtures) ----


def mosquitto_binary() -> str:
    for candidate in ("/usr/sbin/mosquitto", "/usr/local/sbin/mosquitto"):
        if os.access(candidate, os.X_OK):
            return candidate
    found = shutil.which("mosquitto")
    if not found:
        raise CampaignError("mosquitto is not installed (make deps-system installs it)")
    return found


def start_broker(directory: Path, config: str = BROKER_CONFIG) -> Broker:
    """A persistent Mosquitto on a free loopback port with its own config
    in ``directory``, as the ``mosquitto`` fixture makes one."""
    directory.mkdir(parents=True, exist_ok=True)
    port = free_port()
    lines = [
        config.replace("@PORT@", str(port)).replace("@DIR@", str(directory)),
        "persistence true",
        f"persistence_location {directory}/",
        f"log_dest file {directory}/mosquitto.log",
        "log_type error",
        "log_type warning",
        "log_type notice",
        f"user {getpass.getuser()}",
    ]
    path = directory / "mosquitto.conf"
    path.write_text("\n".join(lines) + "\n")
    broker = Broker(binary=mosquitto_binary(), directory=directory, port=port, config=path)
    broker.start()
    return broker


class SubscriberFactory(Protocol):
    def __call__(
        self, broker: Broker, topics: list[str], *, client_id: str = ..., clean: bool = ...
    ) -> Subscriber: ...


def standalone_subscriber(
    broker: Broker, topics: list[str], *, client_id: str = "", clean: bool = True
) -> Subscriber:
    """What the ``subscriber`` fixture returns, outside pytest: a recording
    client, returned once the broker has acknowledged the subscriptions."""
    try:
        return subscribe(broker, topics, client_id=client_id, clean=clean)
    except RuntimeError as exc:
        raise CampaignError(str(exc)) from exc


# --- the run --------------------------------------------------------------------


@dataclass
class Disruption:
    at_coup: int
    kind: str  # "broker" | "daemon"
    downtime: float
    done_at_coup: int | None = None


def plan_disruptions(settings: Settings, total: int) -> list[Disruption]:
    rng = random.Random(f"disruptions:{settings.seed}")
    plan: list[Disruption] = []
    k = settings.daemon_kills
    for i in range(k):
        frac = 0.10 + 0.35 * (i + rng.uniform(0.2, 0.8)) / k
        plan.append(Disruption(round(frac * total), "daemon", rng.uniform(*settings.daemon_down_s)))
    b = settings.broker_restarts
    for i in range(b):
        frac = 0.10 + 0.80 * (i + rng.uniform(0.2, 0.8)) / b
        plan.append(Disruption(round(frac * total), "broker", rng.uniform(*settings.broker_down_s)))
    return sorted(plan, key=lambda d: d.at_coup)


def line_baud(settings: Settings) -> int:
    """The ``baudrate`` the daemon is told (a pty ignores it). An Angel Eye
    decoder takes it as the line's rate: a loss is of known size only where
    the line could not have carried one more seq cycle meanwhile, at 6 bytes
    of 10 bits the shortest message. So it must be at least what the fake
    sends at: one message a card interval (drivers.fake paces an Angel
    Eye's messages like its cards)."""
    if settings.protocol == "angel-eye/2":
        return max(4800, int(60 * settings.cards_per_second) + 1)
    return 115_200


def write_daemon_config(settings: Settings, workdir: Path, port: str, broker: Broker) -> Path:
    cfg = {
        "table": TABLE,
        "profile": "punto_banco",
        "decks": settings.decks,
        "device": {
            "driver": "serial",
            "port": port,
            "baudrate": line_baud(settings),
            "protocol": settings.protocol,
        },
        "journal": str(workdir / "journal.sqlite3"),
        "odds": settings.odds,
        "outputs": {
            "stdout": False,
            "mqtt": {"host": broker.host, "port": broker.port, "client_id": f"shoe-{TABLE}"},
        },
        "rules": {"correction_deadline_s": settings.correction_deadline_s},
    }
    path = workdir / "config.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


@dataclass
class Run:
    """Everything a campaign collected, for :func:`analyse`."""

    settings: Settings
    reference: Reference
    fake_records: list[dict[str, Any]]
    journal_events: list[tuple[str, str]]  # (event_id, json) in seq order
    journal_frames: list[Frame]
    messages: list[Received]
    disruptions: list[Disruption]
    rss: list[RssSample]
    daemon_exit_codes: list[int]
    fake_exit_code: int
    dealing_s: float
    elapsed_s: float


def save_run(run: Run, workdir: Path) -> None:
    """Keep what the journal and the fake's log do not hold, so that
    :func:`load_run` can analyse the campaign again later."""
    with (workdir / "messages.jsonl").open("w") as f:
        for m in run.messages:
            f.write(
                json.dumps({"topic": m.topic, "qos": m.qos, "retain": m.retain, "payload": m.text}) + "\n"
            )
    meta = {
        "settings": asdict(run.settings),
        "disruptions": [asdict(d) for d in run.disruptions],
        "rss": [asdict(r) for r in run.rss],
        "daemon_exit_codes": run.daemon_exit_codes,
        "fake_exit_code": run.fake_exit_code,
        "dealing_s": run.dealing_s,
        "elapsed_s": run.elapsed_s,
    }
    (workdir / "run.json").write_text(json.dumps(meta, indent=1))


def load_run(workdir: Path) -> Run:
    """A campaign saved by :func:`run_campaign` in ``workdir``."""
    meta = json.loads((workdir / "run.json").read_text())
    given: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in meta["settings"].items()}
    settings = Settings(**given)
    messages = []
    with (workdir / "messages.jsonl").open() as f:
        for line in f:
            m = json.loads(line)
            messages.append(Received(m["topic"], m["payload"].encode(), m["qos"], m["retain"]))
    journal = workdir / "journal.sqlite3"
    return Run(
        settings=settings,
        reference=build_reference(settings),
        fake_records=FakeLog(workdir / "fake.jsonl").records(),
        journal_events=_journal_events(journal),
        journal_frames=journalled_frames(journal, settings.protocol),
        messages=messages,
        disruptions=[Disruption(**d) for d in meta["disruptions"]],
        rss=[RssSample(**r) for r in meta["rss"]],
        daemon_exit_codes=meta["daemon_exit_codes"],
        fake_exit_code=meta["fake_exit_code"],
        dealing_s=meta["dealing_s"],
        elapsed_s=meta["elapsed_s"],
    )


def _journal_last_seq(path: Path) -> int:
    with Journal(path) as j:
        return j.last_seq()


def _journal_events(path: Path) -> list[tuple[str, str]]:
    with Journal(path) as j:
        return [(p.event_id, p.json) for p in j.events_since(0)]


class _Seen:
    """The event ids the subscriber has received so far (read incrementally)."""

    def __init__(self, sub: Subscriber) -> None:
        self._sub = sub
        self._n = 0
        self.ids: set[str] = set()

    def now(self) -> set[str]:
        with self._sub.lock:
            new = self._sub.messages[self._n :]
        self._n += len(new)
        for m in new:
            if m.topic in NON_EVENT_TOPICS or m.retain or m.topic.startswith(f"{PREFIX}/{TABLE}/cmd"):
                continue
            with contextlib.suppress(ValueError, KeyError, TypeError):
                self.ids.add(json.loads(m.payload)["event_id"])
        return self.ids


def _wait(predicate: Callable[[], bool], timeout: float, what: str, interval: float = 0.25) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise CampaignError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(interval)


def run_campaign(
    settings: Settings,
    workdir: Path,
    broker: Broker,
    subscribe: SubscriberFactory = standalone_subscriber,
    *,
    say: Callable[[str], None] = lambda s: None,
) -> Run:
    """Run one campaign against ``broker`` (a persistent Mosquitto that this
    function stops and restarts) and collect what :func:`analyse` needs."""
    t_start = time.monotonic()
    workdir.mkdir(parents=True, exist_ok=True)
    reference = build_reference(settings)
    shoes = len(reference.shoes)
    total = len(reference.coups)
    say(f"reference: {total} coups in {shoes} shoes, {len(reference.frames)} frames")
    plan = plan_disruptions(settings, total)
    done: list[Disruption] = []
    rng = random.Random(f"timing:{settings.seed}")

    sub = subscribe(broker, [f"{PREFIX}/{TABLE}/#"], client_id="soak-surveillance", clean=False)
    fake = FakeShoeProcess(settings, shoes, workdir)
    daemon = DaemonProcess(write_daemon_config(settings, workdir, fake.port, broker), workdir)
    sampler = RssSampler(daemon, lambda: fake.log.coups, settings.rss_interval_s)
    journal = workdir / "journal.sqlite3"
    fake_rc = -1
    t_dealt = t_start
    try:
        daemon.start()
        sampler.start()
        deadline = time.monotonic() + settings.timeout_s
        last_report = 0
        while fake.running():
            if time.monotonic() > deadline:
                raise CampaignError(f"the fake shoe was still dealing after {settings.timeout_s:.0f} s")
            coups = fake.log.poll()
            if coups - last_report >= max(100, total // 20):
                last_report = coups
                say(f"  {coups}/{total} coups dealt, {time.monotonic() - t_start:.0f} s")
            if (rc := daemon.died()) is not None:
                raise CampaignError(f"the daemon exited on its own ({rc}):\n{_tail(daemon.stderr)}")
            while plan and coups >= plan[0].at_coup:
                d = plan.pop(0)
                d.done_at_coup = coups
                if d.kind == "broker":
                    say(f"  coup {coups}: broker down for {d.downtime:.1f} s")
                    broker.stop()
                    time.sleep(d.downtime)
                    broker.start()
                else:
                    time.sleep(rng.uniform(0.0, 0.3))  # land anywhere in a coup
                    say(f"  coup {coups}: kill -9 the daemon, down for {d.downtime:.1f} s")
                    daemon.kill9()
                    time.sleep(d.downtime)
                    daemon.start()
                done.append(d)
            time.sleep(0.05)
        fake_rc = fake.proc.returncode
        fake.log.poll()
        t_dealt = time.monotonic()
        say(f"fake shoe done ({fake.log.coups} coups) after {t_dealt - t_start:.0f} s; draining")
        # The daemon has read everything (the fake leaves only then); let
        # the last deadlines pass and the journal go quiet, then let the
        # subscriber catch up with everything the journal holds.
        quiet = settings.correction_deadline_s + 2.0
        last = [-1, time.monotonic()]

        def journal_quiet() -> bool:
            seq = _journal_last_seq(journal)
            if seq != last[0]:
                last[0], last[1] = seq, time.monotonic()
            return time.monotonic() - last[1] >= quiet

        _wait(journal_quiet, 300, "the daemon to go quiet")
        wanted = {eid for eid, _ in _journal_events(journal)}
        seen = _Seen(sub)
        _wait(lambda: wanted <= seen.now(), 300, "the subscriber to receive every journalled event")
        sampler.stop()
        rc = daemon.stop()
        if rc != 0:
            raise CampaignError(f"the daemon exited {rc} on SIGTERM:\n{_tail(daemon.stderr)}")
        time.sleep(0.5)  # the retained 'offline'
    finally:
        # every process this campaign started goes, whatever failed above
        with contextlib.suppress(Exception):
            sampler.stop()
        if daemon.proc is not None:
            with contextlib.suppress(Exception):
                daemon.stop()
        with contextlib.suppress(Exception):
            fake.stop()
        with sub.lock:
            messages = list(sub.messages)
        with contextlib.suppress(Exception):
            sub.stop()
    run = Run(
        settings=settings,
        reference=reference,
        fake_records=fake.log.records(),
        journal_events=_journal_events(journal),
        journal_frames=journalled_frames(journal, settings.protocol),
        messages=messages,
        disruptions=done,
        rss=sampler.samples,
        daemon_exit_codes=daemon.exit_codes,
        fake_exit_code=fake_rc,
        dealing_s=t_dealt - t_start,
        elapsed_s=time.monotonic() - t_start,
    )
    save_run(run, workdir)
    return run


# --- analysis -------------------------------------------------------------------

#: Codes for which a coup waits (a supervisor, the device or its deadline):
#: such a coup may instead be voided by a new shoe (``SHOE_ENDED``).
AWAITING = "awaiting_supervisor"
AWAITING_CODES = frozenset({"SEQUENCE_GAP", "UNREAD_CARD", "PREMATURE_RESULT", "DEVICE_FAULT", "WRONG_HAND"})

CoupKey = tuple[int, int]  # the fake's (shoe, coup); coup 0 = the burn


@dataclass(frozen=True, slots=True)
class DealtCard:
    """A card frame that reached the daemon: the fake coup that dealt it
    (coup 0: the exposed and burned cards) and its code (None: unread)."""

    key: CoupKey
    card: str | None


def map_cards(
    dealt: list[DealtCard], card_events: list[dict[str, Any]], window: int = 400
) -> tuple[list[CoupKey | None], int]:
    """For each of the daemon's ``card`` events (in journal order), the
    fake's coup that dealt that card: the next card frame received with the
    same code (or unread); ``None`` where none of the next ``window`` does.
    Also the number of such unmatched events (cards the shoe never dealt)."""
    out: list[CoupKey | None] = []
    j = 0
    unmatched = 0
    for ev in card_events:
        card = ev["card"]
        for k in range(j, min(len(dealt), j + window)):
            d = dealt[k]
            if d.card == card:
                out.append(d.key)
                j = k + 1
                break
        else:
            out.append(None)
            unmatched += 1
    return out, unmatched


@dataclass
class CoupVerdict:
    """What became of one coup the fake dealt."""

    shoe: int
    coup: int
    outcome: str
    codes: set[str] = field(default_factory=set)  # misdeal and void codes of the daemon's coup(s)
    allowed: set[str] = field(default_factory=set)  # what its faults explain
    daemon_coups: list[int] = field(default_factory=list)  # the daemon's numbers for its cards
    detail: str = ""

    @property
    def unexplained(self) -> set[str]:
        return self.codes - self.allowed


#: Outcomes that keep a promise (the others, in capitals, break one).
GOOD_OUTCOMES = ("settled", "corrected", "void", "lost")


@dataclass
class Report:
    """The campaign's numbers and everything it found wrong."""

    settings: Settings
    coups_dealt: int = 0
    shoes_dealt: int = 0
    faults: collections.Counter[str] = field(default_factory=collections.Counter)
    void_codes: collections.Counter[str] = field(default_factory=collections.Counter)
    misdeal_codes: collections.Counter[str] = field(default_factory=collections.Counter)
    alerts: collections.Counter[str] = field(default_factory=collections.Counter)
    verdicts: list[CoupVerdict] = field(default_factory=list)
    shifts: collections.Counter[int] = field(default_factory=collections.Counter)
    frames_sent: int = 0
    frames_lost_on_line: int = 0
    coups_with_line_loss: int = 0
    frames_unexpected: int = 0
    cards_unmatched: int = 0
    broker_restarts: int = 0
    daemon_kills: int = 0
    pty_reopens_fake: int = 0
    journal_events: int = 0
    messages: int = 0
    delivered: int = 0
    duplicates: int = 0
    lost: list[str] = field(default_factory=list)
    conflicts: list[str] = field(default_factory=list)
    order_violations: list[str] = field(default_factory=list)
    stream_equals_journal: bool = False
    shoe_problems: list[str] = field(default_factory=list)
    count_problems: list[str] = field(default_factory=list)
    #: fake shoes whose coup numbering the daemon declared lost (frames lost
    #: that may hold whole coups): their count is not checked, and every
    #: coup from there on may be void with SEQUENCE_GAP
    numbering_lost: dict[int, int] = field(default_factory=dict)
    rss: list[RssSample] = field(default_factory=list)
    rss_window: tuple[float, float, float, float] = (0.0, 0.0, 0.0, 0.0)  # min, max, start, end (MB)
    process_problems: list[str] = field(default_factory=list)
    dealing_s: float = 0.0
    elapsed_s: float = 0.0

    def of(self, outcome: str) -> list[CoupVerdict]:
        return [v for v in self.verdicts if v.outcome == outcome]

    @property
    def mis_settled(self) -> list[CoupVerdict]:
        """Settled with cards that differ from the fake's record for that
        coup: mixed hands, or the right hands under another coup's number."""
        return self.of("MIS-SETTLED") + self.of("RENUMBERED")

    @property
    def unexplained(self) -> list[CoupVerdict]:
        return [v for v in self.verdicts if v.unexplained]

    @property
    def rss_growth_mb(self) -> float:
        return self.rss_window[3] - self.rss_window[2]

    # -- verdict groups, one per promise (each a test of its own)

    def delivery_problems(self) -> list[str]:
        """docs/events.md and docs/operations.md, MQTT: nothing lost, nothing changed, order kept."""
        out = []
        if self.lost:
            out.append(f"{len(self.lost)} events lost (journalled, never delivered): {_some(self.lost)}")
        if self.conflicts:
            out.append(
                f"{len(self.conflicts)} event ids delivered with different content: {_some(self.conflicts)}"
            )
        if self.order_violations:
            out.append(f"per-table order broken: {_some(self.order_violations)}")
        if not self.stream_equals_journal:
            out.append("the subscriber's de-duplicated stream differs from the journal's events")
        return out

    def line_problems(self) -> list[str]:
        """Nothing invented between the pty and the engine."""
        out = []
        if self.frames_unexpected:
            out.append(f"{self.frames_unexpected} frames journalled that the fake never sent")
        if self.cards_unmatched:
            out.append(f"{self.cards_unmatched} card events for cards the fake never dealt")
        return out

    def coup_problems(self) -> list[str]:
        """Every coup accounted for: none mis-settled with mixed hands, none
        left open or without a trace, every code explained, every shoe the
        fake dealt started and ended."""
        out = []
        for outcome, what in (
            ("MIS-SETTLED", "coups settled with hands the shoe never dealt together"),
            ("UNRESOLVED", "coups still awaiting past every deadline (never settled nor void)"),
            ("UNACCOUNTED", "coups with no trace in the stream"),
        ):
            vs = self.of(outcome)
            if vs:
                out.append(f"{len(vs)} {what}: {_some(_brief(vs))}")
        if self.unexplained:
            out.append(
                f"{len(self.unexplained)} coups with codes their faults do not explain: "
                f"{_some(_brief(self.unexplained))}"
            )
        return out + self.shoe_problems

    def numbering_problems(self) -> list[str]:
        """Every coup settled under the number the shoe dealt it, and every
        shoe ending with as many coups as the fake dealt."""
        vs = self.of("RENUMBERED")
        out = [
            f"{len(vs)} coups settled with the right hands under another coup's number: {_some(_brief(vs))}"
        ]
        return (out if vs else []) + self.count_problems

    def memory_problems(self) -> list[str]:
        if not self.rss:
            return ["no RSS sample of the daemon"]
        if self.rss_growth_mb > self.settings.rss_growth_limit_mb:
            return [
                f"daemon RSS grew {self.rss_growth_mb:.1f} MB over the second half "
                f"(limit {self.settings.rss_growth_limit_mb:g} MB)"
            ]
        return []

    def problems(self) -> list[str]:
        """Every broken promise, one line each (empty: the campaign passed)."""
        return (
            self.process_problems
            + self.delivery_problems()
            + self.line_problems()
            + self.coup_problems()
            + self.numbering_problems()
            + self.memory_problems()
        )

    def write_verdicts(self, path: Path) -> None:
        """One JSON line per coup the fake dealt: what became of it."""
        with path.open("w") as f:
            for v in self.verdicts:
                row = asdict(v) | {"codes": sorted(v.codes), "allowed": sorted(v.allowed)}
                f.write(json.dumps(row) + "\n")

    def summary(self) -> str:
        """The campaign's numbers as a table, then PASS or the problems."""
        s = self.settings
        first = self.rss[0].kb / 1024 if self.rss else 0.0
        last = self.rss[-1].kb / 1024 if self.rss else 0.0
        lo, hi, start, end = self.rss_window

        def counts(c: collections.Counter[Any]) -> str:
            return ", ".join(f"{k} {n}" for k, n in sorted(c.items())) or "none"

        rows = [
            ("coups dealt", f"{self.coups_dealt} in {self.shoes_dealt} shoes"),
            ("  settled as dealt", str(len(self.of("settled")))),
            ("  settled after a correction", str(len(self.of("corrected")))),
            ("  void", f"{len(self.of('void'))} ({counts(self.void_codes)})"),
            ("  lost on the line (gap)", str(len(self.of("lost")))),
            (
                "  shoes with numbering lost",
                f"{len(self.numbering_lost)} (the rest of each void: "
                + ", ".join(f"shoe {n} from coup {c}" for n, c in sorted(self.numbering_lost.items()))
                + ")",
            ),
            ("  MIS-SETTLED (mixed hands)", str(len(self.of("MIS-SETTLED")))),
            ("  RENUMBERED (right hands)", f"{len(self.of('RENUMBERED'))} (shifts: {counts(self.shifts)})"),
            ("  UNRESOLVED past deadline", str(len(self.of("UNRESOLVED")))),
            ("  UNACCOUNTED", str(len(self.of("UNACCOUNTED")))),
            ("  mis-settled in all", str(len(self.mis_settled))),
            ("  codes not explained by faults", str(len(self.unexplained))),
            ("faults injected", counts(self.faults)),
            ("misdeal events by code", counts(self.misdeal_codes)),
            ("security alerts by code", counts(self.alerts)),
            (
                "frames lost on the line",
                f"{self.frames_lost_on_line} of {self.frames_sent} sent intact "
                f"(in {self.coups_with_line_loss} coups; around daemon kills)",
            ),
            ("frames / cards invented", f"{self.frames_unexpected} / {self.cards_unmatched}"),
            ("broker restarts", str(self.broker_restarts)),
            ("daemon kills (-9)", str(self.daemon_kills)),
            (
                "pty reopens",
                f"{self.pty_reopens_fake} by the fake (disconnect) + {self.daemon_kills} by daemon restarts",
            ),
            ("events journalled", str(self.journal_events)),
            (
                "events delivered",
                f"{self.delivered} unique ({self.messages} messages, {self.duplicates} duplicates)",
            ),
            ("events lost", str(len(self.lost))),
            ("event ids with different content", str(len(self.conflicts))),
            ("order violations", str(len(self.order_violations))),
            ("subscriber stream == journal", "yes" if self.stream_equals_journal else "NO"),
            (
                "daemon RSS",
                f"first {first:.1f} MB, last {last:.1f} MB; last daemon, second half: "
                f"{start:.1f} -> {end:.1f} MB (min {lo:.1f}, max {hi:.1f}, growth {end - start:+.1f})",
            ),
            ("RSS samples", str(len(self.rss))),
            ("time", f"dealing {self.dealing_s:.0f} s, total {self.elapsed_s:.0f} s"),
        ]
        width = max(len(k) for k, _ in rows)
        head = (
            f"soak campaign: seed {s.seed}, {s.protocol}, {s.cards_per_second:g} cards/s, "
            f"deadline {s.correction_deadline_s:g} s, odds {'on' if s.odds else 'off'}\n"
            f"faults: {s.faults}\n"
        )
        body = "\n".join(f"{k.ljust(width)}  {v}" for k, v in rows)
        problems = self.problems()
        tail = "\nPASS" if not problems else "\nFAIL\n" + "\n".join(f"- {p}" for p in problems)
        return head + body + tail


def _some(items: Iterable[Any], n: int = 5) -> str:
    items = list(items)
    return "; ".join(str(v) for v in items[:n]) + (f" ... ({len(items) - n} more)" if len(items) > n else "")


def _brief(vs: list[CoupVerdict]) -> list[str]:
    return [
        f"shoe {v.shoe} coup {v.coup} (daemon {v.daemon_coups or '-'}): codes={sorted(v.codes)} "
        f"explained={sorted(v.allowed)}" + (f" [{v.detail}]" if v.detail else "")
        for v in vs
    ]


def _hands(player: Any, banker: Any) -> tuple[list[Any], list[Any]]:
    return list(player), list(banker)


def analyse(run: Run) -> Report:
    """Account for every coup and check every delivery promise."""
    rep = Report(run.settings, dealing_s=run.dealing_s, elapsed_s=run.elapsed_s)
    coups = [r for r in run.fake_records if r["record"] == "coup"]
    shoes = [r for r in run.fake_records if r["record"] == "shoe"]
    rep.coups_dealt, rep.shoes_dealt = len(coups), len(shoes)
    _check_processes(run, rep, coups)
    if run.settings.protocol == "angel-eye/2":
        coups = [_with_error_mode(c) for c in coups]
    events = _check_delivery(run, rep)
    line_lost, arrived = _line_losses(run, rep)
    shoe_of = _match_shoes(events, shoes, rep)
    received = [
        DealtCard(f.key, f.frame.card if isinstance(f.frame, Card) else None)
        for f, ok in zip(run.reference.frames, arrived, strict=True)
        if ok and (isinstance(f.frame, Card) or _unread_as_error(f.frame))
    ]
    _account_for_coups(events, coups, received, shoe_of, line_lost, rep)
    _check_memory(run, rep)
    return rep


def _unread_as_error(frame: Frame) -> bool:
    """An Angel Eye's unread card: no card message, only this error (the
    engine reports it as an unread card)."""
    return isinstance(frame, Status) and frame.code == "ERROR" and frame.text.startswith("unreadable card")


def _with_error_mode(coup: dict[str, Any]) -> dict[str, Any]:
    """An Angel Eye coup's record with an ``error_mode`` fault for each
    unread card (the shoe's error mode is a device fault as well)."""
    extra = [{"kind": "error_mode"} for f in coup["faults"] if f["kind"] == "unread"]
    return {**coup, "faults": coup["faults"] + extra} if extra else coup


def _check_processes(run: Run, rep: Report, coups: list[dict[str, Any]]) -> None:
    if run.fake_exit_code != 0:
        rep.process_problems.append(f"the fake shoe exited {run.fake_exit_code}")
    if [{"record": "coup", **c} for c in run.reference.coups] != coups:
        rep.process_problems.append("the fake's log differs from its in-process replay (not deterministic?)")
    if run.daemon_exit_codes[-1:] != [0]:
        rep.process_problems.append(f"the daemon's last exit code was {run.daemon_exit_codes[-1:]}")
    for c in coups:
        rep.faults.update(f["kind"] for f in c["faults"])
    rep.pty_reopens_fake = rep.faults["disconnect"]
    rep.broker_restarts = sum(d.kind == "broker" for d in run.disruptions)
    rep.daemon_kills = sum(d.kind == "daemon" for d in run.disruptions)


def _check_delivery(run: Run, rep: Report) -> list[dict[str, Any]]:
    """The subscriber's stream against the journal; returns the journal's events."""
    journal = run.journal_events
    rep.journal_events = len(journal)
    first: dict[str, str] = {}
    order: list[str] = []
    for m in run.messages:
        # A retained copy is sent because of a (re)subscription: a snapshot
        # of the latest roads, not part of the stream.
        if m.topic in NON_EVENT_TOPICS or m.retain or m.topic.startswith(f"{PREFIX}/{TABLE}/cmd"):
            continue
        rep.messages += 1
        text = m.payload.decode()
        eid = json.loads(text)["event_id"]
        seen = first.get(eid)
        if seen is None:
            first[eid] = text
            order.append(eid)
        elif seen != text:
            rep.conflicts.append(eid)
        else:
            rep.duplicates += 1
    rep.delivered = len(first)
    seqs = [json.loads(first[e])["seq"] for e in order]
    rep.order_violations = [f"seq {b} after {a}" for a, b in itertools.pairwise(seqs) if b <= a]
    rep.lost = [eid for eid, _ in journal if eid not in first]
    rep.stream_equals_journal = [(e, first[e]) for e in order] == journal
    return [json.loads(text) for _, text in journal]


def _line_losses(run: Run, rep: Report) -> tuple[collections.Counter[CoupKey], list[bool]]:
    """Frames the fake sent intact that the daemon never journalled, per
    coup (those before a shoe's first coup count for it), and which of the
    sent frames arrived."""
    sent = run.reference.frames
    arrived, rep.frames_unexpected = match_frames(sent, run.journal_frames)
    lost: collections.Counter[CoupKey] = collections.Counter(
        (f.key[0], max(1, f.key[1])) for f, ok in zip(sent, arrived, strict=True) if not ok
    )
    rep.frames_sent = len(sent)
    rep.frames_lost_on_line = sum(lost.values())
    rep.coups_with_line_loss = len(lost)
    return lost, arrived


def _match_shoes(events: list[dict[str, Any]], shoes: list[dict[str, Any]], rep: Report) -> dict[str, int]:
    """The daemon's shoes, in order, against the fake's (checked by the
    first card and the number of coups); daemon shoe id -> fake shoe."""
    started = [e for e in events if e["type"] == "shoe.started"]
    burns = {e["shoe"]: e for e in events if e["type"] == "shoe.burn"}
    ended = {e["shoe"]: e for e in events if e["type"] == "shoe.ended"}
    shoe_of: dict[str, int] = {}
    burned_from: list[str] = []
    open_: list[str] = []
    counts: list[tuple[int, int, int]] = []  # fake shoe, daemon's coups, fake's coups
    for rec, ev in zip(shoes, started, strict=False):
        sid = ev["shoe"]
        shoe_of[sid] = rec["shoe"]
        burn = burns.get(sid)
        if burn is not None and burn["first_card"] != rec["first_card"]:
            burned_from.append(f"shoe {rec['shoe']}: {burn['first_card']}, dealt {rec['first_card']}")
        end = ended.get(sid)
        if end is None:
            open_.append(f"shoe {rec['shoe']} ({sid})")
        elif end.get("coups_exact") is False:
            # frames lost may have held whole coups: the daemon said its count
            # is not exact (every coup after it void, none numbered)
            pass
        elif end["coups"] != rec["coups"]:
            counts.append((rec["shoe"], end["coups"], rec["coups"]))
    if burned_from:
        rep.shoe_problems.append(
            f"{len(burned_from)} shoes burned from another first card: {_some(burned_from)}"
        )
    if open_:
        rep.shoe_problems.append(f"{len(open_)} shoes never ended: {_some(open_)}")
    for what, sel in (
        ("fewer", [c for c in counts if c[1] < c[2]]),
        ("more", [c for c in counts if c[1] > c[2]]),
    ):
        if sel:
            rep.count_problems.append(
                f"{len(sel)} of {len(shoes)} shoes ended counting {what} coups than the fake dealt "
                f"({sum(abs(c[2] - c[1]) for c in sel)} in all): "
                + _some(f"shoe {n}: {got} of {want}" for n, got, want in sel)
            )
    if len(started) != len(shoes):
        rep.shoe_problems.append(f"the daemon started {len(started)} shoes, the fake dealt {len(shoes)}")
    return shoe_of


def _explained(
    key: CoupKey,
    dealt: dict[CoupKey, dict[str, Any]],
    line_lost: collections.Counter[CoupKey],
    foreign_pending: set[CoupKey],
) -> set[str]:
    """The codes the faults of fake coup ``key`` explain, with what spills
    over from the coup before it (a frame lost after a complete tableau
    holds the next coup; an extra copy dealt earlier shows later)."""
    c = dealt.get(key)
    kinds = {f["kind"] for f in c["faults"]} if c else set()
    if line_lost[key]:
        kinds.add("line_lost")
    prev = (key[0], key[1] - 1)
    prev_kinds = {f["kind"] for f in dealt[prev]["faults"]} if prev in dealt else set()
    if line_lost[prev]:
        prev_kinds.add("line_lost")
    allowed: set[str] = set().union(*(CODES_FOR_FAULT.get(k, frozenset()) for k in kinds))
    if prev_kinds & LOSS_KINDS:
        allowed.add("SEQUENCE_GAP")
    if key in foreign_pending:
        allowed.add("FOREIGN_CARD")
    if allowed & AWAITING_CODES:
        allowed.add("SHOE_ENDED")
    return allowed


def _account_for_coups(
    events: list[dict[str, Any]],
    coups: list[dict[str, Any]],
    received: list[DealtCard],
    shoe_of: dict[str, int],
    line_lost: collections.Counter[CoupKey],
    rep: Report,
) -> None:
    """Every coup the fake dealt, through the cards the daemon reported.

    Each ``card`` event is traced to the card frame it reports (among those
    that reached the journal, in order) and so to the fake coup that dealt
    the card, so a
    daemon coup is known by its cards whatever number it carries: settled
    with exactly one fake coup's hands under that coup's number (settled),
    under another number (RENUMBERED), with cards of several coups or other
    hands (MIS-SETTLED); void; or still awaiting (UNRESOLVED: every deadline
    has passed by the end of a campaign). A fake coup none of whose cards
    reached a daemon coup is *lost* if frames of it were lost (on the line
    or by its own faults) and the daemon reported a gap, else UNACCOUNTED.
    """
    dealt = {(c["shoe"], c["coup"]): c for c in coups}
    card_events = [e for e in events if e["type"] == "card"]
    keys, rep.cards_unmatched = map_cards(received, card_events)
    # daemon coup (shoe id, number) -> the fake coups its cards came from
    sources: dict[tuple[str, int], set[CoupKey]] = collections.defaultdict(set)
    daemon_of: dict[CoupKey, set[tuple[str, int]]] = collections.defaultdict(set)
    for ev, source in zip(card_events, keys, strict=True):
        if source is not None and ev["coup"] is not None and source[1] != 0:
            sources[ev["shoe"], ev["coup"]].add(source)
            daemon_of[source].add((ev["shoe"], ev["coup"]))
    by_coup: dict[tuple[str, int], list[dict[str, Any]]] = collections.defaultdict(list)
    gaps_in_shoe: set[int] = set()
    for e in events:
        if e["type"] in ("coup.result", "coup.void", "misdeal") and e.get("coup") is not None:
            by_coup[e["shoe"], e["coup"]].append(e)
        if e["type"] == "misdeal":
            rep.misdeal_codes[e["code"]] += 1
        elif e["type"] == "security.alert":
            rep.alerts[e["code"]] += 1
        if e.get("code") == "SEQUENCE_GAP" and e["shoe"] in shoe_of:
            gaps_in_shoe.add(shoe_of[e["shoe"]])
        if e["type"] == "security.alert" and e["code"] == "COUP_NUMBERING_LOST" and e["shoe"] in shoe_of:
            # (coup null: from the shoe's first coup: its start was lost)
            rep.numbering_lost.setdefault(shoe_of[e["shoe"]], e["coup"] or 1)

    foreign_pending: set[CoupKey] = set()
    extra_copy_in: set[int] = set()
    for c in coups:
        if c["shoe"] in extra_copy_in:
            foreign_pending.add((c["shoe"], c["coup"]))
        # an extra copy (of a card the shoe still holds) shows only once the
        # shoe's own copies are out, in a later coup
        if any(f["kind"] == "foreign" and f["how"] == "extra_copy" for f in c["faults"]):
            extra_copy_in.add(c["shoe"])

    during = _codes_during_holds(coups, card_events, keys, sources, by_coup, line_lost)

    for c in coups:
        key: CoupKey = (c["shoe"], c["coup"])
        mine = sorted(daemon_of.get(key, set()), key=lambda d: d[1])
        v = CoupVerdict(c["shoe"], c["coup"], "UNACCOUNTED", daemon_coups=[n for _, n in mine])
        explained = _explained(key, dealt, line_lost, foreign_pending)
        lost_from = rep.numbering_lost.get(c["shoe"])
        if lost_from is not None and c["coup"] >= lost_from:
            # the daemon numbers no coup after it: each is void (SEQUENCE_GAP);
            # nor can it tell which is the shoe's last after the cut card
            # (an early RESULT is not told apart then): CUT_CARD_OVERRUN
            explained |= {"SEQUENCE_GAP", "SHOE_ENDED", "CUT_CARD_OVERRUN"}
        evs = [e for d in mine for e in by_coup.get(d, [])]
        v.codes = {e["code"] for e in evs if e["type"] in ("misdeal", "coup.void")}
        v.allowed = set(explained)
        # codes of a daemon coup that mixes several fake coups: any of theirs
        for d in mine:
            v.allowed |= during.get(d, set())
            for other in sources[d] - {key}:
                v.allowed |= _explained(other, dealt, line_lost, foreign_pending)
        results = [e for e in evs if e["type"] == "coup.result"]
        voids = [e for e in evs if e["type"] == "coup.void"]
        want = _hands(c["player"], c["banker"])
        if results:
            r = results[0]
            got = _hands(r["player"]["cards"], r["banker"]["cards"])
            from_ = sorted(sources[r["shoe"], r["coup"]])
            if got != want or from_ != [key] or len(results) > 1:
                v.outcome = "MIS-SETTLED"
                v.detail = f"daemon coup {r['coup']} settled {got} from the cards of fake coups {from_}"
            elif r["coup"] != c["coup"]:
                v.outcome = "RENUMBERED"
                v.detail = f"settled as coup {r['coup']}"
                rep.shifts[r["coup"] - c["coup"]] += 1
            else:
                v.outcome = "corrected" if r["corrections"] else "settled"
        elif voids:
            v.outcome = "void"
            rep.void_codes[voids[0]["code"]] += 1
        elif mine:
            v.outcome = "UNRESOLVED"
            v.detail = "its cards reached daemon coups with no result or void"
        elif (line_lost[key] or any(f["kind"] in LOSS_KINDS for f in c["faults"])) and c[
            "shoe"
        ] in gaps_in_shoe:
            v.outcome = "lost"
        rep.verdicts.append(v)


def _ts(text: str) -> float:
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC).timestamp()


def _codes_during_holds(
    coups: list[dict[str, Any]],
    card_events: list[dict[str, Any]],
    keys: list[CoupKey | None],
    sources: dict[tuple[str, int], set[CoupKey]],
    by_coup: dict[tuple[str, int], list[dict[str, Any]]],
    line_lost: collections.Counter[CoupKey],
) -> dict[tuple[str, int], set[str]]:
    """What a daemon coup that waited may be charged with by frames that are
    applied at once rather than held (a gap, a device status, a link drop):
    ``SEQUENCE_GAP`` and ``DEVICE_FAULT`` for the losses, jams and drops of
    every fake coup dealt from the one before its first card until it was
    settled or void (by the read time of the cards), and the drop of the
    line when the fake leaves for a coup still waiting then."""
    index = {(c["shoe"], c["coup"]): i for i, c in enumerate(coups)}
    first_read: list[float] = [float("inf")] * len(coups)
    for ev, key in zip(card_events, keys, strict=True):
        if key is not None and key in index:
            i = index[key]
            first_read[i] = min(first_read[i], _ts(ev["ts"]))
    floor = -float("inf")
    for i, t in enumerate(first_read):  # coups lost whole take the time of the one before
        floor = t = max(floor, t if t != float("inf") else floor)
        first_read[i] = t
    codes_of: list[set[str]] = []
    for c in coups:
        kinds = {f["kind"] for f in c["faults"]} | (
            {"line_lost"} if line_lost[c["shoe"], c["coup"]] else set()
        )
        codes_of.append(
            ({"SEQUENCE_GAP"} if kinds & LOSS_KINDS else set())
            | ({"DEVICE_FAULT"} if kinds & {"jam", "disconnect", "line_lost", "error_mode"} else set())
        )
    # the fake's leaving drops the link: a DEVICE_FAULT of any coup still waiting
    last_read = max((t for t in first_read if t != float("inf")), default=float("inf"))
    out: dict[tuple[str, int], set[str]] = {}
    for d, evs in by_coup.items():
        if d not in sources or not any(e["type"] == "misdeal" and e["action"] == AWAITING for e in evs):
            continue
        ends = [_ts(e["ts"]) for e in evs if e["type"] in ("coup.result", "coup.void")]
        end = min(ends) if ends else float("inf")
        lo = max(0, min(index[k] for k in sources[d]) - 1)
        hi = bisect.bisect_right(first_read, end)
        out[d] = set().union(*codes_of[lo : max(hi, lo + 1)])
        if end >= last_read:
            out[d].add("DEVICE_FAULT")
    return out


def _check_memory(run: Run, rep: Report) -> None:
    """The last daemon's RSS over the second half of the dealing: the mean
    of its first fifth against the mean of its last fifth."""
    rep.rss = run.rss
    if not run.rss:
        return
    last_inc = run.rss[-1].incarnation
    # while the fake dealt: the drain at the end releases what was still held
    # in one burst, a high-water mark that says nothing about a leak
    mine = [s for s in run.rss if s.incarnation == last_inc and s.t <= run.dealing_s]
    mine = mine or [s for s in run.rss if s.incarnation == last_inc]
    window = [s for s in mine if s.coups >= rep.coups_dealt / 2] or mine
    mb = [s.kb / 1024 for s in window]
    k = max(1, len(mb) // 5)
    rep.rss_window = (min(mb), max(mb), statistics.mean(mb[:k]), statistics.mean(mb[-k:]))
