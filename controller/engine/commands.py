"""Supervisor commands (docs/operations.md, MQTT) as operations on the game.

Owns which operation each typed command (``controller.commands_schema``)
is (``apply``), and what ``void``, ``enter_card``, ``accept`` (and
``accept`` with a coup number while the numbering is lost), ``new_shoe``,
``end_shoe`` and the daemon's own ``_reject``, ``_alert`` and ``_refused``
do; each raises :class:`CommandError` before changing anything when it
cannot apply.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from controller.cards import CARD_VALUE, RANK_BURN, CardError, parse_card
from controller.commands_schema import (
    AS_TAKEN,
    Accept,
    Alert,
    CommandError,
    Correct,
    EndShoe,
    EngineCommand,
    EnterCard,
    NewShoe,
    Refused,
    Reject,
    Void,
)
from controller.engine import article_x, correction, evidence, loss, machine, shoe
from controller.engine.article_x import ENTERABLE, MisdealCode
from controller.engine.loss import _UNKNOWN_LOSS
from controller.engine.machine import BURN_UNKNOWN
from controller.engine.state import Coup, Shoe, Work
from controller.event_types import CardEvent

if TYPE_CHECKING:
    from controller.engine.facade import Engine

UNREAD_CARD, SEQUENCE_GAP = MisdealCode.UNREAD_CARD, MisdealCode.SEQUENCE_GAP


def coup_arg(eng: Engine, n: int) -> Coup:
    s = eng.shoe
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


def entry_coup(eng: Engine, n: int) -> Coup:
    """``coup_arg`` for ``enter_card`` and ``accept``: a settled coup is
    refused, naming the command that corrects it (``engine.correction``)."""
    s = eng.shoe
    if s is not None and isinstance(n, int) and n not in s.coups and n in s.settled_coups:
        raise CommandError(f"coup {n} is settled; a correction is `ctl correct`")
    return coup_arg(eng, n)


def void(eng: Engine, coup: Coup, reason: str, t: float) -> Work:
    if coup.resolved:
        raise CommandError(f"coup {coup.number} is already settled or void")
    detail = f"voided by supervisor: {reason}" if reason else "voided by supervisor"
    yield from article_x.void_misdeal(eng, t, coup, "SUPERVISOR_VOID", detail)


def enter_card(eng: Engine, coup: Coup, card: Any, t: float, *, checked: bool = True) -> Work:
    if not isinstance(card, str):
        raise CommandError("'card' must be a card code such as 'TD'")
    try:
        code = parse_card(card)
    except CardError as exc:
        raise CommandError(str(exc)) from exc
    s = eng.shoe
    assert s is not None
    if s.comp.remaining[code] <= 0:
        raise CommandError(f"{code}: no copy of it is left in this shoe")
    # the first open misdeal a card entered clears (Article X's table, in
    # its order), and what entering it does
    waiting = next((c for c in ENTERABLE if c in coup.open), None)
    if waiting is None:
        raise CommandError(f"coup {coup.number} is not waiting for a card")
    if checked and waiting is UNREAD_CARD and None in coup.cards:  # (what the shoe dealt after it)
        evidence.check_enter(eng, coup, code, coup.positions[coup.cards.index(None)])
    yield from _ENTER[waiting](eng, s, coup, code, t)


def _enter_unread(eng: Engine, s: Shoe, coup: Coup, code: str, t: float) -> Work:
    """The card a coup's unread card was (or the burn's unread first card)."""
    if s.phase == BURN_UNKNOWN and s.first_card is None and coup.number == s.next_coup - 1:
        s.first_card = code
        s.comp.remaining[code] -= 1
        s.burn_left = eng.profile.burn_count(RANK_BURN[code[0]], eng.decks)
        machine.set_phase(s, "first card entered")
        emit_entered(eng, t, coup, "burn", code)
        article_x.correct(eng, t, coup, UNREAD_CARD, f"first card entered by supervisor: {code}")
        if s.burn_left == 0:
            shoe.finish_burn(eng, s, t)
        yield from article_x.after_resolution(eng, coup, t)
        return
    i = coup.cards.index(None)
    coup.cards[i] = code
    s.comp.remaining[code] -= 1
    emit_entered(eng, t, coup, coup.positions[i], code)
    if None not in coup.cards:
        article_x.correct(eng, t, coup, UNREAD_CARD, f"{coup.positions[i]} entered by supervisor: {code}")
        yield from article_x.after_resolution(eng, coup, t)


def _enter_in_gap(eng: Engine, s: Shoe, coup: Coup, code: str, t: float) -> Work:
    """A card the frames lost in a gap held: inserted where they were lost;
    taken from the shoe when the held frames are released behind it (so no
    more copies than the shoe has left: that bounds the list)."""
    if coup.gap_entered.count(code) >= s.comp.remaining[code]:
        raise CommandError(f"{code}: every copy left in this shoe is entered already")
    coup.gap_entered.append(code)
    # (a loss of unknown size is never made whole by cards entered)
    if 0 < coup.gap_missing < _UNKNOWN_LOSS and len(coup.gap_entered) >= coup.gap_missing:
        article_x.correct(eng, t, coup, SEQUENCE_GAP, "every missing frame entered as a card by supervisor")
        yield from article_x.after_resolution(eng, coup, t)


#: what ``enter_card`` does for each code Article X's table says it clears
#: (``article_x.ENTERABLE``; ``tests/test_engine_machine.py`` checks both agree)
_ENTER: dict[MisdealCode, Callable[[Engine, Shoe, Coup, str, float], Work]] = {
    UNREAD_CARD: _enter_unread,
    SEQUENCE_GAP: _enter_in_gap,
}


def emit_entered(eng: Engine, t: float, coup: Coup, position: str, code: str) -> None:
    eng._emit(
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


def accept(eng: Engine, coup: Coup, t: float, *, checked: bool = True) -> Work:
    accepted = [c for c in article_x.ACCEPTABLE if c in coup.open]
    if not accepted:
        enterable = [c.value for c in article_x.ENTERABLE if c in coup.open]
        if enterable:
            # the one thing it waits for is a card: say which command gives it
            raise CommandError(
                f"coup {coup.number} has nothing a supervisor can accept: it awaits a card"
                f" ({', '.join(enterable)}); enter it with enter_card (ctl enter-card --coup"
                f" {coup.number} --card CARD) or void the coup"
            )
        raise CommandError(f"coup {coup.number} has nothing a supervisor can accept")
    if checked:  # (the cards read since a loss: ``evidence``)
        evidence.check_accept(eng, coup)
    for code in accepted:
        if code is MisdealCode.DEVICE_FAULT and eng._fault_coup == coup.number:
            eng._fault_coup = None
            eng._fault_waiting = None
        article_x.correct(eng, t, coup, code, "accepted by supervisor")
    yield from article_x.after_resolution(eng, coup, t)


def renumber(eng: Engine, s: Shoe, n: int, t: float) -> None:
    """``accept`` with a coup number while the numbering is lost: the
    supervisor says the next coup to be dealt is ``n``; the coups between
    were lost whole and are counted void."""
    high, why = loss.renumber_range(eng, s)
    if isinstance(n, bool) or n < s.next_coup:
        raise CommandError(
            f"coup numbers below {s.next_coup} are taken: the next coup is {s.next_coup} to {high}"
        )
    if n > high:
        raise CommandError(f"coup {n} is not plausible: the next coup is {s.next_coup} to {high} ({why})")
    loss.restore_numbering(eng, s, n, t)
    eng._alert(t, "COUP_NUMBERING_RESTORED", f"the supervisor numbers the next coup {n}", n)


def end_shoe(eng: Engine, t: float) -> Work:
    if eng.shoe is None or eng.shoe.ended_emitted:
        raise CommandError("no shoe in play")
    yield from shoe.end_shoe(eng, t, reason="ended by supervisor")


def apply(eng: Engine, cmd: EngineCommand, t: float) -> tuple[Work | None, dict[str, Any] | None]:
    """The operation a typed command is (``controller.commands_schema``): the
    work it does on the game, for the engine's dispatcher to run, or, for the
    daemon's own commands (``_reject``, ``_alert``, ``_refused``), done here
    with the reply they get. Raises :class:`CommandError` before changing
    anything when it cannot apply."""
    if isinstance(cmd, EnterCard | Accept) and not isinstance(cmd, AS_TAKEN) and cmd.confirm is not True:
        # an entry with consequences beyond its card waits for confirm: the
        # reply says what it would do (``evidence.gate``, run on a copy)
        answer = evidence.gate(eng, cmd, t)
        if answer is not None:
            return None, answer
    match cmd:
        case Void():
            return void(eng, coup_arg(eng, cmd.coup), cmd.reason, t), None
        case EnterCard():
            checked = not isinstance(cmd, AS_TAKEN)
            return enter_card(eng, entry_coup(eng, cmd.coup), cmd.card, t, checked=checked), None
        case Accept():
            s = eng.shoe
            n = cmd.coup
            if s is not None and s.numbering_lost is not None and n not in s.coups:
                renumber(eng, s, n, t)
                return None, None
            checked = not isinstance(cmd, AS_TAKEN)
            return accept(eng, entry_coup(eng, cmd.coup), t, checked=checked), None
        case NewShoe():
            return shoe.new_shoe(eng, t), None
        case EndShoe():
            return end_shoe(eng, t), None
        case Correct():
            # a settled coup's cards (``engine.correction``); without confirm,
            # the reply says what it would do
            return None, correction.apply(eng, cmd, t)
        case Reject():
            # the daemon refused it (origin check): journalled like any
            # command so a rebuild reproduces the alert
            error = cmd.error or "command refused"
            coup = eng.shoe.current.number if eng.shoe is not None and eng.shoe.current else None
            eng._alert(t, "COMMAND_REJECTED", f"command {cmd.id!r}: {error}", coup)
            return None, {"id": cmd.id, "ok": False, "error": error}
        case Alert():
            # raised by the daemon itself (its journal lost history, an
            # output failing), journalled like any command so a rebuild
            # reproduces it; ``seq_above`` starts a new epoch of event
            # seqs above every id already issued
            floor = cmd.seq_above
            if isinstance(floor, int) and floor > eng.seq:
                eng.seq = floor
            eng._alert(t, cmd.code, cmd.detail, None)
            return None, {"id": cmd.id, "ok": True, "error": None}
        case Refused():
            # the daemon's one alert per window for the commands it
            # refused after the first and those over its bounds
            refused, dropped = cmd.refused, cmd.dropped
            coup = eng.shoe.current.number if eng.shoe is not None and eng.shoe.current else None
            detail = (
                f"{refused} more command(s) refused and {dropped} dropped unread in the last"
                f" {cmd.window_s} s (limits: {cmd.limits})"
            )
            eng._alert(t, "COMMAND_REJECTED", detail, coup)
            return None, {"id": None, "ok": False, "error": detail}
        case _:
            raise CommandError(f"unknown command {cmd!r}")
