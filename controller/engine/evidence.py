"""Supervisor entries checked against the shoe's own evidence (issue 27,
item 3), and what an entry would do before it is done.

- ``check_enter``: an ``enter_card`` whose card makes the cards the shoe
  dealt after it illegal by the tableau (the hand would be complete, yet
  the shoe dealt another card before the RESULT) is refused, naming the
  card and why.
- ``check_accept``: an ``accept`` of a coup whose frames were lost on the
  line, when the cards read since cannot be that coup's (the frames lost
  must hold its end: ``loss._ends_possible`` leaves no count of 0), is
  refused with the counts that fit.
- ``preview`` and ``consequences``: the entry run on a copy of the engine
  (nothing of the real one changes), and what it would do beyond the
  entered card: set a dealt card aside, void a coup, put a card the shoe
  dealt in this coup into another, number the next coup past coups lost
  whole. Such an entry is applied only with ``confirm`` (the reply says
  what it would do, in one line).

Pure functions of the engine's state (the copy is the engine's own,
deterministic like it): no I/O.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

from controller.cards import CARD_VALUE
from controller.commands_schema import Accept, CommandError, EngineCommand, EnterCard
from controller.engine import loss, tableau
from controller.engine.state import AWAITING, UNKNOWN, Coup
from controller.events import Event
from firmware_protocols.frames import Button, Card, DeviceResult, Frame, SequenceGap

if TYPE_CHECKING:
    from controller.engine.facade import Engine

_ORDINAL = {5: "5th", 6: "6th", 7: "7th"}


def _own_cards(eng: Engine, held: list[Frame], *, auto: bool = False) -> list[Card]:
    """The held cards the shoe dealt in this coup: before the first held
    RESULT, up to a gap (what it lost is unknown). With the automatic
    boundary none is known to be (``auto``: every held card may be)."""
    out: list[Card] = []
    if not eng.button and not auto:
        return out
    for f in held:
        if isinstance(f, (Button, DeviceResult, SequenceGap)):
            break
        if isinstance(f, Card):
            out.append(f)
    return out


def _why_complete(eng: Engine, cards: list[str | None]) -> str:
    """Why a tableau of these cards (all read) takes no further card."""
    p = (CARD_VALUE[cards[0] or "TS"] + CARD_VALUE[cards[2] or "TS"]) % 10
    b = (CARD_VALUE[cards[1] or "TS"] + CARD_VALUE[cards[3] or "TS"]) % 10
    tab = eng.tab
    if tab.natural[p] or tab.natural[b]:
        who, n = ("Player", p) if tab.natural[p] else ("Banker", b)
        return f"gives the {who} a natural {n}"
    if len(cards) == 5:
        v = CARD_VALUE[cards[4] or "TS"]
        return f"makes the Banker stand on {b} against a Player 3rd card of {v}"
    if len(cards) == 4:
        return f"makes the Player stand on {p} and the Banker on {b}"
    return "completes the hand"


def _first_illegal(
    eng: Engine, cards: list[str | None], then: list[str | None]
) -> tuple[int, list[str | None]] | None:
    """Deal ``then`` after ``cards`` by the tableau: the index in ``then``
    of the first card dealt with the hand already complete, and the hand
    then; None if every card has its place (or an unread card decides)."""
    trial = Coup(number=0, demo=False, t_start=0.0)
    for c in cards:
        pos = tableau.next_position(eng, trial)
        if pos is None or pos == UNKNOWN:
            return None
        trial.positions.append(pos)
        trial.cards.append(c)
    for i, c in enumerate(then):
        pos = tableau.next_position(eng, trial)
        if pos == UNKNOWN:
            return None
        if pos is None:
            return i, list(trial.cards)
        trial.positions.append(pos)
        trial.cards.append(c)
    return None


def check_enter(eng: Engine, coup: Coup, code: str, position: str) -> None:
    """Refuse an entered card that makes the cards dealt after it illegal:
    the hand complete with it, yet the shoe dealt another card in this
    coup (before its RESULT). ``position``: the unread card's. (A card
    entered for a frame lost in a gap is not checked so: the frames lost
    may hold coup ends.)"""
    after = [f.card for f in _own_cards(eng, coup.held or [])]
    if not after or coup.cards.count(None) != 1:
        return  # (another unread card still decides: the entry cannot be checked yet)
    cards: list[str | None] = [code if c is None else c for c in coup.cards]
    found = _first_illegal(eng, cards, after)
    if found is None:
        return
    i, hand = found
    extra = after[i]
    label = "B3" if len(hand) == 5 else f"a {_ORDINAL.get(len(hand) + 1, 'further')} card"
    raise CommandError(
        f"{code} as {position} {_why_complete(eng, hand)}, yet {label} {extra or '(unread)'} was dealt"
        f" in coup {coup.number} before its RESULT"
    )


def check_accept(eng: Engine, coup: Coup) -> None:
    """Refuse ``accept`` of a coup whose frames were lost when the cards
    and RESULTs read since say the frames lost held its end (no count of
    0 coup ends fits): the cards held are a later coup's."""
    if "SEQUENCE_GAP" not in coup.open or not coup.lost_frames or coup.held is None:
        return
    items = [coup.gap_missing]
    result = False
    for x in coup.held:
        if isinstance(x, Card):
            items.append(0)
        elif isinstance(x, SequenceGap):
            items.append(loss._lost(x))
        elif eng.button and isinstance(x, (Button, DeviceResult)):
            result = True
            break
    cards = items.count(0)
    if not cards:
        return
    ends = loss._ends_possible(coup.anchor_k, coup.anchor_need, items, result)
    # with an anchor (the complete coup before), its own RESULT is one of the ends
    own = 1 if coup.anchor_prev is not None else 0
    if own in ends:
        return
    n = coup.number
    nums = sorted({n + e - own for e in ends})
    top = loss._MAX_ENDS - own
    which = " or ".join(str(x) if x - n < top else f"{x} or later" for x in nums)
    before = coup.anchor_k if own == 0 else 0
    lost = loss._frames_lost(coup.gap_missing)
    raise CommandError(
        f"accept {n}: the {cards} card(s) read since the {lost} in coup {n} cannot be its own"
        f" ({before} read before the loss, at least {coup.anchor_need} due, at most 6 in a coup):"
        f" the frames lost hold its end, and the cards are coup {which}'s; void {n}, then accept"
        " with the number of the next coup to be dealt"
    )


