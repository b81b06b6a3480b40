"""The fake shoe as a specification: deterministic, dealt strictly by the
tableau, burning and cutting as the shoe procedure says, and injecting every
fault kind of the fake shoe (docs/devices.md, The fake shoe) into the bytes it sends.

The bytes are read back with the real shoe-ascii/1 decoder, and the deal is
checked against a tableau written here from docs/dealing-errors.md alone (not the fake's
nor the engine's code).
"""

from __future__ import annotations

import collections
import dataclasses
import importlib
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from drivers.base import Driver, LinkEvent
from drivers.fake import FAULT_KINDS, Disconnect, FakeDriver, FakeShoe, parse_faults
from firmware_protocols.frames import (
    Button,
    Card,
    CutCard,
    DeviceResult,
    Frame,
    Hello,
    SequenceGap,
    ShuffleCommit,
    ShuffleOrder,
    Status,
)
from firmware_protocols.shoe_ascii import Decoder

REPO = Path(__file__).resolve().parent.parent

# --- the rules, as docs/dealing-errors.md states them -------------------------------------

RANKS = "A23456789TJQK"


def points(card: str) -> int:
    return [1, 2, 3, 4, 5, 6, 7, 8, 9, 0, 0, 0, 0][RANKS.index(card[0])]


def burn_count(card: str) -> int:
    return [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 10, 10, 10][RANKS.index(card[0])]


# Banker total -> Player third-card values on which the Banker draws.
BANKER_DRAWS_AFTER_PLAYER_THIRD = {
    0: set(range(10)),
    1: set(range(10)),
    2: set(range(10)),
    3: {0, 1, 2, 3, 4, 5, 6, 7, 9},
    4: {2, 3, 4, 5, 6, 7},
    5: {4, 5, 6, 7},
    6: {6, 7},
    7: set(),
}


def tableau_deal(shoe: list[str]) -> tuple[list[str], list[str]]:
    """Deal one coup from the front of ``shoe`` (cards in the order they
    leave it); returns the Player and Banker hands."""
    cards = iter(shoe)
    p1, b1, p2, b2 = next(cards), next(cards), next(cards), next(cards)
    player, banker = [p1, p2], [b1, b2]
    pt = (points(p1) + points(p2)) % 10
    bt = (points(b1) + points(b2)) % 10
    if pt >= 8 or bt >= 8:
        return player, banker
    if pt <= 5:
        player.append(next(cards))
        if bt in BANKER_DRAWS_AFTER_PLAYER_THIRD and points(player[2]) in BANKER_DRAWS_AFTER_PLAYER_THIRD[bt]:
            banker.append(next(cards))
    elif bt <= 5:
        banker.append(next(cards))
    return player, banker


def total(hand: list[str]) -> int:
    return sum(points(c) for c in hand) % 10


# --- reading the fake's bytes back ------------------------------------------


@dataclass
class ShoeSeen:
    cards: list[str | None] = field(default_factory=list)  # every card since NEWSHOE
    cut_after: int | None = None  # cards out when CUT came
    results_at: list[int] = field(default_factory=list)  # cards out at each RESULT
    results_after_cut: int = 0


def decode(chunks: list[tuple[float, bytes]]) -> tuple[list[Frame], collections.Counter[str]]:
    dec = Decoder()
    frames: list[Frame] = []
    for t, data in chunks:
        frames.extend(dec.feed(t, data))
    return frames, dec.stats


def shoes_seen(frames: list[Frame]) -> list[ShoeSeen]:
    shoes: list[ShoeSeen] = []
    for f in frames:
        if isinstance(f, Button) and f.name == "NEWSHOE":
            shoes.append(ShoeSeen())
        elif not shoes:
            continue
        elif isinstance(f, Card):
            shoes[-1].cards.append(f.card)
        elif isinstance(f, CutCard):
            shoes[-1].cut_after = len(shoes[-1].cards)
        elif isinstance(f, Button) and f.name == "RESULT":
            shoes[-1].results_at.append(len(shoes[-1].cards))
            if shoes[-1].cut_after is not None:
                shoes[-1].results_after_cut += 1
    return shoes


