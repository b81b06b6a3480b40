"""When the garbage collector runs in the daemon (``controller.heap``): the
start-up heap frozen while the daemon runs and released after, and young
collections done while idle, before the automatic one comes due on a card.
No timings here (``benchmarks/bench_latency.py --trace`` has them)."""

from __future__ import annotations

import gc
import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from controller import heap
from controller.config import load_config
from controller.daemon import Daemon
from tests.support.configs import write_config

CAPTURE = Path(__file__).parent / "captures" / "profile_punto_banco.shoelog"


@pytest.fixture
def passes() -> Iterator[list[int]]:
    """The generation of every collection made while the test runs, with
    the thresholds set to (1000, 3, 10) and restored after."""
    seen: list[int] = []

    def note(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            seen.append(int(info["generation"]))

    saved = gc.get_threshold()
    was_enabled = gc.isenabled()
    gc.set_threshold(1000, 3, 10)
    gc.enable()
    gc.collect()  # every count back to zero
    gc.callbacks.append(note)
    try:
        yield seen
    finally:
        gc.callbacks.remove(note)
        gc.set_threshold(*saved)
        if not was_enabled:
            gc.disable()


def _allocate(n: int) -> list[list[int]]:
    """``n`` container objects kept alive (each one counts toward the
    collector's threshold)."""
    return [[i] for i in range(n)]


def test_nothing_is_collected_while_the_count_is_below_half_the_threshold(passes: list[int]) -> None:
    kept = _allocate(300)
    assert gc.get_count()[0] < 500
    assert heap.collect_ahead() is False
    assert passes == []
    assert kept


def test_past_half_the_threshold_a_young_generation_is_collected_ahead(passes: list[int]) -> None:
    kept = _allocate(600)
    assert 500 <= gc.get_count()[0] < 1000
    assert heap.collect_ahead() is True
    assert passes == [0]
    # the count starts again: the automatic pass is a whole threshold away
    assert gc.get_count()[0] < 100
    assert heap.collect_ahead() is False
    assert kept


def test_when_the_next_automatic_pass_would_take_generation_1_it_is_taken_ahead(passes: list[int]) -> None:
    gc.collect(0)
    gc.collect(0)  # two generation-0 passes: with threshold 3 the next is a generation-1 pass
    passes.clear()
    kept = _allocate(600)
    assert heap.collect_ahead() is True
    assert passes == [1]
    assert kept


def test_nothing_is_collected_ahead_with_the_collector_off(passes: list[int]) -> None:
    gc.disable()
    try:
        kept = _allocate(900)
        assert heap.collect_ahead() is False
        assert passes == []
        assert kept
    finally:
        gc.enable()


def test_settle_freezes_what_survives_and_release_undoes_only_its_own_freeze() -> None:
    assert gc.get_freeze_count() == 0
    heap.settle()
    try:
        assert gc.get_freeze_count() > 0
    finally:
        heap.release()
    assert gc.get_freeze_count() == 0
    # a freeze the process made itself is not the daemon's to undo
    gc.freeze()
    try:
        heap.release()
        assert gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()


class _Watched(Daemon):
    """Notes the collector's frozen count when the first input comes."""

    frozen_at_first_input: int | None = None

    def _input(self, *a: Any, **kw: Any) -> None:
        if self.frozen_at_first_input is None:
            self.frozen_at_first_input = gc.get_freeze_count()
        super()._input(*a, **kw)


def test_the_daemon_deals_with_its_start_up_heap_frozen_and_releases_it_when_it_stops(
    tmp_path: Path,
) -> None:
    cfg = load_config(
        write_config(
            tmp_path, {"driver": "replay", "file": str(CAPTURE)}, odds=True, outputs={"stdout": True}
        )
    )
    daemon = _Watched(cfg, stdout=io.StringIO(), stop_at_eof=True)
    assert daemon.run() == 0
    assert daemon.frozen_at_first_input is not None and daemon.frozen_at_first_input > 0
    assert gc.get_freeze_count() == 0