def preview(eng: Engine, cmd: EngineCommand, t: float) -> list[Event]:
    """The events ``cmd`` would emit, from a copy of the engine (the real
    one is not touched). Raises :class:`CommandError` as applying would."""
    from controller.engine import commands

    # what is never changed by a command is shared, not copied
    memo: dict[int, Any] = {}
    for name in ("profile", "tab", "_calc", "settings", "rules", "_handlers", "_next_settings", "_outcomes"):
        value = getattr(eng, name, None)
        if value is not None:
            memo[id(value)] = value
    clone: Engine = copy.deepcopy(eng, memo)
    clone.defer_analytics = True  # (roads and odds: none of an entry's consequences)
    out: list[Event] = []
    clone._out = out
    work, _ = commands.apply(clone, cmd, t)
    if work is not None:
        clone._drain(work)
    return out


def _hands(e: Event) -> str:
    p, b = e["player"]["total"], e["banker"]["total"]
    if e["winner"] == "tie":
        return f"Tie {p}-{b}"
    return f"Player {p}-{b}" if e["winner"] == "player" else f"Banker {b}-{p}"


def consequences(eng: Engine, cmd: EnterCard | Accept, events: list[Event]) -> tuple[list[str], list[str]]:
    """What the previewed ``events`` do: every consequence, in order (for
    the reply), and those beyond the entered card (that need ``confirm``)."""
    n = cmd.coup
    coup = eng.shoe.coups.get(n) if eng.shoe is not None else None
    own = [f.card for f in _own_cards(eng, coup.held or [], auto=True)] if coup is not None else []
    said: list[str] = []
    beyond: list[str] = []
    early: list[str] = []
    for e in events:
        kind = e["type"]
        if kind == "card" and not e.get("entered"):
            card, where = e["card"] or "an unread card", e["coup"]
            if e["position"] == "extra":
                text = f"set {card} aside as an extra card of coup {where}"
                said.append(text)
                beyond.append(text)
            elif where is not None and where != n and e["card"] in own:
                own.remove(e["card"])
                text = f"deal {card} (dealt in coup {n}) as {e['position']} of coup {where}"
                said.append(text)
                beyond.append(text)
        elif kind == "coup.result":
            said.append(f"settle coup {e['coup']} {_hands(e)}")
        elif kind == "misdeal" and e["code"] == "PREMATURE_RESULT" and isinstance(cmd, EnterCard):
            # the entered card leaves a card due at the RESULT the shoe saw,
            # and no card held after it is that card (it stays awaiting):
            # the RESULT is read as pressed early, and the next card dealt
            # (the next coup's first, as likely) would be taken in as it
            if e.get("action") == AWAITING:
                due = str(e.get("detail") or "").rpartition("with ")[2].removesuffix(" still due")
                early.append(
                    f"read coup {e['coup']}'s RESULT as pressed early, the next card dealt taken as its {due}"
                )
            else:
                early.clear()  # (corrected by a card the shoe dealt after it)
        elif kind == "coup.void":
            text = f"void coup {e['coup']} ({e['code']})"
            said.append(text)
            beyond.append(text)
        elif kind == "security.alert" and e["code"] == "COUP_NUMBERING_RESTORED":
            s = eng.shoe
            if s is not None and isinstance(cmd, Accept) and cmd.coup > s.next_coup:
                first, last = s.next_coup, cmd.coup - 1
                span = f"coup {first}" if first == last else f"coups {first} to {last}"
                text = f"count {span} void (lost whole) and number the next coup {cmd.coup}"
            else:
                text = f"number the next coup {cmd.coup}"
            said.append(text)
            if s is not None and cmd.coup > s.next_coup:
                beyond.append(text)
    said += early
    beyond += early
    return said, beyond


def gate(eng: Engine, cmd: EnterCard | Accept, t: float) -> dict[str, Any] | None:
    """Without ``confirm``: the reply to an entry with consequences beyond
    the entered card (nothing applied), or None when it may apply as it is."""
    confirmed = type(cmd)(**{f: getattr(cmd, f) for f in cmd.__struct_fields__} | {"confirm": True})
    events = preview(eng, confirmed, t)
    said, beyond = consequences(eng, cmd, events)
    if not beyond:
        return None
    name = cmd.NAME
    what = f"{name} {cmd.card} for coup {cmd.coup}" if isinstance(cmd, EnterCard) else f"{name} {cmd.coup}"
    return {
        "id": cmd.id,
        "ok": False,
        "error": f"not applied: {what} would {'; '.join(said)}; send again with confirm",
        "would": said,
    }