def fake_chunks(**kw: Any) -> tuple[FakeShoe, list[tuple[float, bytes]]]:
    fake = FakeShoe(**kw)
    return fake, list(fake.stream())


# --- determinism ------------------------------------------------------------


def test_same_seed_and_options_give_the_same_bytes() -> None:
    opts: dict[str, Any] = {"seed": 7, "shoes": 2, "faults": "garbage:0.1,gap:0.05,extra:0.1,jam:0.1"}
    _, a = fake_chunks(**opts)
    _, b = fake_chunks(**opts)
    assert a == b
    _, c = fake_chunks(**{**opts, "seed": 8})
    assert [d for _, d in a] != [d for _, d in c]


def test_the_same_fake_replays_identically_and_refills_its_record() -> None:
    fake = FakeShoe(seed=3, shoes=1)
    first = list(fake.stream())
    coups = list(fake.coups)
    assert list(fake.stream()) == first
    assert fake.coups == coups


def test_without_a_record_it_sends_the_same_bytes_and_keeps_none_in_memory(tmp_path: Path) -> None:
    opts: dict[str, Any] = {"seed": 4, "shoes": 2, "faults": "jam:0.1,extra:0.1,unread:0.05"}
    kept = FakeShoe(**opts)
    log = tmp_path / "fake.jsonl"
    lean = FakeShoe(**opts, record=False, log=log)
    assert list(lean.stream()) == list(kept.stream())
    assert len(kept.coups) > 100 and len(kept.shoes) == 2
    assert lean.coups == [] and lean.shoes == []
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert [
        {k: v for k, v in r.items() if k != "record"} for r in lines if r["record"] == "coup"
    ] == kept.coups


def test_the_daemons_embedded_fake_keeps_no_record_however_long_it_deals(tmp_path: Path) -> None:
    from controller.config import load_config
    from controller.daemon import Daemon
    from tests.support.configs import write_config

    cfg = write_config(tmp_path, {"driver": "fake", "seed": 2, "cards_per_second": 0})
    driver = Daemon(load_config(cfg))._open_driver()
    assert isinstance(driver, FakeDriver)
    driver.open()
    try:
        reads = 0
        while reads < 5_000:
            if driver.read(0.1) is not None:
                reads += 1
    finally:
        driver.close()
    assert driver.fake.coups == [] and driver.fake.shoes == []


def test_cards_per_second_changes_timestamps_only() -> None:
    _, slow = fake_chunks(seed=5, shoes=1, cards_per_second=2.0)
    _, fast = fake_chunks(seed=5, shoes=1, cards_per_second=0)
    assert [d for _, d in slow] == [d for _, d in fast]
    assert [t for t, _ in slow] != [t for t, _ in fast]
    ts = [t for t, _ in slow]
    assert ts == sorted(ts)
    # two cards, then the Banker's: half a second apart at 2 cards per second
    card_ts = [t for t, d in slow if b",CARD," in d]
    assert card_ts[1] - card_ts[0] == pytest.approx(0.5)


def test_faults_do_not_change_the_first_shoes_shuffle() -> None:
    clean, _ = fake_chunks(seed=11, shoes=1)
    noisy, _ = fake_chunks(seed=11, shoes=1, faults="garbage:0.5,jam:0.5")
    assert clean.shoes[0]["first_card"] == noisy.shoes[0]["first_card"]
    assert clean.coups == [{**c, "faults": []} for c in noisy.coups]


