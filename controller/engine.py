"""The game engine: frames and supervisor commands in, SPEC section 3 events out.

Sans-IO and deterministic. Time advances only through the timestamps of the
frames and commands fed in (and ``tick(now)`` from the daemon), so a replay
of a capture reproduces a live session event for event, ids included.

What the engine owns:

* the shoe: start, burn (the first card decides how many), cut card, last
  coup, end, composition and the shuffler's secret order;
* each coup: cards to positions by the profile's tableau, the coup boundary
  (the dealer's RESULT, or the completed tableau), settlement by the
  profile's bet table;
* Article X: every deviation is flagged at the frame that reveals it, with
  the profile's correction applied or a supervisor's awaited until the
  deadline, after which the coup is void. A void coup is never settled.

Where the position of a card cannot be known (frames lost, or an unread
card whose value decides the tableau), the engine does not guess: the
coup's further frames are *held* and released in order once a supervisor
has supplied what was missing (``enter_card``, ``accept``); in the meantime
their ``card`` events wait. With the RESULT button, the RESULT that follows
ends what is held for that coup and the next coup is dealt normally.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from controller.cards import CARD_VALUE, RANK_BURN, CardError, ShoeComposition, parse_card
from controller.commands_schema import (
    Accept,
    Alert,
    CommandError,
    EndShoe,
    EngineCommand,
    EnterCard,
    NewShoe,
    Refused,
    Reject,
    Void,
    command_from_dict,
)
from controller.event_types import (
    UNSET,
    CardEvent,
    CoupResult,
    CoupVoid,
    DeviceInfo,
    DeviceStatus,
    Hand,
    Misdeal,
    MisdealAction,
    OddsUpdate,
    Payload,
    RoadsEvent,
    SecurityAlert,
    ShoeBurn,
    ShoeCutCard,
    ShoeEnded,
    ShoeStarted,
    Tally,
)
from controller.events import SCHEMA_VERSION, Event, format_ts, net, payload_dict, shoe_id_for
from controller.rules import Profile, outcome_of, tags_of
from firmware_protocols.frames import (
    Ack,
    Button,
    Card,
    CutCard,
    DeviceResult,
    Frame,
    Hello,
    HostRequest,
    Link,
    SequenceGap,
    ShuffleCommit,
    ShuffleOrder,
    Status,
)

ORDER = ("P1", "B1", "P2", "B2")
UNKNOWN = "?"  # the next position cannot be decided yet
AWAITING: Final = "awaiting_supervisor"

BURN_HANDS = frozenset(("burn", "first", "burn_count"))
FAULT_CODES = frozenset(("JAM", "READER_FAULT", "ERROR"))


def _copy_stats(stats: dict[str, Any]) -> dict[str, Any]:
    return {
        **stats,
        "tags": dict(sorted(stats["tags"].items())),
        "misdeals": dict(sorted(stats["misdeals"].items())),
    }


#: Coup ends counted apart by ``_ends_possible``; more are "several".
_MAX_ENDS = 3

#: Stands for a loss of unknown size (a ``SequenceGap`` that is not
#: ``exact``: ``angel-eye/2``'s short seq cycle cannot tell how many whole
#: cycles were lost): more frames than ``_ends_possible`` needs for every
#: count of coup ends it tells apart, so every count fits. It is never
#: reported as a number (``_frames_lost``).
_UNKNOWN_LOSS = 6 + 1 + 5 * _MAX_ENDS + 6


def _lost(f: SequenceGap) -> int:
    """Frames a gap lost, for counting: its count if exact, else any number."""
    return max(1, f.missing) if f.exact else _UNKNOWN_LOSS


def _frames_lost(n: int) -> str:
    return f"{n} frames lost" if n < _UNKNOWN_LOSS else "frames lost (how many is unknown)"


#: The fewest cards a coup has (two to each hand): what a coup lost whole on
#: the line took from the shoe at least.
MIN_COUP_CARDS = 4

#: The most frames a coup holds while its positions are unknown: its own
#: remaining cards and RESULT, then every later frame of its shoe, kept so
#: they can be placed once a supervisor corrects it (README, "It never
#: guesses"). Only cards, RESULTs, device results, the cut card and gaps are
#: held, and a shoe of 12 decks has at most 624 cards and 156 coups (a RESULT
#: and a device result each): 937 frames. So 1024 lets a hold last out the
#: rest of any shoe, as the deadline means it to, while a device that keeps
#: sending cards (no shoe holds) cannot make the engine buffer without end.
#: The frame past it voids the coup as its deadline would, and what it held
#: is dealt on.
MAX_HELD = 1024

#: The most extra cards a coup lists in its ``coup.void``: every card a shoe
#: can hold (12 decks). Only foreign cards (none of the shoe's own, each
#: raising FOREIGN_CARD), held before the coup is void, can go past it; they
#: are still shown by their own ``card`` events and counted in the detail.
MAX_LISTED_EXTRAS = 12 * 52


def _ends_possible(k: int, need: int, items: list[int], result: bool) -> set[int]:
    """How many coup ends (RESULTs) the frames lost on the line may hold.

    ``k``: the tableau cards read of the coup in play when frames were first
    lost, ``need``: how many more cards it needed at least; ``items``: what
    came since, in order, ``0`` for a card read and ``n > 0`` for ``n``
    frames lost; ``result``: whether a RESULT closes them (else the count is
    open). Every coup has 4 to 6 cards and a RESULT; a frame lost may be
    anything (a card, a RESULT, a status), so more frames than a count needs
    never rule it out. Cards read beyond a complete tableau are extra cards,
    a dealing error in sight: of the counts that fit, those that need the
    fewest of them are kept (one coup of seven cards read is a coup with an
    extra card, not seven cards of two coups). If no count fits, none is
    taken. Counts above ``_MAX_ENDS`` are folded into it."""
    complete = need == 0 and k >= 4  # any card now is an extra card
    states = {(0, k): 0}  # (ends so far, cards of the coup now in play) -> extras read

    def keep(into: dict[tuple[int, int], int], key: tuple[int, int], cost: int) -> None:
        if cost < into.get(key, cost + 1):
            into[key] = cost

    for n in items:
        nxt: dict[tuple[int, int], int] = {}
        for (e, c), cost in states.items():
            if n == 0:
                extra = c >= 6 or (e == 0 and complete)
                keep(nxt, (e, min(6, c + 1)), cost + extra)
                continue
            for add in range(min(n, 6 - c) + 1):
                keep(nxt, (e, c + add), cost)
            # the coup in play still needs what it needed less what it got
            due = max(need - (c - k) if e == 0 else 0, 4 - c)
            if c + due > 6:
                continue
            j = 1
            while (used := due + 1 + 5 * (j - 1)) <= n and e + j <= _MAX_ENDS:
                for c2 in range(min(n - used, 6) + 1):
                    keep(nxt, (e + j, c2), cost)
                j += 1
            if used <= n:  # more ends than counted apart
                keep(nxt, (_MAX_ENDS, 0), cost)
        states = nxt
    fits = {key: cost for key, cost in states.items() if not result or 4 <= key[1] <= 6}
    if not fits:
        return {0}
    least = min(fits.values())
    return {e for (e, _), cost in fits.items() if cost == least}


def _coups(n: int) -> str:
    return f"{n} coup" if n == 1 else f"{n} coups"


@dataclass
class Coup:
    number: int
    demo: bool
    t_start: float
    positions: list[str] = field(default_factory=list)
    cards: list[str | None] = field(default_factory=list)
    #: cards set aside (burned by a correction), kept for coup.void
    extras: list[str | None] = field(default_factory=list)
    extras_unlisted: int = 0  # past MAX_LISTED_EXTRAS: shown, counted, not listed
    #: open misdeals: code -> deadline (None: resolved by the device itself)
    open: dict[str, float | None] = field(default_factory=dict)
    corrections: list[str] = field(default_factory=list)
    void_code: str | None = None
    dealing: bool = True  # still takes cards: no boundary seen yet
    settled: bool = False
    premature: bool = False
    had_unread: bool = False
    overrun: bool = False
    #: frames held while positions are unknown (None: not holding)
    held: list[Frame] | None = None
    gap_missing: int = 0
    lost_frames: bool = False  # a gap (or a device restart) hit this coup
    gap_entered: list[str] = field(default_factory=list)
    #: what the frames lost in a gap may hold (see ``_ends_possible``): the
    #: tableau cards of the coup dealt when they were lost, how many more
    #: cards it needed at least, and the number of the complete coup before
    #: this one whose RESULT the gap may have swallowed (None: this coup's own)
    anchor_k: int = 0
    anchor_need: int = 0
    anchor_prev: int | None = None
    #: the shoe's cards dealt when it opened: where a lost numbering's window starts
    dealt_at_open: int = 0
    #: how many coup ends the gap held, once the first held RESULT told
    ends: int | None = None
    device_result: DeviceResult | None = None
    #: frames for the next coup (the ``next_coup`` extra-card correction)
    carry: list[Frame] = field(default_factory=list)

    @property
    def resolved(self) -> bool:
        return self.settled or self.void_code is not None

    def as_dealt(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = [
            {"position": p, "card": c} for p, c in zip(self.positions, self.cards, strict=True)
        ]
        out.extend({"position": "extra", "card": c} for c in self.extras)
        return out


@dataclass
class Shoe:
    id: str
    t_start: float
    comp: ShoeComposition
    commit: str | None
    order: list[str | None] | None
    phase: str = "burn"  # burn | deal | ended
    first_card: str | None = None
    burn_left: int | None = None  # None: the first card has not come
    burned: int = 0
    next_coup: int = 1
    current: Coup | None = None
    coups: dict[int, Coup] = field(default_factory=dict)  # unresolved or still dealing
    cut_coup: int | None = None
    last_coup: int | None = None
    coups_count: int = 0
    tally: dict[str, int] = field(default_factory=lambda: {"player": 0, "banker": 0, "tie": 0})
    #: face-down burned cards: what a counter cannot see
    burned_cards: list[str] = field(default_factory=list)
    #: settled, non-demo coups in order, for the scoreboard roads
    results: list[dict[str, Any]] = field(default_factory=list)
    stats: dict[str, Any] = field(
        default_factory=lambda: {
            "naturals": 0,
            "player_pairs": 0,
            "banker_pairs": 0,
            "tags": {},
            "void_coups": 0,
            "misdeals": {},
        }
    )
    ended_emitted: bool = False
    announced: bool = False
    ending: bool = False  # _end_shoe is running
    #: cards after a coup settled on its due card following an early RESULT,
    #: until the dealer's second RESULT or a fourth card tells what they are
    after_premature: list[Card] | None = None
    after_premature_coup: int = 0
    #: set when that coup is void: a second RESULT before a fourth card
    #: says the cards between were its own (due cards after an early press)
    after_premature_void: Coup | None = None
    ended_by_rule: bool = False  # its last permitted coup was dealt
    #: frames lost on the line may have held a coup's end, or not: the number
    #: of every later coup is unknown (each is void) until a supervisor says it
    numbering_lost: str | None = None
    renumber_to: int | None = None  # the supervisor's number for the next coup
    #: from where the numbering is lost (``Engine._renumber_range``): the
    #: first coup whose number may be wrong and the shoe's cards dealt before
    #: it (None: lost before this was kept, by a checkpoint)
    window: tuple[int, int] | None = None
    #: the engine's counts of frames lost on the line and of losses of
    #: unknown size (device restarts) when this shoe's losses began to count
    loss_mark: tuple[int, int] = (0, 0)
    dealing_over: bool = False  # the last permitted coup has finished dealing


@dataclass
class _Commit:
    shoe_id: str
    ncards: int
    sha256: str
    order: list[str | None]
    received: int = 0
    valid: bool = True


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
    ) -> None:
        if not 1 <= decks <= 12:
            raise ValueError(f"decks must be 1..12, not {decks}")
        self.table = table
        self.profile = profile
        self.decks = decks
        self.odds = odds
        self.roads = roads
        self.advantage_threshold = advantage_threshold
        #: roads, odds and their ADVANTAGE alerts are queued by feed/tick/
        #: command and emitted by ``drain_analytics`` (see there)
        self.defer_analytics = defer_analytics
        self._deferred: list[tuple[Shoe | None, Callable[[], None]]] = []
        self._calc: Any = None
        if odds:
            from controller.odds import OddsCalculator  # tables built once per profile

            self._calc = OddsCalculator.for_profile(profile)
        self._advantage: set[str] = set()
        self.rules = profile.rules
        self.tab = profile.tableau
        self.deadline_s = float(self.rules["correction_deadline_s"])
        self.button = self.rules["coup_boundary"] == "button"
        self.seq = 0
        self.shoe: Shoe | None = None
        self.device: DeviceInfo = {"model": "", "firmware": "", "serial": ""}
        self._commit: _Commit | None = None
        self._fault_coup: int | None = None  # coup with an open DEVICE_FAULT
        self._fault_waiting: str | None = None  # "ok" (STAT OK clears) | "frame" (next unbroken frame)
        self._after_void: list[Frame] = []
        #: frames lost since the last shoe ended (its successor's NEWSHOE and
        #: burn may be among them)
        self._lost_after_shoe = 0
        self._phantom: list[Frame] = []
        self._phantom_before = 0  # coups lost whole before the phantom
        self._shoe_ids: set[str] = set()
        #: frames lost on the line so far (gaps of known size), and losses of
        #: unknown size (device restarts, gaps that cannot say): bound the
        #: coups a shoe can have lost whole; snapshot when a shoe ends
        self._lost_frames = 0
        self._lost_unknown = 0
        self._loss_at_end = (0, 0)
        self._odds_quiet = False  # coups lost whole are being counted
        self._out: list[Event] = []
        self._handlers = self._make_handlers()

    def _make_handlers(self) -> dict[type, Any]:
        return {
            Card: self._on_card,
            Button: self._on_button,
            CutCard: self._on_cut,
            Status: self._on_status,
            Hello: self._on_hello,
            SequenceGap: self._on_gap,
            ShuffleCommit: self._on_commit,
            ShuffleOrder: self._on_order,
            DeviceResult: self._on_device_result,
            Link: self._on_link,
            HostRequest: self._ignore,
            Ack: self._ignore,
        }

    # ------------------------------------------------------------------ API

    def feed(self, frame: Frame) -> list[Event]:
        """Apply one decoded frame; returns the events it caused, in order."""
        out: list[Event] = []
        self._out = out
        self._run_deferred()
        self._expire(frame.t)
        if isinstance(frame, SequenceGap) and frame.exact and frame.missing > 0:
            self._lost_frames += frame.missing
        elif isinstance(frame, (SequenceGap, Hello)):  # a loss of unknown size
            self._lost_unknown += 1
        if self._fault_waiting == "frame" and not isinstance(frame, (Link, SequenceGap, Hello)):
            self._device_back(frame.t)
        self._dispatch(frame)
        self._bound_held(frame.t)
        return out

    def _dispatch(self, frame: Frame) -> None:
        """Apply one frame, arriving now or released after a wait."""
        s = self.shoe
        if (
            s is not None
            and s.after_premature is not None
            and not (
                isinstance(frame, (Card, DeviceResult))
                or (isinstance(frame, Button) and frame.name == "RESULT")
            )
        ):
            self._flush_after_premature(s)
        self._handlers[type(frame)](frame)

    def tick(self, now: float) -> list[Event]:
        """Let time pass with no frame: fires correction deadlines."""
        out: list[Event] = []
        self._out = out
        self._run_deferred()
        self._expire(now)
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
            for shoe, fn in work:
                # emitted under the shoe they were queued in (a NEWSHOE may
                # have started another since)
                current, self.shoe = self.shoe, shoe
                try:
                    fn()
                finally:
                    self.shoe = current

    def command(self, cmd: EngineCommand | Mapping[str, Any], t: float) -> tuple[dict[str, Any], list[Event]]:
        """Apply a supervisor command (SPEC section 5), or one of the
        daemon's own, as parsed by ``controller.commands_schema`` (a JSON
        object is parsed by it first). Returns the reply and the events; a
        command that cannot apply changes nothing."""
        out: list[Event] = []
        self._out = out
        self._run_deferred()
        self._expire(t)
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
            match cmd:
                case Void():
                    self._cmd_void(self._coup_arg(cmd.coup), cmd.reason, t)
                case EnterCard():
                    self._cmd_enter_card(self._coup_arg(cmd.coup), cmd.card, t)
                case Accept():
                    s = self.shoe
                    n = cmd.coup
                    if s is not None and s.numbering_lost is not None and n not in s.coups:
                        self._cmd_renumber(s, n, t)
                    else:
                        self._cmd_accept(self._coup_arg(cmd.coup), t)
                case NewShoe():
                    self._new_shoe(t)
                case EndShoe():
                    self._cmd_end_shoe(t)
                case Reject():
                    # the daemon refused it (origin check): journalled like any
                    # command so a rebuild reproduces the alert
                    error = cmd.error or "command refused"
                    coup = self.shoe.current.number if self.shoe is not None and self.shoe.current else None
                    self._alert(t, "COMMAND_REJECTED", f"command {cmd.id!r}: {error}", coup)
                    return {"id": cmd.id, "ok": False, "error": error}, out
                case Alert():
                    # raised by the daemon itself (its journal lost history, an
                    # output failing), journalled like any command so a rebuild
                    # reproduces it; ``seq_above`` starts a new epoch of event
                    # seqs above every id already issued
                    floor = cmd.seq_above
                    if isinstance(floor, int) and floor > self.seq:
                        self.seq = floor
                    self._alert(t, cmd.code, cmd.detail, None)
                    return {"id": cmd.id, "ok": True, "error": None}, out
                case Refused():
                    # the daemon's one alert per window for the commands it
                    # refused after the first and those over its bounds
                    refused, dropped = cmd.refused, cmd.dropped
                    coup = self.shoe.current.number if self.shoe is not None and self.shoe.current else None
                    detail = (
                        f"{refused} more command(s) refused and {dropped} dropped unread in the last"
                        f" {cmd.window_s} s (limits: {cmd.limits})"
                    )
                    self._alert(t, "COMMAND_REJECTED", detail, coup)
                    return {"id": None, "ok": False, "error": detail}, out
                case _:
                    raise CommandError(f"unknown command {cmd!r}")
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
        """The current shoe's state, for the retained ``shoe/state`` topic."""
        s = self.shoe
        if s is None:
            return {"table": self.table, "shoe": None, "coup": None, "cards_left": None, "tally": None}
        return {
            "table": self.table,
            "shoe": s.id,
            "state": s.phase if not s.ended_emitted else "ended",
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

    # -------------------------------------------------------------- helpers

    def _emit(self, t: float, payload: Payload) -> None:
        self.seq += 1
        shoe = self.shoe.id if self.shoe is not None else None
        ev: Event = {
            "v": SCHEMA_VERSION,
            "type": payload.TYPE,
            "event_id": f"{self.table}/{shoe or '-'}/{self.seq}",
            "table": self.table,
            "shoe": shoe,
            "seq": self.seq,
            "ts": format_ts(t),
        }
        ev.update(payload_dict(payload))
        self._out.append(ev)

    def _alert(self, t: float, code: str, detail: str, coup: int | None) -> None:
        self._emit(t, SecurityAlert(code=code, detail=detail, coup=coup))

    def _misdeal(self, t: float, coup: Coup, code: str, detail: str, action: MisdealAction) -> None:
        if self.shoe is not None:
            counts = self.shoe.stats["misdeals"]
            counts[code] = counts.get(code, 0) + (action != "corrected")
        deadline = None
        if action == AWAITING:
            # a second error of the same kind does not push the deadline back
            dl = min(coup.open.get(code) or t + self.deadline_s, t + self.deadline_s)
            coup.open[code] = dl
            deadline = format_ts(dl)
        self._emit(
            t,
            Misdeal(coup=coup.number, code=code, detail=detail, action=action, deadline=deadline),
        )

    def _open_device_wait(self, t: float, coup: Coup, code: str, detail: str) -> None:
        """A misdeal the device itself can clear, with the deadline still running."""
        if code not in coup.open:
            self._misdeal(t, coup, code, detail, AWAITING)

    def _correct(self, t: float, coup: Coup, code: str, detail: str) -> None:
        coup.open.pop(code, None)
        if code not in coup.corrections:
            coup.corrections.append(code)
        self._emit(
            t,
            Misdeal(coup=coup.number, code=code, detail=detail, action="corrected", deadline=None),
        )

    # ---------------------------------------------------------------- shoe

    def _start_shoe(self, t: float) -> Shoe:
        # ids are never reused, even if the clock steps back (NTP, a capture
        # whose times go back): event ids are <table>/<shoe>/<seq>
        base = sid = shoe_id_for(t)
        n = 1
        while sid in self._shoe_ids:
            n += 1
            sid = f"{base}.{n}"
        self._shoe_ids.add(sid)
        shoe = Shoe(id=sid, t_start=t, comp=ShoeComposition(self.decks), commit=None, order=None)
        shoe.loss_mark = (self._lost_frames, self._lost_unknown)
        self.shoe = shoe
        self._lost_after_shoe = 0
        return shoe

    def _start_shoe_unseen(self, t: float) -> Shoe:
        """A card after frames were lost once a shoe had ended: the next
        shoe's NEWSHOE and burn may have been lost with them (or this is a
        card past the last coup). Either way nothing of it can be settled
        before a supervisor says where the shoe stands: it starts here, its
        burn unchecked and its numbering lost."""
        lost = self._lost_after_shoe
        s = self._start_shoe(t)
        # its first coups were among the frames lost since the shoe before ended
        s.window, s.loss_mark = (1, 0), self._loss_at_end
        self._announce(s)
        s.phase = "deal"
        detail = (
            f"{_frames_lost(lost)} after the last shoe ended: this shoe's NEWSHOE and burn may be among them"
        )
        self._alert(t, "BURN_MISMATCH", detail + "; its burn is not checked", None)
        s.numbering_lost = detail
        self._alert(
            t,
            "COUP_NUMBERING_LOST",
            detail + ": every coup of this shoe is void until a supervisor sends accept with the number of "
            "the next coup to be dealt, or a new shoe starts",
            None,
        )
        return s

    def _announce(self, s: Shoe) -> None:
        """``shoe.started``, stamped with the shoe's start, once its first
        card comes: a shuffler may send its commitment before or after the
        dealer's NEWSHOE, and the shoe takes whichever came by then."""
        if s.announced:
            return
        s.announced = True
        commit, self._commit = self._commit, None
        if commit is not None:
            s.commit = commit.sha256
            s.order = commit.order if commit.valid and commit.received >= commit.ncards else None
        self._emit(
            s.t_start,
            ShoeStarted(decks=self.decks, profile=self.profile.name, shuffle_commit=s.commit),
        )

    def _new_shoe(self, t: float) -> None:
        if self.shoe is not None:
            self._end_shoe(t, reason="new shoe loaded")
        self._start_shoe(t)

    def _end_shoe(self, t: float, reason: str) -> None:
        s = self.shoe
        if s is None or s.ended_emitted or s.ending:
            return
        s.ending = True
        s.ended_by_rule = reason == "last coup dealt"
        self._announce(s)
        # Void what is still open, lowest first. Frames a voided coup held
        # past its RESULT are dealt on (they were dealt before this shoe
        # ended), which may open, settle or leave open further coups: loop.
        while True:
            if s.after_premature is not None:
                self._flush_after_premature(s)
            cur = s.current
            if cur is not None and cur.resolved and cur.held is not None:
                # a void coup still dealt, holding frames to tell whose they
                # are: with the shoe ending, its held cards are its extras
                held, cur.held = cur.held, None
                for x in held:
                    if isinstance(x, Card):
                        self._set_aside(s, cur, x)
            if cur is not None and cur.resolved and cur.carry:
                # a card set aside to open the next coup: it opens it now
                carry, cur.carry = cur.carry, []
                cur.dealing = False
                s.current = None
                self._refeed(carry)
                continue
            pending = sorted((c for c in s.coups.values() if not c.resolved), key=lambda c: c.number)
            if not pending:
                break
            coup = pending[0]
            detail = f"{reason} before coup {coup.number} was settled"
            self._misdeal(t, coup, "SHOE_ENDED", detail, "void")
            self._void(t, coup, "SHOE_ENDED", detail)
        s.coups.clear()
        s.current = None
        s.phase = "ended"
        s.ended_emitted = True
        self._loss_at_end = (self._lost_frames, self._lost_unknown)
        self._emit(
            t,
            ShoeEnded(
                coups=s.coups_count,
                # false: frames lost may have held whole coups, so ``coups``
                # counts those seen (the numbering was never given back)
                coups_exact=s.numbering_lost is None,
                cards_dealt=s.comp.dealt,
                tally=Tally(player=s.tally["player"], banker=s.tally["banker"], tie=s.tally["tie"]),
                reason=reason,
                stats=_copy_stats(s.stats),
            ),
        )

    def _maybe_finish_shoe(self, t: float) -> None:
        s = self.shoe
        if s is None or not s.dealing_over or s.ended_emitted or s.ending:
            return
        if any(not c.resolved for c in s.coups.values() if not c.overrun):
            return
        self._end_shoe(t, reason="last coup dealt")
        # overrun coups after the end still belong to this shoe
        s.phase = "ended"

    # ---------------------------------------------------------------- cards

    def _on_card(self, f: Card) -> None:
        s = self.shoe
        if s is not None and f.hand == "first" and s.phase != "ended":
            # An Angel Eye marks a new shoe's first card itself (it has no
            # NEWSHOE button): the shoe in play has ended, whatever it still
            # waited for (a due card after an early RESULT, frames held
            # after a gap, its last coup)
            self._new_shoe(f.t)
            s = self.shoe
        if s is not None and s.current is not None and s.current.held is not None:
            s.current.held.append(f)
            return
        if not f.game:
            self._out_of_game_card(f)
            return
        if s is not None and s.after_premature is not None:
            s.after_premature.append(f)
            # (after a void coup's early RESULT, the next RESULT decides)
            if len(s.after_premature) >= (8 if s.after_premature_void is not None else 4):
                self._flush_after_premature(s)
            return
        if s is not None and s.phase == "ended" and self._lost_after_shoe and f.hand != "first":
            s = self._start_shoe_unseen(f.t)
        elif s is None or (s.phase == "ended" and (f.hand == "first" or not s.ended_by_rule)):
            # A shoe with no NEWSHOE button starts at its first card (Angel
            # Eye marks that card itself). A shoe that ended by its cut card
            # does not: a card after its last coup is CUT_CARD_OVERRUN.
            s = self._start_shoe(f.t)
        self._announce(s)
        if s.phase == "burn":
            self._burn_card(s, f)
            return
        coup = s.current
        if coup is None or not coup.dealing:
            coup = self._open_coup(s, f.t)
        self._deal(s, coup, f)

    def _take(self, s: Shoe, f: Card, coup: Coup | None) -> tuple[str, str] | None:
        """Remove the card from the composition. Returns ``(code, detail)``
        for a card this shoe cannot hold (FOREIGN_CARD) or one that departs
        from the shuffler's order (SHUFFLE_MISMATCH), after alerting; the
        caller decides what it does to the coup."""
        index = s.comp.dealt
        where = coup.number if coup is not None else None
        foreign_deck = f.deck is not None and not 1 <= f.deck <= self.decks
        empty = s.comp.cards_left <= 0
        # a foreign-deck card left the shoe but is none of the shoe's own copies
        ok = True if foreign_deck else s.comp.take(f.card)
        if not ok or foreign_deck:
            if foreign_deck:
                what = f"{f.card} from deck {f.deck}, not in this {self.decks}-deck shoe"
            elif empty:
                what = f"{f.card or 'an unread card'} after every card of this {self.decks}-deck shoe"
                what += " was dealt"
            else:
                what = f"{f.card}: more copies than {self.decks} deck(s) hold"
            self._alert(f.t, "FOREIGN_CARD", what, where)
            return "FOREIGN_CARD", what
        if s.order and f.card is not None and index < len(s.order) and s.order[index] != f.card:
            detail = f"card {index + 1} of the shoe differs from the shuffler's order"
            self._alert(f.t, "SHUFFLE_MISMATCH", detail, where)
            return "SHUFFLE_MISMATCH", detail
        return None

    def _void_for(self, t: float, coup: Coup, problem: tuple[str, str] | None) -> None:
        if problem is not None and not coup.resolved:
            code, detail = problem
            self._misdeal(t, coup, code, detail, "void")
            self._void(t, coup, code, detail)

    def _card_event(self, f: Card, coup: int | None, position: str) -> None:
        self._emit(
            f.t,
            CardEvent(
                coup=coup,
                position=position,  # type: ignore[arg-type]
                card=f.card,
                value=CARD_VALUE[f.card] if f.card is not None else None,
                face_up=f.face_up,
            ),
        )

    def _out_of_game_card(self, f: Card) -> None:
        s = self.shoe
        coup = s.current.number if s is not None and s.current is not None else None
        if s is not None:
            s.comp.take(f.card)
        self._card_event(f, coup, "extra")
        self._alert(f.t, "CARD_OUT_OF_GAME", "the device reports a card drawn while locked or in error", coup)

    def _burn_card(self, s: Shoe, f: Card) -> None:
        if f.hand is not None and f.hand not in BURN_HANDS:
            self._alert(
                f.t, "BURN_MISMATCH", f"the device placed a card on {f.hand} during the burn", s.next_coup
            )
        self._take(s, f, None)  # alerts only: the burn belongs to no coup
        self._card_event(f, None, "burn")
        if s.burn_left is None:
            s.first_card = f.card
            if f.card is None:
                # the burn count is unknowable: hold coup 1 until a supervisor
                # enters the first card
                coup = self._open_coup(s, f.t)
                coup.held = []
                coup.had_unread = True
                self._misdeal(
                    f.t, coup, "UNREAD_CARD", "the first (burn) card was unread: burn count unknown", AWAITING
                )
                s.phase = "burn-unknown"
                return
            s.burn_left = self.profile.burn_count(RANK_BURN[f.card[0]], self.decks)
        else:
            s.burned += 1
            s.burn_left -= 1
            if f.card is not None:
                s.burned_cards.append(f.card)
        if s.burn_left == 0:
            self._finish_burn(s, f.t)

    def _finish_burn(self, s: Shoe, t: float) -> None:
        s.phase = "deal"
        self._emit(t, ShoeBurn(first_card=s.first_card, burned=s.burned))
        self._publish_odds(t)

    def _open_coup(self, s: Shoe, t: float) -> Coup:
        if s.renumber_to is not None:
            target, s.renumber_to = s.renumber_to, None
            high, why = self._renumber_range(s)
            if target > high:
                # only a checkpoint written before the range was checked can
                # hold one: refused as the command would be now
                s.numbering_lost = f"the supervisor's number {target} is out of range ({why})"
                self._alert(
                    t,
                    "COMMAND_REJECTED",
                    f"accept {target}: the next coup is {s.next_coup} to {high} ({why}); "
                    "the numbering stays lost",
                    None,
                )
            elif s.next_coup < target:
                # each is void with no card; the odds are those of the coup
                # after the last of them, published once
                self._odds_quiet = True
                try:
                    while s.next_coup < target:
                        self._void_lost_whole(s, t)
                finally:
                    self._odds_quiet = False
                self._publish_odds(t)
        n = s.next_coup
        s.next_coup += 1
        s.coups_count += 1
        coup = Coup(number=n, demo=n <= int(self.rules["demo_coups"]), t_start=t)
        coup.dealt_at_open = s.comp.dealt
        s.coups[n] = coup
        s.current = coup
        if s.last_coup is not None and n > s.last_coup:
            coup.overrun = True
            detail = f"coup {n} started after the last permitted coup {s.last_coup}"
            self._misdeal(t, coup, "CUT_CARD_OVERRUN", detail, "void")
            self._void(t, coup, "CUT_CARD_OVERRUN", detail)
        elif s.numbering_lost is not None:
            detail = f"this coup's number is unknown: {s.numbering_lost}"
            self._misdeal(t, coup, "SEQUENCE_GAP", detail, "void")
            self._void(t, coup, "SEQUENCE_GAP", detail)
        return coup

    def _void_lost_whole(self, s: Shoe, t: float) -> None:
        """A coup the supervisor's numbering says was dealt while its frames
        were lost: counted, and void (nothing of it was read)."""
        n = s.next_coup
        s.next_coup += 1
        s.coups_count += 1
        coup = Coup(number=n, demo=n <= int(self.rules["demo_coups"]), t_start=t, dealing=False)
        s.coups[n] = coup
        detail = "lost whole on the line; counted by the supervisor's numbering"
        self._misdeal(t, coup, "SEQUENCE_GAP", detail, "void")
        self._void(t, coup, "SEQUENCE_GAP", detail)

    def _next_position(self, coup: Coup) -> str | None:
        """The tableau's next position, None when complete, UNKNOWN when an
        unread card decides it."""
        n = len(coup.cards)
        if n < 4:
            return ORDER[n]
        c = coup.cards
        if c[0] is None or c[1] is None or c[2] is None or c[3] is None:
            return UNKNOWN
        p = (CARD_VALUE[c[0]] + CARD_VALUE[c[2]]) % 10
        b = (CARD_VALUE[c[1]] + CARD_VALUE[c[3]]) % 10
        tab = self.tab
        if tab.natural[p] or tab.natural[b]:
            return None
        if tab.player_draws[p]:
            if n == 4:
                return "P3"
            p3 = c[4]
            if p3 is None:
                return UNKNOWN
            if tab.banker_draws[b][CARD_VALUE[p3]]:
                return "B3" if n == 5 else None
            return None
        if tab.banker_draws_stood[b]:
            return "B3" if n == 4 else None
        return None

    def _tableau_exact(self, cards: list[str | None]) -> bool:
        """Whether these cards, dealt in order, make one complete tableau with
        none left over (an unread card: not known, so no)."""
        trial = Coup(number=0, demo=False, t_start=0.0)
        for c in cards:
            pos = self._next_position(trial)
            if pos is None or pos == UNKNOWN or c is None:
                return False
            trial.positions.append(pos)
            trial.cards.append(c)
        return self._next_position(trial) is None

    def _after_void_early_result(
        self, s: Shoe, void: Coup, cards: list[Card], f: Button | DeviceResult
    ) -> None:
        """The RESULT after a void coup's early one: the cards between were
        its due cards (this is the dealer's second RESULT), or the next
        coup's (the first RESULT ended the void coup), or its due cards and
        then the next coup's. The tableau tells which, when only one fits."""
        trial = Coup(
            number=0, demo=False, t_start=0.0, positions=list(void.positions), cards=list(void.cards)
        )
        due = 0
        for c in cards:
            pos = self._next_position(trial)
            if pos is None or pos == UNKNOWN:
                break
            trial.positions.append(pos)
            trial.cards.append(c.card)
            due += 1
        codes = [c.card for c in cards]
        next_only = self._tableau_exact(codes)  # the first RESULT ended the void coup
        after_due = 0 < due < len(cards) and self._tableau_exact(codes[due:])
        if not next_only and not after_due and len(cards) < 4:
            after_due, due = False, len(cards)  # its due cards (and extras), then the second RESULT
        elif not after_due:
            due = 0
        for c in cards[:due]:
            self._deal_void(s, void, c)
        rest = cards[due:]
        if not rest:
            return  # the dealer's second RESULT
        for c in rest:
            self._on_card(c)
        coup = s.current
        if coup is not None and not coup.resolved and next_only == after_due:
            detail = (
                f"coup {void.number} had its RESULT with a card due: whether the cards after it were its due "
                "cards or this coup's cannot be told from them"
            )
            self._misdeal(f.t, coup, "PREMATURE_RESULT", detail, "void")
            self._void(f.t, coup, "PREMATURE_RESULT", detail)
        self._result(f)

    def _flush_after_premature(self, s: Shoe) -> None:
        """The cards after an early-RESULT coup were the next coup's."""
        cards, s.after_premature = s.after_premature or [], None
        void, s.after_premature_void = s.after_premature_void, None
        for c in cards:
            self._on_card(c)
        coup = s.current
        if void is not None and coup is not None and cards and coup.number == void.number + 1:
            # no second RESULT: the first of these cards may have been the
            # void coup's due card, so this coup's hands are not known
            detail = (
                f"coup {void.number} had its RESULT with a card due and no second RESULT followed: "
                "this coup's first card may be its due card"
            )
            self._misdeal(cards[0].t, coup, "PREMATURE_RESULT", detail, "void")
            self._void(cards[0].t, coup, "PREMATURE_RESULT", detail)

    def _complete_whatever_unread(self, coup: Coup, *, some: bool = False) -> bool:
        """True if the tableau is complete for every value of the coup's
        unread cards (``some``: for at least one); at most two are tried
        (100 cases), more are never complete for every value and may be for
        some."""
        holes = [i for i, c in enumerate(coup.cards) if c is None]
        if len(holes) > 2:
            return some
        stand_in = "TA23456789"  # a card of each point value 0..9
        saved = list(coup.cards)
        try:
            for values in itertools.product(range(10), repeat=len(holes)):
                for i, v in zip(holes, values, strict=True):
                    coup.cards[i] = stand_in[v] + "S"
                if (self._next_position(coup) is None) == some:
                    return some
            return not some
        finally:
            coup.cards[:] = saved

    def _set_aside(self, s: Shoe, coup: Coup, f: Card) -> tuple[str, str] | None:
        """A card that left the shoe in ``coup`` with no position: taken from
        the composition and shown as the coup's ``extra`` card."""
        problem = self._take(s, f, coup)
        if len(coup.extras) < MAX_LISTED_EXTRAS:
            coup.extras.append(f.card)
        else:
            coup.extras_unlisted += 1
        self._card_event(f, coup.number, "extra")
        return problem

    def _deal_void(self, s: Shoe, coup: Coup, f: Card) -> None:
        """A card of a void coup: shown where the tableau puts it, or as an
        extra card once it is complete (or an unread card decides it)."""
        pos = self._next_position(coup)
        if pos is None or pos == UNKNOWN:
            self._set_aside(s, coup, f)
            return
        self._take(s, f, coup)
        coup.positions.append(pos)
        coup.cards.append(f.card)
        self._card_event(f, coup.number, pos)

    def _deal(self, s: Shoe, coup: Coup, f: Card) -> None:
        if f.hand in BURN_HANDS:
            self._alert(
                f.t, "BURN_MISMATCH", f"the device reports {f.hand} during coup {coup.number}", coup.number
            )
        if coup.void_code is not None:
            # a void coup keeps its cards until its boundary, none settled
            placed = len(coup.cards)
            self._deal_void(s, coup, f)
            if len(coup.cards) > placed and not self.button and self._next_position(coup) is None:
                self._close_dealing(coup, f.t)
            return
        pos = self._next_position(coup)
        if pos == UNKNOWN:
            coup.held = [f]
            return
        if pos is None:
            self._extra_card(s, coup, f)
            return
        problem = self._take(s, f, coup)
        coup.positions.append(pos)
        coup.cards.append(f.card)
        self._card_event(f, coup.number, pos)
        if problem is not None:
            self._void_for(f.t, coup, problem)
            if not self.button:
                self._close_dealing(coup, f.t)
            return
        if f.card is None:
            coup.had_unread = True
            self._misdeal(f.t, coup, "UNREAD_CARD", f"{pos} passed the reader unread", AWAITING)
        if f.hand is not None and f.hand != pos and f.hand not in BURN_HANDS:
            self._misdeal(
                f.t,
                coup,
                "WRONG_HAND",
                f"the device placed the card on {f.hand}; the tableau's next position is {pos}",
                AWAITING,
            )
        nxt = self._next_position(coup)
        if nxt is None:
            if coup.premature:
                coup.premature = False
                self._correct(f.t, coup, "PREMATURE_RESULT", "the due card was dealt after an early RESULT")
                self._close_dealing(coup, f.t)
                if self.button and s.after_premature is None:
                    # the dealer usually presses RESULT again: cards before it
                    # are extra cards of this coup, four are the next coup
                    s.after_premature = []
                    s.after_premature_coup = coup.number
            elif not self.button or not coup.dealing:
                self._close_dealing(coup, f.t)
        elif s.comp.cards_left == 0:
            detail = f"the shoe ran out with {nxt} still due"
            self._misdeal(f.t, coup, "SHOE_EXHAUSTED", detail, "void")
            self._void(f.t, coup, "SHOE_EXHAUSTED", detail)

    def _extra_card(self, s: Shoe, coup: Coup, f: Card) -> None:
        """A card after the tableau completed, before the dealer's RESULT."""
        policy = self.rules["extra_card"]
        if not coup.dealing:
            policy = "burn"  # its coup is over; nothing else is possible
        detail = f"a card ({f.card or 'unread'}) left the shoe after the tableau was complete"
        if policy == "next_coup" and not coup.carry:
            # dealt (and checked) as the first card of the next coup once the
            # dealer's RESULT closes this one
            coup.carry.append(f)
            self._correct(f.t, coup, "EXTRA_CARD", detail + "; it opens the next coup")
            return
        problem = self._set_aside(s, coup, f)
        if problem is not None:
            self._void_for(f.t, coup, problem)
        elif policy == "void":
            self._misdeal(f.t, coup, "EXTRA_CARD", detail, "void")
            self._void(f.t, coup, "EXTRA_CARD", detail)
        else:
            self._correct(f.t, coup, "EXTRA_CARD", detail + "; burned")

    # ----------------------------------------------------------- boundaries

    def _on_button(self, f: Button) -> None:
        if f.name == "NEWSHOE":
            self._new_shoe(f.t)
        elif f.name == "RESULT":
            self._result(f)
        elif f.name == "REDEAL":
            s = self.shoe
            if s is not None and s.current is not None and s.current.dealing and not s.current.resolved:
                coup = s.current
                self._misdeal(f.t, coup, "REDEAL", "the device announced a re-deal", "void")
                self._void(f.t, coup, "REDEAL", "the device announced a re-deal")
                self._close_dealing(coup, f.t)
        # STANDBY and unknown buttons carry no game meaning

    def _result(self, f: Button | DeviceResult) -> None:
        s = self.shoe
        if s is not None and s.after_premature is not None:
            # the dealer's second RESULT: what came between were extra cards
            # of the coup already settled (burned, as the profile's policy
            # cannot apply to a settled coup)
            extras, s.after_premature = s.after_premature, None
            prev = s.after_premature_coup
            void, s.after_premature_void = s.after_premature_void, None
            if void is not None:
                self._after_void_early_result(s, void, extras, f)
                return
            for c in extras:
                # the coup stands settled: no misdeal on it, but the card is
                # shown and surveillance is told (a foreign one alerts in _take)
                if self._take(s, c, None) is None:
                    self._alert(
                        c.t,
                        "EXTRA_CARD",
                        f"a card ({c.card or 'unread'}) after the due card of coup {prev}, "
                        "before the dealer's second RESULT; burned",
                        prev,
                    )
                self._card_event(c, prev, "extra")
            return
        coup = s.current if s is not None else None
        if s is not None and s.phase == "burn" and coup is None:
            self._alert(f.t, "BURN_MISMATCH", "RESULT pressed before the burn was complete", s.next_coup)
        if s is None or coup is None or not coup.dealing:
            return
        if not self.button:
            return
        if coup.held is not None:
            if (
                coup.void_code is not None or (coup.anchor_prev is not None and coup.ends is None)
            ) and not any(isinstance(x, (Button, DeviceResult)) for x in coup.held):
                self._ends_at_result(coup, f)
                return
            # Held too: it is the boundary only if it was not pressed early,
            # which the missing card will tell.
            coup.held.append(f)
            return
        if coup.void_code is not None:
            nxt = self._next_position(coup)
            self._close_dealing(coup, f.t)
            if (
                nxt is not None
                and nxt != UNKNOWN
                and len(coup.cards) >= 4
                and s.after_premature is None
                and not coup.lost_frames  # (its tableau is then not known)
                and s.numbering_lost is None  # (no number to keep)
            ):
                # Pressed early, or the dealer stopped dealing the void coup:
                # a second RESULT before a fourth card says the cards between
                # were its due cards (counted as a coup of their own they
                # would shift every later number); a fourth card, the next coup.
                s.after_premature = []
                s.after_premature_coup = coup.number
                s.after_premature_void = coup
            return
        nxt = self._next_position(coup)
        if nxt is None:
            self._close_dealing(coup, f.t)
        elif nxt == UNKNOWN:
            if self._complete_whatever_unread(coup):
                # every value the unread card(s) could have completes the
                # tableau: this RESULT is the boundary for certain
                self._close_dealing(coup, f.t)
            else:
                # It may have been pressed early: only the missing card can
                # tell where this coup ends, so nothing after it is placed
                # until a supervisor enters it (or the deadline voids it).
                coup.held = [f]
        elif len(coup.cards) < 4:
            # A RESULT before the first four cards: no third card was due, so
            # this is no early press the next cards could correct. The
            # coup's boundary cannot be trusted: never settle it.
            detail = f"RESULT after only {len(coup.cards)} card(s) of the coup"
            self._misdeal(f.t, coup, "PREMATURE_RESULT", detail, "void")
            self._void(f.t, coup, "PREMATURE_RESULT", detail)
            self._close_dealing(coup, f.t)
        elif not coup.premature:
            coup.premature = True
            self._misdeal(f.t, coup, "PREMATURE_RESULT", f"RESULT pressed with {nxt} still due", AWAITING)

    def _close_dealing(self, coup: Coup, t: float) -> None:
        s = self.shoe
        assert s is not None
        coup.dealing = False
        if s.current is coup:
            s.current = None
        if s.last_coup is not None and coup.number >= s.last_coup:
            s.dealing_over = True
        if coup.void_code is None and not coup.open and coup.held is None:
            self._settle(coup, t)
        elif coup.void_code is not None:
            self._publish_odds(t)
        if coup.resolved:
            s.coups.pop(coup.number, None)
        self._maybe_finish_shoe(t)
        if coup.carry:
            carry, coup.carry = coup.carry, []
            self._refeed(carry)

    def _settle(self, coup: Coup, t: float) -> None:
        s = self.shoe
        assert s is not None
        player = [c for p, c in zip(coup.positions, coup.cards, strict=True) if p[0] == "P"]
        banker = [c for p, c in zip(coup.positions, coup.cards, strict=True) if p[0] == "B"]
        if any(c is None for c in player + banker):  # pragma: no cover - guarded by open misdeals
            return
        pv = [CARD_VALUE[c] for c in player if c is not None]
        bv = [CARD_VALUE[c] for c in banker if c is not None]
        ppair = player[0][0] == player[1][0]  # type: ignore[index]
        bpair = banker[0][0] == banker[1][0]  # type: ignore[index]
        natural = self.tab.natural[sum(pv[:2]) % 10] or self.tab.natural[sum(bv[:2]) % 10]
        outcome = outcome_of(pv, bv, ppair, bpair, natural)
        dr = coup.device_result
        if dr is not None and (
            dr.winner != outcome["winner"] or dr.player_pair != ppair or dr.banker_pair != bpair
        ):
            detail = (
                f"the device announced {dr.winner} (pairs P={dr.player_pair} B={dr.banker_pair}); "
                f"the tableau gives {outcome['winner']} (pairs P={ppair} B={bpair})"
            )
            self._alert(t, "SHOE_DISAGREES", detail, coup.number)
            if coup.had_unread:
                self._misdeal(t, coup, "SHOE_DISAGREES", detail + "; a card was unread", "void")
                self._void(t, coup, "SHOE_DISAGREES", detail)
                return
            self._misdeal(
                t, coup, "SHOE_DISAGREES", detail + "; every card was read: the tableau stands", "corrected"
            )
            if "SHOE_DISAGREES" not in coup.corrections:
                coup.corrections.append("SHOE_DISAGREES")
        coup.settled = True
        settlement = None
        tags = tags_of(outcome)
        if not coup.demo:
            s.tally[outcome["winner"]] += 1
            settlement = {k: net(v) for k, v in self.profile.settle(outcome).items()}
            st = s.stats
            st["naturals"] += natural
            st["player_pairs"] += ppair
            st["banker_pairs"] += bpair
            for tag in tags:
                st["tags"][tag] = st["tags"].get(tag, 0) + 1
            s.results.append({"winner": outcome["winner"], "player_pair": ppair, "banker_pair": bpair})
        self._emit(
            t,
            CoupResult(
                coup=coup.number,
                demo=coup.demo,
                player=Hand(cards=player, total=outcome["player_total"]),  # type: ignore[typeddict-item]
                banker=Hand(cards=banker, total=outcome["banker_total"]),  # type: ignore[typeddict-item]
                winner=outcome["winner"],
                natural=natural,
                player_pair=ppair,
                banker_pair=bpair,
                tags=tags,  # type: ignore[arg-type]
                settlement=settlement,
                corrections=list(coup.corrections),
            ),
        )
        if not coup.demo and self.roads:
            self._later(functools.partial(self._emit_roads, t, s.results, len(s.results)))
        self._publish_odds(t)

    def _emit_roads(self, t: float, results: list[dict[str, Any]], n: int) -> None:
        """The scoreboard roads of a shoe's first ``n`` settled coups."""
        from controller.roads import build_roads

        self._emit(t, RoadsEvent(**build_roads(results[:n])))

    def _void(self, t: float, coup: Coup, code: str, detail: str) -> None:
        if coup.resolved:
            return
        coup.void_code = code
        coup.open.clear()
        coup.premature = False
        held, coup.held = coup.held, None
        if held is not None:
            self._discard_held(coup, held, t)
        rest, self._after_void = self._after_void, []
        phantom, self._phantom = self._phantom, []
        before, self._phantom_before = self._phantom_before, 0
        if coup.extras_unlisted:
            detail += f" ({coup.extras_unlisted} more extra cards, shown by their card events, not listed)"
        self._emit(
            t,
            CoupVoid(coup=coup.number, code=code, article="X", detail=detail, cards=coup.as_dealt()),  # type: ignore[arg-type]
        )
        s = self.shoe
        assert s is not None
        s.stats["void_coups"] += 1
        if self._fault_coup == coup.number:
            self._fault_coup = None
            self._fault_waiting = None
        if not coup.dealing:
            s.coups.pop(coup.number, None)
            if s.last_coup is not None and coup.number >= s.last_coup:
                s.dealing_over = True
            self._maybe_finish_shoe(t)
            self._publish_odds(t)
        if phantom:
            self._void_phantom(phantom, t, before)
        # frames held past the void coup's RESULT belong to the coups after it
        self._refeed(rest)

    def _discard_held(self, coup: Coup, held: list[Frame], t: float) -> None:
        """A coup voided while its frames were held: its held cards left the
        shoe but their positions were never known, so they are reported as
        ``extra`` of the void coup, up to the first held RESULT; what follows
        that RESULT is dealt on as usual (``self._after_void``).

        Two cases are told apart by counting cards, since a coup has 4 to 6:
        more than 6 before the first held RESULT means this coup's own RESULT
        was among the lost frames, so those cards are the next coup's (void
        too, ``self._phantom``); fewer than 4 between the first and the
        second held RESULT are no coup but this coup's due cards after an
        early RESULT, and stay with it. With the automatic boundary nothing
        tells where the coup ended: every held card stays with it."""
        s = self.shoe
        assert s is not None
        boundary = (Button, DeviceResult) if self.button else ()
        first = next((i for i, f in enumerate(held) if isinstance(f, boundary)), None)
        head = held if first is None else held[:first]
        rest = [] if first is None else held[first + 1 :]
        if first is None:
            # no RESULT held: frames lost after this coup's cards (a gap, a
            # restart) still apply to what comes next
            lost = next((i for i, f in enumerate(held) if isinstance(f, (SequenceGap, Hello))), None)
            if lost is not None:
                head, rest = held[:lost], held[lost:]
        if s.phase in ("burn", "burn-unknown"):
            # frames were lost during the burn: it cannot be finished by
            # count; it ends here, and the shoe is dealt on from here
            self._alert(coup.t_start, "BURN_MISMATCH", "frames lost during the burn", coup.number)
            s.phase = "deal"
            self._emit(coup.t_start, ShoeBurn(first_card=s.first_card, burned=s.burned))
        own = len(coup.cards) + len(coup.extras)
        m = sum(isinstance(f, Card) for f in head)
        phantom = False
        if any(isinstance(f, Hello) for f in head):
            # a device restart: how many frames it lost is unknown
            phantom = first is not None and own + m > 6
        elif (coup.lost_frames or any(isinstance(f, SequenceGap) for f in head)) and first is not None:
            # (without a loss the RESULT cannot have been lost: more than six
            # cards are then this coup's extra cards)
            ends = coup.ends if coup.ends is not None else min(self._ends_in(coup, head, result=True))
            if coup.anchor_prev is not None:
                # this coup is the first end's; the RESULT held, the last's
                if ends >= 2:
                    self._phantom, self._phantom_before = held[first : first + 1], ends - 2
            elif ends >= 1:
                phantom = True
                self._phantom_before = ends - 1
        elif coup.lost_frames:
            self._ends_in(coup, head, result=False)
        if phantom and first is not None:
            self._phantom = held[: first + 1]
            head = [f for f in head if not isinstance(f, Card)]
        elif not self._phantom:
            second = next((i for i, f in enumerate(rest) if isinstance(f, boundary)), None)
            if (
                second is not None
                and sum(isinstance(f, Card) for f in rest[:second]) < 4
                # a coup short of cards because some were lost is a coup
                and not any(isinstance(f, (SequenceGap, Hello, Link)) for f in rest[:second])
            ):
                head = head + rest[:second]
                rest = rest[second + 1 :]
        for f in head:
            if isinstance(f, Card):
                self._set_aside(s, coup, f)
            elif not isinstance(f, SequenceGap):
                self._dispatch(f)
        coup.dealing = False
        if s.current is coup:
            s.current = None
        if s.last_coup is not None and coup.number >= s.last_coup:
            s.dealing_over = True
        self._after_void = rest

    def _bound_held(self, t: float) -> None:
        """A coup holding more than ``MAX_HELD`` frames: one not corrected
        is void as at its deadline (its held cards up to the first held
        RESULT are its extra cards, what follows is dealt on); one already
        void, held to learn whose its frames are from the next RESULT that
        has not come, closes, and since those frames may hold coup ends the
        numbering of the coups after it is lost. Either way nothing past the
        bound is buffered."""
        s = self.shoe
        while s is not None and s.current is not None:
            coup = s.current
            if coup.held is None or len(coup.held) <= MAX_HELD:
                return
            if not coup.resolved:
                code = min(coup.open, key=lambda c: coup.open[c] or float("inf"), default="SEQUENCE_GAP")
                detail = f"not corrected before {MAX_HELD} frames were held behind it"
                self._misdeal(t, coup, code, detail, "void")
                self._void(t, coup, code, detail)
                continue
            held, coup.held = coup.held, None
            lost = coup.gap_missing + sum(_lost(x) for x in held if isinstance(x, SequenceGap))
            self._lose_numbering(t, coup, lost, {0, _MAX_ENDS})
            self._close_dealing(coup, t)
            self._refeed([x for x in held if not isinstance(x, SequenceGap)])

    def _void_phantom(self, frames: list[Frame], t: float, before: int = 0) -> None:
        """The coup whose RESULT and some frames were lost: its cards were
        read but cannot be placed. Counted (coups are numbered as dealt),
        reported, void; so are the ``before`` coups lost whole before it."""
        s = self.shoe
        assert s is not None
        for _ in range(before):
            lost = self._open_coup(s, t)
            if not lost.resolved:
                detail = "lost whole on the line: counted from the cards read around the frames lost"
                self._misdeal(t, lost, "SEQUENCE_GAP", detail, "void")
                self._void(t, lost, "SEQUENCE_GAP", detail)
            self._close_dealing(lost, t)
        coup = self._open_coup(s, t)
        detail = "its frames were partly lost with the previous coup's RESULT: the cards cannot be placed"
        for f in frames:
            if isinstance(f, Card):
                self._set_aside(s, coup, f)
        if coup.resolved:  # after the last coup: void already (CUT_CARD_OVERRUN)
            self._close_dealing(coup, t)
            return
        self._misdeal(t, coup, "SEQUENCE_GAP", detail, "void")
        self._void(t, coup, "SEQUENCE_GAP", detail)
        self._close_dealing(coup, t)

    def _after_resolution(self, coup: Coup, t: float) -> None:
        """A misdeal of ``coup`` was resolved: release what it held, settle it
        if it is complete and nothing else is open."""
        s = self.shoe
        assert s is not None
        if coup.held is not None and not coup.open.keys() & {"UNREAD_CARD", "SEQUENCE_GAP"}:
            held, coup.held = coup.held, None
            entered = [Card(t, None, c) for c in coup.gap_entered]
            coup.gap_entered = []
            if s.current is None and coup.dealing:
                s.current = coup
            self._refeed(entered + held)
        if coup.resolved or coup.held is not None or coup.open:
            return
        nxt = self._next_position(coup)
        if not coup.dealing:
            if nxt is None:
                self._settle(coup, t)
            else:
                detail = f"{nxt} was never dealt: the coup ended before its tableau was complete"
                self._misdeal(t, coup, "PREMATURE_RESULT", detail, "void")
                self._void(t, coup, "PREMATURE_RESULT", detail)
            if coup.resolved:
                s.coups.pop(coup.number, None)
            self._maybe_finish_shoe(t)
        elif nxt is None and not self.button:
            self._close_dealing(coup, t)

    def _refeed(self, frames: list[Frame]) -> None:
        """Apply frames that waited (held, carried) in their order, exactly as
        if they were arriving now (with their own read times)."""
        for f in frames:
            self._dispatch(f)

    # ------------------------------------------------------------ cut card

    def _on_cut(self, f: CutCard) -> None:
        s = self.shoe
        if s is None or (s.ended_emitted and not s.ended_by_rule):
            self._alert(f.t, "CUT_CARD_UNEXPECTED", "cut card with no shoe in play", None)
            return
        cur = s.current
        if cur is not None and cur.held is not None:
            cur.held.append(f)
            return
        if s.cut_coup is not None:
            self._alert(f.t, "CUT_CARD_REPEATED", "a second cut card in the same shoe", None)
            return
        self._announce(s)
        if cur is not None and cur.dealing and self._next_position(cur) is not None:
            coup_no = cur.number
        else:
            coup_no = s.next_coup
        s.cut_coup = coup_no
        s.last_coup = coup_no + (1 if self.rules["after_cut"] == "one_more" else 0)
        if s.comp.cards_left < int(self.rules["cut_card_min"]):
            self._alert(
                f.t,
                "CUT_CARD_POSITION",
                f"cut card with {s.comp.cards_left} cards left; "
                f"the rule is at least {self.rules['cut_card_min']}",
                coup_no,
            )
        self._emit(f.t, ShoeCutCard(coup=coup_no, last_coup=s.last_coup))

    # ------------------------------------------------------- device health

    def _on_hello(self, f: Hello) -> None:
        self.device = {"model": f.model, "firmware": f.firmware, "serial": f.serial}
        self._emit(f.t, DeviceStatus(state="online", code="HELLO", device=self.device.copy()))
        if self._fault_coup is not None:
            # the sequence restarted: frames may have been lost unseen, so
            # neither the next frame nor STAT OK says it resumed unbroken
            self._fault_waiting = None
        coup = self._coup_in_play()
        if coup is not None:
            # a restart breaks the sequence: frames may have been lost unseen
            self._gap(coup, f.t, 0, "the device restarted mid-coup; frames may have been lost")

    def _coup_in_play(self) -> Coup | None:
        s = self.shoe
        if s is None or s.current is None or not s.current.dealing or s.current.resolved:
            return None
        return s.current

    def _on_status(self, f: Status) -> None:
        code = f.code
        state = "fault" if code in FAULT_CODES or code == "LID_OPEN" else "online"
        payload = DeviceStatus(state=state, code=code, device=self.device.copy())  # type: ignore[arg-type]
        if f.text:
            payload.detail = f.text
        self._emit(f.t, payload)
        coup = self._coup_in_play()
        if f.card_unread and self.shoe is not None:
            # A shoe that reports an unread card only as an error (Angel Eye
            # sends no card message for it) still dealt that card: it takes
            # the next position, so the cards after it stay where they are
            # (the first card of a coup opens it).
            self._on_card(Card(f.t, f.seq, None))
            coup = self._coup_in_play()
        if code in FAULT_CODES:
            if coup is not None:
                self._fault_coup = coup.number
                self._fault_waiting = "ok"
                self._open_device_wait(f.t, coup, "DEVICE_FAULT", f"device reports {code} mid-coup")
        elif code == "OK":
            if self._fault_waiting == "ok":
                self._device_back(f.t)
        elif code == "EMPTY":
            s = self.shoe
            if coup is not None and self._next_position(coup) is not None:
                self._misdeal(f.t, coup, "SHOE_EXHAUSTED", "the shoe is empty mid-coup", "void")
                self._void(f.t, coup, "SHOE_EXHAUSTED", "the shoe is empty mid-coup")
            elif s is not None and s.phase == "deal" and not s.ended_emitted and coup is None:
                self._end_shoe(f.t, reason="shoe empty")
        elif code == "LID_OPEN":
            self._alert(f.t, "LID_OPEN", "the shoe's lid was opened", coup.number if coup else None)

    def _device_back(self, t: float) -> None:
        self._fault_waiting = None
        s = self.shoe
        n, self._fault_coup = self._fault_coup, None
        if s is None or n is None or n not in s.coups:
            return
        coup = s.coups[n]
        if "DEVICE_FAULT" in coup.open and coup.void_code is None:
            self._correct(t, coup, "DEVICE_FAULT", "the device resumed with an unbroken sequence")
            self._after_resolution(coup, t)

    def _on_link(self, f: Link) -> None:
        self._emit(
            f.t,
            DeviceStatus(
                state="online" if f.up else "offline",
                code="CONNECTED" if f.up else "DISCONNECTED",
                device=self.device.copy(),
                detail=f.detail if f.detail else UNSET,
            ),
        )
        if not f.up:
            coup = self._coup_in_play()
            if coup is not None:
                self._fault_coup = coup.number
                self._open_device_wait(f.t, coup, "DEVICE_FAULT", "the device disconnected mid-coup")
            self._fault_waiting = None
        elif self._fault_coup is not None:
            self._fault_waiting = "frame"

    def _on_gap(self, f: SequenceGap) -> None:
        s = self.shoe
        if f.exact:
            detail = f"frames lost: expected sequence {f.expected}, received {f.seq} ({f.missing} missing)"
        else:
            detail = (
                f"frames lost: expected sequence {f.expected}, received {f.seq} (at least {f.missing} "
                "missing; how many more is unknown)"
            )
        if self._fault_coup is not None:
            self._fault_waiting = None  # the sequence is broken: no automatic resume
        if s is None or s.ended_emitted:
            self._alert(f.t, "SEQUENCE_GAP", detail, None)
            if s is not None:
                self._lost_after_shoe += _lost(f)
            return
        coup = s.current
        if coup is not None and coup.held is not None:
            # held like any frame: once the frames before it are placed (or
            # voided) it applies where it happened
            coup.held.append(f)
            return
        if s.numbering_lost is not None:
            # every coup is void until the numbering is given back: there is
            # nothing left to hold frames for
            if coup is not None:
                coup.lost_frames = True
            return
        if coup is not None and coup.dealing and coup.resolved:
            # A void coup has nothing left to correct: its cards are reported
            # until its RESULT. Unless its RESULT may be among the frames
            # lost: then what follows waits for the next RESULT, which tells
            # whose it is (_ends_at_result).
            need = self._need(coup)
            coup.lost_frames = True  # its positions are no longer known
            if _lost(f) >= need + 1:
                coup.held = []
                coup.gap_missing += _lost(f)
                coup.anchor_k, coup.anchor_need = len(coup.cards), need
            return
        prev: Coup | None = None
        if coup is not None and coup.dealing and coup.void_code is None and self._next_position(coup) is None:
            # Every card of this coup was read and its tableau is complete:
            # what was lost came after it (its RESULT, an extra card, or the
            # next coup's first cards), so it stands; the next coup is held.
            prev = coup
            self._close_dealing(coup, f.t)
            coup = None
        if coup is None or not coup.dealing:
            if s.last_coup is not None and s.next_coup > s.last_coup:
                self._alert(f.t, "SEQUENCE_GAP", detail + " after the last coup", None)
                return
            coup = self._open_coup(s, f.t)
            if prev is not None:
                coup.anchor_prev, coup.anchor_k, coup.anchor_need = prev.number, len(prev.cards), 0
            else:
                coup.anchor_k, coup.anchor_need = 0, 4
        else:
            coup.anchor_k, coup.anchor_need = len(coup.cards), self._need(coup)
        self._gap(coup, f.t, _lost(f), detail)

    def _need(self, coup: Coup) -> int:
        """The fewest cards the coup still needs to complete its tableau."""
        nxt = self._next_position(coup)
        if nxt is None:
            return 0
        if nxt == UNKNOWN:
            # the fewest: complete if the unread card(s) can make it so
            return 0 if self._complete_whatever_unread(coup, some=True) else 1
        return max(1, 4 - len(coup.cards))

    def _ends_at_result(self, coup: Coup, f: Button | DeviceResult) -> None:
        """The first RESULT after a gap that may have swallowed the end of the
        coup in play: the cards read since tell how many coups ended in the
        gap (``_ends_possible``). Where more than one count fits, the number
        of every later coup is unknown (``_lose_numbering``)."""
        s = self.shoe
        assert s is not None
        held: list[Frame] = coup.held if coup.held is not None else []
        ends = self._ends_in(coup, held, result=True)
        coup.ends = min(ends)
        lost = coup.gap_missing + sum(_lost(x) for x in held if isinstance(x, SequenceGap))
        # one end, and not one frame of the next coup lost: it is whole
        whole = ends == {1} and lost == coup.anchor_need + 1 and s.numbering_lost is None
        frames: list[Frame] = [x for x in held if not isinstance(x, SequenceGap)]
        frames.append(f)
        if coup.void_code is not None:
            coup.held = None
            if ends == {0}:
                self._refeed(frames)  # the void coup's own cards and RESULT
                return
            # its RESULT was lost: what came since is the next coup's
            self._close_dealing(coup, f.t)
            if whole:
                self._refeed(frames)
            else:
                self._void_phantom(frames, f.t, min(ends) - 1)
                self._refeed([x for x in frames if not isinstance(x, (Card, Button, DeviceResult))])
            return
        prev = coup.anchor_prev
        if ends == {0}:
            # this RESULT is the coup before's: the frames lost came before
            # it (extra cards, a status), and this coup has lost nothing
            coup.held = None
            coup.lost_frames = False
            coup.gap_missing = 0
            for x in held:
                if isinstance(x, Card):
                    if self._take(s, x, None) is None:
                        self._alert(
                            x.t,
                            "EXTRA_CARD",
                            f"a card ({x.card or 'unread'}) after the tableau of coup {prev}, before its "
                            "RESULT; burned",
                            prev,
                        )
                    self._card_event(x, prev, "extra")
                elif not isinstance(x, SequenceGap):
                    self._dispatch(x)
            detail = f"the frames lost came before the RESULT of coup {prev}: nothing of this coup was lost"
            self._correct(f.t, coup, "SEQUENCE_GAP", detail)
            return
        held.append(f)
        if whole:
            detail = f"the frame lost was the RESULT of coup {prev}: nothing of this coup was lost"
            self._correct(f.t, coup, "SEQUENCE_GAP", detail)
            self._after_resolution(coup, f.t)

    def _ends_in(self, coup: Coup, held: list[Frame], *, result: bool) -> set[int]:
        """``_ends_possible`` for the frames a coup held since its gap; where
        more than one count fits, or more than one end, the numbering of
        the coups after it is lost (one end is told apart, not more)."""
        if coup.lost_frames:
            k, need, items = coup.anchor_k, coup.anchor_need, [coup.gap_missing]
        else:  # held for another reason (an unread card); frames lost since
            k, need, items = len(coup.cards), self._need(coup), []
        for x in held:
            if isinstance(x, Card):
                items.append(0)
            elif isinstance(x, SequenceGap):
                items.append(_lost(x))
        if not any(items):
            return {0}
        ends = _ends_possible(k, need, items, result)
        if len(ends) > 1 or _MAX_ENDS in ends:
            lost = sum(items)
            self._lose_numbering(held[-1].t if held else coup.t_start, coup, lost, ends)
        return ends

    def _lose_numbering(self, t: float, coup: Coup, lost: int, ends: set[int]) -> None:
        """Frames lost may hold more than one count of coup ends: the coups
        after this one cannot be numbered. Each is void until a supervisor
        gives the number of the next coup (``accept``) or a new shoe starts."""
        s = self.shoe
        assert s is not None
        if s.numbering_lost is not None:
            return
        s.window = (coup.number, coup.dealt_at_open)
        counts = sorted(ends)
        top = f"{_MAX_ENDS} or more" if counts[-1] == _MAX_ENDS else str(counts[-1])
        what = f"{counts[0]} to {top}" if len(counts) > 1 else top
        s.numbering_lost = f"the {_frames_lost(lost)} in coup {coup.number} may hold the end of {what} coups"
        self._alert(
            t,
            "COUP_NUMBERING_LOST",
            s.numbering_lost + ": every later coup of this shoe is void until a supervisor sends accept "
            "with the number of the next coup to be dealt, or a new shoe starts",
            coup.number,
        )

    def _gap(self, coup: Coup, t: float, missing: int, detail: str) -> None:
        coup.lost_frames = True
        coup.gap_missing += missing
        if coup.held is None:
            coup.held = []
        if "SEQUENCE_GAP" not in coup.open:
            self._misdeal(t, coup, "SEQUENCE_GAP", detail, AWAITING)

    # ------------------------------------------------------------- shuffler

    def _on_commit(self, f: ShuffleCommit) -> None:
        if not 1 <= f.ncards <= 12 * 52:
            self._alert(f.t, "SHUFFLE_COMMIT_INVALID", f"shuffler announced {f.ncards} cards", None)
            return
        self._commit = _Commit(f.shoe_id, f.ncards, f.sha256.lower(), [None] * f.ncards)

    def _on_order(self, f: ShuffleOrder) -> None:
        c = self._commit
        if c is not None and not c.valid:
            return  # already alerted: this commitment cannot be trusted
        if c is None or f.index < 0 or f.index + len(f.cards) > c.ncards:
            self._alert(f.t, "SHUFFLE_ORDER_INVALID", "shuffler order outside its commitment", None)
            return
        for i, card in enumerate(f.cards):
            c.order[f.index + i] = card
        c.received += len(f.cards)
        if c.received >= c.ncards:
            text = ",".join(x or "XX" for x in c.order)
            if hashlib.sha256(text.encode("ascii")).hexdigest() != c.sha256:
                self._alert(
                    f.t, "SHUFFLE_COMMIT_MISMATCH", "the shuffler's order does not match its commitment", None
                )
                c.valid = False  # cannot be trusted for the card-by-card check
                c.order = []

    def _on_device_result(self, f: DeviceResult) -> None:
        s = self.shoe
        coup = s.current if s is not None else None
        if coup is not None and coup.held is not None:
            if self.button and coup.dealing:
                self._result(f)  # held there, or it tells what the gap held
            else:
                coup.held.append(f)
            return
        elif coup is not None and coup.dealing:
            if f.winner == "quit":
                self._misdeal(f.t, coup, "SHOE_DISAGREES", "the device forced the coup to quit", "void")
                self._void(f.t, coup, "SHOE_DISAGREES", "the device forced the coup to quit")
            elif self._next_position(coup) is None:
                # compared with the tableau at settlement; a result announced
                # early (a third card still due) is a PREMATURE_RESULT, not
                # the shoe's view of the finished coup
                coup.device_result = f
        self._result(f)

    def _ignore(self, f: Frame) -> None:
        return None

    # ----------------------------------------------------------------- odds

    def _publish_odds(self, t: float) -> None:
        """Exact odds of every bet for the next coup, in two views: the
        cards truly left (``shoe``) and what a counter can know (``counter``:
        the face-down burned cards still unknown); plus ADVANTAGE alerts when
        a bet's counter-view expectation crosses the threshold."""
        s = self.shoe
        if self._calc is None or s is None or s.ended_emitted or s.dealing_over or self._odds_quiet:
            return
        if s.last_coup is not None and s.next_coup > s.last_coup:
            return
        shoe_counts = s.comp.rank_counts()
        counter_counts = dict(shoe_counts)
        for card in s.burned_cards:
            counter_counts[card[0]] += 1
        self._later(
            functools.partial(self._emit_odds, t, s.next_coup, s.comp.cards_left, shoe_counts, counter_counts)
        )

    def _emit_odds(
        self,
        t: float,
        coup_no: int,
        cards_left: int,
        shoe_counts: dict[str, int],
        counter_counts: dict[str, int],
    ) -> None:
        for view, counts in (("shoe", shoe_counts), ("counter", counter_counts)):
            res = self._calc.compute(counts)
            bets = {
                name: {
                    "win": round(b.win, 12),
                    "push": round(b.push, 12),
                    "lose": round(b.lose, 12),
                    "ev": round(b.ev, 12),
                }
                for name, b in res.bets.items()
            }
            self._emit(
                t,
                OddsUpdate(coup=coup_no, cards_left=cards_left, view=view, bets=bets),  # type: ignore[arg-type]
            )
            if view == "counter":
                self._check_advantage(t, coup_no, bets)

    def _check_advantage(self, t: float, coup_no: int, bets: dict[str, dict[str, float]]) -> None:
        for name, b in bets.items():
            above = b["ev"] > self.advantage_threshold
            if above and name not in self._advantage:
                self._advantage.add(name)
                self._alert(
                    t,
                    "ADVANTAGE",
                    f"{name}: a counter's expectation for coup {coup_no} is {b['ev']:+.5f} per unit, "
                    f"above {self.advantage_threshold:+g}",
                    coup_no,
                )
            elif not above and name in self._advantage:
                self._advantage.discard(name)
                self._alert(
                    t,
                    "ADVANTAGE",
                    f"{name}: back to {b['ev']:+.5f} per unit for coup {coup_no}, "
                    f"at or below {self.advantage_threshold:+g}",
                    coup_no,
                )

    # ------------------------------------------------------------ deadlines

    def _expire(self, now: float) -> None:
        s = self.shoe
        # checked on every frame: most have no coup with an open misdeal
        if s is None or not any(c.open for c in s.coups.values()):
            return
        for coup in sorted(s.coups.values(), key=lambda c: c.number):
            if coup.resolved or not coup.open:
                continue
            due = [(dl, code) for code, dl in coup.open.items() if dl is not None and dl <= now]
            if due:
                dl, code = min(due)
                detail = f"not corrected within {self.deadline_s:g} s"
                self._emit(
                    dl,
                    Misdeal(coup=coup.number, code=code, detail=detail, action="void", deadline=None),
                )
                self._void(dl, coup, code, detail)

    # ------------------------------------------------------------- commands

    def _coup_arg(self, n: int) -> Coup:
        s = self.shoe
        if not isinstance(n, int) or isinstance(n, bool):
            raise CommandError("'coup' must be an integer")
        if s is None:
            raise CommandError("no shoe in play")
        coup = s.coups.get(n)
        if coup is None:
            if 1 <= n < s.next_coup:
                raise CommandError(f"coup {n} is already settled or void")
            raise CommandError(f"no coup {n} in this shoe")
        return coup

    def _cmd_void(self, coup: Coup, reason: str, t: float) -> None:
        if coup.resolved:
            raise CommandError(f"coup {coup.number} is already settled or void")
        detail = f"voided by supervisor: {reason}" if reason else "voided by supervisor"
        self._misdeal(t, coup, "SUPERVISOR_VOID", detail, "void")
        self._void(t, coup, "SUPERVISOR_VOID", detail)

    def _cmd_enter_card(self, coup: Coup, card: Any, t: float) -> None:
        if not isinstance(card, str):
            raise CommandError("'card' must be a card code such as 'TD'")
        try:
            code = parse_card(card)
        except CardError as exc:
            raise CommandError(str(exc)) from exc
        s = self.shoe
        assert s is not None
        if s.comp.remaining[code] <= 0:
            raise CommandError(f"{code}: no copy of it is left in this shoe")
        if "UNREAD_CARD" in coup.open:
            if s.phase == "burn-unknown" and s.first_card is None and coup.number == s.next_coup - 1:
                s.first_card = code
                s.comp.remaining[code] -= 1
                s.burn_left = self.profile.burn_count(RANK_BURN[code[0]], self.decks)
                s.phase = "burn"
                self._emit_entered(t, coup, "burn", code)
                self._correct(t, coup, "UNREAD_CARD", f"first card entered by supervisor: {code}")
                if s.burn_left == 0:
                    self._finish_burn(s, t)
                self._after_resolution(coup, t)
                return
            i = coup.cards.index(None)
            coup.cards[i] = code
            s.comp.remaining[code] -= 1
            self._emit_entered(t, coup, coup.positions[i], code)
            if None not in coup.cards:
                self._correct(t, coup, "UNREAD_CARD", f"{coup.positions[i]} entered by supervisor: {code}")
                self._after_resolution(coup, t)
            return
        if "SEQUENCE_GAP" in coup.open:
            # inserted where the frames were lost; taken from the shoe when
            # the held frames are released behind it (so no more copies than
            # the shoe has left: that bounds the list)
            if coup.gap_entered.count(code) >= s.comp.remaining[code]:
                raise CommandError(f"{code}: every copy left in this shoe is entered already")
            coup.gap_entered.append(code)
            # (a loss of unknown size is never made whole by cards entered)
            if 0 < coup.gap_missing < _UNKNOWN_LOSS and len(coup.gap_entered) >= coup.gap_missing:
                self._correct(t, coup, "SEQUENCE_GAP", "every missing frame entered as a card by supervisor")
                self._after_resolution(coup, t)
            return
        raise CommandError(f"coup {coup.number} is not waiting for a card")

    def _emit_entered(self, t: float, coup: Coup, position: str, code: str) -> None:
        self._emit(
            t,
            CardEvent(
                coup=coup.number if position != "burn" else None,
                position=position,  # type: ignore[arg-type]
                card=code,
                value=CARD_VALUE[code],
                face_up=False,
                entered=True,
            ),
        )

    def _cmd_accept(self, coup: Coup, t: float) -> None:
        accepted = [c for c in ("SEQUENCE_GAP", "WRONG_HAND", "DEVICE_FAULT") if c in coup.open]
        if not accepted:
            raise CommandError(f"coup {coup.number} has nothing a supervisor can accept")
        for code in accepted:
            if code == "DEVICE_FAULT" and self._fault_coup == coup.number:
                self._fault_coup = None
                self._fault_waiting = None
            self._correct(t, coup, code, "accepted by supervisor")
        self._after_resolution(coup, t)

    def _cmd_renumber(self, s: Shoe, n: int, t: float) -> None:
        """``accept`` with a coup number while the numbering is lost: the
        supervisor says the next coup to be dealt is ``n``; the coups between
        were lost whole and are counted void."""
        high, why = self._renumber_range(s)
        if isinstance(n, bool) or n < s.next_coup:
            raise CommandError(
                f"coup numbers below {s.next_coup} are taken: the next coup is {s.next_coup} to {high}"
            )
        if n > high:
            raise CommandError(f"coup {n} is not plausible: the next coup is {s.next_coup} to {high} ({why})")
        s.numbering_lost = None
        s.renumber_to = n
        self._alert(t, "COUP_NUMBERING_RESTORED", f"the supervisor numbers the next coup {n}", n)

    def _renumber_range(self, s: Shoe) -> tuple[int, str]:
        """The highest number ``accept`` may give the next coup while the
        numbering is lost, and why.

        From the first coup whose number may be wrong (``s.window``) to the
        one before the next to be dealt, every coup but the one in play was
        dealt in full, with at least ``MIN_COUP_CARDS`` cards: cards the
        shoe dealt since (read or unread, taken or still held), or cards
        among the frames lost on the line in this shoe, no more than the
        cards the engine has not seen (all of those after a device restart,
        which loses an unknown number of frames). With the RESULT button,
        each coup the engine did not count also lost its RESULT among those
        frames (or it is held). Frames lost are counted as they arrive and
        held frames are placed later, so they are taken since the shoe
        began, not since that coup. The first bound is at most (the shoe's
        cards + ``MAX_HELD``) / 4 + 1: one card after an ``accept`` voids at
        most 413 coups lost whole (12 decks; 157 with nothing held), two
        events each."""
        left = max(0, s.comp.cards_left)
        in_play = int(s.current is not None and s.current.dealing)
        w = s.window
        if w is None:  # (lost before windows were kept: a checkpoint)
            cap = s.comp.capacity // MIN_COUP_CARDS
            return s.next_coup + cap, f"a shoe of {s.comp.capacity} cards has at most {_coups(cap)}"
        first, dealt0 = w
        # (cards held or set aside for later are dealt, not yet taken)
        open_ = {id(c): c for c in [s.current, *s.coups.values()] if c is not None}.values()
        waiting = [x for c in open_ for x in [*(c.held or []), *c.carry]] + (s.after_premature or [])
        dealt = max(0, s.comp.dealt - dealt0) + sum(isinstance(x, Card) for x in waiting)
        unknown = self._lost_unknown > s.loss_mark[1]
        lost = self._lost_frames - s.loss_mark[0]
        lost_cards = left if unknown else min(lost, left)
        coups = (dealt + lost_cards) // MIN_COUP_CARDS
        high = max(s.next_coup, first + in_play + coups)
        since = (
            "frames were lost in this shoe in a number that cannot be known"
            if unknown
            else f"{lost} frames were lost in this shoe"
        )
        why = f"{dealt} cards dealt since coup {first}, and {since}: at most {_coups(coups)} of 4 cards"
        # a RESULT held is one the engine has not counted yet
        ends = lost + sum(isinstance(x, (Button, DeviceResult)) for x in waiting)
        if self.button and not unknown and s.next_coup + ends < high:
            high = s.next_coup + ends
            why = f"{lost} frames were lost in this shoe: at most {lost} RESULTs not seen"
            if ends > lost:
                why += f", {ends - lost} held"
        return high, why

    def _cmd_end_shoe(self, t: float) -> None:
        if self.shoe is None or self.shoe.ended_emitted:
            raise CommandError("no shoe in play")
        self._end_shoe(t, reason="ended by supervisor")
