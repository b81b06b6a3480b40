"""The engine's façade: frames, supervisor commands and ticks in, events out.

Sans-IO and deterministic. Time advances only through the timestamps of the
frames and commands fed in (and ``tick(now)`` from the daemon), so a replay
of a capture reproduces a live session event for event, ids included.

Owns the engine's public calls (``feed``, ``tick``, ``command``,
``next_deadline``, ``snapshot``), the frame dispatch (``HANDLERS``: one
handler per frame type, in the module that owns that part of the game),
the fast path's place in ``feed`` (``fast``) and the one place events are
made (``Engine._emit``; ``_emit_card`` and ``_emit_fields`` for the two
types whose dict is built at once, ``card`` and ``coup.result``). The game
itself lives in the sibling modules (see ``controller.engine``'s docstring
for the map).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Literal

from controller.commands_schema import (
    CommandError,
    EngineCommand,
    command_from_dict,
)
from controller.engine import analytics, article_x, boundary, commands, dealing, device, fast, loss, shoe
from controller.engine import settings as engine_settings
from controller.engine.machine import PUBLISHED
from controller.engine.settings import EngineSettings
from controller.engine.state import Coup, Shoe, Work, _Commit, _copy_stats
from controller.event_types import DeviceInfo, Payload, SecurityAlert
from controller.events import SCHEMA_VERSION, Event, format_ts, payload_dict
from controller.rules import Profile
from firmware_protocols.frames import (
    Ack,
    Button,
    Card,
    CutCard,
    DeviceResult,
    DeviceSeen,
    Frame,
    Hello,
    HostRequest,
    Link,
    Renumbered,
    SequenceGap,
    ShuffleCommit,
    ShuffleOrder,
    Status,
)


def _ignore(eng: Engine, f: Frame) -> None:
    return None


#: The handler of each frame type.
HANDLERS: dict[type, Callable[[Any, Any], Work | None]] = {
    Card: dealing.on_card,
    Button: boundary.on_button,
    CutCard: shoe.on_cut,
    Status: device.on_status,
    Hello: device.on_hello,
    SequenceGap: loss.on_gap,
    ShuffleCommit: shoe.on_commit,
    ShuffleOrder: shoe.on_order,
    DeviceResult: boundary.on_device_result,
    Link: device.on_link,
    Renumbered: loss.on_renumbered,
    DeviceSeen: device.on_seen,
    HostRequest: _ignore,
    Ack: _ignore,
}


class Engine:
    """One table's game. Feed it frames, commands and ticks; read events."""

    def __init__(
        self,
        table: str,
        profile: Profile,
        decks: int,
        *,
        odds: bool = False,
        roads: bool = False,
        advantage_threshold: float = 0.0,
        defer_analytics: bool = False,
        settings: EngineSettings | None = None,
    ) -> None:
        """``settings``, when given, stand for ``profile``, ``decks``,
        ``odds`` and ``advantage_threshold`` (``Engine.of``)."""
        if settings is None:
            settings = EngineSettings(profile, decks, odds, advantage_threshold)
        self.table = table
        self.roads = roads
        #: roads, odds and their ADVANTAGE alerts are queued by feed/tick/
        #: command and emitted by ``drain_analytics`` (see there)
        self.defer_analytics = defer_analytics
        self._deferred: list[tuple[Shoe | None, Callable[[], None]]] = []
        # what the settings make: the profile, its rules and tableau, the
        # deck count, the odds calculator (``engine.settings.configure``)
        self.settings: EngineSettings
        self.profile: Profile
        self.decks: int
        self.odds: bool
        self.advantage_threshold: float
        self._calc: Any
        self.rules: dict[str, Any]
        self.tab: Any
        self.deadline_s: float
        self.button: bool
        #: settled outcomes by their facts (``boundary._settled``)
        self._outcomes: dict[tuple[int, int, int, int, bool, bool, bool], boundary.Settled]
        engine_settings.configure(self, settings)
        #: settings given by ``reconfigure`` while a shoe was in progress:
        #: they apply when the next shoe starts
        self._next_settings: EngineSettings | None = None
        #: the settings of the last shoe announced (``shoe.started``), as
        #: ``EngineSettings.summary``: a shoe under others announces them
        self._announced: dict[str, Any] | None = settings.summary()
        self._advantage: set[str] = set()
        self.seq = 0
        self.shoe: Shoe | None = None
        self.device: DeviceInfo = {"model": "", "firmware": "", "serial": ""}
        self._commit: _Commit | None = None
        self._fault_coup: int | None = None  # coup with an open DEVICE_FAULT
        self._fault_waiting: str | None = None  # "ok" (STAT OK clears) | "frame" (next unbroken frame)
        #: frames lost since the last shoe ended (its successor's NEWSHOE and
        #: burn may be among them)
        self._lost_after_shoe = 0
        self._shoe_ids: set[str] = set()
        #: frames lost on the line so far (gaps of known size), and losses of
        #: unknown size (device restarts, gaps that cannot say): bound the
        #: coups a shoe can have lost whole; snapshot when a shoe ends
        self._lost_frames = 0
        self._lost_unknown = 0
        self._loss_at_end = (0, 0)
        self._odds_quiet = False  # coups lost whole are being counted
        self._out: list[Event] = []
        self._handlers = HANDLERS
        #: the roads computed ahead for the coup being dealt, by the results
        #: they are of (``analytics.prepare_roads``)
        self._roads_ahead: analytics.RoadsAhead | None = None
        self._running = False  # inside feed, tick or command (never re-entered)

    @classmethod
    def of(
        cls, table: str, settings: EngineSettings, *, roads: bool = False, defer_analytics: bool = False
    ) -> Engine:
        """An engine dealing under ``settings``."""
        s = settings
        return cls(
            table,
            s.profile,
            s.decks,
            odds=s.odds,
            roads=roads,
            advantage_threshold=s.advantage_threshold,
            defer_analytics=defer_analytics,
            settings=s,
        )

    def reconfigure(self, settings: EngineSettings) -> bool:
        """Deal under ``settings`` from the next shoe: the shoe in progress
        finishes under the settings it started with. At once (True) when no
        shoe has started or the shoe loaded has had no card yet; otherwise
        (False) when the next shoe starts. The first ``shoe.started`` under
        settings other than the last shoe's carries them (``rules``). Called
        between two calls of ``feed``, ``tick`` and ``command``."""
        if self._running:
            self._enter()  # (raises)
        return engine_settings.reconfigure(self, settings)

    @property
    def next_settings(self) -> EngineSettings | None:
        """Settings waiting for the next shoe (``reconfigure``), if any."""
        return self._next_settings

    def feed(self, frame: Frame) -> list[Event]:
        """Apply one decoded frame; returns the events it caused, in order:
        the deadlines it passes, what it tells of the line (frames lost, the
        device back), the frame itself, the bound on held frames."""
        out: list[Event] = []
        self._out = out
        if self._running:
            self._enter()  # (raises)
        self._running = True
        try:
            if self._deferred:
                self._run_deferred()
            # Most frames are a plain card or the RESULT of a clean coup:
            # ``fast`` applies those when its guard says the general path
            # below would do no more than it does (False: it does not apply).
            kind = type(frame)
            work: Work | Literal[False] | None = False
            if kind is Card:
                if fast.ENABLED:
                    work = fast.card(self, frame)  # type: ignore[arg-type]
                    if work is None:
                        return out  # (dealt: nothing held, nothing left to do)
            elif kind is Button and fast.ENABLED:
                work = fast.result(self, frame)  # type: ignore[arg-type]
            if work is False:
                s = self.shoe
                if s is not None and any(c.open for c in s.coups.values()):  # (most frames: none)
                    self._drain(article_x.expire(self, frame.t))
                if isinstance(frame, SequenceGap) and frame.exact and frame.missing > 0:
                    self._lost_frames += frame.missing
                elif isinstance(frame, (SequenceGap, Hello)):  # a loss of unknown size
                    self._lost_unknown += 1
                if self._fault_waiting == "frame" and not isinstance(frame, (Link, SequenceGap, Hello)):
                    self._drain(device.device_back(self, frame.t))
                work = self._dispatch(frame)
            if work is not None:
                self._drain(work)
            s = self.shoe
            if s is not None and s.current is not None and s.current.held is not None:
                self._drain(loss.bound_held(self, frame.t))
        finally:
            self._running = False
        return out

    def _enter(self) -> None:
        """``feed``, ``tick`` and ``command`` are never re-entered (an event
        sink that fed the engine from inside ``_emit`` would interleave two
        frames' handling)."""
        if self._running:
            raise RuntimeError("the engine's dispatcher was re-entered")
        self._running = True

    def _drain(self, work: Work) -> None:
        """The one dispatcher loop: runs an operation to its end. Every frame
        it yields (frames released after a wait) is applied by ``_dispatch``,
        its work pushed on this loop's stack, before the operation that
        yielded it resumes, so events come in the order of the game, and no
        operation applies a frame from inside itself: the Python stack stays
        as deep as one frame's handling, whatever was held."""
        stack = [work]
        try:
            while stack:
                frame = next(stack[-1], None)
                if frame is None:  # that operation is over
                    stack.pop()
                else:
                    more = self._dispatch(frame)
                    if more is not None:
                        stack.append(more)
        finally:
            for rest in reversed(stack):  # (only after an exception)
                rest.close()

    def _dispatch(self, frame: Frame) -> Work | None:
        """Apply one frame, arriving now or released after a wait: what its
        handler has left to do, if anything (a plain card: nothing)."""
        if type(frame) is Renumbered:  # (no frame of the line: nothing waits on it)
            loss.on_renumbered(self, frame)
            return None
        if type(frame) is DeviceSeen:  # (its device.status was sent when it came)
            return device.on_seen(self, frame)
        s = self.shoe
        if (
            s is not None
            and s.burn_unread is not None
            and not isinstance(frame, (Card, HostRequest, Ack))
            and not (isinstance(frame, Status) and not frame.card_unread)
        ):
            # (a status, the link's chatter: nothing of where the unread card goes)
            return shoe.after_burn_unread(self, s, frame)
        cur = s.current if s is not None else None
        if cur is not None and cur.past and boundary.ends_past_wait(frame):
            return self._past_then(cur, frame)
        if (
            s is not None
            and s.after_premature is not None
            and not (
                isinstance(frame, (Card, DeviceResult))
                or (isinstance(frame, Button) and frame.name == "RESULT")
            )
        ):
            return self._flush_then(s, frame)
        return self._handlers[type(frame)](self, frame)

    def _flush_then(self, s: Shoe, frame: Frame) -> Work:
        yield from boundary.flush_after_premature(self, s, frame)
        work = self._handlers[type(frame)](self, frame)
        if work is not None:
            yield from work

    def _past_then(self, coup: Coup, frame: Frame) -> Work:
        assert self.shoe is not None
        waiting, dealt = sum(isinstance(x, Card) for x in coup.past), self.shoe.comp.dealt
        yield from boundary.past_as_extras(self, self.shoe, coup)
        if isinstance(frame, (SequenceGap, Hello)):
            # The cards that waited, the frames lost and what follows them
            # may be one coup (the dealer did not press RESULT: docs/dealing-errors.md,
            # "Dealing errors", four cards or more before the next RESULT
            # are the next coup) or this coup's extra cards: which is not
            # known, so neither is the number of the coups after it.
            loss.lose_past_numbering(self, frame, coup, waiting, dealt)
        work = self._handlers[type(frame)](self, frame)
        if work is not None:
            yield from work

    def tick(self, now: float) -> list[Event]:
        """Let time pass with no frame: fires correction deadlines."""
        out: list[Event] = []
        self._out = out
        self._enter()
        try:
            self._run_deferred()
            self._drain(article_x.expire(self, now))
        finally:
            self._running = False
        return out

    def drain_analytics(self) -> list[Event]:
        """With ``defer_analytics``: the analytics the last ``feed``, ``tick``
        or ``command`` queued (``roads``, ``odds.update`` and the ADVANTAGE
        alerts they raise), computed now on the state captured when they
        were queued, in the order queued; their seqs follow that call's
        events. The daemon commits and publishes a call's events first, then
        drains. Whoever does not drain gets them at the start of the next
        call's events: the same order either way, so the event stream is a
        function of the inputs alone (live, rebuilt or replayed)."""
        out: list[Event] = []
        self._out = out
        self._run_deferred()
        return out

    def _later(self, work: Callable[[], None]) -> None:
        """Analytics work: done now, or queued for ``drain_analytics``."""
        if self.defer_analytics:
            self._deferred.append((self.shoe, work))
        else:
            work()

    def _run_deferred(self) -> None:
        while self._deferred:
            work, self._deferred = self._deferred, []
            for queued_in, fn in work:
                # emitted under the shoe they were queued in (a NEWSHOE may
                # have started another since)
                current, self.shoe = self.shoe, queued_in
                try:
                    fn()
                finally:
                    self.shoe = current

    def command(self, cmd: EngineCommand | Mapping[str, Any], t: float) -> tuple[dict[str, Any], list[Event]]:
        """Apply a supervisor command (docs/operations.md, MQTT), or one of the
        daemon's own, as parsed by ``controller.commands_schema`` (a JSON
        object is parsed by it first). Returns the reply and the events; a
        command that cannot apply changes nothing."""
        self._enter()
        try:
            return self._command(cmd, t)
        finally:
            self._running = False

    def _command(
        self, cmd: EngineCommand | Mapping[str, Any], t: float
    ) -> tuple[dict[str, Any], list[Event]]:
        out: list[Event] = []
        self._out = out
        self._run_deferred()
        self._drain(article_x.expire(self, t))
        if isinstance(cmd, Mapping):
            raw = cmd
            try:
                cmd = command_from_dict(raw)
            except CommandError as exc:
                return {"id": raw.get("id"), "ok": False, "error": str(exc)}, out
        reply: dict[str, Any] = {"id": getattr(cmd, "id", None), "ok": True, "error": None}
        before = len(out)  # what the deadlines emitted stands whatever the command does
        queued = len(self._deferred)
        try:
            work, answer = commands.apply(self, cmd, t)
            if work is not None:
                self._drain(work)
            if answer is not None:  # (the daemon's own: answered as they say)
                return answer, out
        except CommandError as exc:
            reply = {"id": getattr(cmd, "id", None), "ok": False, "error": str(exc)}
            del out[before:]
            del self._deferred[queued:]
        return reply, out

    def next_deadline(self) -> float | None:
        """The earliest correction deadline still open, if any: the daemon
        ticks the engine when it passes."""
        s = self.shoe
        if s is None:
            return None
        deadlines = [
            dl for c in s.coups.values() if not c.resolved for dl in c.open.values() if dl is not None
        ]
        return min(deadlines) if deadlines else None

    def snapshot(self) -> dict[str, Any]:
        """The current shoe's state, for the retained ``shoe/state`` topic,
        with the ``seq`` of the last event it accounts for: the table's own
        order, by which a reader tells a later shoe from an earlier one
        (shoe ids are clock times, and a clock may step back)."""
        s = self.shoe
        if s is None:
            return {
                "table": self.table,
                "shoe": None,
                "seq": self.seq,
                "coup": None,
                "cards_left": None,
                "tally": None,
            }
        return {
            "table": self.table,
            "shoe": s.id,
            "seq": self.seq,
            "state": PUBLISHED[s.phase],
            "coup": s.next_coup - 1,
            "cards_dealt": s.comp.dealt,
            "cards_left": s.comp.cards_left,
            "last_coup": s.last_coup,
            "tally": dict(s.tally),
            "stats": _copy_stats(s.stats),
            "open_misdeals": [
                {"coup": n, "code": code}
                for n, code in sorted((c.number, code) for c in s.coups.values() for code in c.open)
            ],
        }

    def _emit(self, t: float, payload: Payload) -> None:
        self.seq = seq = self.seq + 1
        s = self.shoe
        shoe = s.id if s is not None else None
        ev: Event = {
            "v": SCHEMA_VERSION,
            "type": payload.TYPE,
            "event_id": f"{self.table}/{shoe or '-'}/{seq}",
            "table": self.table,
            "shoe": shoe,
            "seq": seq,
            "ts": format_ts(t),
        }
        ev.update(payload_dict(payload))
        self._out.append(ev)

    def _emit_fields(self, t: float, kind: str, fields: dict[str, Any]) -> None:
        """An event of type ``kind`` whose payload's dict is built by the
        caller, as ``_emit`` would make it of the payload's Struct: its
        fields in declared order, none ``UNSET``
        (``tests/test_engine_fast_path.py`` compares the two)."""
        self.seq = seq = self.seq + 1
        s = self.shoe
        shoe = s.id if s is not None else None
        ev: Event = {
            "v": SCHEMA_VERSION,
            "type": kind,
            "event_id": f"{self.table}/{shoe or '-'}/{seq}",
            "table": self.table,
            "shoe": shoe,
            "seq": seq,
            "ts": format_ts(t),
        }
        ev.update(fields)
        self._out.append(ev)

    def _emit_card(
        self, t: float, coup: int | None, position: str, card: str | None, value: int | None, face_up: bool
    ) -> None:
        """A ``card`` event (:class:`CardEvent`, its ``entered`` left out),
        the dict built at once: ``_emit`` of the Struct makes the same
        dict, at three times the cost, and a shoe is mostly cards
        (``tests/test_engine_fast_path.py`` compares the two). ``fast.card``
        builds the same dict inline."""
        self.seq = seq = self.seq + 1
        s = self.shoe
        shoe = s.id if s is not None else None
        self._out.append(
            {
                "v": SCHEMA_VERSION,
                "type": "card",
                "event_id": f"{self.table}/{shoe or '-'}/{seq}",
                "table": self.table,
                "shoe": shoe,
                "seq": seq,
                "ts": format_ts(t),
                "coup": coup,
                "position": position,
                "card": card,
                "value": value,
                "face_up": face_up,
            }
        )

    def _alert(self, t: float, code: str, detail: str, coup: int | None) -> None:
        self._emit(t, SecurityAlert(code=code, detail=detail, coup=coup))