# --- the deal ---------------------------------------------------------------


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_every_coup_is_dealt_by_the_tableau(seed: int) -> None:
    fake, chunks = fake_chunks(seed=seed, shoes=2)
    frames, stats = decode(chunks)
    assert stats["bad_checksum"] == stats["garbage"] == stats["sequence_gap"] == 0
    record = iter(fake.coups)
    for seen, shoe in zip(shoes_seen(frames), fake.shoes, strict=True):
        cards = [c for c in seen.cards if c is not None]
        start = 1 + burn_count(cards[0])
        for end in seen.results_at:
            dealt = cards[start:end]
            player, banker = tableau_deal(dealt)
            assert len(player) + len(banker) == len(dealt), dealt
            coup = next(record)
            assert (coup["player"], coup["banker"]) == (player, banker)
            p, b = total(player), total(banker)
            assert coup["winner"] == ("player" if p > b else "banker" if b > p else "tie")
            start = end
        assert len(cards) == shoe["cards_dealt"]
    assert next(record, None) is None


def test_a_long_run_covers_every_branch_of_the_tableau() -> None:
    fake, _ = fake_chunks(seed=4, shoes=4)
    shapes = collections.Counter((len(c["player"]), len(c["banker"])) for c in fake.coups)
    assert set(shapes) == {(2, 2), (2, 3), (3, 2), (3, 3)}
    assert {c["winner"] for c in fake.coups} == {"player", "banker", "tie"}


def test_the_first_card_is_exposed_and_its_value_burned() -> None:
    seen_values = set()
    for seed in range(1, 13):
        fake, chunks = fake_chunks(seed=seed, shoes=1)
        frames, _ = decode(chunks)
        (seen,) = shoes_seen(frames)
        shoe = fake.shoes[0]
        first = seen.cards[0]
        assert first == shoe["first_card"]
        assert first is not None
        n = burn_count(first)
        assert n == len(shoe["burned"])
        assert seen.cards[1 : 1 + n] == shoe["burned"]
        coup1 = fake.coups[0]
        assert seen.cards[1 + n : 1 + n + 4] == [
            coup1["player"][0],
            coup1["banker"][0],
            coup1["player"][1],
            coup1["banker"][1],
        ]
        seen_values.add(min(n, 10))
    assert 10 in seen_values  # a ten or a face card burned ten


@pytest.mark.parametrize("cut_card_min", [12, 14, 16])
def test_the_cut_card_comes_out_about_cut_card_min_cards_from_the_end(cut_card_min: int) -> None:
    for seed in (1, 2, 3):
        fake, chunks = fake_chunks(seed=seed, shoes=1, decks=6, cut_card_min=cut_card_min)
        (seen,) = shoes_seen(decode(chunks)[0])
        shoe = fake.shoes[0]
        assert seen.cut_after is not None
        left = 6 * 52 - seen.cut_after
        assert cut_card_min <= left <= cut_card_min + 2
        assert left == shoe["cards_after_cut"]


def test_the_cut_card_minimum_is_at_least_twelve() -> None:
    with pytest.raises(ValueError, match="cut_card_min"):
        FakeShoe(cut_card_min=11)


def test_after_the_cut_card_the_coup_is_finished_and_one_more_dealt_then_a_new_shoe() -> None:
    fake, chunks = fake_chunks(seed=9, shoes=3)
    frames, _ = decode(chunks)
    shoes = shoes_seen(frames)
    assert len(shoes) == 3
    for seen, shoe in zip(shoes, fake.shoes, strict=True):
        assert seen.results_after_cut == 2
        assert seen.results_at[-1] == len(seen.cards)  # nothing dealt after the last RESULT
        assert shoe["last_coup"] == shoe["coups"] == len(seen.results_at)
    cut_coups = [c for c in fake.coups if c["cut"]]
    assert len(cut_coups) <= 3  # a cut card between two coups belongs to the next one


def test_the_stream_starts_with_hello_then_newshoe_for_every_shoe() -> None:
    _, chunks = fake_chunks(seed=1, shoes=2)
    frames, _ = decode(chunks)
    assert isinstance(frames[0], Hello) and frames[0].seq == 0
    assert isinstance(frames[1], Button) and frames[1].name == "NEWSHOE"
    assert sum(isinstance(f, Button) and f.name == "NEWSHOE" for f in frames) == 2
    assert [f.seq for f in frames] == list(range(len(frames)))


