"""What must hold of the engine's output whatever it is fed: the checks the
engine, command and shoelog harnesses and ``tests/test_fuzz_properties.py``
share.

``EngineChecker`` wraps an engine: every frame, command and tick goes
through it, and every event that comes back is checked against the
published contract (docs/events.md) and against what was fed in. Each
broken invariant raises ``InvariantError`` with a short code (in brackets):

- the engine never raises (the caller sees the exception);
- [schema, ts, cards_left, json] each event validates against
  ``controller.contract.event_schema`` of its type and serialises as
  strict JSON;
- [seq, events_lost, event_id] ``seq`` increases by exactly one per event
  and every event the engine numbered was handed out; ``event_id`` is
  ``<table>/<shoe>/<seq>``;
- [card_invented, card_value, card_after_result] every card shown in a
  ``card`` event was fed in a Card frame or entered by a supervisor
  command, at most once per copy, with its own value, and none is dealt to
  a coup already settled;
- [coup_ended_twice] a coup ends once: never both ``coup.result`` and
  ``coup.void``, never two of either;
- [shoe_id_reused] no two shoes of the table have the same id;
- [shoe_ended_with_open_coup, after_shoe_end, result_after_shoe,
  shoe_twice] a shoe ends once every coup dealt in it has a result or is
  void; after that, no cut card and no coup (but a void overrun one) is
  taken into it, none of its coups is settled, and it does not end again;
- [result_while_open, result_cards, result_math, settlement] a
  ``coup.result`` never comes while a misdeal of its coup awaits a
  supervisor; its cards are those shown in ``card`` events at those
  positions of that coup, its totals, winner and pairs follow from them,
  and its settlement has exactly the profile's bets (null for a demo coup);
- [void_without_coup_void, misdeal_on_settled, deadline_on_void] a
  ``misdeal`` whose action is ``void`` is followed by the coup's
  ``coup.void``; no misdeal is raised on a settled coup, and no deadline
  starts on a void one;
- [reply, failed_command_events, failed_command_state] a command that
  cannot apply changes nothing: it amounts to a tick at its time (the
  deadlines that passed still fire); a reply echoes the command's id;
- [cards_lost, coups_unfinished] once the session is closed (``finish``),
  every card fed in a Card frame has been shown, and every coup that was
  dealt to or had a misdeal has ended in a result or a void.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import functools
from collections import Counter, defaultdict
from collections.abc import Iterator
from typing import Any
from unittest import mock

import jsonschema

from controller.cards import CARD_VALUE, parse_card
from controller.commands_schema import EngineCommand, command_dict
from controller.contract import event_schema
from controller.engine import Engine
from controller.events import Event, dumps
from controller.odds import OddsCalculator
from controller.rules import Profile, load_profile
from firmware_protocols.frames import Button, Card, Frame

DEAL_POSITIONS = ("P1", "B1", "P2", "B2", "P3", "B3")
#: The last second an event's ``ts`` can carry (9999-12-31T23:59:59Z).
LAST_TS = 253_402_300_799.0

_validators: dict[str, jsonschema.protocols.Validator] = {}


@functools.cache
def _builtin(name: str) -> Profile:
    return load_profile(name)


@functools.cache
def profile_for(name: str, rules: tuple[tuple[str, Any], ...] = ()) -> Profile:
    """A built-in profile with (valid) rule overrides: what
    ``load_profile(name, dict(rules))`` gives, without reading the YAML
    again for each combination."""
    base = _builtin(name)
    return dataclasses.replace(base, rules={**base.rules, **dict(rules)}) if rules else base


_for_profile = OddsCalculator.for_profile.__func__  # type: ignore[attr-defined]
_calculators: dict[Any, OddsCalculator] = {}


def _cached_for_profile(cls: type[OddsCalculator], profile: Profile) -> OddsCalculator:
    # the tables depend on the tableau and the bets only, not on the rules
    key = (profile.tableau, tuple(profile.bets.items()))
    calc = _calculators.get(key)
    if calc is None:
        calc = _calculators[key] = _for_profile(cls, profile)
    return calc


@contextlib.contextmanager
def _odds_tables_cached() -> Iterator[None]:
    """While the engine builds (or a copy rebuilds) its odds tables: reuse
    them. They take about 0.2 s to build, once per profile in the product
    and again when an engine is copied; the fuzzers spend that on inputs."""
    with mock.patch.object(OddsCalculator, "for_profile", classmethod(_cached_for_profile)):
        yield


def make_engine(
    profile: str,
    decks: int,
    rules: tuple[tuple[str, Any], ...] = (),
    *,
    odds: bool = False,
    roads: bool = False,
) -> Engine:
    """An engine for a fuzz session, table ``T01``."""
    with _odds_tables_cached():
        return Engine("T01", profile_for(profile, rules), decks, odds=odds, roads=roads)


class InvariantError(AssertionError):
    """An invariant of the engine's output does not hold; ``code`` names
    which (``FUZZ_IGNORE`` takes these names)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"[{code}] {message}")
        self.code = code


