"""The daemon: the only place that wires driver -> decoder -> engine ->
journal -> outputs together and owns the event loop, the clock, signals,
sd_notify and the metrics.

Order of work for every read, so that nothing is lost and nothing is
published twice under a new id:

1. the raw chunk is decoded and fed to the engine;
2. the chunk (as an input) and the events it caused (the outbox) are
   committed to the journal in one transaction: both or neither (a crash
   before the commit loses the read as if on the line, and the engine
   rebuilt from the journal never saw it);
3. the commit is made durable (one fsync), then outputs deliver from the
   journal after their own marks: nothing is published before its fsync.
   An input within a coup does its own fsync, and so does one that deals a
   card whose analytics follow (a shoe's burn card: it goes out before the
   new shoe's odds are computed). A coup's end (another input whose
   analytics follow) is synced by ``Syncer``'s threads while the loop goes
   on, and the journal holds its events back from every output until then;
   an input read meanwhile (the next coup's first card, a millisecond
   behind) is applied and stored at once, and its own sync starts beside;
4. the analytics an input queued (``roads``, ``odds.update`` and their
   ADVANTAGE alerts: ``Engine.drain_analytics``) are computed at once and
   published after its events. While that input's own sync is under way
   (a coup's end) they are held: the next input read meanwhile (the next
   coup's first card, a millisecond behind) stores them in its own
   transaction, ahead of its events; with no such input they are stored
   on their own (no fsync of their own) once the syncs are done. Their
   seqs follow the input's events either way, the same order a rebuild or
   a replay produces, and a card's events never wait for a transaction of
   the previous coup's analytics. Should the process die before they are
   stored, the rebuild re-feeds the input (it is in the journal) and
   stores them under the same seqs and ids;
5. with nothing to read, the loop works ahead: the roads and odds the
   coup being dealt will publish when it settles (``analytics.prepare``).

After a crash the daemon loads the latest engine checkpoint
(``controller.checkpoint``: versioned JSON; one it cannot use is ignored and
the journal's inputs are re-fed from the first), re-feeds the
journal's inputs recorded after it to the same decoder and engine, and
appends what they produce: events already stored are recognised by id and
content (the engine is deterministic), events that were lost are stored,
and the outputs then deliver whatever is past their marks.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from types import FrameType
from typing import TYPE_CHECKING, Any

import structlog

from controller import checkpoint, command_limits, heap
from controller import settings as settings_mod
from controller.command_auth import CommandGate
from controller.command_limits import CommandInbox, RefusalAlerts
from controller.commands_schema import (
    Alert,
    CommandError,
    EngineCommand,
    Received,
    Refused,
    Reject,
    command_dict,
    command_json,
    parse_journalled,
)
from controller.config import Config, FakeDevice
from controller.engine import Engine, analytics
from controller.engine.settings import EngineSettings
from controller.events import Event
from controller.journal import (
    History,
    Journal,
    JournalConflict,
    JournalError,
    JournalRefused,
    PendingEvent,
    check_unclaimed,
)
from controller.outputs import Output
from controller.rules import load_profile
from controller.settings import Entry
from controller.textsafe import visible
from drivers.base import Driver, LinkEvent
from firmware_protocols.detect import AutoDecoder, make_decoder
from firmware_protocols.frames import Frame, Link

if TYPE_CHECKING:  # imported when MQTT is configured: paho loads only then
    from controller.outputs.mqtt import MqttOutput

log = structlog.get_logger("shoe-controller")

CHECKPOINT_KEY = "engine_checkpoint"
CHECKPOINT_EVERY_INPUTS = 500
STATE_EVERY_S = 1.0
#: While an fsync is under way the loop looks at the device this often (s),
#: and publishes the moment the fsync ends.
SYNC_POLL_S = 0.0002
#: Inputs stored and waiting to be published beyond which publishing goes
#: before the next input (a device that never pauses: replay at full speed).
AWAITING_MAX = 64
#: Idle-time work (``Daemon._idle_step``) starts no sooner than this (s)
#: after the last publish: computing holds the GIL, which paho's network
#: thread needs to send what was published, and its acknowledgement to be
#: read (QoS 1 over loopback takes well under this).
IDLE_AFTER_S = 0.002
#: Bytes of an input a failure's log line shows (a device read is at most
#: the driver's read size; a command at most its bound).
MAX_FAILED_INPUT_SHOWN = 256
#: The journal's size is checked against ``journal_max_mb`` this often (s);
#: retention runs hourly, and at once when it is over.
SIZE_CHECK_EVERY_S = 60.0
#: How often a terminal with no event output gets a line saying the dealing
#: goes on (``Daemon._progress``).
PROGRESS_EVERY_S = 10.0
MIB = 1024 * 1024


class InputFailure(Exception):
    """Applying an input (decoding it, feeding the engine, answering a
    command; re-fed from the journal, also its analytics) raised, or,
    re-fed, it made other events than those stored (``JournalConflict``):
    a bug, never the input's fault (a bad input is refused, counted or
    flagged, not raised). Carries what the log line needs; the cause is
    ``__cause__``. ``input_id`` is the journal's id of the input when it
    was being re-fed from the journal (``None``: live)."""

    def __init__(self, kind: str, t: float, data: bytes, input_id: int | None = None) -> None:
        super().__init__(kind)
        self.kind = kind
        self.t = t
        self.data = data
        self.input_id = input_id


class Notifier:
    """sd_notify(3) over $NOTIFY_SOCKET: READY, STATUS, WATCHDOG, STOPPING.
    A no-op outside systemd. (The protocol is one datagram per message; a
    dependency on libsystemd would buy nothing here.) A socket that cannot
    be reached is logged once, then at most every ``warn_every_s`` seconds
    with the count of failures since (a watchdog ping fails every few
    seconds: one warning each would flood the log)."""

    def __init__(self, *, warn_every_s: float = 300.0, clock: Callable[[], float] = time.monotonic) -> None:
        addr = os.environ.get("NOTIFY_SOCKET", "")
        self._addr = "\0" + addr[1:] if addr.startswith("@") else addr
        self._sock: socket.socket | None = None
        if self._addr:
            self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        usec = os.environ.get("WATCHDOG_USEC")
        self.watchdog_interval = int(usec) / 2e6 if usec and usec.isdigit() else 0.0
        self._last_ping = 0.0
        self._warn_every = warn_every_s
        self._clock = clock
        self._warned_at: float | None = None
        #: messages that could not be sent since the last warning
        self.failures = 0

    def send(self, message: str) -> None:
        if self._sock is None:
            return
        try:
            self._sock.sendto(message.encode(), self._addr)
        except OSError as exc:
            self.failures += 1
            now = self._clock()
            if self._warned_at is None or now - self._warned_at >= self._warn_every:
                log.warning(
                    "sd_notify failed",
                    error=str(exc),
                    socket=os.environ.get("NOTIFY_SOCKET", ""),
                    failures=self.failures,
                    next_warning_in_s=self._warn_every,
                )
                self._warned_at = now
                self.failures = 0

    def watchdog(self) -> None:
        if self.watchdog_interval and time.monotonic() - self._last_ping >= self.watchdog_interval:
            self._last_ping = time.monotonic()
            self.send("WATCHDOG=1")


class Syncer:
    """Makes the journal's commits durable (``Journal.sync``: one fdatasync
    of the WAL) in threads of their own, so that the daemon's loop reads
    and applies the next input while the disk syncs the last one: a coup's
    first card, a millisecond behind the RESULT, is applied and stored while
    the RESULT's sync is under way, and its own sync starts at once, beside
    it, not after it. Nothing is published before the sync that makes it
    durable: the daemon publishes an input's events once ``done`` has
    reached the ticket ``request`` gave it, and the journal hands none of
    them to an output before. A sync covers every commit made before it
    began, so tickets are done in order whatever order the syncs end in."""

    #: syncs under way at once, at most
    THREADS = 2

    def __init__(self, journal: Journal) -> None:
        self._journal = journal
        self._cond = threading.Condition()
        #: requests made, each with the journal's ``sync_point`` after its commit
        self._requested = 0
        self._point = (0, 0)
        self._started = 0  # the latest request a sync under way or done covers
        #: the latest request a completed sync covers
        self.done = 0
        self.error: JournalError | None = None
        self._closing = False
        self._threads = [
            threading.Thread(target=self._run, name=f"journal-sync-{i}", daemon=True)
            for i in range(self.THREADS)
        ]
        for th in self._threads:
            th.start()

    def request(self) -> int:
        """After a commit: its ticket, done once a sync begun after it ends."""
        point = self._journal.sync_point()
        with self._cond:
            self._requested += 1
            self._point = point
            self._cond.notify()
            return self._requested

    def wait(self, ticket: int, timeout: float | None) -> bool:
        """Until ``ticket`` is done (True) or ``timeout`` passes (False);
        raises the journal's error if a sync failed."""
        with self._cond:
            self._cond.wait_for(lambda: self.done >= ticket or self.error is not None, timeout)
        if self.error is not None:
            raise self.error
        return self.done >= ticket

    def close(self) -> None:
        with self._cond:
            self._closing = True
            self._cond.notify_all()
        for th in self._threads:
            th.join(10)

    def _run(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(
                    lambda: self._requested > self._started or self._closing or self.error is not None
                )
                if self.error is not None or self._requested <= self._started:
                    return  # a sync failed, or closing with nothing left to sync
                target, point = self._requested, self._point
                self._started = target
            try:
                self._journal.sync(point)
            except JournalError as exc:
                with self._cond:
                    self.error = exc
                    self._cond.notify_all()
                return
            with self._cond:
                self.done = max(self.done, target)
                self._cond.notify_all()


@dataclass
class Stats:
    frames: int = 0
    cards: int = 0
    coups: int = 0
    events: int = 0
    misdeals: dict[str, int] = field(default_factory=dict)


class Daemon:
    """One table: a device, an engine, a journal and its outputs."""

    def __init__(
        self,
        cfg: Config,
        *,
        driver: Driver | None = None,
        stdout: Any = None,
        stdout_text: bool = False,
        stop_at_eof: bool = False,
    ) -> None:
        self.cfg = cfg
        self.profile = load_profile(cfg.profile, cfg.rules.overrides() or None)
        self.stop_at_eof = stop_at_eof
        self._stdout = stdout
        self._stdout_text = stdout_text
        self._driver = driver
        self._stop = threading.Event()
        #: why the daemon stops (a signal's name), said in its last log line
        self._stop_reason = "asked to stop"
        #: when a terminal with no event output next gets a progress line
        #: (``_progress``); None: never (journald, or events on stdout)
        self._progress_at: float | None = (
            time.monotonic() + PROGRESS_EVERY_S if sys.stderr.isatty() and not cfg.outputs.stdout else None
        )
        self._last_coup: Event | None = None
        self._reopen = threading.Event()
        self._commands = CommandInbox()
        self._refusals = RefusalAlerts()
        self.notifier = Notifier()
        self.stats = Stats()
        self.journal: Journal | None = None
        self.engine: Engine | None = None
        self.decoder: Any = None
        self.outputs: list[Output] = []
        self.mqtt: MqttOutput | None = None
        self.gate: CommandGate | None = None  # with the journal, in run()
        m = cfg.outputs.mqtt
        self._command_key = m.command_key() if m is not None else None
        self.metrics: Any = None
        self._inputs_since_checkpoint = 0
        self._checkpoint_input = 0
        #: the journal's settings history (``controller.settings``), the
        #: settings the config asks for, and the decoder's in force
        self._history: settings_mod.History | None = None
        #: the table's key list as announced on ``<prefix>/<table>/keys`` (signing on)
        self._keys_text: str | None = None
        self._wanted: dict[str, Any] | None = None
        self._decoder_in_force: dict[str, Any] | None = None
        #: with the loop running: the journal's fsyncs, in their own thread
        self._syncer: Syncer | None = None
        #: committed, not yet published: (the syncer's ticket that makes them
        #: durable, the journal's copy, the events), in commit order
        self._awaiting: list[tuple[int, list[PendingEvent], list[Event]]] = []
        #: analytics drained from the engine (their seqs given) while their
        #: input's sync is under way, not yet stored: they go into the next
        #: input's transaction, ahead of its events, or are stored on their
        #: own once the syncs are done and no input waits
        #: (``_store_unstored``). Until then no checkpoint is taken.
        self._unstored: list[Event] = []
        self._published_at = 0.0  # monotonic time of the last publish
        self._shoe_ended = False  # since the last checkpoint
        # For a replayed capture the engine's clock is the file's: commands
        # and ticks are stamped on it (paced: the last chunk's time plus the
        # wall time since; unpaced: no ticks at all, time only from frames).
        self._data_clock: tuple[float, float] | None = None
        self._replay = cfg.device.driver == "replay"
        self._paced = not self._replay or bool(getattr(cfg.device, "realtime", False))
        self._last_state = 0.0
        self._state_sig = ""
        # what STATUS= says follows these: the device link as last
        # reported, and the outputs that are failing
        self._device: tuple[bool, str] = (True, "")
        self._output_failures: dict[str, str | None] = {}
        self._status_sent = ""

    # ------------------------------------------------------------ set-up

    def _new_engine(self, settings: EngineSettings) -> Engine:
        return Engine.of(self.cfg.table, settings, roads=True, defer_analytics=True)

    def _protocol(self) -> str:
        dev = self.cfg.device
        proto = getattr(dev, "protocol", None)
        if proto is None and dev.driver == "replay":
            from controller.shoelog import read_header

            proto = read_header(dev.file).get("protocol", "shoe-ascii/1")
        return str(proto or "shoe-ascii/1")

    def _make_decoder(self, entry: Entry) -> Any:
        """A fresh decoder of the protocol (and baud rate) in force from ``entry``."""
        dec = entry.decoder
        if dec["protocol"] == "auto":
            return AutoDecoder()
        return make_decoder(str(dec["protocol"]), baud=dec.get("baud"))

    def _switch_settings(self, entry: Entry) -> bool:
        """The settings of a history entry, where it applies (re-fed, or at
        start): the engine's from its next shoe, unless none is in progress
        (True: at once); the decoder's at once. Always between two inputs."""
        engine = self.engine
        assert engine is not None
        at_once = engine.reconfigure(settings_mod.engine_settings(entry.doc))
        if entry.decoder != self._decoder_in_force:
            self.decoder = self._make_decoder(entry)
            self._decoder_in_force = entry.decoder
        return at_once

    def _take_config(self, journal: Journal) -> None:
        """At start, after the rebuild: a config whose settings differ from
        the journal's last ones is a change, journalled (so that a rebuild
        applies it where it applied live) and applied (``_switch_settings``),
        said in one line."""
        wanted, history = self._wanted, self._history
        assert wanted is not None and history is not None
        last = history.entries[-1]
        changed = settings_mod.changed_keys(last.doc, wanted)
        if not changed:
            return
        entry = history.record(journal, wanted, after=journal.last_input_id())
        at_once = self._switch_settings(entry)
        engine_keys = [k for k in changed if k not in settings_mod.DECODER_KEYS]
        decoder_keys = [k for k in changed if k in settings_mod.DECODER_KEYS]
        parts = []
        if engine_keys and at_once:
            parts.append("no shoe in progress: the new settings apply at once")
        elif engine_keys:
            parts.append(
                "the shoe in progress finishes under the journal's settings, the new ones apply from the"
                " next shoe"
            )
        if decoder_keys:
            parts.append(f"{', '.join(decoder_keys)} applies at once (the device's next read)")
        log.warning(
            f"config changed: {', '.join(changed)}; {'; '.join(parts)}",
            changed=changed,
            applies="now" if at_once or not engine_keys else "next shoe",
            settings_entry=entry.serial,
        )

    def _open_driver(self) -> Driver:
        if self._driver is not None:
            return self._driver
        dev = self.cfg.device
        if dev.driver == "fake":
            from drivers.fake import FakeDriver, FakeShoe

            fake = FakeShoe(
                seed=dev.seed,
                protocol=dev.protocol if dev.protocol != "auto" else "shoe-ascii/1",
                decks=self.cfg.decks,
                faults=dev.faults or None,
                cards_per_second=dev.cards_per_second,
                t0=time.time(),
                record=False,  # dealt for as long as it runs; nobody reads the record
            )
            return FakeDriver(fake, dev.cards_per_second)
        if dev.driver == "serial":
            from drivers.serial import SerialDriver

            baud = dev.baudrate or (4800 if dev.protocol == "angel-eye/2" else 9600)
            return SerialDriver(dev.port, baud)
        if dev.driver == "usb":
            from drivers.usb import UsbDriver

            driver: Driver = UsbDriver(dev.vendor_id, dev.product_id, serial_number=dev.serial_number)
            return driver
        from controller.shoelog import device_reads
        from drivers.replay import ReplayDriver

        return ReplayDriver(functools.partial(device_reads, dev.file), realtime=dev.realtime)

    def _rebuild(self, journal: Journal) -> None:
        """A fresh engine, or the latest checkpoint, brought up to date by
        re-feeding the journal's inputs recorded after it.

        Each input is re-fed under the settings in force when it was
        applied live (the journal's settings history, ``controller.settings``:
        a change is applied after the input it followed), so the rebuild
        reproduces the stored events whatever the config says now; the
        config's own are taken after (``_take_config``).

        A checkpoint this version cannot use (another version, damaged, of
        another table, or of settings not in the history) is ignored with one warning,
        and every input the journal keeps is re-fed to a fresh engine: the
        same state and the same events, recognised by id, when the journal
        keeps its inputs from the first. When retention has pruned the
        first ones, the events cannot be reproduced under their ids: the
        inputs kept are re-fed for the state only, and the engine's seqs
        carry on above every seq the journal issued (nothing re-published,
        no id issued twice)."""
        history = settings_mod.History.load(journal, self.cfg.table)
        wanted = self._wanted = settings_mod.wanted(self.cfg, self._protocol())
        if not history.entries:
            if history.note is not None or journal.last_input_id() > 0:
                log.warning(
                    "journal settings history begun: its inputs so far are taken as dealt under the"
                    " current config",
                    reason=history.note or "a journal written before settings were journalled",
                )
            history.record(journal, wanted, after=0)
        self._history = history
        received_from = journal.received_commands_from()
        first = journal.first_input_id()
        base = history.in_force_at(first)
        self.engine = self._new_engine(settings_mod.engine_settings(base.doc))
        self.decoder = self._make_decoder(base)
        self._decoder_in_force = base.decoder
        applied = base.serial
        after = 0
        state_only = False
        blob = journal.get_meta(CHECKPOINT_KEY)
        if blob:
            try:
                after, engine, decoder = checkpoint.load(
                    blob, self._new_engine, None, settings_of=settings_mod.engine_settings
                )
                serial = max(
                    int(s.doc["serial"])
                    for s in (engine.settings, engine.next_settings)
                    if s is not None and s.doc is not None
                )
                entry = history.by_serial(serial)
                if entry is None:
                    raise checkpoint.CheckpointError(
                        f"its settings (entry {serial}) are not in the journal's settings history"
                    )
                if type(decoder) is not type(self._make_decoder(entry)):
                    raise checkpoint.CheckpointError(
                        f"decoder {type(decoder).__name__} is not that of the protocol in force"
                        f" ({entry.decoder['protocol']})"
                    )
                self.engine, self.decoder, self._decoder_in_force = engine, decoder, entry.decoder
                applied = serial
            except (checkpoint.CheckpointError, KeyError, TypeError, ValueError) as exc:
                first = journal.first_input_id()
                state_only = first > 1
                log.warning(
                    "engine checkpoint ignored: rebuilding from the journal's inputs",
                    reason=str(exc),
                    inputs_from=first,
                    events=(
                        f"not re-stored: inputs before {first} were pruned, seqs carry on above"
                        f" {journal.last_seq()}"
                        if state_only
                        else "re-stored, recognised by id"
                    ),
                )
        replayed = stored = 0
        # the changes of settings after those the start point has, each
        # applied where it was live: after input ``after``, before the next
        pending = [e for e in history.entries if e.serial > applied]
        for rec in journal.inputs_since(after):
            while pending and pending[0].after < rec.id:
                self._switch_settings(pending.pop(0))
            try:
                events = self._apply_input(rec.t, rec.kind, rec.data, received=rec.id >= received_from)
                events += self.engine.drain_analytics()
            except Exception as exc:  # a bug: see InputFailure
                raise InputFailure(rec.kind, rec.t, rec.data, rec.id) from exc
            replayed += 1
            if events and not state_only:
                try:
                    stored += len(journal.append_events(events))
                except JournalConflict as exc:  # the engine did not reproduce what it stored
                    raise InputFailure(rec.kind, rec.t, rec.data, rec.id) from exc
                except JournalError:
                    raise
                except Exception as exc:  # an event that cannot be stored (encoded): a bug
                    raise InputFailure(rec.kind, rec.t, rec.data, rec.id) from exc
        for entry in pending:  # applied after the last input
            self._switch_settings(entry)
        if state_only:
            self.engine.seq = max(self.engine.seq, journal.last_seq())
        if replayed:
            log.info("rebuilt from journal", inputs=replayed, events_recovered=stored, checkpoint_input=after)

    def _apply_input(
        self, t: float, kind: str, data: bytes, parsed: EngineCommand | None = None, *, received: bool = False
    ) -> list[Event]:
        engine = self.engine
        assert engine is not None
        if kind == "rx":
            out: list[Event] = []
            undecided = isinstance(self.decoder, AutoDecoder) and self.decoder.protocol is None
            frames: list[Frame] = self.decoder.feed(t, data)
            if undecided and self._live:
                self._report_detection()
            self.stats.frames += len(frames)
            for frame in frames:
                out.extend(engine.feed(frame))
            return out
        if kind == "link":
            return engine.feed(Link(t, None, data[:1] == b"1", data[1:].decode("utf-8", "replace")))
        if kind == "cmd":
            # a journalled command is read back by the parser a live one
            # went through (``parsed``: live, already parsed once);
            # ``received``: the bytes as they arrived, not ``command_json``
            try:
                cmd = parsed if parsed is not None else parse_journalled(data, received=received)
            except CommandError as exc:
                self.last_reply = {"id": exc.command_id, "ok": False, "error": str(exc)}
                return []
            reply, events = engine.command(cmd, t)
            # answered live only: a command re-fed after a crash was answered
            # (or its sender got no reply and asks again); the daemon's own
            # alerts and summary of refusals answer nobody
            if self.mqtt is not None and self._live and not isinstance(cmd, Alert | Refused):
                self.mqtt.reply(reply)
            self.last_reply = reply
            return events
        if kind == "tick":
            return engine.tick(t)
        return []  # 'tx': bytes we sent; the device's answer tells

    def _report_detection(self) -> None:
        dec = self.decoder
        if dec.protocol is not None:
            log.info("protocol detected", protocol=dec.protocol)
            self.notifier.send(f"STATUS=device speaks {dec.protocol}")
        elif dec.held >= 512 and dec.held // 512 != getattr(self, "_warned_at", 0):
            self._warned_at = dec.held // 512
            sample = b"".join(d for _, d in dec._pending)[-48:]
            log.error(
                "protocol: auto: no known protocol in the bytes read so far "
                "(shoe-ascii/1, shoe-bin/1, angel-eye/2); check the device, its baud rate, "
                "or set device.protocol",
                bytes_held=dec.held,
                last_bytes=sample.hex(" "),
            )
            self.notifier.send("STATUS=waiting: no known protocol detected on the device")

    _live = False
    last_reply: dict[str, Any] | None = None

    def _checkpoint(self, journal: Journal, *, durable: bool = True) -> None:
        """``durable=False`` (a live one, on an input's path): no fsync of its
        own. A power cut that loses it leaves the previous checkpoint, which
        the journal's inputs bring up to date; the next input's durable
        commit covers it, and retention prunes inputs only in a durable
        commit, so never below a checkpoint that could still be lost."""
        last = journal.last_input_id()
        assert self.engine is not None
        journal.set_meta(CHECKPOINT_KEY, checkpoint.dump(last, self.engine, self.decoder), durable=durable)
        self._checkpoint_input = last
        self._inputs_since_checkpoint = 0

    def _open_outputs(self, journal: Journal) -> None:
        o = self.cfg.outputs
        if o.stdout:
            from controller.outputs.stdout import StdoutOutput

            self.outputs.append(
                StdoutOutput(journal, stream=self._stdout or sys.stdout, text=self._stdout_text)
            )
        if o.jsonl:
            from controller.outputs.jsonl import JsonlOutput

            self.outputs.append(JsonlOutput(journal, o.jsonl))
        if o.mqtt is not None:
            from controller.outputs.mqtt import MqttOutput

            warning = o.mqtt.protocol_warning()
            if warning:
                log.warning("weaker command protection", detail=warning)
            self.mqtt = MqttOutput(
                o.mqtt,
                self.cfg.table,
                journal,
                on_command=self._commands.offer,
                admit=self._commands.admit,
            )
            self.mqtt.keys_text = self._keys_text
            self.mqtt.start()

    def _open_metrics(self) -> None:
        addr = self.cfg.metrics_address()
        if addr is None:
            return
        from controller.metrics import Metrics

        self.metrics = Metrics(addr)

    # -------------------------------------------------------------- run

    def request_stop(self, signum: int | None = None, _frame: Any = None) -> None:
        if signum is not None and not self._stop.is_set():
            self._stop_reason = signal.Signals(signum).name
        self._stop.set()

    def _on_hup(self, signum: int, frame: FrameType | None) -> None:
        self._reopen.set()

    def install_signals(self) -> None:
        signal.signal(signal.SIGTERM, self.request_stop)
        signal.signal(signal.SIGINT, self.request_stop)
        signal.signal(signal.SIGHUP, self._on_hup)

    def run(self) -> int:
        try:
            return self._run()
        except JournalRefused as exc:
            # not taken: nothing was written; the error says what to do
            log.critical("journal refused: the daemon does not start", error=str(exc))
            self.notifier.send(f"STATUS=journal refused: {exc}"[:200])
            return 1
        except JournalError as exc:
            log.critical(
                "journal cannot be written: stopping so nothing is published unstored", error=str(exc)
            )
            self.notifier.send(f"STATUS=journal failure: {exc}")
            return 1
        except InputFailure as exc:
            self._input_failed(exc)
            return 1
        finally:
            self._close()

    def _input_failed(self, exc: InputFailure) -> None:
        """One critical line (the traceback in its ``exception`` field, for
        journald) saying what failed, on which input, and what a restart
        will do: live, the input was not stored, so a restart rebuilds
        without it (the read lost as if on the line, its gap flagged); while
        re-feeding the journal, every start fails alike on that input."""
        cause = exc.__cause__ if exc.__cause__ is not None else exc
        error = f"{type(cause).__name__}: {cause}"
        shown = exc.data[:MAX_FAILED_INPUT_SHOWN]
        where: dict[str, Any] = {
            "input_kind": exc.kind,
            "input_t": exc.t,
            "input_data": shown.hex() if exc.kind == "rx" else shown.decode("utf-8", "replace"),
        }
        if exc.input_id is None:
            what = (
                "DAEMON FAILED applying an input: a bug, please report this line; the input was "
                "not stored, a restart rebuilds from the journal without it (lost as if on the line)"
            )
            status = f"failed applying a {exc.kind} input: {error}"
        else:
            what = (
                "DAEMON FAILED re-feeding the journal: a bug, please report this line; every start "
                "fails alike on this input until the engine is fixed or the journal is moved aside "
                "(docs/operations.md: 'If the daemon fails on an input')"
            )
            status = f"failed re-feeding journal input {exc.input_id}: {error}"
            where["input_id"] = exc.input_id
        log.critical(what, **where, error=error, exc_info=cause)
        self.notifier.send(f"STATUS={status}"[:200])

    def _run(self) -> int:
        cfg = self.cfg
        # First what can fail for a reason the operator must fix (another
        # daemon on this journal, then the metrics port taken), before the
        # journal is touched or the device is opened: one line and a
        # non-zero exit, nothing half-started. A second daemon started by
        # mistake on the same journal is told that, not that the port is taken.
        check_unclaimed(cfg.journal)
        self._open_metrics()
        self.journal = journal = Journal(cfg.journal)
        history = journal.claim(cfg.table)
        if history.note:
            log.warning("journal", note=history.note)
        if cfg.signing:
            self._enable_signing(journal, history)
        # taken commands are remembered in the journal: a restart does not
        # make a captured command good again
        self.gate = CommandGate(cfg.table, journal, self._command_key)
        self._rebuild(journal)
        self._take_config(journal)
        self._checkpoint(journal)
        self._syncer = Syncer(journal)
        if history.lost is not None:
            self._new_epoch(history)
        driver = self._open_driver()
        self._driver = driver
        driver.open()
        if not getattr(driver, "is_up", True):
            self._device = (False, "not open yet")
        self._open_outputs(journal)
        # started: what is on the heap now lives as long as the process, and
        # no later full collection need walk it (controller.heap)
        heap.settle()
        self._live = True
        self._status_sent = self._status()  # READY carries it: not sent twice
        self._pump()
        self.notifier.send(f"READY=1\nSTATUS={self._status_sent}")
        fake = cfg.device if isinstance(cfg.device, FakeDevice) else None
        shown = {"seed": fake.seed, "faults": fake.faults or "none"} if fake is not None else {}
        log.info(
            "running",
            table=cfg.table,
            profile=self.profile.name,
            decks=cfg.decks,
            device=cfg.device.driver,
            **shown,
        )
        last_retention = time.monotonic()
        last_size = last_retention - SIZE_CHECK_EVERY_S  # a journal over its bound at start: at once
        syncer = self._syncer
        while not self._stop.is_set():
            # the device first; with commands waiting, only a short wait for
            # it. An input already there is applied and stored before what an
            # fsync has made durable since is published: its own fsync then
            # runs while they go out (a coup's first card, right behind the
            # RESULT, does not wait for the RESULT's analytics to be sent).
            item = driver.read(0.0)
            if item is None or len(self._awaiting) > AWAITING_MAX:
                self._publish_durable()
            while item is None and self._awaiting:
                # a commit is being made durable: published the moment it
                # is, and an input that comes meanwhile is applied (and
                # stored) at once, first
                done = syncer.wait(self._awaiting[0][0], SYNC_POLL_S)
                item = driver.read(0.0)
                if done and item is None:
                    self._publish_durable()
            if item is None and self._unstored:
                # analytics held for the next input's transaction: an input
                # come while the last was published takes them along
                item = driver.read(0.0)
                if item is None:
                    # none came: stored and published now
                    self._store_unstored()
            if item is None:
                # nothing has come: work ahead while idle, a step at a time,
                # looking at the device between two steps
                timeout = 0.01 if self._commands.pending() else 0.2
                quiet = self._published_at + IDLE_AFTER_S - time.monotonic()
                if quiet > 0:
                    # what was just published is still on its way out (paho's
                    # network thread needs the GIL to send it): no work yet
                    item = driver.read(min(quiet, timeout))
                while item is None and self._idle_step():
                    item = driver.read(0.0)
                if item is None:
                    item = driver.read(timeout)
            if item is None:
                if self.stop_at_eof and getattr(driver, "eof", False):
                    break
            elif isinstance(item, LinkEvent):
                flag = b"1" if item.up else b"0"
                # a path from the config, an OS error: shown escaped, so it
                # is one line and encodes as UTF-8 (a lone surrogate would not)
                detail = visible(item.detail)
                log.warning("device link", up=item.up, detail=detail)
                self._device = (item.up, detail)
                self._input(item.t, "link", flag + detail.encode())
            else:
                t, data = item
                if self._replay:
                    self._data_clock = (t, time.monotonic())
                self._input(t, "rx", data)
            # then a bounded batch of commands before the next read
            for cmd in self._commands.take(command_limits.BATCH):
                self._command(cmd)
            self._report_refusals()
            engine = self.engine
            assert engine is not None
            now = self._now()
            dl = engine.next_deadline()
            if self._paced and dl is not None and now >= dl:
                self._input(now, "tick", b"")
            if self._reopen.is_set():
                self._reopen.clear()
                for out in self.outputs:
                    out.reopen()
            self._pump()
            self.notifier.watchdog()
            at = time.monotonic()
            size_due = at - last_size > SIZE_CHECK_EVERY_S
            if size_due:
                last_size = at
            if at - last_retention > 3600 or (size_due and journal.size_bytes() > cfg.journal_max_mb * MIB):
                last_retention = at
                self._retention(journal)
        # said at once: draining the outputs may take a moment
        log.info("stopping", reason=self._stop_reason, table=cfg.table)
        self._publish_durable(wait=True)
        self._store_unstored()
        self.notifier.send("STOPPING=1\nSTATUS=draining outputs")
        self._pump()
        return 0

    def _retention(self, journal: Journal) -> None:
        """Prune the journal: wall time, the age on disk. Inputs go only
        below the checkpoint a rebuild starts from; events only once every
        configured output delivered them and, once an archive has
        acknowledged any (``outputs.mqtt.archive_ack``), once the archive
        holds them. Past ``journal_max_mb`` the oldest go anyway: any that
        were not delivered or confirmed raise ``JOURNAL_PRUNED``."""
        cfg = self.cfg
        outputs = [o.name for o in self.outputs]
        if self.mqtt is not None:
            outputs.append("mqtt")
            if self.mqtt.archive_ack and self.mqtt.archive_heard:
                from controller.outputs.mqtt import ARCHIVE_OUTPUT

                outputs.append(ARCHIVE_OUTPUT)
        result = journal.retention(
            cfg.journal_retention_days,
            now=time.time(),
            outputs=outputs,
            keep_inputs_from=self._checkpoint_input + 1,
            max_bytes=cfg.journal_max_mb * MIB,
        )
        if result.undelivered_deleted:
            detail = (
                f"journal {cfg.journal} over journal_max_mb ({cfg.journal_max_mb} MiB): pruned"
                f" {result.undelivered_deleted} event(s) not yet delivered to {', '.join(outputs)}"
                f" (seqs up to {journal.retired_seq()}); what the archive lacks of them is lost"
            )
            log.error("JOURNAL PRUNED past its size bound", detail=detail)
            self._input_command(Alert(code="JOURNAL_PRUNED", detail=detail), self._now() or time.time())

    def _idle_step(self) -> bool:
        """One bounded step of work done ahead while no input waits (each at
        most one odds computation or one checkpoint, about a millisecond):
        True if it did one. Now: a checkpoint that was due while a sync was
        under way (``_checkpoint_if_due``), then the roads and odds the coup
        being dealt will publish when it settles (``analytics.prepare``), so
        that its RESULT and the next coup's first card, a millisecond behind
        it, do not wait for them; last, a young collection of the garbage
        collector's, when one is near (``heap.collect_ahead``), so that it
        does not come due on the next card. Beside them, the journal's own
        checkpoint (``Journal.checkpoint_ahead``: a thread of its own, so
        that SQLite does not run it inside a card's commit) is started when
        one is due."""
        engine = self.engine
        self._checkpoint_journal_ahead()
        return (
            self._checkpoint_if_due()
            or (engine is not None and analytics.prepare(engine))
            or heap.collect_ahead()
        )

    def _checkpoint_journal_ahead(self) -> None:
        """Start the journal's checkpoint in its thread when one is due; say
        so once should that fail (SQLite then checkpoints inside commits
        again, as before: slower on a card now and then, nothing lost)."""
        journal = self.journal
        if journal is None or journal.ahead_failure is not None:
            return
        journal.checkpoint_ahead()
        if journal.ahead_failure is not None:
            log.error(
                "journal checkpoints ahead failed; SQLite checkpoints inside commits again",
                error=journal.ahead_failure,
            )

    def _enable_signing(self, journal: Journal, history: History) -> None:
        """Every event stored from here on is signed with the table's key
        (made now if missing: docs/events.md "Signed and chained events") and chained
        to the journal's last; after lost history the next event says so."""
        from controller import signing

        path = self.cfg.signing_key_path()
        key, created = signing.load_or_create(path)
        signer = signing.Signer(key)
        if created:
            log.warning("signing key made", path=path, key_id=signer.key_id)
        entry: dict[str, Any] = {"key_id": signer.key_id, "public_key": signer.public_key}
        endorsement = signing.read_endorsement(path, signer.key_id)
        if endorsement is not None:
            entry.update(endorsement)
        keys = journal.add_signing_key(entry)
        self._keys_text = json.dumps({"table": self.cfg.table, "keys": keys}, separators=(",", ":"))
        reset = None
        if history.lost is not None:
            reset = f"new epoch above seq {history.seq_floor}: {history.lost}"
        journal.enable_signing(signer, chain_reset=reset)

    def _new_epoch(self, history: History) -> None:
        """The journal lost history: carry on above every seq ever issued
        (so no event id is issued twice with different content), and say so
        on every output with a ``security.alert`` ``JOURNAL_LOST``."""
        detail = (
            f"journal {self.cfg.journal} lost history: {history.lost}; events continue above seq"
            f" {history.seq_floor} so that no event id is issued twice"
        )
        log.critical("JOURNAL LOST HISTORY: new epoch of event seqs", detail=detail)
        self.notifier.send(f"STATUS=new epoch: {detail}")
        alert = Alert(code="JOURNAL_LOST", detail=detail, seq_above=history.seq_floor)
        self._input_command(alert, self._now() or time.time())

    def _command(self, item: Received) -> None:
        """One command from the broker: checked (origin over the bytes
        received, table, freshness, once-only), then journalled as those
        bytes and applied. A refusal is journalled with its alert only when
        it is the first in its alert window; later ones are answered,
        counted and reported together."""
        gate = self.gate
        assert gate is not None
        cmd = item.cmd
        error = gate.check(command_dict(cmd), time.time(), item.payload)
        if error is None:
            self._input(self._now(), "cmd", item.payload, cmd)
            return
        if self._refusals.refused(time.monotonic()):
            log.warning("command refused", id=cmd.id, error=error)
            self._input_command(Reject(id=cmd.id, error=error))
        elif self.mqtt is not None:
            self.mqtt.reply({"id": cmd.id, "ok": False, "error": error})

    def _report_refusals(self) -> None:
        """One alert per window for the commands refused after the first
        and those dropped over the rate or queue bounds."""
        now = time.monotonic()
        self._refusals.dropped(now, self._commands.pop_dropped())
        counts = self._refusals.due(now)
        if counts is None:
            return
        refused, dropped = counts
        log.warning("commands refused or dropped", refused=refused, dropped=dropped)
        note = Refused(
            refused=refused,
            dropped=dropped,
            window_s=self._refusals.window_s,
            limits=(
                f"at most {command_limits.BURST} at once then {command_limits.RATE_PER_S:g} per s,"
                f" {command_limits.QUEUE_MAX} waiting"
            ),
        )
        self._input_command(note)

    def _now(self) -> float:
        if self._replay:
            if self._data_clock is None:
                return 0.0
            t, mono = self._data_clock
            return t + (time.monotonic() - mono if self._paced else 0.0)
        return time.time()

    def _input_command(self, cmd: EngineCommand, t: float | None = None) -> None:
        """Journal and apply a command (a supervisor's, or the daemon's own
        ``_reject``, ``_refused``, ``_alert``) as compact JSON, at ``t`` or now.
        The daemon's own texts (a path from the config, an OS error) are
        made one line of UTF-8 first (``textsafe.visible``); a
        supervisor's were refused at the door unless they are."""
        if isinstance(cmd, Alert):
            cmd = Alert(code=visible(cmd.code), detail=visible(cmd.detail), seq_above=cmd.seq_above)
        elif isinstance(cmd, Reject):
            cmd = Reject(id=cmd.id, error=visible(cmd.error))
        self._input(self._now() if t is None else t, "cmd", command_json(cmd), cmd)

    def _input(self, t: float, kind: str, data: bytes, parsed: EngineCommand | None = None) -> None:
        journal = self.journal
        assert journal is not None
        engine = self.engine
        assert engine is not None
        # Applied first, then the input and its events are stored in one
        # transaction, before anything is published: one fsync per read.
        # Should the process die in between, neither is stored: the read is
        # lost as if on the line (the next frame's sequence shows the gap)
        # and the engine rebuilt from the journal never saw it.
        try:
            events = self._apply_input(t, kind, data, parsed)
        except Exception as exc:  # a bug: see InputFailure
            raise InputFailure(kind, t, data) from exc
        self._commit(t, kind, data, events)
        self._inputs_since_checkpoint += 1
        self._shoe_ended |= any(e["type"] == "shoe.ended" for e in events)
        # The analytics this input queued (a coup's end) are computed and
        # stored now, while the syncer's fsync of its read is under way (the
        # fsync releases the GIL), so that the next coup's first card, a
        # millisecond behind, finds them done: its events go out after them
        # in any case.
        self._drain_analytics()

    def _drain_analytics(self) -> None:
        """The analytics the last input queued (odds, roads): computed now,
        published after its own events. (Computing them in a thread beside
        the commit was tried: every SQLite call of the committing thread
        then waited for the GIL behind the odds; see
        benchmarks.bench_latency --trace.) While the input's sync is under
        way (a coup's end) they are only held (``_unstored``): the next
        coup's first card, a millisecond behind, is read at once and stores
        them in its own transaction, ahead of its events, instead of
        waiting for a transaction of theirs. Otherwise they are stored now.
        Then a checkpoint, if one is due (``_checkpoint_if_due``)."""
        engine = self.engine
        assert engine is not None
        analytics_ = engine.drain_analytics()
        if analytics_:
            self._shoe_ended |= any(e["type"] == "shoe.ended" for e in analytics_)
            self._unstored.extend(analytics_)
            if not self._awaiting:
                self._store_unstored()
        self._checkpoint_if_due()

    def _store_unstored(self) -> None:
        """Store the analytics held (``_unstored``) in a transaction of their
        own, and publish them after what precedes them.

        A crash before the analytics are stored loses nothing: the input
        they come from is stored, and the rebuild re-feeds it and stores
        them under the same seqs. So they take no fsync of their own (a
        power cut that loses them is made good the same way); the next
        durable commit covers them."""
        if not self._unstored:
            return
        journal = self.journal
        assert journal is not None
        analytics_, self._unstored = self._unstored, []
        self._between_commits()
        journal.append_events(analytics_, durable=False)
        # after the input's own events: at once, or with them once durable
        self._release(journal.last_stored, analytics_)

    def _checkpoint_if_due(self) -> bool:
        """A checkpoint bounds the inputs a rebuild replays; one per shoe and
        every few hundred inputs keeps that short without serialising the
        engine and a third fsync after every coup. Taken after an input
        whose events are out, or while idle; never while a sync is under way
        (a coup's end: the next coup's first card, a millisecond behind,
        would wait for it), nor with analytics queued (a checkpoint does not
        keep them; they are drained right after each input). True if taken."""
        journal = self.journal
        assert journal is not None
        due = self._inputs_since_checkpoint >= CHECKPOINT_EVERY_INPUTS or self._shoe_ended
        if self._awaiting or self._unstored or not due:
            return False
        self._shoe_ended = False
        self._checkpoint(journal, durable=False)
        return True

    def _between_commits(self) -> None:
        """A fault hook for tests: runs after an input's own events are
        committed, before its analytics are stored (alone, or with the next
        input)."""

    def _commit(self, t: float, kind: str, data: bytes, events: list[Event]) -> None:
        """Store an input and its events (one transaction), and publish them
        from this thread once durable: with the loop running, the fsync is
        the syncer's, and they go out when it is done (``_publish_durable``);
        otherwise the commit does its own fsync and they go out at once."""
        journal = self.journal
        assert journal is not None
        syncer = self._syncer
        engine = self.engine
        assert engine is not None
        # Overlapped only where there is work to overlap: an input whose
        # analytics follow (a coup's end: its fsync runs while they are
        # computed and stored, and while the next coup's first card,
        # close behind, is applied), or one behind an fsync still under
        # way. Any other input (a card within a coup) does its own fsync
        # here, without a hand-over to another thread.
        if self._unstored:
            # the analytics of the input before (its sync was under way when
            # they were drained) go first, in this input's transaction
            self._between_commits()
            events = self._unstored + events
            self._unstored = []
        # A card whose analytics follow (a shoe's burn card: the new shoe's
        # odds, not prepared ahead) is not held behind them: it takes its
        # own fsync here and goes out before they are computed.
        overlap = self._awaiting or (
            analytics.queued(engine) and not any(e["type"] == "card" for e in events)
        )
        if syncer is None or not overlap:
            self._store_input(t, kind, data, events, durable=True)
            self._release(journal.last_stored, events)
            return
        self._store_input(t, kind, data, events, durable=False)
        self._awaiting.append((syncer.request(), journal.last_stored, events))

    def _store_input(self, t: float, kind: str, data: bytes, events: list[Event], *, durable: bool) -> None:
        """``journal.append_input``; an event it cannot store (one that
        cannot be encoded: a bug, every outside text being refused or made
        safe first) is an ``InputFailure``, logged by ``run`` in its one
        critical line. Its transaction was rolled back: nothing of the
        input is stored, so a restart rebuilds without it."""
        journal = self.journal
        assert journal is not None
        try:
            journal.append_input(t, kind, data, events, durable=durable)
        except JournalError:
            raise
        except Exception as exc:
            raise InputFailure(kind, t, data) from exc

    def _release(self, stored: list[PendingEvent], events: list[Event]) -> None:
        """Events committed whose input is durable (or, for analytics, whose
        input is stored): published now, or, if events before them still
        wait for their fsync, right after those."""
        if self._awaiting:
            self._awaiting.append((self._awaiting[-1][0], stored, events))
        else:
            self._publish(stored)
            self._delivered(events)

    def _publish_durable(self, *, wait: bool = False) -> None:
        """Publish, in commit order, what the syncer has made durable
        (``wait``: all of it, waiting for the fsyncs still under way)."""
        syncer = self._syncer
        while self._awaiting and syncer is not None:
            ticket, stored, events = self._awaiting[0]
            if syncer.done < ticket and not syncer.wait(ticket, None if wait else 0.0):
                return
            del self._awaiting[0]
            self._publish(stored)
            self._delivered(events)

    def _publish(self, stored: list[PendingEvent]) -> None:
        """Events just committed (``stored``, the journal's copy): MQTT
        publishes them from this thread when nothing older is waiting (no
        wake-up of its sender on a card's path)."""
        if self.mqtt is not None and stored:
            self.mqtt.deliver(stored)
            self._published_at = time.monotonic()

    def _delivered(self, events: list[Event]) -> None:
        """Events committed and published: counted, and the other outputs
        pumped (they read the journal)."""
        if not events:
            return
        self._count(events)
        for out in self.outputs:
            out.pump()

    def _count(self, events: list[Event]) -> None:
        st = self.stats
        st.events += len(events)
        for e in events:
            t = e["type"]
            if t == "card":
                st.cards += 1
            elif t in ("coup.result", "coup.void"):
                st.coups += 1
            elif t == "misdeal" and e["action"] != "corrected":
                st.misdeals[e["code"]] = st.misdeals.get(e["code"], 0) + 1
        if self.metrics is not None:
            self.metrics.observe(events, self.decoder, self)
        if self._progress_at is not None:
            self._progress(events)

    def _progress(self, events: list[Event]) -> None:
        """A person at a terminal with no event output (``stdout: false``)
        sees the dealing go on: a log line at most every ``PROGRESS_EVERY_S``
        while events come (never under systemd: ``STATUS=`` says it there)."""
        for e in events:
            if e["type"] in ("coup.result", "coup.void"):
                self._last_coup = e
        now = time.monotonic()
        assert self._progress_at is not None
        if now < self._progress_at:
            return
        self._progress_at = now + PROGRESS_EVERY_S
        st = self.stats
        last = self._last_coup
        said = "no coup finished yet"
        if last is not None:
            outcome = "void" if last["type"] == "coup.void" else f"{last['winner']}"
            said = f"coup {last['coup']}: {outcome}"
        log.info("dealing", last=said, cards=st.cards, coups=st.coups, misdeals=sum(st.misdeals.values()))

    def _pump(self) -> None:
        for out in self.outputs:
            out.pump()
        now = time.monotonic()
        if self.mqtt is not None and now - self._last_state >= STATE_EVERY_S and self.engine is not None:
            snap = self.engine.snapshot()
            sig = json.dumps(snap, sort_keys=True)
            if sig != self._state_sig:
                self._state_sig = sig
                self.mqtt.publish_state(snap)
            self._last_state = now
        if self.metrics is not None and self.journal is not None:
            self.metrics.journal_backlog(self.journal, self.mqtt)
            # here, not only when events come: a stream of garbage makes none
            self.metrics.decoder_stats(self.decoder)
        self._watch_outputs()
        self._update_status()

    def _watch_outputs(self) -> None:
        """An output that starts or stops failing (a JSON-lines file that
        cannot be opened or written) is reported: a log line, the
        ``shoe_controller_output_up`` metric and a ``security.alert`` (``OUTPUT_FAILED``,
        ``OUTPUT_RESTORED``) on the outputs that work. The output retries on
        its own; its events wait in the journal; dealing goes on."""
        for out in self.outputs:
            failure = out.failure
            if self.metrics is not None:
                self.metrics.output(out.name, failure is None, out.errors)
            was = self._output_failures.get(out.name)
            self._output_failures[out.name] = failure
            if (failure is None) == (was is None):
                continue
            if failure is not None:
                code = "OUTPUT_FAILED"
                detail = (
                    f"output {out.name} cannot deliver: {failure}; its events wait in the journal and"
                    " it is retried; dealing goes on"
                )
                log.error("output failing", output=out.name, error=failure)
            else:
                code, detail = "OUTPUT_RESTORED", f"output {out.name} delivers again (was: {was})"
                log.warning("output delivers again", output=out.name)
            self._input_command(Alert(code=code, detail=detail), self._now() or time.time())

    def _status(self) -> str:
        up, detail = self._device
        status = "dealing: device up" if up else f"waiting for the device: {detail}"
        failing = sorted(name for name, why in self._output_failures.items() if why is not None)
        if failing:
            status += f"; output failing: {', '.join(failing)} (retried)"
        return status

    def _update_status(self) -> None:
        """``STATUS=`` follows the device link and the outputs."""
        if not self._live:
            return
        status = self._status()
        if status != self._status_sent:
            self._status_sent = status
            self.notifier.send(f"STATUS={status}")

    def _close(self) -> None:
        if self._syncer is not None:
            # what is committed and not yet synced: the journal's close syncs it
            self._syncer.close()
            self._syncer = None
        if self.mqtt is not None:
            try:
                self.mqtt.stop(timeout=5.0)
            except Exception as exc:  # closing must not hide the real exit reason
                log.warning("mqtt stop failed", error=str(exc))
        for out in self.outputs:
            try:
                out.close()
            except Exception as exc:
                log.warning("output close failed", output=out.name, error=str(exc))
        if self._driver is not None:
            self._driver.close()
        if self.journal is not None:
            with contextlib.suppress(JournalError):
                self.journal.close()
        heap.release()


def run_daemon(
    cfg: Config,
    *,
    install_signals: bool = True,
    early_signals: tuple[threading.Event, threading.Event] | None = None,
    **kw: Any,
) -> int:
    """Run one daemon. ``early_signals`` (stop, hup): what was caught before
    the daemon existed (``shoe-controller run`` catches signals first)."""
    d = Daemon(cfg, **kw)
    if install_signals:
        d.install_signals()
    if early_signals is not None:
        stop, hup = early_signals
        if stop.is_set():
            d.request_stop()
        if hup.is_set():
            d._reopen.set()
    return d.run()