def test_the_shuffler_commits_to_the_order_it_then_deals() -> None:
    import hashlib

    fake, chunks = fake_chunks(seed=6, shoes=1, decks=2, shuffler=True)
    frames, _ = decode(chunks)
    commit = next(f for f in frames if isinstance(f, ShuffleCommit))
    order: list[str | None] = []
    for f in frames:
        if isinstance(f, ShuffleOrder):
            assert f.index == len(order) and len(f.cards) <= 16
            order.extend(f.cards)
    assert commit.ncards == len(order) == 104
    assert commit.sha256 == hashlib.sha256(",".join(c or "XX" for c in order).encode()).hexdigest()
    (seen,) = shoes_seen(frames)
    assert seen.cards == order[: len(seen.cards)]
    assert fake.shoes[0]["shuffle_commit"] == commit.sha256


def test_the_record_is_also_written_as_json_lines(tmp_path: Path) -> None:
    log = tmp_path / "fake.jsonl"
    fake, _ = fake_chunks(seed=2, shoes=1, log=log, faults="jam:0.3")
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert [{k: v for k, v in rec.items() if k != "record"} for rec in lines if rec["record"] == "coup"] == (
        fake.coups
    )
    assert [rec["shoe"] for rec in lines if rec["record"] == "shoe"] == [1]
    assert set(fake.coups[0]) >= {"shoe", "coup", "player", "banker", "winner", "faults"}


# --- faults -----------------------------------------------------------------


def test_fault_spec_strings_are_parsed_and_checked() -> None:
    assert parse_faults("gap:0.01, garbage:0.05") == {"gap": 0.01, "garbage": 0.05}
    assert parse_faults("") == {}
    with pytest.raises(ValueError, match="teleport"):
        parse_faults("teleport:0.1")
    with pytest.raises(ValueError, match="gap"):
        parse_faults("gap:1.5")
    with pytest.raises(ValueError, match="gap"):
        parse_faults("gap:-0.1")
    with pytest.raises(ValueError, match="gap"):
        parse_faults("gap")
    with pytest.raises(ValueError, match="jam"):
        parse_faults("jam:often")
    with pytest.raises(ValueError, match="teleport"):
        FakeShoe(faults="teleport:1")


def faulty(kind: str, **kw: Any) -> tuple[FakeShoe, list[Frame], collections.Counter[str]]:
    """Two shoes of two decks with ``kind`` at probability 1, decoded (the
    second shoe's NEWSHOE shows what the first lost)."""
    kw.setdefault("shoes", 2)
    fake, chunks = fake_chunks(seed=kw.pop("seed", 1), decks=kw.pop("decks", 2), faults=f"{kind}:1", **kw)
    frames, stats = decode(chunks)
    return fake, frames, stats


def recorded(fake: FakeShoe, kind: str) -> list[dict[str, Any]]:
    return [f for c in fake.coups for f in c["faults"] if f["kind"] == kind]


def test_fault_garbage_puts_bytes_between_frames_and_costs_no_frame() -> None:
    fake, _, stats = faulty("garbage")
    assert stats["garbage"] > 0 and stats["bad_checksum"] == 0 and stats["sequence_gap"] == 0
    assert sum(f["bytes"] for f in recorded(fake, "garbage")) == stats["garbage"]


def test_fault_badck_loses_the_frame_and_leaves_a_gap() -> None:
    fake, frames, stats = faulty("badck")
    assert stats["bad_checksum"] == len(recorded(fake, "badck")) > 0
    assert any(isinstance(f, SequenceGap) for f in frames)


def test_fault_gap_skips_sequence_numbers() -> None:
    fake, frames, stats = faulty("gap")
    gaps = [f for f in frames if isinstance(f, SequenceGap)]
    assert gaps and stats["bad_checksum"] == 0
    assert len(recorded(fake, "gap")) > 0


def test_fault_unread_sends_xx() -> None:
    fake, frames, _ = faulty("unread")
    unread = [f for f in frames if isinstance(f, Card) and f.card is None]
    assert len(unread) == len(recorded(fake, "unread")) > 0


