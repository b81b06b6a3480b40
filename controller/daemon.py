"""The daemon: the only place that wires driver -> decoder -> engine ->
journal -> outputs together and owns the event loop, the clock, signals,
sd_notify and the metrics.

Order of work for every read, so that nothing is lost and nothing is
published twice under a new id:

1. the raw chunk is decoded and fed to the engine;
2. the chunk (as an input) and the events it caused (the outbox) are
   committed to the journal in one transaction, one fsync: both or neither
   (a crash before the commit loses the read as if on the line, and the
   engine rebuilt from the journal never saw it);
3. outputs deliver from the journal after their own marks.

After a crash the daemon loads the latest engine checkpoint, re-feeds the
journal's inputs recorded after it to the same decoder and engine, and
appends what they produce: events already stored are recognised by id and
content (the engine is deterministic), events that were lost are stored,
and the outputs then deliver whatever is past their marks.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import pickle
import queue
import signal
import socket
import sys
import threading
import time
from dataclasses import dataclass, field
from types import FrameType
from typing import Any

import structlog

from controller.command_auth import CommandVerifier, read_key
from controller.config import Config
from controller.engine import Engine
from controller.events import Event
from controller.journal import Journal, JournalError
from controller.rules import load_profile
from drivers.base import Driver, LinkEvent
from firmware_protocols.detect import AutoDecoder, make_decoder
from firmware_protocols.frames import Frame, Link

log = structlog.get_logger("shoe-controller")

CHECKPOINT_KEY = "engine_checkpoint"
CHECKPOINT_EVERY_INPUTS = 500
STATE_EVERY_S = 1.0


class Notifier:
    """sd_notify(3) over $NOTIFY_SOCKET: READY, STATUS, WATCHDOG, STOPPING.
    A no-op outside systemd. (The protocol is one datagram per message; a
    dependency on libsystemd would buy nothing here.)"""

    def __init__(self) -> None:
        addr = os.environ.get("NOTIFY_SOCKET", "")
        self._addr = "\0" + addr[1:] if addr.startswith("@") else addr
        self._sock: socket.socket | None = None
        if self._addr:
            self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        usec = os.environ.get("WATCHDOG_USEC")
        self.watchdog_interval = int(usec) / 2e6 if usec and usec.isdigit() else 0.0
        self._last_ping = 0.0

    def send(self, message: str) -> None:
        if self._sock is None:
            return
        try:
            self._sock.sendto(message.encode(), self._addr)
        except OSError as exc:
            log.warning("sd_notify failed", error=str(exc))

    def watchdog(self) -> None:
        if self.watchdog_interval and time.monotonic() - self._last_ping >= self.watchdog_interval:
            self._last_ping = time.monotonic()
            self.send("WATCHDOG=1")


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
        stop_at_eof: bool = False,
    ) -> None:
        self.cfg = cfg
        self.profile = load_profile(cfg.profile, cfg.rules.overrides() or None)
        self.stop_at_eof = stop_at_eof
        self._stdout = stdout
        self._driver = driver
        self._stop = threading.Event()
        self._reopen = threading.Event()
        self._commands: queue.Queue[dict[str, Any]] = queue.Queue()
        self.notifier = Notifier()
        self.stats = Stats()
        self.journal: Journal | None = None
        self.engine: Engine | None = None
        self.decoder: Any = None
        self.outputs: list[Any] = []
        self.mqtt: Any = None
        self.verifier: CommandVerifier | None = None
        m = cfg.outputs.mqtt
        if m is not None and m.command_key_file is not None:
            self.verifier = CommandVerifier(read_key(m.command_key_file))
        self.metrics: Any = None
        self._inputs_since_checkpoint = 0
        self._checkpoint_input = 0
        # For a replayed capture the engine's clock is the file's: commands
        # and ticks are stamped on it (paced: the last chunk's time plus the
        # wall time since; unpaced: no ticks at all, time only from frames).
        self._data_clock: tuple[float, float] | None = None
        self._replay = cfg.device.driver == "replay"
        self._paced = not self._replay or bool(getattr(cfg.device, "realtime", False))
        self._last_state = 0.0
        self._state_sig = ""

    # ------------------------------------------------------------ set-up

    def _new_engine(self) -> Engine:
        c = self.cfg
        return Engine(
            c.table,
            self.profile,
            c.decks,
            odds=c.odds,
            roads=True,
            advantage_threshold=c.advantage_threshold,
        )

    def _protocol(self) -> str:
        dev = self.cfg.device
        proto = getattr(dev, "protocol", None)
        if proto is None and dev.driver == "replay":
            from controller.shoelog import read_header

            proto = read_header(dev.file).get("protocol", "shoe-ascii/1")
        return str(proto or "shoe-ascii/1")

    def _make_decoder(self) -> Any:
        proto = self._protocol()
        if proto == "auto":
            return AutoDecoder()
        return make_decoder(proto, baud=getattr(self.cfg.device, "baudrate", None))

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
        from drivers.replay import ReplayDriver

        return ReplayDriver(dev.file, realtime=dev.realtime)

    def _rebuild(self, journal: Journal) -> None:
        """A fresh engine, or the latest checkpoint, brought up to date by
        re-feeding the journal's inputs recorded after it."""
        self.engine = self._new_engine()
        self.decoder = self._make_decoder()
        after = 0
        blob = journal.get_meta(CHECKPOINT_KEY)
        if blob:
            try:
                after, engine, decoder = pickle.loads(base64.b64decode(blob))
                self.engine, self.decoder = engine, decoder
            except Exception as exc:  # a checkpoint from another version
                log.warning("ignoring unreadable engine checkpoint", error=str(exc))
                after = 0
                self.engine = self._new_engine()
                self.decoder = self._make_decoder()
        replayed = stored = 0
        for rec in journal.inputs_since(after):
            events = self._apply_input(rec.t, rec.kind, rec.data)
            replayed += 1
            if events:
                stored += len(journal.append_events(events))
        if replayed:
            log.info("rebuilt from journal", inputs=replayed, events_recovered=stored, checkpoint_input=after)

    def _apply_input(self, t: float, kind: str, data: bytes) -> list[Event]:
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
            reply, events = engine.command(json.loads(data), t)
            # answered live only: a command re-fed after a crash was answered
            # (or its sender got no reply and asks again)
            if self.mqtt is not None and self._live:
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

    def _checkpoint(self, journal: Journal) -> None:
        last = journal.last_input_id()
        state = pickle.dumps((last, self.engine, self.decoder), protocol=pickle.HIGHEST_PROTOCOL)
        journal.set_meta(CHECKPOINT_KEY, base64.b64encode(state).decode("ascii"))
        self._checkpoint_input = last
        self._inputs_since_checkpoint = 0

    def _open_outputs(self, journal: Journal) -> None:
        o = self.cfg.outputs
        if o.stdout:
            from controller.outputs.stdout import StdoutOutput

            self.outputs.append(StdoutOutput(journal, stream=self._stdout or sys.stdout))
        if o.jsonl:
            from controller.outputs.jsonl import JsonlOutput

            self.outputs.append(JsonlOutput(journal, o.jsonl))
        if o.mqtt is not None:
            from controller.outputs.mqtt import MqttOutput

            self.mqtt = MqttOutput(o.mqtt, self.cfg.table, journal, on_command=self._commands.put)
            self.mqtt.start()

    def _open_metrics(self) -> None:
        addr = self.cfg.metrics_address()
        if addr is None:
            return
        from controller.metrics import Metrics

        self.metrics = Metrics(addr)

    # -------------------------------------------------------------- run

    def request_stop(self, *_: Any) -> None:
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
        except JournalError as exc:
            log.critical(
                "journal cannot be written: stopping so nothing is published unstored", error=str(exc)
            )
            self.notifier.send(f"STATUS=journal failure: {exc}")
            return 1
        finally:
            self._close()

    def _run(self) -> int:
        cfg = self.cfg
        self.journal = journal = Journal(cfg.journal)
        self._rebuild(journal)
        self._checkpoint(journal)
        driver = self._open_driver()
        self._driver = driver
        driver.open()
        self._open_outputs(journal)
        self._open_metrics()
        self._live = True
        self._pump()
        self.notifier.send("READY=1\nSTATUS=dealing: device open, journal and outputs up")
        log.info(
            "running", table=cfg.table, profile=self.profile.name, decks=cfg.decks, device=cfg.device.driver
        )
        last_retention = time.monotonic()
        while not self._stop.is_set():
            item = driver.read(0.2)
            if item is None:
                if self.stop_at_eof and getattr(driver, "eof", False):
                    break
            elif isinstance(item, LinkEvent):
                flag = b"1" if item.up else b"0"
                log.warning("device link", up=item.up, detail=item.detail)
                self._input(item.t, "link", flag + item.detail.encode())
            else:
                t, data = item
                if self._replay:
                    self._data_clock = (t, time.monotonic())
                self._input(t, "rx", data)
            while True:
                try:
                    cmd = self._commands.get_nowait()
                except queue.Empty:
                    break
                if self.verifier is not None:
                    error = self.verifier.check(cmd, time.time())
                    if error is not None:
                        log.warning("command refused", id=cmd.get("id"), error=error)
                        cmd = {"id": cmd.get("id"), "cmd": "_reject", "error": error}
                self._input(self._now(), "cmd", json.dumps(cmd, separators=(",", ":")).encode())
            engine = self.engine
            assert engine is not None
            now = self._now()
            dl = engine.next_deadline()
            if self._paced and dl is not None and now >= dl:
                self._input(now, "tick", b"")
            if self._reopen.is_set():
                self._reopen.clear()
                for out in self.outputs:
                    reopen = getattr(out, "reopen", None)
                    if reopen is not None:
                        reopen()
            self._pump()
            self.notifier.watchdog()
            if time.monotonic() - last_retention > 3600:
                last_retention = time.monotonic()
                # wall time: the age on disk. Inputs go only below the
                # checkpoint a rebuild starts from; events only once every
                # configured output delivered them.
                journal.retention(
                    cfg.journal_retention_days,
                    now=time.time(),
                    outputs=[o.name for o in self.outputs] + (["mqtt"] if self.mqtt is not None else []),
                    keep_inputs_from=self._checkpoint_input + 1,
                )
        self.notifier.send("STOPPING=1\nSTATUS=draining outputs")
        self._pump()
        return 0

    def _now(self) -> float:
        if self._replay:
            if self._data_clock is None:
                return 0.0
            t, mono = self._data_clock
            return t + (time.monotonic() - mono if self._paced else 0.0)
        return time.time()

    def _input(self, t: float, kind: str, data: bytes) -> None:
        journal = self.journal
        assert journal is not None
        # Applied first, then the input and its events are stored in one
        # transaction, before anything is published: one fsync per read.
        # Should the process die in between, neither is stored: the read is
        # lost as if on the line (the next frame's sequence shows the gap)
        # and the engine rebuilt from the journal never saw it.
        events = self._apply_input(t, kind, data)
        journal.append_input(t, kind, data, events)
        if events:
            self._count(events)
            if self.mqtt is not None:
                self.mqtt.notify()
        self._inputs_since_checkpoint += 1
        # a checkpoint bounds the inputs a rebuild replays; one per shoe and
        # every few hundred inputs keeps that short without a pickle and a
        # third fsync after every coup (the next coup's first card waited)
        if self._inputs_since_checkpoint >= CHECKPOINT_EVERY_INPUTS or any(
            e["type"] == "shoe.ended" for e in events
        ):
            self._checkpoint(journal)

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

    def _close(self) -> None:
        if self.mqtt is not None:
            try:
                self.mqtt.stop(timeout=5.0)
            except Exception as exc:  # closing must not hide the real exit reason
                log.warning("mqtt stop failed", error=str(exc))
        for out in self.outputs:
            try:
                out.close()
            except Exception as exc:
                log.warning("output close failed", output=getattr(out, "name", "?"), error=str(exc))
        if self._driver is not None:
            self._driver.close()
        if self.journal is not None:
            with contextlib.suppress(JournalError):
                self.journal.close()


def run_daemon(cfg: Config, *, install_signals: bool = True, **kw: Any) -> int:
    d = Daemon(cfg, **kw)
    if install_signals:
        d.install_signals()
    return d.run()
