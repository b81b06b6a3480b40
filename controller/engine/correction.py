"""A supervisor's correction of a settled coup (``correct``).

A coup settled on a card that was not the card dealt (a misread the
surveillance tape shows) is corrected, never silently: the supervisor
names the coup, the cards at the positions that were wrong and a reason,
and confirms (``confirm: true``; without it nothing changes and the reply
says what the correction would do). The engine then emits
``coup.corrected``: the hands, winner, flags and settlement recomputed by
the profile's tableau and bet table, and the ``event_id`` of the result it
supersedes (the ``coup.result``, or an earlier correction of the coup).

What it applies to: a settled, non-demo coup of the shoe in play (its
``coup.result`` issued), until the next shoe starts (the shoe may have
ended): at most one shoe's coups (156 for 12 decks), whose cards and
result event ids the shoe keeps (``Shoe.settled_coups``, checkpointed).

What it checks, each refusal one line: the coup was settled in this shoe;
each position named was dealt in that coup (a correction replaces cards,
it does not add or remove one); the corrected cards make the same coup by
the tableau (every card it dealt is due, none is missing: a Player who
would stand with the corrected cards cannot have drawn); every corrected
card is left in the shoe once the cards it replaces are put back; at least
one card changes.

What follows from it: the shoe's tally and statistics (naturals, pairs,
tags: ``shoe.ended`` and ``shoe/state``) count the corrected result in place
of the one it supersedes, the composition takes the corrected cards in
place of the replaced ones, the ``roads`` are emitted again (with roads on)
and, with no coup being dealt, the next coup's odds too.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

from controller.cards import CARD_VALUE
from controller.commands_schema import HAND_POSITIONS, CommandError, Correct
from controller.engine import analytics, boundary, tableau
from controller.engine.state import Coup, Shoe
from controller.event_types import CoupCorrected

if TYPE_CHECKING:
    from controller.engine.facade import Engine


def _positions(player: list[str], banker: list[str]) -> dict[str, str]:
    """A coup's cards by position, in the dealing order P1 B1 P2 B2 P3 B3."""
    out = {f"P{i + 1}": c for i, c in enumerate(player)} | {f"B{i + 1}": c for i, c in enumerate(banker)}
    return {p: out[p] for p in HAND_POSITIONS if p in out}


def _outcome(eng: Engine, player: list[str], banker: list[str]) -> dict[str, Any]:
    """The fields ``coup.result`` carries for these hands (demo never)."""
    ppair, bpair, natural, (outcome, tags, settlement) = boundary._scored(eng, player, banker)
    return {
        "player": {"cards": list(player), "total": outcome["player_total"]},
        "banker": {"cards": list(banker), "total": outcome["banker_total"]},
        "winner": outcome["winner"],
        "natural": natural,
        "player_pair": ppair,
        "banker_pair": bpair,
        "tags": list(tags),
        "settlement": dict(settlement),
    }


def _settled(eng: Engine, n: int) -> tuple[Shoe, tuple[list[str], list[str], str, int]]:
    s = eng.shoe
    if s is None:
        raise CommandError("no shoe in play")
    got = s.settled_coups.get(n)
    if got is not None:
        return s, got
    if n in s.coups and not s.coups[n].resolved:
        raise CommandError(f"coup {n} is not settled: only a settled coup's result can be corrected")
    if 1 <= n < s.next_coup:
        raise CommandError(f"coup {n} has no settled result in this shoe (void, or a demo coup)")
    raise CommandError(f"no coup {n} in this shoe")


def _check_tableau(eng: Engine, n: int, cards: dict[str, str]) -> None:
    """The corrected cards make a complete coup by the tableau, at exactly
    the positions the coup was dealt."""
    trial = Coup(number=n, demo=False, t_start=0.0)
    while True:
        pos = tableau.next_position(eng, trial)
        if pos is None:
            break
        if pos not in cards:
            p, b = _totals(trial)
            raise CommandError(
                f"coup {n}: with these cards {pos} is due (Player {p}, Banker {b}) and the coup was dealt "
                f"without it: a correction replaces cards, it cannot add one"
            )
        trial.positions.append(pos)
        trial.cards.append(cards[pos])
    extra = [p for p in cards if p not in trial.positions]
    if extra:
        p, b = _totals(trial)
        raise CommandError(
            f"coup {n}: with these cards the tableau deals no {extra[0]} (Player {p}, Banker {b}): "
            "the corrected cards do not make the coup that was dealt"
        )


