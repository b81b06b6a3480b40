"""How many coup ends a stretch of lost frames may hold (controller.engine
``_ends_possible``): the count the engine numbers coups by after a gap.

The property that keeps coup numbers honest: whatever was lost, the true
count is always among the counts the function returns, so when it returns
one count the engine's numbering is right, and when it returns several the
engine declares the numbering lost rather than pick one.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from controller.engine import _MAX_ENDS, _ends_possible

CARD, RESULT, OTHER = "card", "result", "other"


@st.composite
def a_stream_with_losses(draw: st.DrawFn) -> tuple[int, int, list[int], int]:
    """Coups of 4-6 cards each closed by a RESULT, with now and then a frame
    of no game meaning (a status); one or two stretches of it lost. Returns
    what the engine sees, ``(k, need, items)`` up to the first RESULT read
    after the first loss, and the true number of RESULTs lost before it."""
    sizes = draw(st.lists(st.integers(4, 6), min_size=3, max_size=8))
    frames: list[tuple[str, int]] = []  # (kind, coup index)
    for i, n in enumerate(sizes):
        for _ in range(n):
            frames.append((CARD, i))
            if draw(st.integers(0, 9)) == 0:
                frames.append((OTHER, i))
        frames.append((RESULT, i))
    # the first loss begins anywhere but the last RESULT, which is read
    start = draw(st.integers(0, len(frames) - 2))
    length = draw(st.integers(1, len(frames) - 1 - start))
    lost = set(range(start, start + length))
    if draw(st.booleans()) and start + length + 1 <= len(frames) - 2:  # a second loss later on
        s2 = draw(st.integers(start + length + 1, len(frames) - 2))
        lost |= set(range(s2, min(len(frames) - 1, s2 + draw(st.integers(1, 8)))))
    # the coup in play when the first frame was lost, as the engine knows it
    before = frames[:start]
    last_result = max((j for j, (kind, _) in enumerate(before) if kind == RESULT), default=-1)
    cards = [i for kind, i in before[last_result + 1 :] if kind == CARD]
    k = len(cards)
    need = 4 if k == 0 else (0 if k == sizes[cards[0]] else max(1, 4 - k))
    items: list[int] = []
    ends = 0
    was_lost = False
    for j in range(start, len(frames)):
        kind = frames[j][0]
        if j in lost:
            if was_lost:
                items[-1] += 1
            else:
                items.append(1)
            was_lost = True
            ends += kind == RESULT
            continue
        was_lost = False
        if kind == RESULT:
            break
        if kind == CARD:
            items.append(0)
    return k, need, items, ends


@settings(max_examples=3000, deadline=None)
@given(a_stream_with_losses())
def test_the_true_count_of_coup_ends_lost_is_always_among_those_returned(
    case: tuple[int, int, list[int], int],
) -> None:
    k, need, items, ends = case
    assert items and items[0] > 0
    possible = _ends_possible(k, need, items, True)
    assert min(ends, _MAX_ENDS) in possible, (k, need, items, ends, possible)


def test_one_frame_lost_after_a_complete_tableau_then_a_whole_coup_is_its_result() -> None:
    assert _ends_possible(4, 0, [1, 0, 0, 0, 0], True) == {1}


def test_one_card_lost_mid_tableau_holds_no_coup_end() -> None:
    assert _ends_possible(2, 2, [1, 0, 0, 0], True) == {0}


def test_five_frames_lost_between_coups_may_or_may_not_hold_a_whole_coup() -> None:
    assert _ends_possible(0, 4, [5, 0, 0, 0, 0], True) == {0, 1}


def test_cards_seen_beyond_six_with_no_count_that_fits_are_extra_cards() -> None:
    # six cards, one frame lost (an extra card?), three more, RESULT: no
    # coup of 4-6 cards explains it: the three are extras dealt in sight
    assert _ends_possible(6, 0, [1, 0, 0, 0], True) == {0}