def validator(event_type: str) -> jsonschema.protocols.Validator:
    v = _validators.get(event_type)
    if v is None:
        schema = event_schema(event_type)
        v = jsonschema.Draft202012Validator(schema)
        _validators[event_type] = v
    return v


def _fail(code: str, message: str, ev: Event | None = None) -> InvariantError:
    return InvariantError(code, message + (f"\n  event: {dumps(ev)}" if ev is not None else ""))


def _total(cards: list[str]) -> int:
    return sum(CARD_VALUE[c] for c in cards) % 10


class EngineChecker:
    """Feeds an engine and checks every event it emits (see the module)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.table = engine.table
        self.bets = set(engine.profile.bet_names)
        self.last_seq = engine.seq
        self.ended: set[str] = set()
        self.shoes: set[str] = set()
        # (shoe, coup) -> "result" | "void"
        self.terminal: dict[tuple[str, int], str] = {}
        # (shoe, coup) -> codes awaiting a supervisor
        self.open: dict[tuple[str, int], set[str]] = defaultdict(set)
        # (shoe, coup) -> position -> cards shown there
        self.dealt: dict[tuple[str, int], dict[str, list[str | None]]] = defaultdict(
            lambda: defaultdict(list)
        )
        self.supplied: Counter[str] = Counter()
        self.shown: Counter[str] = Counter()
        self.fed: Counter[str] = Counter()  # cards of Card frames only
        self.events = 0

    # -- inputs

    def feed(self, frame: Frame) -> list[Event]:
        if isinstance(frame, Card) and frame.card is not None:
            self.supplied[frame.card] += 1
            self.fed[frame.card] += 1
        events = self.engine.feed(frame)
        self.check(events)
        return events

    def tick(self, now: float) -> list[Event]:
        events = self.engine.tick(now)
        self.check(events)
        return events

    def command(self, sent: EngineCommand | dict[str, Any], t: float) -> tuple[dict[str, Any], list[Event]]:
        # a parsed command, or a JSON object the engine parses itself
        cmd = sent if isinstance(sent, dict) else command_dict(sent)
        entered = None
        if cmd.get("cmd") == "enter_card" and isinstance(cmd.get("card"), str):
            entered = parse_card(cmd["card"])
            self.supplied[entered] += 1
        # What a command that cannot apply must amount to: the deadlines up
        # to t fire, as a tick at t fires them, and nothing else happens.
        expected_events, expected_state = self._tick_on_a_copy(t)
        reply, events = self.engine.command(sent, t)
        keys = set(reply) - {"would"}  # an entry held for its confirm says what it would do
        if keys != {"id", "ok", "error"} or reply["id"] != cmd.get("id"):
            raise _fail(
                "reply", f"reply {reply!r} to {cmd!r}: keys must be id, ok, error (and would) and id echoed"
            )
        if "would" in reply and (
            reply["ok"] is not False
            or not isinstance(reply["would"], list)
            or not reply["would"]
            or not all(isinstance(w, str) and w for w in reply["would"])
        ):
            raise _fail("reply", f"reply {reply!r} to {cmd!r}: would is a list of lines, never with ok")
        if reply["ok"] is not True:
            if reply["ok"] is not False or not isinstance(reply["error"], str) or not reply["error"]:
                raise _fail(
                    "reply", f"reply {reply!r} to {cmd!r}: a failure needs ok=false and an error message"
                )
            if entered is not None:
                self.supplied[entered] -= 1
            if events != expected_events:
                raise _fail(
                    "failed_command_events",
                    f"failed command {cmd!r} ({reply['error']}) returned events "
                    f"{[e['type'] for e in events]}; a tick at the same time returns "
                    f"{[(e['type'], e.get('code'), e.get('action')) for e in expected_events]}",
                )
            if self.engine.snapshot() != expected_state:
                raise _fail(
                    "failed_command_state",
                    f"failed command {cmd!r} ({reply['error']}) changed the shoe:\n"
                    f"  expected: {expected_state}\n  found:    {self.engine.snapshot()}",
                )
        elif reply["error"] is not None:
            raise _fail("reply", f"reply {reply!r}: ok with an error")
        self.check(events)
        return reply, events

    def _tick_on_a_copy(self, t: float) -> tuple[list[Event], dict[str, Any]]:
        # the profile is read-only: shared, not copied (the engine leaves its
        # odds tables out of a copy and rebuilds them: from the cache here)
        with _odds_tables_cached():
            probe = copy.deepcopy(self.engine, {id(self.engine.profile): self.engine.profile})
        events = probe.tick(t)
        return events, probe.snapshot()

    def finish(self, t: float) -> None:
        """Close the session and check that nothing was lost: every
        deadline passes, a RESULT closes what waits for one, the supervisor
        ends the shoe; then every card that left the shoe has been shown in
        a ``card`` event, the snapshot serialises, and the engine handed out
        every event it numbered."""
        # the closing steps stay within what a timestamp can say (year 9999)
        t = min(t, LAST_TS)
        later = min(t + 1_000_000.0, LAST_TS)
        self.tick(t)
        self.feed(Button(t, None, "RESULT"))
        self.tick(later)
        self.command({"id": "fuzz-end", "cmd": "end_shoe"}, later)
        dumps(self.engine.snapshot())
        missing = self.fed - self.shown
        if missing:
            raise _fail(
                "cards_lost",
                f"cards left the shoe but were never shown in a card event: {sorted(missing.elements())}",
            )
        unfinished = sorted({k for k in [*self.dealt, *self.open] if k not in self.terminal})
        if unfinished:
            raise _fail(
                "coups_unfinished",
                f"coups with cards or misdeals that never got a coup.result or coup.void: {unfinished}",
            )
        if self.engine.seq != self.last_seq:
            raise _fail(
                "events_lost", f"the engine numbered {self.engine.seq} events but handed out {self.last_seq}"
            )

    # -- the checks

    def check(self, events: list[Event]) -> None:
        void_due: dict[tuple[str, int], Event] = {}
        for ev in events:
            self._check_one(ev, void_due)
        if void_due:
            key, ev = next(iter(void_due.items()))
            raise _fail("void_without_coup_void", f"misdeal void for coup {key} with no coup.void", ev)
        if self.engine.seq != self.last_seq:
            raise _fail(
                "events_lost",
                f"the engine numbered events up to seq {self.engine.seq} "
                f"but handed out up to {self.last_seq}: events were lost",
            )

    def _check_one(self, ev: Event, void_due: dict[tuple[str, int], Event]) -> None:
        self.events += 1
        etype = ev.get("type")
        if not isinstance(etype, str):
            raise _fail("schema", "event without a type", ev)
        try:
            schema_validator = validator(etype)
        except KeyError:
            raise _fail("schema", f"event type {etype!r} has no schema", ev) from None
        err = jsonschema.exceptions.best_match(schema_validator.iter_errors(ev))
        if err is not None:
            where = list(err.absolute_path)
            if where in (["ts"], ["deadline"]):  # a time the format cannot write
                raise _fail("ts", f"{etype}: {err.message} at {where}", ev)
            if where == ["cards_left"]:  # a count of the shoe gone wrong
                raise _fail("cards_left", f"{etype}: {err.message} at {where}", ev)
            raise _fail(
                "schema", f"{etype} does not match its schema: {err.message} at {list(err.absolute_path)}", ev
            )
        try:
            dumps(ev)
        except ValueError as exc:
            raise _fail("json", f"not strict JSON: {exc}") from None
        seq = ev["seq"]
        if seq != self.last_seq + 1:
            raise _fail("seq", f"seq {seq} after {self.last_seq}: must increase by one per event", ev)
        self.last_seq = seq
        shoe = ev["shoe"]
        if ev["table"] != self.table or ev["event_id"] != f"{self.table}/{shoe or '-'}/{seq}":
            raise _fail("event_id", "event_id must be <table>/<shoe>/<seq>", ev)
        handler = getattr(self, "_on_" + etype.replace(".", "_"), None)
        if handler is not None:
            handler(ev, shoe, void_due)

    def _on_shoe_started(self, ev: Event, shoe: str, void_due: dict[tuple[str, int], Event]) -> None:
        if shoe in self.shoes:
            raise _fail("shoe_id_reused", f"shoe id {shoe} started twice", ev)
        self.shoes.add(shoe)

    def _on_shoe_ended(self, ev: Event, shoe: str, void_due: dict[tuple[str, int], Event]) -> None:
        if shoe in self.ended:
            raise _fail("shoe_twice", f"shoe {shoe} ended twice", ev)
        self.ended.add(shoe)
        open_coups = sorted(
            {k[1] for k in [*self.dealt, *self.open] if k[0] == shoe and k not in self.terminal}
        )
        if open_coups:
            raise _fail("shoe_ended_with_open_coup", f"shoe {shoe} ended with coups {open_coups} open", ev)

    def _on_shoe_cut_card(self, ev: Event, shoe: str, void_due: dict[tuple[str, int], Event]) -> None:
        if shoe in self.ended:
            raise _fail("after_shoe_end", f"cut card taken into shoe {shoe} after it ended", ev)

    def _on_card(self, ev: Event, shoe: str, void_due: dict[tuple[str, int], Event]) -> None:
        card = ev["card"]
        if card is not None:
            if ev["value"] != CARD_VALUE[card]:
                raise _fail("card_value", "card value is not the card's baccarat value", ev)
            self.shown[card] += 1
            if self.shown[card] > self.supplied[card]:
                raise _fail(
                    "card_invented",
                    f"card {card} shown {self.shown[card]} times, fed or entered {self.supplied[card]} times",
                    ev,
                )
        elif ev["value"] is not None:
            raise _fail("card_value", "an unread card has a value", ev)
        pos = ev["position"]
        if ev["coup"] is not None and pos in DEAL_POSITIONS:
            key = (shoe, ev["coup"])
            if shoe in self.ended and self.terminal.get(key) != "void":
                raise _fail("after_shoe_end", f"card dealt to {pos} of coup {key} after its shoe ended", ev)
            if self.terminal.get(key) == "result":
                raise _fail("card_after_result", f"card dealt to {pos} of coup {key} after its result", ev)
            self.dealt[key][pos].append(card)

    def _on_misdeal(self, ev: Event, shoe: str, void_due: dict[tuple[str, int], Event]) -> None:
        key = (shoe, ev["coup"])
        action = ev["action"]
        code = ev["code"]
        done = self.terminal.get(key)
        if done == "result":
            raise _fail("misdeal_on_settled", f"misdeal on coup {key}, which was already settled", ev)
        if action == "awaiting_supervisor":
            if done == "void":
                raise _fail("deadline_on_void", f"a deadline started on coup {key}, which is void", ev)
            if ev["deadline"] is None:
                raise _fail("schema", "awaiting a supervisor with no deadline", ev)
            self.open[key].add(code)
        elif action == "corrected":
            self.open[key].discard(code)
        elif action == "void" and done is None:
            void_due[key] = ev

    def _on_coup_void(self, ev: Event, shoe: str, void_due: dict[tuple[str, int], Event]) -> None:
        key = (shoe, ev["coup"])
        if key in self.terminal:
            raise _fail("coup_ended_twice", f"coup {key} void after it was already {self.terminal[key]}", ev)
        self.terminal[key] = "void"
        self.open.pop(key, None)
        void_due.pop(key, None)

    def _on_coup_result(self, ev: Event, shoe: str, void_due: dict[tuple[str, int], Event]) -> None:
        key = (shoe, ev["coup"])
        if key in self.terminal:
            raise _fail(
                "coup_ended_twice", f"coup {key} settled after it was already {self.terminal[key]}", ev
            )
        if key in void_due:
            raise _fail("coup_ended_twice", f"coup {key} settled right after a misdeal voided it", ev)
        if self.open.get(key):
            raise _fail(
                "result_while_open",
                f"coup {key} settled with misdeals awaiting a supervisor: {sorted(self.open[key])}",
                ev,
            )
        if shoe in self.ended:
            raise _fail("result_after_shoe", f"coup {key} settled after its shoe ended", ev)
        self.terminal[key] = "result"
        dealt = self.dealt.get(key, {})
        player, banker = ev["player"]["cards"], ev["banker"]["cards"]
        positions = [f"P{i + 1}" for i in range(len(player))] + [f"B{i + 1}" for i in range(len(banker))]
        if sorted(positions) != sorted(p for p, cards in dealt.items() if cards):
            raise _fail(
                "result_cards", f"coup {key} settled on {positions}; card events were at {sorted(dealt)}", ev
            )
        for pos, card in zip(positions, player + banker, strict=True):
            if card not in dealt[pos]:
                raise _fail(
                    "result_cards",
                    f"coup {key}: {card} at {pos} was never shown there (shown: {dealt[pos]})",
                    ev,
                )
        p, b = _total(player), _total(banker)
        if ev["player"]["total"] != p or ev["banker"]["total"] != b:
            raise _fail("result_math", "totals do not follow from the cards", ev)
        winner = "player" if p > b else "banker" if b > p else "tie"
        if ev["winner"] != winner:
            raise _fail("result_math", f"winner {ev['winner']} with totals {p} and {b}", ev)
        if ev["player_pair"] != (player[0][0] == player[1][0]) or ev["banker_pair"] != (
            banker[0][0] == banker[1][0]
        ):
            raise _fail("result_math", "pairs do not follow from the cards", ev)
        settlement = ev["settlement"]
        if ev["demo"]:
            if settlement is not None:
                raise _fail("settlement", "a demo coup was settled", ev)
        elif settlement is None or set(settlement) != self.bets:
            raise _fail("settlement", f"settlement keys must be the profile's bets {sorted(self.bets)}", ev)
