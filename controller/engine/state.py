"""The game's state: a shoe, its coups, the shuffler's commitment.

Plain data, no behaviour beyond derived views (``Coup.dealing``,
``Coup.settled``, ``Coup.premature``, ``Coup.resolved``, ``Coup.as_dealt``):
what the engine knows of the shoe in play, saved in a checkpoint
(``controller.checkpoint``) field by field. Also the constants that name
positions and the supervisor's wait.

A coup's life stage is its ``state`` (``machine.CoupState``), the one source
of truth: whether it still takes cards, is settled or void is read from it
and changed only by ``machine.move`` (through ``sync``, ``close``, ``hold``,
``unhold``, ``void``).
``void_code`` and ``held`` carry data (the code, the frames held) whose
presence the state follows: set exactly in the ``void-*`` states, not None
exactly in ``held`` / ``void-held`` (``machine.coup_state`` says so, checked
after every call over the corpus by ``tests/test_engine_machine.py``). An
early RESULT is its open ``PREMATURE_RESULT`` misdeal (``early-result``).
The other fields are facts about the coup, not stages of its life, and stay
fields: ``had_unread`` (a card came unread: a disagreeing device result
voids it), ``overrun`` (opened past the last permitted coup),
``lost_frames``, ``gap_missing``, ``gap_entered``, ``ends``, ``anchor_*``
(what frames lost in a gap may have held), ``carry``, ``device_result``.

A shoe's life stage is its ``phase`` (``machine.ShoePhase``, changed only by
``machine.set_phase``): ``Shoe.ended_emitted`` is its ``ended`` phase, and
the last permitted coup dealt is its ``dealing-over`` phase. ``announced``,
``ending`` and ``ended_by_rule`` stay fields (facts, see ``machine``).
"""

from __future__ import annotations

from collections.abc import Generator, Iterable
from dataclasses import dataclass, field
from typing import Any, Final, TypeAlias, TypeVar

from controller.cards import ShoeComposition
from controller.engine.machine import BURN, ENDED, LIVE, SETTLED, CoupState, ShoePhase
from firmware_protocols.frames import Card, DeviceResult, DeviceSeen, Frame, Renumbered

ORDER = ("P1", "B1", "P2", "B2")
UNKNOWN = "?"  # the next position cannot be decided yet
AWAITING: Final = "awaiting_supervisor"

_T = TypeVar("_T")

#: An operation of the game that may release frames that waited (held while
#: positions were unknown, carried to the next coup): it yields each frame to
#: the engine's dispatcher (``Engine._drain``), which applies it in full (its
#: events, its own releases) before the operation resumes, and returns a
#: ``_T``. No operation applies a frame itself, so the dispatcher is never
#: re-entered and the Python stack does not grow with what was held.
Steps: TypeAlias = Generator[Frame, None, _T]
#: An operation that returns nothing.
Work: TypeAlias = Generator[Frame, None, None]


def release(frames: Iterable[Frame]) -> Work:
    """Hands frames that waited back to the dispatcher, in their order,
    exactly as if they were arriving now (with their own read times)."""
    yield from frames


BURN_HANDS = frozenset(("burn", "first", "burn_count"))
FAULT_CODES = frozenset(("JAM", "READER_FAULT", "ERROR"))


def _copy_stats(stats: dict[str, Any]) -> dict[str, Any]:
    return {
        **stats,
        "tags": dict(sorted(stats["tags"].items())),
        "misdeals": dict(sorted(stats["misdeals"].items())),
    }