def test_fault_faceup_flags_the_card() -> None:
    fake, frames, _ = faulty("faceup")
    assert len([f for f in frames if isinstance(f, Card) and f.face_up]) == len(recorded(fake, "faceup")) > 0


def test_fault_jam_reports_jam_mid_coup_then_ok() -> None:
    fake, frames, _ = faulty("jam")
    codes = [f.code for f in frames if isinstance(f, Status)]
    assert codes[:2] == ["JAM", "OK"] and codes.count("JAM") == len(fake.coups)
    # mid-coup: a card of the same coup follows the OK
    i = next(i for i, f in enumerate(frames) if isinstance(f, Status) and f.code == "OK")
    assert isinstance(frames[i + 1], Card)


def test_fault_extra_deals_a_card_after_the_tableau_before_result() -> None:
    fake, frames, _ = faulty("extra", shoes=1)
    (seen,) = shoes_seen(frames)
    cards = seen.cards
    start = 1 + burn_count(str(cards[0]))
    extras = 0
    for end in seen.results_at:
        player, banker = tableau_deal([c for c in cards[start:end] if c is not None])
        extras += (end - start) - len(player) - len(banker)
        start = end
    assert extras == len(recorded(fake, "extra")) == len(fake.coups) > 0


def test_fault_premature_presses_result_before_the_due_third_card() -> None:
    fake, frames, _ = faulty("premature", shoes=1)
    (seen,) = shoes_seen(frames)
    drawing = [c for c in fake.coups if len(c["player"]) + len(c["banker"]) > 4]
    assert len(recorded(fake, "premature")) == len(drawing) > 0
    assert len(seen.results_at) == len(fake.coups) + len(drawing)
    # every premature RESULT came after exactly the four first cards of its coup
    assert all(len(f["player"]) == 2 and len(f["banker"]) == 2 for f in recorded(fake, "premature"))


def test_fault_foreign_deals_a_card_the_shoe_does_not_hold() -> None:
    fake, frames, _ = faulty("foreign", decks=2)
    cards = [f for f in frames if isinstance(f, Card)]
    counts = collections.Counter(f.card for f in cards if f.card is not None)
    over = {c for c, n in counts.items() if n > 2}
    from_other_decks = [f for f in cards if f.deck is not None and f.deck > 2]
    assert over or from_other_decks
    assert len(recorded(fake, "foreign")) == len(fake.coups)
    assert len(from_other_decks) == sum(f["how"] == "foreign_deck" for f in recorded(fake, "foreign"))


def test_fault_disconnect_drops_the_line_mid_coup_losing_nothing_or_frames() -> None:
    fake = FakeShoe(seed=1, shoes=1, decks=2, faults="disconnect:1")
    items = list(fake.events())
    drops = [i for i in items if isinstance(i, Disconnect)]
    assert len(drops) == len(fake.coups) == len(recorded(fake, "disconnect"))
    lost = sum(d.lost for d in drops)
    assert lost > 0 and any(d.lost == 0 for d in drops)
    frames, _ = decode([i for i in items if not isinstance(i, Disconnect)])
    missing = sum(f.missing for f in frames if isinstance(f, SequenceGap))
    assert missing == lost == len(recorded(fake, "disconnect_lost"))


def test_fault_wronghand_reports_a_card_on_the_other_hand() -> None:
    from firmware_protocols.angel_eye import Decoder as AngelDecoder

    fake = FakeShoe(seed=1, shoes=1, decks=2, protocol="angel-eye/2", faults="wronghand:1")
    dec = AngelDecoder()
    frames = [f for t, d in fake.stream() for f in dec.feed(t, d)]
    hands = [f.hand for f in frames if isinstance(f, Card) and f.hand and f.hand[0] in "PB"]
    wrong = recorded(fake, "wronghand")
    assert len(wrong) == len(hands) > 0
    assert [w["reported"] for w in wrong] == hands