def _totals(coup: Coup) -> tuple[int, int]:
    p = sum(CARD_VALUE[c] for pos, c in zip(coup.positions, coup.cards, strict=True) if c and pos[0] == "P")
    b = sum(CARD_VALUE[c] for pos, c in zip(coup.positions, coup.cards, strict=True) if c and pos[0] == "B")
    return p % 10, b % 10


def _check_composition(s: Shoe, n: int, changes: list[dict[str, str]]) -> None:
    """Each corrected card left in the shoe once the cards it replaces are back."""
    left = dict(s.comp.remaining)
    for ch in changes:
        left[ch["was"]] += 1
    for ch in changes:
        left[ch["card"]] -= 1
        if left[ch["card"]] < 0:
            raise CommandError(
                f"coup {n}: {ch['position']}={ch['card']}: no copy of {ch['card']} is left in this shoe "
                "(every copy is dealt elsewhere)"
            )


def _describe(r: dict[str, Any]) -> str:
    """One line: ``Player 9H 5C (4), Banker KD 8S (8): banker; settles
    banker +0.95, player -1, tie -1``."""
    hands = ", ".join(
        f"{who.capitalize()} {' '.join(r[who]['cards'])} ({r[who]['total']})" for who in ("player", "banker")
    )
    pays = ", ".join(f"{k} {v:+g}" if v else f"{k} 0" for k, v in r["settlement"].items())
    return f"{hands}: {r['winner']}; settles {pays}"


def apply(eng: Engine, cmd: Correct, t: float) -> dict[str, Any] | None:
    """The correction, applied with ``confirm``; without it, the reply
    saying what it would do (and nothing changed). Raises
    :class:`CommandError` before changing anything when it cannot apply."""
    n = cmd.coup
    s, (player, banker, supersedes, index) = _settled(eng, n)
    before = _positions(player, banker)
    for pos in cmd.cards:
        if pos not in before:
            raise CommandError(f"coup {n} was dealt no {pos} (its cards: {' '.join(before)})")
    changes = [
        {"position": pos, "was": before[pos], "card": card}
        for pos, card in cmd.cards.items()
        if before[pos] != card
    ]
    if not changes:
        raise CommandError(f"coup {n}: these are the cards it settled on already: nothing to correct")
    after = before | dict(cmd.cards)
    _check_tableau(eng, n, after)
    _check_composition(s, n, changes)
    new_player = [after[p] for p in HAND_POSITIONS if p in after and p[0] == "P"]
    new_banker = [after[p] for p in HAND_POSITIONS if p in after and p[0] == "B"]
    old = _outcome(eng, player, banker)
    new = _outcome(eng, new_player, new_banker)
    if cmd.confirm is not True:
        # (the shape of every entry that waits for confirm: ``evidence.gate``)
        what = ", ".join(f"{c['position']} {c['was']}->{c['card']}" for c in changes)
        said = [
            f"correct coup {n} ({what}): {_describe(new)}",
            f"in place of {_describe(old)} ({supersedes})",
        ]
        return {
            "id": cmd.id,
            "ok": False,
            "error": f"not applied: correct needs confirm; it would {'; '.join(said)}; send again with"
            " confirm",
            "would": said,
        }
    # the shoe counts the corrected result in place of the superseded one
    if new["winner"] != old["winner"]:
        s.tally[old["winner"]] -= 1
        s.tally[new["winner"]] += 1
    st = s.stats
    st["naturals"] += new["natural"] - old["natural"]
    st["player_pairs"] += new["player_pair"] - old["player_pair"]
    st["banker_pairs"] += new["banker_pair"] - old["banker_pair"]
    tags = st["tags"]
    for tag in old["tags"]:
        tags[tag] -= 1
        if not tags[tag]:
            del tags[tag]
    for tag in new["tags"]:
        tags[tag] = tags.get(tag, 0) + 1
    for ch in changes:
        s.comp.remaining[ch["was"]] += 1
        s.comp.remaining[ch["card"]] -= 1
    s.results[index] = {
        "winner": new["winner"],
        "player_pair": new["player_pair"],
        "banker_pair": new["banker_pair"],
    }
    eng._roads_ahead = None  # (computed for the results before)
    eng._emit(
        t,
        CoupCorrected(
            coup=n,
            **new,
            supersedes=supersedes,
            changes=changes,  # type: ignore[arg-type]
            reason=cmd.reason,
            command_id=cmd.id,
        ),
    )
    s.settled_coups[n] = (new_player, new_banker, f"{eng.table}/{s.id}/{eng.seq}", index)
    if eng.roads:
        eng._later(functools.partial(analytics.emit_roads, eng, t, s.results, len(s.results)))
    if s.current is None or s.current.resolved:
        analytics.publish_odds(eng, t)
    return None
