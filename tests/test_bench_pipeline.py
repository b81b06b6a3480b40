"""The latency benchmark's floor (benchmarks/pipeline_floor.py) must do the
daemon's I/O for every frame: each frame read from the pty is flushed to
disk, and each card reaches a subscriber through the broker, in order. No
timings here (benchmarks/)."""

from __future__ import annotations

from pathlib import Path

from benchmarks.bench_latency import broker, card_frames, pipeline_run


def test_the_pipeline_floor_flushes_every_frame_and_delivers_every_card_in_order(tmp_path: Path) -> None:
    frames = card_frames(seed=7)[:60]
    cards = sum(1 for _, _, card in frames if card is not None)
    assert cards > 40
    with broker(tmp_path) as port:
        # raises unless the cards arrive as written and every frame was flushed
        latencies = pipeline_run(port, tmp_path, frames)
    assert len(latencies) == cards
    assert all(x > 0 for x in latencies)
    assert (tmp_path / "pipeline.flushed").read_text() == str(len(frames))
