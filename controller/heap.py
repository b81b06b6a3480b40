"""The live daemon's use of CPython's cyclic garbage collector: when its
passes run, so that they run between cards rather than on a card's path.

A collection runs in whichever thread allocates past the collector's
threshold, so without a policy it falls on whatever the loop is doing: the
card being decoded, committed or published. Two measures, both measured
with ``python -m benchmarks.bench_latency --trace`` (its ``gc`` rows):

* :func:`settle`, once the daemon has started (modules imported, engine
  rebuilt, outputs open): one full collection, then ``gc.freeze()``: what
  survived start-up is long-lived and no later full collection walks it.
  A full collection at the end of a 2,000-card run took 44 ms without it
  and 1.6 ms with it (about 47,000 objects walked against 2,050). The
  cost: cyclic garbage made of start-up objects is never collected while
  frozen (a bounded, one-off amount: the start-up heap does not grow).
  :func:`release` unfreezes, for a process that goes on after the daemon
  (the tests, an embedding program).
* :func:`collect_ahead`, one of the daemon's idle steps: the young
  generations are collected while nothing waits, once the allocation count
  is past half its threshold, so the automatic pass does not come due on
  the next card. In traced 2,000-card runs the passes begun on a card's
  path went from 13 to 1 or 2, the longest of them from 2.4-3.2 ms to
  under 0.2 ms.

Nothing here changes what is collected, only when.
"""

from __future__ import annotations

import gc

_frozen = False


def settle() -> None:
    """Collect everything once and freeze what survives (start-up done)."""
    global _frozen
    gc.collect()
    gc.freeze()
    _frozen = True


def release() -> None:
    """Undo :func:`settle`: the frozen objects are collectable again."""
    global _frozen
    if _frozen:
        gc.unfreeze()
        _frozen = False


def collect_ahead() -> bool:
    """One young collection now if the automatic one is past half-way to
    due (generation 1 when the next automatic pass would be one, else 0);
    True if it collected. Nothing when the collector is off."""
    if not gc.isenabled():
        return False
    count0, count1, _ = gc.get_count()
    threshold0, threshold1, _ = gc.get_threshold()
    if threshold0 <= 0 or count0 < threshold0 // 2:
        return False
    gc.collect(1 if count1 + 1 >= threshold1 else 0)
    return True
