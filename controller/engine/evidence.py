"""Supervisor entries checked against the shoe's own evidence,
and what an entry would do before it is done.

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
  what it would do, in one line). So is an ``accept`` of the next coup's
  number while frames are held (``_numbered_behind_held``): the number
  waits until they are dealt on, and the reply says what they then do if
  the coup holding them ends void.

Pure functions of the engine's state (the copy is the engine's own,
deterministic like it): no I/O.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

from controller.cards import CARD_VALUE
from controller.commands_schema import Accept, CommandError, EngineCommand, EnterCard
from controller.engine import article_x, loss, tableau
from controller.engine.state import AWAITING, UNKNOWN, Coup
from controller.events import Event
from firmware_protocols.frames import Button, Card, DeviceResult, Frame, Renumbered, SequenceGap

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


def _copy(eng: Engine) -> Engine:
    """A copy of the engine to run a command on (the real one is not
    touched); what a command never changes is shared, not copied."""
    memo: dict[int, Any] = {}
    for name in ("profile", "tab", "_calc", "settings", "rules", "_handlers", "_next_settings", "_outcomes"):
        value = getattr(eng, name, None)
        if value is not None:
            memo[id(value)] = value
    clone: Engine = copy.deepcopy(eng, memo)
    clone.defer_analytics = True  # (roads and odds: none of an entry's consequences)
    return clone


def preview(eng: Engine, cmd: EngineCommand, t: float, on: Engine | None = None) -> list[Event]:
    """The events ``cmd`` would emit, from a copy of the engine (the real
    one is not touched; ``on``: that copy, made by ``_copy``, to run what
    happens next on it too). Raises :class:`CommandError` as applying
    would."""
    from controller.engine import commands

    clone = on if on is not None else _copy(eng)
    out: list[Event] = []
    clone._out = out
    work, _ = commands.apply(clone, cmd, t)
    if work is not None:
        clone._drain(work)
    return out


def _plural(n: int, one: str, many: str | None = None) -> str:
    return f"{n} {one if n == 1 else many or one + 's'}"


def _span(first: int, last: int) -> str:
    return f"coup {first}" if first == last else f"coups {first} to {last}"


def _numbered_behind_held(eng: Engine, cmd: Accept, t: float) -> list[str] | None:
    """What ``accept N`` while the numbering is lost does when frames are
    held behind the coup in play (``loss.restore_numbering``): the number
    waits among them, since the shoe sent them before the command. The
    coups they open when dealt on stay void, their number unknown; the
    next coup opened after them takes N, the coups between counted void
    (lost whole); if they open coup N or later, the numbering stays lost.
    How many they open is known only once they are dealt on: the second
    line says it for the coup holding them ending void at its deadline
    (as a supervisor's ``void`` ends it), run on a copy. None when
    nothing is held."""
    s = eng.shoe
    cur = s.current if s is not None else None
    if s is None or cur is None or not cur.held:
        return None
    n, c = cmd.coup, cur.number
    frames = [f for f in cur.held if not isinstance(f, Renumbered)]
    cards = sum(isinstance(f, Card) for f in frames)
    results = sum(
        isinstance(f, DeviceResult) or (isinstance(f, Button) and f.name == "RESULT") for f in frames
    )
    held = (
        f"the {_plural(len(frames), 'frame')} held behind coup {c}"
        f" ({_plural(cards, 'card')}, {_plural(results, 'RESULT')}, all sent before this command)"
    )
    said = [
        f"number the next coup {n} only after {held} are dealt on: the coups they open stay void,"
        f" their numbers unknown; those between the last of them and coup {n} are counted void"
        f" (lost whole); if they open coup {n} or later, the numbering stays lost"
    ]
    deadlines = [d for d in cur.open.values() if d is not None]
    if not deadlines:
        return said  # (it holds them until a frame tells whose they are)
    try:
        clone = _copy(eng)
        preview(eng, Accept(id=cmd.id, coup=n, confirm=True), t, clone)
        # (as ``tick`` does: the copy is inside this command's dispatch)
        clone._drain(article_x.expire(clone, max(t, min(deadlines))))
    except CommandError:
        return said
    cs = clone.shoe
    if (
        cs is None
        or cs.id != s.id
        or any(isinstance(f, Renumbered) for k in cs.coups.values() for f in (k.held or []))
    ):
        return said  # (still held: what they open is not known yet)
    first, nxt = s.next_coup, cs.next_coup
    if nxt > first:
        its = "its number" if nxt - 1 == first else "their numbers"
        opened = f"deal them on as {_span(first, nxt - 1)} (void, {its} unknown)"
    else:
        opened = f"deal them on as coup {c}'s own (they open no coup)"
    if cs.numbering_lost is not None:
        outcome = f"so the numbering stays lost ({cs.numbering_lost})"
    elif cs.renumber_to == n:
        high, why = loss.renumber_range(clone, cs)
        if n > high:
            outcome = (
                f"then {n} is out of range (the next coup is {nxt} to {high}: {why}),"
                " and the numbering stays lost"
            )
        elif nxt < n:
            outcome = f"then count {_span(nxt, n - 1)} void (lost whole) and number the next coup {n}"
        else:
            outcome = f"then number the next coup {n} (no coup lost whole)"
    else:
        return said
    said.append(f"if coup {c} ends void (at its deadline or by a void), {opened}, {outcome}")
    return said


def _hands(e: Event) -> str:
    p, b = e["player"]["total"], e["banker"]["total"]
    if e["winner"] == "tie":
        return f"Tie {p}-{b}"
    return f"Player {p}-{b}" if e["winner"] == "player" else f"Banker {b}-{p}"


def consequences(
    eng: Engine, cmd: EnterCard | Accept, events: list[Event], t: float | None = None
) -> tuple[list[str], list[str]]:
    """What the previewed ``events`` do: every consequence, in order (for
    the reply), and those beyond the entered card (that need ``confirm``).
    ``t``: the command's time (what a number given while frames are held
    does is previewed from it)."""
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
            behind = _numbered_behind_held(eng, cmd, t) if isinstance(cmd, Accept) and t is not None else None
            if behind is not None:
                # frames held: what the number does waits for them, and
                # depends on them (always confirmed first)
                said += behind
                beyond += behind
                continue
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
    said, beyond = consequences(eng, cmd, events, t)
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