def test_every_fault_kind_is_covered_above() -> None:
    names = {n.removeprefix("test_fault_").split("_")[0] for n in globals() if n.startswith("test_fault_")}
    names.discard("spec")
    assert names == set(FAULT_KINDS)


# --- the in-process driver --------------------------------------------------


def test_fake_driver_hands_out_the_stream_with_link_events_for_disconnects() -> None:
    opts: dict[str, Any] = {"seed": 2, "shoes": 1, "decks": 1, "cut_card_min": 12, "faults": "disconnect:0.5"}
    expected = [d for _, d in FakeShoe(**opts).stream()]
    driver = FakeDriver(FakeShoe(**opts), cards_per_second=0, synthetic_time=True)
    assert isinstance(driver, Driver)
    driver.open()
    got: list[bytes] = []
    links: list[bool] = []
    while True:
        item = driver.read(0.01)
        if item is None:
            break
        if isinstance(item, LinkEvent):
            links.append(item.up)
        else:
            got.append(item[1])
    driver.close()
    assert got == expected
    assert links and links == [False, True] * (len(links) // 2)


def test_fake_driver_paces_in_real_time() -> None:
    driver = FakeDriver(FakeShoe(seed=1, shoes=1, cards_per_second=20))
    driver.open()
    start = time.monotonic()
    cards = 0
    while cards < 6:
        item = driver.read(1.0)
        assert isinstance(item, tuple)
        cards += b",CARD," in item[1]
    elapsed = time.monotonic() - start
    driver.close()
    assert 0.2 <= elapsed <= 1.5  # five card intervals of 50 ms, plus small frame steps


# --- the command ------------------------------------------------------------


def cli(*args: str) -> list[str]:
    return [sys.executable, "-c", "import sys; from controller.cli import main; sys.exit(main())", *args]


def test_fake_command_writes_the_raw_stream_to_stdout() -> None:
    out = subprocess.run(
        cli("fake", "--seed", "4", "--shoes", "1", "--cards-per-second", "0", "--decks", "2"),
        cwd=REPO,
        capture_output=True,
        timeout=60,
        check=True,
    )
    expected = b"".join(d for _, d in FakeShoe(seed=4, shoes=1, decks=2).stream())
    assert out.stdout == expected


def test_fake_command_rejects_a_bad_fault_spec_with_exit_2() -> None:
    out = subprocess.run(cli("fake", "--faults", "teleport:1"), cwd=REPO, capture_output=True, timeout=60)
    assert out.returncode == 2
    assert b"teleport" in out.stderr and b"Traceback" not in out.stderr


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_fake_pty_prints_its_path_first_and_exits_0_on_a_signal(sig: int, tmp_path: Path) -> None:
    proc = subprocess.Popen(
        cli("fake", "--pty", "--cards-per-second", "0", "--log", str(tmp_path / "log.jsonl")),
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert proc.stdout is not None
        path = proc.stdout.readline().decode().strip()
        assert os.path.exists(path)
        fd = os.open(path, os.O_RDONLY | os.O_NOCTTY)
        try:
            data = b""
            while b"NEWSHOE" not in data:
                data += os.read(fd, 4096)
        finally:
            os.close(fd)
        assert data.startswith(b"$SH,0,HELLO,")
        proc.send_signal(sig)
        assert proc.wait(timeout=10) == 0
        assert not os.path.exists(path)  # the symlink is cleaned up
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


# --- other protocols --------------------------------------------------------


def decode_with(protocol: str, chunks: list[tuple[float, bytes]]) -> list[Frame]:
    module = importlib.import_module(
        {"shoe-bin/1": "firmware_protocols.shoe_bin", "angel-eye/2": "firmware_protocols.angel_eye"}[protocol]
    )
    dec = module.Decoder()
    frames: list[Frame] = []
    for t, data in chunks:
        frames.extend(dec.feed(t, data))
    return frames


def without_time(frames: list[Frame]) -> list[Frame]:
    # shoe-bin/1 has no shoe_id in its shuffle commitment
    out: list[Frame] = []
    for f in frames:
        f = dataclasses.replace(f, t=0.0)
        out.append(dataclasses.replace(f, shoe_id="") if isinstance(f, ShuffleCommit) else f)
    return out


def test_shoe_bin_carries_the_same_shoe_as_shoe_ascii() -> None:
    _, ascii_chunks = fake_chunks(seed=12, shoes=1, shuffler=True, faults="faceup:0.1,unread:0.1,jam:0.1")
    _, bin_chunks = fake_chunks(
        seed=12, shoes=1, shuffler=True, faults="faceup:0.1,unread:0.1,jam:0.1", protocol="shoe-bin/1"
    )
    ascii_frames, _ = decode(ascii_chunks)
    assert without_time(decode_with("shoe-bin/1", bin_chunks)) == without_time(ascii_frames)


def test_angel_eye_places_cards_on_hands_announces_results_and_repeats_each_message() -> None:
    fake, chunks = fake_chunks(seed=3, shoes=1, protocol="angel-eye/2")
    frames = decode_with("angel-eye/2", chunks)
    assert isinstance(frames[0], Hello)
    assert not any(isinstance(f, Button) and f.name == "NEWSHOE" for f in frames)
    assert all(d[: len(d) // 3] * 3 == d for _, d in chunks)  # every message three times
    cards = [f for f in frames if isinstance(f, Card)]
    shoe = fake.shoes[0]
    assert cards[0].hand == "first" and cards[0].card == shoe["first_card"]
    assert [c.card for c in cards[1 : 1 + len(shoe["burned"])]] == shoe["burned"]
    assert {c.hand for c in cards[1 : 1 + len(shoe["burned"])]} == {"burn"}
    dealt = [c for c in cards if c.hand and c.hand[0] in "PB"]
    expected = []
    for coup in fake.coups:
        p, b = coup["player"], coup["banker"]
        order = [("P1", p[0]), ("B1", b[0]), ("P2", p[1]), ("B2", b[1])]
        order += [("P3", p[2])] if len(p) == 3 else []
        order += [("B3", b[2])] if len(b) == 3 else []
        expected += order
    assert [(c.hand, c.card) for c in dealt] == expected
    results = [f for f in frames if isinstance(f, DeviceResult)]
    assert [r.winner for r in results] == [c["winner"] for c in fake.coups]
    assert [r.player_pair for r in results] == [c["player"][0][0] == c["player"][1][0] for c in fake.coups]
    assert sum(isinstance(f, CutCard) for f in frames) == 1


def test_angel_eye_sends_a_seq_cycle_of_characters_and_data_bytes_with_bit_7_set() -> None:
    # docs/devices.md, Angel Eye: a printable seq of a short cycle (here the default 0-F), bit 7
    # set on the data bytes; a whole shoe decodes without one gap
    _, chunks = fake_chunks(seed=3, shoes=1, protocol="angel-eye/2")
    frames = decode_with("angel-eye/2", chunks)
    assert not any(isinstance(f, SequenceGap) for f in frames)
    seqs = [f.seq for f in frames]
    assert bytes(s for s in seqs if s is not None)[:20] == b"0123456789ABCDEF0123"
    for _, data in chunks:
        one = data[: len(data) // 3]
        if one[2:3] in (b"D", b"G", b"E", b"e", b"L"):
            assert all(b & 0x80 for b in one[3:-3]), one.hex()


def test_angel_eye_seq_cycle_is_configurable_and_checked() -> None:
    fake = FakeShoe(seed=3, shoes=1, protocol="angel-eye/2", angel_seq_cycle="123456789")
    frames = decode_with("angel-eye/2", list(fake.stream()))
    assert {f.seq for f in frames} == set(b"123456789")
    assert not any(isinstance(f, SequenceGap) for f in frames)
    for bad in ("", "A", "BA", "00", "0 1", "01\x7f"):
        with pytest.raises(ValueError, match="angel_seq_cycle"):
            FakeShoe(protocol="angel-eye/2", angel_seq_cycle=bad)