@dataclass(slots=True)
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
    #: the code it was voided with: set (by ``machine.void``) exactly when
    #: its state is one of ``machine.VOIDED``
    void_code: str | None = None
    had_unread: bool = False
    overrun: bool = False
    #: frames held while positions are unknown (None: not holding): not None
    #: exactly when its state is ``held`` or ``void-held`` (set and cleared
    #: only by ``machine.hold``, ``unhold``, ``void``)
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
    #: cards after its complete tableau with its RESULT not yet pressed
    #: (fewer than 4): extra cards if the RESULT comes, the next coup's
    #: if a fourth card comes first (``boundary.past_tableau``); a fault
    #: (or its OK) that came among them waits there too, as a
    #: ``DeviceSeen`` (``device.past_behind``): it came in the coup they
    #: turn out to be
    past: list[Card | DeviceSeen] = field(default_factory=list)
    #: where it stands in its life, the one source of truth: changed only by
    #: ``machine.move`` (and ``sync``, ``close``, ``hold``, ``unhold``, ``void``)
    state: CoupState = CoupState.NEW

    @property
    def dealing(self) -> bool:
        """It still takes cards: no boundary seen yet."""
        return self.state in LIVE

    @property
    def settled(self) -> bool:
        return self.state is SETTLED

    @property
    def premature(self) -> bool:
        """A RESULT came with a third card due (its misdeal still open)."""
        return "PREMATURE_RESULT" in self.open

    @property
    def resolved(self) -> bool:
        return self.state is SETTLED or self.void_code is not None

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
    phase: ShoePhase = BURN  # changed only by machine.set_phase
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
    #: what a supervisor's correction needs of each settled, non-demo coup
    #: of this shoe (``engine.correction``), by number: its Player's and
    #: Banker's cards, the ``event_id`` of the result now in force (its
    #: ``coup.result`` or latest ``coup.corrected``) and its index in
    #: ``results``. At most one entry per coup of the shoe (156 for 12 decks).
    settled_coups: dict[int, tuple[list[str], list[str], str, int]] = field(default_factory=dict)
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
    announced: bool = False  # shoe.started sent
    ending: bool = False  # shoe.end_shoe has begun (it stays set once ended)
    #: cards after a coup settled on its due card following an early RESULT,
    #: until the dealer's second RESULT or a fourth card tells what they are
    #: (a supervisor's number given meanwhile waits among them: those cards
    #: were dealt before it, ``loss.restore_numbering``)
    after_premature: list[Card | Renumbered] | None = None
    after_premature_coup: int = 0
    #: set when that coup is void: a second RESULT before a fourth card
    #: says the cards between were its own (due cards after an early press)
    after_premature_void: Coup | None = None
    #: the cards a RESULT placed past a coup's complete tableau as its
    #: extra cards, and that coup's number: the next coup's first cards if
    #: its RESULT was never pressed and the next one pressed early
    #: (``boundary._early_fits``, at the next coup's RESULT)
    past_read: tuple[int, list[str | None]] | None = None
    #: an unread card the device reported only as an error (no label) when
    #: one burn card was still called for: the last burn card, or coup 1's
    #: P1 if the burn was short; the next card's label tells (``shoe.after_burn_unread``)
    burn_unread: Card | None = None
    ended_by_rule: bool = False  # it ended because its last permitted coup was dealt
    #: frames lost on the line may have held a coup's end, or not: the number
    #: of every later coup is unknown (each is void) until a supervisor says it
    numbering_lost: str | None = None
    renumber_to: int | None = None  # the supervisor's number for the next coup
    #: the coup opened after frames lost between coups while the numbering
    #: was lost (its number): its first cards may have been among them, so
    #: a RESULT before its fourth card read may be its end, not an early
    #: press (``loss.number_before_due_cards``)
    unseen_start: int | None = None
    #: from where the numbering is lost (``loss.renumber_range``): the
    #: first coup whose number may be wrong and the shoe's cards dealt before
    #: it (None: lost before this was kept, by a checkpoint)
    window: tuple[int, int] | None = None
    #: the engine's counts of frames lost on the line and of losses of
    #: unknown size (device restarts) when this shoe's losses began to count
    loss_mark: tuple[int, int] = (0, 0)

    @property
    def ended_emitted(self) -> bool:
        """``shoe.ended`` was sent: its phase is ``ended``."""
        return self.phase is ENDED


@dataclass
class _Commit:
    shoe_id: str
    ncards: int
    sha256: str
    order: list[str | None]
    received: int = 0
    valid: bool = True
