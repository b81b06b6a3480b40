"""The board's state model: one table's MQTT messages in, the page's view
out. Pure: no I/O, no clock, no threads; the subscriber feeds it and the
app reads :meth:`TableState.view`.

What it is built from (docs/operations.md, MQTT):

* the retained ``status`` (``online`` / ``offline``, the daemon's Last
  Will), ``shoe/state`` (the shoe so far: coup number, cards left, tally,
  statistics, open misdeals), ``roads`` (the latest roads event: every
  settled coup of the shoe) and ``odds``: enough to draw the shoe so far
  the moment the board (re)connects, whatever it missed;
* the events (``coup/result``, ``coup/corrected``, ``coup/void``, ``card``, ``misdeal``,
  ``device/status``, ``shoe/started``, ``shoe/ended``): what happens next,
  coup by coup, with the detail the retained topics lack (the last coup's
  cards, the coup number behind each road cell, the misdeal awaiting a
  supervisor).

Catching up (after a broker outage, or a start mid-shoe): the cards and
totals of a coup the board did not see end are retained nowhere, so the
panels show what is known and say what is not. The first ``roads`` after
a (re)connect with cells it did not see settle gives the last settled
coup's winner and pairs (its number and cards unknown); a snapshot counting
more void coups than it knew says a coup was voided unseen (and, with both,
that which came last is unknown). The snapshot's coup is the coup being
dealt unless the board saw it end or the snapshot's tally and void count
account for every coup; its cards dealt while the board was away are
marked missing. The device is ``unknown`` until a ``device.status`` says
(it is not retained) or a card is read (the daemon publishes only cards its
shoe read: online), and again after the board lost the broker or the
controller went offline. The snapshot's ``last_coup`` is the last coup
the cut card permits (not the last coup's result). The odds keep the
latest ``odds.update`` of each view (``shoe``, ``counter``), whichever of
the retained ``odds`` and the events brings it.

The shoe is the one the table sent last, in the table's own order: the
envelope's ``seq``, which only grows, across shoes and the daemon's restarts
(the retained ``shoe/state`` carries the ``seq`` of the last event it
accounts for). A message about another shoe with a higher ``seq`` starts
that shoe, whatever its id (the UTC time of its first frame: a box whose
clock stepped back starts a shoe whose id sorts first); one with a lower
``seq`` (a retained message about an older shoe, arriving after the new
shoe's first event) is ignored.

Bounds: every message is read and checked whole before any of it is used
(``_read_*``, pure, then the ``TableState`` method that applies it). An
event is decoded with the contract itself (``controller.event_types``,
strictly; fields a newer table adds are ignored); one that is not such an
event (not JSON, not an object, a field missing or of the wrong type, a
shoe id that is not 1 to 64 printable ASCII characters), or a snapshot
that is not what docs/events.md says, raises :class:`BadMessage` and
changes nothing; a lone surrogate in a text is shown as U+FFFD;
a shoe keeps at most :data:`MAX_COUPS` road entries, :data:`MAX_VOIDS` void
coups and :data:`MAX_AWAITING` open misdeals.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import msgspec

from controller.event_types import (
    UNSET,
    CardEvent,
    CoupCorrected,
    CoupResult,
    CoupVoid,
    DeviceStatus,
    EnvelopeRead,
    Hand,
    Misdeal,
    OddsUpdate,
    Payload,
    RoadsEvent,
    ShoeCutCard,
    ShoeEnded,
    ShoeStarted,
    UnsetType,
    problem,
    read_envelope,
    read_payload,
)
from controller.roads import ROWS, build_roads, derived_entry, layout
from controller.textsafe import visible

#: Road entries kept per shoe (a 12-deck shoe has ~130 coups).
MAX_COUPS = 400
#: Void coups listed per shoe.
MAX_VOIDS = 100
#: Misdeals awaiting a supervisor shown at once.
MAX_AWAITING = 32
#: Cards of the coup being dealt shown (six positions, and a few extras).
MAX_CARDS = 12
#: Longest text taken from a message (a misdeal's detail, a device code).
MAX_TEXT = 200
#: The largest ``seq`` taken (the envelope's, a 63-bit integer).
MAX_SEQ = (1 << 63) - 1
#: A shoe id: printable ASCII without ``/`` (it is a path segment of the
#: history links), at most 64 characters.
_SHOE_ID = re.compile(r"[!-.0-~]{1,64}")
_SURROGATE = re.compile("[\ud800-\udfff]")

HAND_POSITIONS = ("P1", "B1", "P2", "B2", "P3", "B3")
#: Labels of the side bets a profile may offer (``settlement`` keys).
SIDE_BET_LABELS = {"dragon7": "Dragon 7", "panda8": "Panda 8", "b27": "B-27"}
#: The ``tags`` (docs/events.md) that count a side bet's hits in the
#: retained ``shoe/state`` statistics.
SIDE_BET_TAGS = {"dragon7": ("dragon7",), "panda8": ("panda8",), "b27": ("banker2", "banker7")}
#: Bets that are not side bets: the tally shows them.
MAIN_BETS = frozenset({"player", "banker", "tie", "player_pair", "banker_pair"})
_WINNER = {"banker": "B", "player": "P", "tie": "T"}
#: The two views of the odds (docs/events.md, ``odds.update``): every card
#: read, and what a player could count (face-down burned cards unknown).
ODDS_VIEWS = ("shoe", "counter")


class BadMessage(ValueError):
    """A message that is not what docs/events.md or docs/operations.md, MQTT says; it changed nothing."""


def _obj(payload: bytes) -> dict[str, Any]:
    try:
        data = msgspec.json.decode(payload)
    except (msgspec.MsgspecError, RecursionError):  # then as ``json`` reads it: a lone surrogate is JSON
        try:
            data = json.loads(payload)
        except (ValueError, RecursionError) as exc:  # bad UTF-8, bad JSON, an integer of over 4300 digits
            raise BadMessage(f"not JSON: {type(exc).__name__}") from None
    if not isinstance(data, dict):
        raise BadMessage("not a JSON object")
    return data


def _opt_int(d: Mapping[str, Any], key: str) -> int | None:
    v = d.get(key)
    if v is None:
        return None
    if not isinstance(v, int) or isinstance(v, bool) or not 0 <= v < 1 << 31:
        raise BadMessage(f"{key}: not a small non-negative integer")
    return v


def _int(d: Mapping[str, Any], key: str) -> int:
    v = _opt_int(d, key)
    if v is None:
        raise BadMessage(f"{key}: not a small non-negative integer")
    return v


def _clean(text: str) -> str:
    """``text`` with each lone surrogate (valid JSON, not valid Unicode: a
    browser's ``encodeURIComponent`` throws on it) replaced by U+FFFD."""
    return _SURROGATE.sub("\ufffd", text)


def _text(d: Mapping[str, Any], key: str, default: str = "") -> str:
    v = d.get(key, default)
    if v is None:
        return default
    if not isinstance(v, str):
        raise BadMessage(f"{key}: not a string")
    return _clean(v[:MAX_TEXT])


@dataclass
class Bead:
    """One settled coup on the roads: winner ``B``/``P``/``T``, pairs, and
    the coup's number when the board saw its ``coup.result`` (a coup known
    only from a retained ``roads`` has none)."""

    w: str
    pp: bool
    bp: bool
    coup: int | None = None

    def same(self, other: Bead) -> bool:
        return (self.w, self.pp, self.bp) == (other.w, other.pp, other.bp)


@dataclass
class _Shoe:
    """What the board knows of the shoe in play."""

    id: str | None = None
    #: the highest ``seq`` of the table's messages about this shoe (0: only
    #: a ``shoe/state`` without one seen)
    seq: int = 0
    phase: str | None = None  # burn | deal | ended
    coup: int | None = None
    cards_left: int | None = None
    cards_dealt: int | None = None
    decks: int | None = None
    profile: str | None = None
    ended: bool = False
    end_reason: str = ""
    beads: list[Bead] = field(default_factory=list)
    #: facts of coups seen live: bead index -> (natural, side bets won)
    live: dict[int, tuple[bool, tuple[str, ...]]] = field(default_factory=dict)
    #: the retained snapshot's statistics and how many settled coups they cover
    snap_stats: dict[str, Any] = field(default_factory=dict)
    snap_settled: int = 0
    last: dict[str, Any] | None = None
    current: dict[str, Any] | None = None
    voids: list[dict[str, Any]] = field(default_factory=list)
    awaiting: dict[tuple[int, str], dict[str, Any]] = field(default_factory=dict)
    #: the last permitted coup, once the cut card is out (``shoe.cut_card``,
    #: the snapshot's ``last_coup``)
    cut_last: int | None = None
    #: void coups of the shoe the board knows of: the snapshots' count, and
    #: one more for each void it sees afterwards
    voids_known: int = 0
    #: coups resolved (settled off demo, or void) by the latest snapshot;
    #: None until one is seen
    snap_resolved: int | None = None
    #: catching up (after a (re)connect): the roads had coups the board had
    #: not seen settle; the snapshot counted voids it had not seen
    missed_settled: bool = False
    missed_voids: bool = False
    #: the board's connection (``TableState.epoch``) in which it saw the
    #: coup being dealt start
    current_epoch: int = 0
    #: the latest odds of each view (``shoe``, ``counter``)
    odds: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: the latest supervisor's correction of a settled coup (``coup``,
    #: ``was``: the winner it replaces, None if the board had no cell for
    #: it, ``winner``, ``reason``, ``changes``), shown until a coup after
    #: the last one ended when it came (``until``) ends
    correction: dict[str, Any] | None = None


# --- reading a message: every check first, nothing applied -------------------------
#
# Each kind of message is read by a pure function below into a :class:`Msg`
# (every field the board uses, checked); only then does :meth:`TableState.apply`
# apply it. A parser cannot touch the state and an applier cannot refuse a
# message, so a bad message never changes anything, whatever field is bad.


@dataclass(frozen=True)
class Msg:
    """A message read and checked: the shoe it is about (None: no shoe), the
    table's ``seq`` it was sent at (None: a ``shoe/state`` of a daemon that
    did not say) and its fields."""

    shoe: str | None
    seq: int | None
    f: dict[str, Any]


def _contract(payload: bytes, data: dict[str, Any]) -> tuple[EnvelopeRead, Payload]:
    """An event (``data``: ``payload`` read as JSON) decoded with the
    contract itself (``controller.event_types``: the envelope, and the
    payload of its type; fields a newer table adds ignored). A lone
    surrogate, which no strict decoder takes, is read as U+FFFD (as the
    board shows it): an older controller's journal could hold one."""
    try:
        try:
            env = read_envelope(payload)
        except msgspec.DecodeError:
            payload = _clean(json.dumps(data, ensure_ascii=False)).encode()
            env = read_envelope(payload)
        return env, read_payload(payload)
    except msgspec.MsgspecError as exc:
        raise BadMessage(visible(problem(exc, data))[:MAX_TEXT]) from None


def _read_status(payload: bytes) -> str:
    text = payload.decode("ascii", errors="replace").strip().lower()
    if text not in ("online", "offline"):
        raise BadMessage("status: not online or offline")
    return text


def _envelope(d: Mapping[str, Any], *, seq_optional: bool = False) -> tuple[str | None, int | None]:
    seq = d.get("seq")
    # an event's seq is at least 1; a shoe/state's is 0 before any event
    # and absent from a daemon that did not send one
    least = 0 if seq_optional else 1
    if seq is None and seq_optional:
        pass
    elif not isinstance(seq, int) or isinstance(seq, bool) or not least <= seq <= MAX_SEQ:
        raise BadMessage("seq: not a 63-bit integer of at least 1 (0 in shoe/state)")
    shoe = d.get("shoe")
    if shoe is not None and (not isinstance(shoe, str) or not _SHOE_ID.fullmatch(shoe)):
        raise BadMessage("shoe: not a shoe id (1 to 64 printable ASCII characters, no '/')")
    return shoe, seq


def _read_snapshot(d: dict[str, Any]) -> Msg:
    shoe, seq = _envelope(d, seq_optional=True)
    tally, stats, opens = d.get("tally"), d.get("stats"), d.get("open_misdeals")
    if tally is not None and not isinstance(tally, dict):
        raise BadMessage("tally: not an object")
    if stats is not None and not isinstance(stats, dict):
        raise BadMessage("stats: not an object")
    counts = None
    if tally is not None and stats is not None:
        tags = stats.get("tags")
        if tags is None:
            tags = {}
        if not isinstance(tags, dict):
            raise BadMessage("stats.tags: not an object")
        counts = {
            "settled": sum(_int(tally, k) for k in ("player", "banker", "tie")),
            "naturals": _int(stats, "naturals"),
            "void_coups": _opt_int(stats, "void_coups") or 0,
            "tags": {_clean(str(k)[:32]): _int(tags, k) for k in tags},
        }
    if opens is not None and (not isinstance(opens, list) or not all(isinstance(o, dict) for o in opens)):
        raise BadMessage("open_misdeals: not a list of objects")
    return Msg(
        shoe,
        seq,
        {
            "coup": _opt_int(d, "coup"),
            "cards_left": _opt_int(d, "cards_left"),
            "cards_dealt": _opt_int(d, "cards_dealt"),
            "phase": _text(d, "state") or None,
            "last_coup": _opt_int(d, "last_coup"),
            "counts": counts,
            "opens": None if opens is None else [(_int(o, "coup"), _text(o, "code")) for o in opens],
        },
    )


def _shoe_seq(env: EnvelopeRead) -> tuple[str | None, int]:
    """The envelope's shoe and seq, the shoe within the board's own bound
    (a path segment of the history links)."""
    if env.shoe is not None and not _SHOE_ID.fullmatch(env.shoe):
        raise BadMessage("shoe: not a shoe id (1 to 64 printable ASCII characters, no '/')")
    if env.seq > MAX_SEQ:
        raise BadMessage("seq: not a 63-bit integer of at least 1 (0 in shoe/state)")
    return env.shoe, env.seq


def _small(value: int | None, key: str) -> int | None:
    if value is not None and value >= 1 << 31:
        raise BadMessage(f"{key}: not a small non-negative integer")
    return value


def _shown(text: str | UnsetType | None) -> str:
    """A text as the page shows it: cut to ``MAX_TEXT``, surrogates cleaned."""
    return "" if text is None or text is UNSET else _clean(text[:MAX_TEXT])


def _read_roads(env: EnvelopeRead, p: Payload, d: dict[str, Any]) -> Msg:
    assert isinstance(p, RoadsEvent)
    beads = [(cell["w"], cell["pp"], cell["bp"]) for col in p.bead_plate for cell in col]
    if len(beads) > MAX_COUPS:
        raise BadMessage(f"bead_plate: more than {MAX_COUPS} coups")
    return Msg(*_shoe_seq(env), {"beads": beads})


def _bet_names(bets: Mapping[str, Any]) -> list[str]:
    """The side bets among a profile's bets (``settlement`` or odds keys)."""
    return [_clean(str(k)[:32]) for k in bets if k not in MAIN_BETS][:8]


def _read_odds(env: EnvelopeRead, p: Payload, d: dict[str, Any]) -> Msg:
    assert isinstance(p, OddsUpdate)
    if len(p.bets) > 32:
        raise BadMessage("bets: not an object of at most 32 bets")
    shown = {
        _clean(name[:32]): {k: float(b[k]) for k in ("win", "push", "lose", "ev")}
        for name, b in p.bets.items()
    }
    odds = {
        "coup": _small(p.coup, "coup"),
        "cards_left": _small(p.cards_left, "cards_left"),
        "view": p.view,
        "bets": shown,
    }
    return Msg(*_shoe_seq(env), {"side_bets": _bet_names(p.bets), "odds": odds})


def _read_device(env: EnvelopeRead, p: Payload, d: dict[str, Any]) -> Msg:
    assert isinstance(p, DeviceStatus)
    fields = {
        "state": p.state,
        "code": _shown(p.code),
        "detail": _shown(p.detail),
        "model": _shown(p.device["model"]),
    }
    return Msg(*_shoe_seq(env), fields)


def _read_started(env: EnvelopeRead, p: Payload, d: dict[str, Any]) -> Msg:
    assert isinstance(p, ShoeStarted)
    return Msg(*_shoe_seq(env), {"decks": p.decks, "profile": _shown(p.profile) or None})


def _read_ended(env: EnvelopeRead, p: Payload, d: dict[str, Any]) -> Msg:
    assert isinstance(p, ShoeEnded)
    return Msg(*_shoe_seq(env), {"reason": _shown(p.reason)})


def _read_cut(env: EnvelopeRead, p: Payload, d: dict[str, Any]) -> Msg:
    assert isinstance(p, ShoeCutCard)
    return Msg(*_shoe_seq(env), {"last_coup": _small(p.last_coup, "last_coup")})


def _read_card(env: EnvelopeRead, p: Payload, d: dict[str, Any]) -> Msg:
    assert isinstance(p, CardEvent)
    if p.position in HAND_POSITIONS and p.coup is None:
        raise BadMessage("coup: not a small non-negative integer")
    fields = {"position": p.position, "coup": _small(p.coup, "coup"), "card": p.card}
    return Msg(*_shoe_seq(env), fields)


def _hand_of(hand: Hand) -> dict[str, Any]:
    return {"cards": list(hand["cards"]), "total": hand["total"]}


def _read_result(env: EnvelopeRead, p: Payload, d: dict[str, Any]) -> Msg:
    assert isinstance(p, CoupResult | CoupCorrected)
    settlement = p.settlement
    if settlement is not None and len(settlement) > 32:
        raise BadMessage("settlement: not an object of at most 32 bets")
    won = {k: v > 0 for k, v in (settlement or {}).items()}
    return Msg(
        *_shoe_seq(env),
        {
            "coup": _small(p.coup, "coup"),
            "winner": _WINNER[p.winner],
            "player": _hand_of(p.player),
            "banker": _hand_of(p.banker),
            "pp": p.player_pair,
            "bp": p.banker_pair,
            "natural": p.natural,
            "demo": isinstance(p, CoupResult) and p.demo,
            "tags": list(p.tags[:8]),
            "side_bets": None if settlement is None else _bet_names(settlement),
            "hits": tuple(k for k, w in won.items() if k not in MAIN_BETS and w),
        },
    )


def _read_corrected(env: EnvelopeRead, p: Payload, d: dict[str, Any]) -> Msg:
    """A ``coup.corrected``: read as the result it carries (never a demo
    coup), with the supervisor's reason and the cards replaced."""
    assert isinstance(p, CoupCorrected)
    if "demo" in d:
        raise BadMessage("demo: not a field of coup.corrected")
    m = _read_result(env, p, d)
    replaced = [dict(c) for c in p.changes]
    return Msg(m.shoe, m.seq, {**m.f, "reason": _shown(p.reason), "changes": replaced})


def _read_void(env: EnvelopeRead, p: Payload, d: dict[str, Any]) -> Msg:
    assert isinstance(p, CoupVoid)
    cards = [{"position": c["position"], "card": c["card"]} for c in p.cards[:MAX_CARDS]]
    fields = {
        "coup": _small(p.coup, "coup"),
        "code": _shown(p.code),
        "detail": _shown(p.detail),
        "cards": cards,
    }
    return Msg(*_shoe_seq(env), fields)


def _read_misdeal(env: EnvelopeRead, p: Payload, d: dict[str, Any]) -> Msg:
    assert isinstance(p, Misdeal)
    fields = {
        "coup": _small(p.coup, "coup"),
        "code": _shown(p.code),
        "action": p.action,
        "detail": _shown(p.detail),
        "deadline": p.deadline,
    }
    return Msg(*_shoe_seq(env), fields)


class TableState:
    """One table as the board shows it. :meth:`apply` takes an MQTT message
    (topic and payload) and says whether the view changed."""

    def __init__(self, table: str, *, prefix: str = "baccarat", title: str | None = None, odds: bool = False):
        self.table = table
        self.title = title or table
        self.odds_enabled = odds
        self._base = f"{prefix}/{table}/"
        self.status: str | None = None  # the daemon: online | offline (retained, Last Will)
        self.device: dict[str, Any] | None = None
        self.broker = False  # the board's own connection to the broker
        self.shoe = _Shoe()
        self.side_bets: list[str] = []  # the profile's side bets, as learnt from its messages
        self.version = 0
        self._resync = False
        #: the first ``roads`` since the (re)connect is still to come: it
        #: (retained, or the daemon's first after a broker outage) says
        #: which coups settled while the board was away
        self._fresh_roads = False
        #: counts the board's connections to the broker
        self.epoch = 0
        #: replayed events (``replay`` in the envelope) not shown because the
        #: table's controller is online: a replay never mixes into live play
        self.replays_ignored = 0

    # --- input ------------------------------------------------------------------

    def connected(self, up: bool) -> None:
        """The board's connection to the broker came or went. On a
        (re)connect the retained ``shoe/state`` that follows replaces the
        open misdeals, which may have been resolved while it was away."""
        self.broker = up
        self._resync = up
        self._fresh_roads = up
        self.epoch += up
        if up and self.device is not None and self.device["known"]:
            # not retained: what the shoe did while the board was away is
            # not known until the daemon reports it again
            self.device = {**self.device, "known": False}
        self.version += 1

    def apply(self, topic: str, payload: bytes) -> bool:
        """Apply one message; True when the view changed. Raises
        :class:`BadMessage` (nothing changed) on a malformed one: the
        message is read and checked whole before anything of it is used."""
        if not topic.startswith(self._base):
            return False
        kind = topic[len(self._base) :]
        if kind == "status":
            changed = self._status(_read_status(payload))
        else:
            entry = _KINDS.get(kind)
            if entry is None:
                return False  # security/alert, cmd, cmd/reply...: not shown
            read, use = entry
            data = _obj(payload)
            if "replay" in data and self.status == "online":
                # a replay published onto a live table's topics (replay
                # --force-live-table): the table's own play is what it shows
                self.replays_ignored += 1
                return False
            # raises BadMessage: nothing is applied yet
            if read is None:  # shoe/state: the table's snapshot, no event
                msg = _read_snapshot(data)
            else:
                env, p = _contract(payload, data)
                if _TYPE_OF[kind] != p.TYPE:
                    raise BadMessage(f"type: a {p.TYPE} event on the {kind} topic")
                msg = read(env, p, data)
            shown = self.shoe
            changed = use(self, msg) or self.shoe is not shown
        if changed:
            self.version += 1
        return changed

    def _status(self, text: str) -> bool:
        changed = text != self.status
        self.status = text
        if text == "offline" and self.device is not None and self.device["known"]:
            # the controller is gone: nobody watches the shoe
            self.device = {**self.device, "known": False}
            changed = True
        return changed

    def _adopt(self, m: Msg) -> bool:
        """Whether a message concerns the shoe shown, starting a new shoe
        when the table sent it after every message of the shoe shown.

        The order is the table's own: ``seq``, which only ever grows, across
        shoes and restarts (the daemon takes it up from its journal), never
        the shoe ids' text (a box whose clock steps back starts a shoe whose
        id sorts before the last one's). A message about another shoe with
        a lower ``seq`` is an older shoe's (a retained copy arriving late)
        and is ignored; a ``shoe/state`` without a ``seq`` (from a daemon
        that did not send one) is taken only for the shoe shown, or when
        none is."""
        if m.shoe is None:
            return False
        s = self.shoe
        if s.id is None or (m.shoe != s.id and m.seq is not None and m.seq > s.seq):
            self.shoe = _Shoe(id=m.shoe, seq=m.seq or 0)
            return True
        if m.shoe == s.id:
            s.seq = max(s.seq, m.seq or 0)
            return True
        return False

    def _snapshot(self, m: Msg) -> bool:
        if not self._adopt(m):
            return False
        s, f = self.shoe, m.f
        coup, cards_left, phase = f["coup"], f["cards_left"], f["phase"]
        # The snapshot is sent at most once a second: it may lag the events
        # already shown. Its counts are taken unless they would go back.
        if s.coup is None or coup is None or coup >= s.coup:
            s.coup, s.phase = coup, phase
            if s.cards_left is None or cards_left is None or cards_left <= s.cards_left:
                s.cards_left, s.cards_dealt = cards_left, f["cards_dealt"]
        if phase == "ended":
            s.ended = True
            s.phase = "ended"
        if f["last_coup"] is not None:
            s.cut_last = f["last_coup"]
        fresh, self._resync = self._resync, False  # the first snapshot since the (re)connect
        counts = f["counts"]
        if counts is not None:
            s.snap_settled = counts["settled"]
            voids = counts["void_coups"]
            if fresh and voids > s.voids_known:
                s.missed_voids = True
            s.voids_known = max(s.voids_known, voids)
            s.snap_resolved = s.snap_settled + voids
            s.snap_stats = {"naturals": counts["naturals"], "tags": counts["tags"], "void_coups": voids}
        opens = f["opens"]
        if opens is not None and fresh:
            # after a (re)connect: the retained list is the truth, whatever
            # was resolved while the board was away
            kept = {}
            for key in opens[:MAX_AWAITING]:
                kept[key] = s.awaiting.get(
                    key, {"coup": key[0], "code": key[1], "detail": "", "deadline": None}
                )
            s.awaiting = kept
        elif opens is not None:
            for key in opens[:MAX_AWAITING]:
                if key not in s.awaiting and len(s.awaiting) < MAX_AWAITING:
                    s.awaiting[key] = {"coup": key[0], "code": key[1], "detail": "", "deadline": None}
        if fresh:
            self._catch_up_last()
            self._catch_up_current()
        return True

    def _roads(self, m: Msg) -> bool:
        if not self._adopt(m):
            return False
        fresh, self._fresh_roads = self._fresh_roads, False
        seen = [Bead(w, pp, bp) for w, pp, bp in m.f["beads"]]
        beads = self.shoe.beads
        # Keep the coup numbers of the cells the board saw live where the
        # sequence agrees; what it missed (an outage) comes in without.
        merged = [beads[i] if i < len(beads) and beads[i].same(b) else b for i, b in enumerate(seen)]
        if [(b.w, b.pp, b.bp, b.coup) for b in merged] == [(b.w, b.pp, b.bp, b.coup) for b in beads]:
            return False
        if len(merged) < len(beads) and all(b.same(m) for b, m in zip(beads, merged, strict=False)):
            return False  # an older roads event than the results already seen
        s = self.shoe
        s.beads = merged
        s.live = {i: v for i, v in s.live.items() if i < len(merged)}
        if fresh and len(merged) > len(beads) and merged[-1].coup is None:
            s.missed_settled = True
            self._catch_up_last()
        return True

    def _odds(self, m: Msg) -> bool:
        self._learn_bets(m.f["side_bets"])
        if not self.odds_enabled or not self._adopt(m):
            return False
        odds = m.f["odds"]
        view = odds["view"]
        held = self.shoe.odds.get(view)
        if held == odds:
            return False  # the retained copy of an odds.update already applied
        if held is not None and (odds["coup"] or 0) < (held["coup"] or 0):
            return False  # older than the odds shown (a retained copy after the events)
        self.shoe.odds[view] = odds
        return True

    def _learn_bets(self, side: list[str] | None) -> None:
        if side is not None and side != self.side_bets:
            self.side_bets = side

    def _device(self, m: Msg) -> bool:
        self.device = {**m.f, "known": True}
        return True

    def _started(self, m: Msg) -> bool:
        if not self._adopt(m):
            return False
        self.shoe.decks = m.f["decks"]
        self.shoe.profile = m.f["profile"]
        self.shoe.phase = self.shoe.phase or "burn"
        return True

    def _ended(self, m: Msg) -> bool:
        if not self._adopt(m):
            return False
        self.shoe.ended = True
        self.shoe.phase = "ended"
        self.shoe.end_reason = m.f["reason"]
        self.shoe.current = None
        return True

    def _cut(self, m: Msg) -> bool:
        if not self._adopt(m):
            return False
        self.shoe.cut_last = m.f["last_coup"]
        return True

    # --- catching up --------------------------------------------------------------

    def _resolved_seen(self) -> set[int]:
        """The coups whose end (result or void) the board saw."""
        s = self.shoe
        done = {b.coup for b in s.beads if b.coup is not None} | {v["coup"] for v in s.voids}
        if s.last is not None and s.last.get("coup") is not None:
            done.add(s.last["coup"])
        return done

    def _catch_up_last(self) -> None:
        """The last-coup panel after a (re)connect, when the retained topics
        say coups ended while the board was away: their cards and totals
        are not retained anywhere, so what is shown is what is known. A
        settled coup only: the roads' last cell (winner and pairs; which
        coup it was is not known). A void only: that a coup was voided. Both:
        the last settled one, and that a void may have come after it."""
        s = self.shoe
        if not (s.missed_settled or s.missed_voids):
            return
        bead = s.beads[-1] if s.missed_settled and s.beads else None
        s.last = {
            "coup": None,
            "seen": False,
            "demo": False,
            "void": {"code": None, "detail": ""} if bead is None else None,
            "cards": [],
            "player": None,
            "banker": None,
            "winner": bead.w if bead else None,
            "natural": None,
            "player_pair": bead.pp if bead else None,
            "banker_pair": bead.bp if bead else None,
            "tags": [],
            "hits": [],
            #: a void coup also ended while the board was away: which of
            #: the two came last is not known
            "void_unseen": bool(bead and s.missed_voids),
        }

    def _catch_up_current(self) -> None:
        """The coup-being-dealt panel after a (re)connect, from the retained
        snapshot: the coup the daemon has open (its number) unless the board
        saw it end or every coup of the shoe is resolved; the cards it saw of
        that coup stay, marked as possibly missing some; a coup it did not
        see start has no card shown."""
        s = self.shoe
        n = s.coup
        every_coup_resolved = n is not None and s.snap_resolved is not None and s.snap_resolved >= n
        if s.ended or s.phase != "deal" or n is None or every_coup_resolved or n in self._resolved_seen():
            s.current = None
        elif s.current is not None and s.current["coup"] == n:
            # seen from its first card on unless the board lost the broker since
            s.current["missed"] = s.current["missed"] or s.current_epoch != self.epoch
        else:
            s.current = {"coup": n, "cards": [], "missed": True}

    def _card(self, m: Msg) -> bool:
        if not self._adopt(m):
            return False
        if self.device is None or not self.device["known"]:
            # a card read is the daemon's word that its shoe reads: online,
            # though no device.status came (it is not retained)
            model = self.device["model"] if self.device is not None else ""
            self.device = {
                "state": "online",
                "code": "",
                "detail": "reading cards",
                "model": model,
                "known": True,
            }
        pos, coup, card = m.f["position"], m.f["coup"], m.f["card"]
        if pos not in HAND_POSITIONS:
            return False  # burn and set-aside cards are not a hand's
        s = self.shoe
        if s.current is None or s.current["coup"] != coup:
            if s.last is not None and s.last.get("coup") == coup:
                return False  # a late copy of a settled coup's card
            s.current = {"coup": coup, "cards": [], "missed": False}
            s.current_epoch = self.epoch
        if len(s.current["cards"]) < MAX_CARDS:
            s.current["cards"].append({"position": pos, "card": card})
        s.phase = "deal"
        if s.coup is None or coup > s.coup:
            s.coup = coup  # the coup being dealt
        return True

    def _corrected(self, m: Msg) -> bool:
        """A supervisor's correction of a settled coup: its road cell, its
        natural and side-bet hits, and the last coup's panel if it is that
        coup, show the corrected result (the ``roads`` the engine sends after
        it then agree). A coup the board has no cell for waits for them."""
        if not self._adopt(m):
            return False
        f = m.f
        s = self.shoe
        coup = f["coup"]
        hits = tuple(f["hits"])
        was = next((b.w for b in s.beads if b.coup == coup), None)
        if was is None and s.last is not None and s.last.get("coup") == coup and not s.last.get("void"):
            was = s.last.get("winner")
        ended = [b.coup for b in s.beads if b.coup is not None] + [v["coup"] for v in s.voids]
        if s.last is not None and isinstance(s.last.get("coup"), int):
            ended.append(s.last["coup"])
        s.correction = {
            "coup": coup,
            "was": was,
            "winner": f["winner"],
            "reason": f["reason"],
            "changes": f["changes"],
            "until": max([coup, *ended]),
        }
        changed = True
        for i, b in enumerate(s.beads):
            if b.coup == coup:
                s.beads[i] = Bead(f["winner"], f["pp"], f["bp"], coup)
                s.live[i] = (f["natural"], hits)
                changed = True
        if s.last is not None and s.last.get("coup") == coup and not s.last.get("void"):
            s.last.update(
                player=f["player"],
                banker=f["banker"],
                winner=f["winner"],
                natural=f["natural"],
                player_pair=f["pp"],
                banker_pair=f["bp"],
                tags=list(f["tags"]),
                hits=[SIDE_BET_LABELS.get(h, h) for h in hits],
                corrected=True,
                changes=f["changes"],
                reason=f["reason"],
            )
        return changed

    def _coup_ended(self, coup: int) -> None:
        """A coup settled or void: the banner of a correction made before
        it began is done (a late copy of an earlier coup's leaves it)."""
        c = self.shoe.correction
        if c is not None and coup > c["until"]:
            self.shoe.correction = None

    def _result(self, m: Msg) -> bool:
        if not self._adopt(m):
            return False
        f = m.f
        coup, winner, pp, bp, natural, hits = (
            f["coup"],
            f["winner"],
            f["pp"],
            f["bp"],
            f["natural"],
            f["hits"],
        )
        self._learn_bets(f["side_bets"])
        self._coup_ended(coup)
        s = self.shoe
        s.missed_settled = s.missed_voids = False
        s.last = {
            "coup": coup,
            "seen": True,
            "demo": f["demo"],
            "void": None,
            "player": f["player"],
            "banker": f["banker"],
            "winner": winner,
            "natural": natural,
            "player_pair": pp,
            "banker_pair": bp,
            "tags": list(f["tags"]),
            "hits": [SIDE_BET_LABELS.get(h, h) for h in hits],
            "void_unseen": False,
        }
        if s.current is not None and s.current["coup"] <= coup:
            s.current = None
        for key in [k for k in s.awaiting if k[0] == coup]:
            del s.awaiting[key]
        if s.coup is None or coup > s.coup:
            s.coup = coup
        if f["demo"]:
            return True
        if any(b.coup == coup for b in s.beads):
            return True  # a copy (events may come twice: docs/operations.md, MQTT)
        bead = Bead(winner, pp, bp, coup)
        last = s.beads[-1] if s.beads else None
        if last is not None and last.coup is None and last.same(bead) and self._numbered_before(coup):
            # the roads event came first: this is its last cell
            s.beads[-1] = bead
            s.live[len(s.beads) - 1] = (natural, hits)
        elif len(s.beads) < MAX_COUPS:
            s.beads.append(bead)
            s.live[len(s.beads) - 1] = (natural, hits)
        return True

    def _numbered_before(self, coup: int) -> bool:
        numbered = [b.coup for b in self.shoe.beads if b.coup is not None]
        return not numbered or max(numbered) < coup

    def _void(self, m: Msg) -> bool:
        if not self._adopt(m):
            return False
        coup, code = m.f["coup"], m.f["code"]
        self._coup_ended(coup)
        s = self.shoe
        s.missed_settled = s.missed_voids = False
        s.last = {
            "coup": coup,
            "seen": True,
            "demo": False,
            "void": {"code": code, "detail": m.f["detail"]},
            "cards": [dict(c) for c in m.f["cards"]],
            "void_unseen": False,
        }
        if s.current is not None and s.current["coup"] == coup:
            s.current = None
        for key in [k for k in s.awaiting if k[0] == coup]:
            del s.awaiting[key]
        if not any(v["coup"] == coup for v in s.voids):
            s.voids_known += 1
            if len(s.voids) < MAX_VOIDS:
                s.voids.append({"coup": coup, "code": code})
        # a coup voided after its result leaves the roads (as `roads` does)
        for i, b in enumerate(s.beads):
            if b.coup == coup:
                del s.beads[i]
                s.live = {(j if j < i else j - 1): v for j, v in s.live.items() if j != i}
                break
        return True

    def _misdeal(self, m: Msg) -> bool:
        if not self._adopt(m):
            return False
        coup, code, action = m.f["coup"], m.f["code"], m.f["action"]
        s = self.shoe
        if action == "awaiting_supervisor":
            if len(s.awaiting) >= MAX_AWAITING and (coup, code) not in s.awaiting:
                return False
            s.awaiting[(coup, code)] = {
                "coup": coup,
                "code": code,
                "detail": m.f["detail"],
                "deadline": m.f["deadline"],
            }
        elif action == "corrected":
            s.awaiting.pop((coup, code), None)
        else:  # void
            for key in [k for k in s.awaiting if k[0] == coup]:
                del s.awaiting[key]
        return True

    # --- output -----------------------------------------------------------------

    def tally(self) -> dict[str, int]:
        return shoe_tally(self.shoe)

    def side_bet_hits(self) -> list[dict[str, Any]]:
        return side_bets_won(self.shoe, self.side_bets)

    def roads(self) -> dict[str, list[dict[str, Any]]]:
        """The shoe's five roads as board cells (:func:`board_roads`)."""
        return board_roads(self.shoe.beads)

    def view(self) -> dict[str, Any]:
        """Everything the page shows, JSON-ready."""
        s = self.shoe
        return {
            "table": self.table,
            "title": self.title,
            "version": self.version,
            "broker": self.broker,
            "status": self.status,
            "device": self.device_view(),
            "shoe": s.id,
            "profile": s.profile,
            "phase": s.phase,
            "coup": s.coup,
            "cards_left": s.cards_left,
            "cards_dealt": s.cards_dealt,
            "cut_last": s.cut_last,
            "ended": s.ended,
            "end_reason": s.end_reason,
            "tally": self.tally(),
            "side_bets": self.side_bet_hits(),
            "roads": self.roads(),
            "last": s.last,
            "current": s.current,
            "awaiting": sorted(s.awaiting.values(), key=lambda a: (a["coup"], a["code"])),
            "voids": list(s.voids),
            "correction": None
            if s.correction is None
            else {k: v for k, v in s.correction.items() if k != "until"},
            "odds": {v: s.odds.get(v) for v in ODDS_VIEWS} if self.odds_enabled else None,
        }

    def device_view(self) -> dict[str, Any]:
        """The shoe (device) as last reported; ``unknown`` until a
        ``device.status`` arrives (it is not retained), and again after the
        board lost the broker or the controller went offline (``was``: the
        state last reported)."""
        d = self.device
        if d is None:
            return {"state": "unknown", "was": None, "code": "", "detail": "", "model": ""}
        if not d["known"]:
            return {"state": "unknown", "was": d["state"], "code": "", "detail": "", "model": d["model"]}
        return {
            "state": d["state"],
            "was": None,
            "code": d["code"],
            "detail": d["detail"],
            "model": d["model"],
        }


def shoe_tally(s: _Shoe) -> dict[str, int]:
    """The shoe's counts: winners, pairs, naturals, coups and voids."""
    beads = s.beads
    naturals = s.snap_stats.get("naturals", 0) if s.snap_stats else 0
    start = s.snap_settled if s.snap_stats else 0
    naturals += sum(1 for i, (nat, _) in s.live.items() if i >= start and nat)
    return {
        "banker": sum(b.w == "B" for b in beads),
        "player": sum(b.w == "P" for b in beads),
        "tie": sum(b.w == "T" for b in beads),
        "player_pair": sum(b.pp for b in beads),
        "banker_pair": sum(b.bp for b in beads),
        "natural": naturals,
        "coups": len(beads),
        "void": max(s.voids_known, len(s.voids)),
    }


def side_bets_won(s: _Shoe, side_bets: list[str]) -> list[dict[str, Any]]:
    """Each side bet offered, with how many coups of the shoe it won."""
    tags = s.snap_stats.get("tags", {}) if s.snap_stats else {}
    start = s.snap_settled if s.snap_stats else 0
    out = []
    for bet in side_bets:
        hits = sum(tags.get(t, 0) for t in SIDE_BET_TAGS.get(bet, ()))
        hits += sum(1 for i, (_, won) in s.live.items() if i >= start and bet in won)
        out.append({"bet": bet, "label": SIDE_BET_LABELS.get(bet, bet), "hits": hits})
    return out


def board_roads(beads: list[Bead]) -> dict[str, list[dict[str, Any]]]:
    """The five roads as board cells ``{x, y, ...}`` (0-based; dragon
    tails turned, as :func:`controller.roads.layout` places them), each
    with the number of the coup that made it (null when unknown)."""
    roads = build_roads(
        [{"winner": b.w, "player_pair": b.pp, "banker_pair": b.bp} for b in beads], opening_tie=True
    )
    bead_cells = [
        {"x": i // ROWS, "y": i % ROWS, "w": b.w, "pp": b.pp, "bp": b.bp, "coup": b.coup}
        for i, b in enumerate(beads)
    ]
    decisive = [b for b in beads if b.w != "T"]
    if not decisive and beads:
        decisive = [beads[0]]  # the opening-tie cell is the first tie's
    big_cells = []
    makers: list[tuple[int, int, int | None]] = []  # (column n, row m, coup) of each big-road cell
    for k, p in enumerate(layout(roads["big_road"])):
        coup = decisive[k].coup if k < len(decisive) else None
        big_cells.append({"x": p.x, "y": p.y, **p.cell, "coup": coup})
    for n, col in enumerate(roads["big_road"], start=1):
        for m, _ in enumerate(col, start=1):
            makers.append((n, m, None))
    makers = [(n, m, big_cells[i]["coup"]) for i, (n, m, _) in enumerate(makers)]
    out: dict[str, list[dict[str, Any]]] = {"bead_plate": bead_cells, "big_road": big_cells}
    for name, k in (("big_eye_boy", 1), ("small_road", 2), ("cockroach_pig", 3)):
        coups = [c for n, m, c in makers if derived_entry(n, m, k)]
        out[name] = [
            {"x": p.x, "y": p.y, "c": p.cell, "coup": coups[i] if i < len(coups) else None}
            for i, p in enumerate(layout(roads[name]))  # type: ignore[literal-required]
        ]
    return out


EventReader = Callable[[EnvelopeRead, Payload, dict[str, Any]], Msg]
_KINDS: dict[str, tuple[EventReader | None, Callable[[TableState, Msg], bool]]] = {
    "shoe/state": (None, TableState._snapshot),
    "roads": (_read_roads, TableState._roads),
    "odds": (_read_odds, TableState._odds),
    "odds/update": (_read_odds, TableState._odds),
    "device/status": (_read_device, TableState._device),
    "shoe/started": (_read_started, TableState._started),
    "shoe/ended": (_read_ended, TableState._ended),
    "shoe/cut_card": (_read_cut, TableState._cut),
    "card": (_read_card, TableState._card),
    "coup/result": (_read_result, TableState._result),
    "coup/corrected": (_read_corrected, TableState._corrected),
    "coup/void": (_read_void, TableState._void),
    "misdeal": (_read_misdeal, TableState._misdeal),
}
#: The event type each topic carries (the retained ``odds``: an ``odds.update``).
_TYPE_OF = {kind: "odds.update" if kind == "odds" else kind.replace("/", ".") for kind in _KINDS}
