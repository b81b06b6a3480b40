"""A supervisor's correction where an operator looks: the Prometheus
endpoint counts it (``shoe_controller_coups_corrected_total``), and
the terminal line ``run`` prints for it says which coup, each card replaced,
the winner before and after, and the reason (shown escaped as every
human output is: ``textsafe.visible``)."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

from controller.journal import Journal
from controller.metrics import Metrics
from controller.outputs.stdout import StdoutOutput
from controller.outputs.text import Winners, render
from tests.table import Table
from tests.test_metrics_http import scrape


def _corrected_table() -> tuple[Table, dict[str, Any]]:
    tb = Table()
    tb.start()
    tb.cards("9S", "2C", "KH", "3D")  # coup 1: Player 9 v Banker 5
    tb.result()
    tb.cards("6S", "7C", "KD", "QD")  # coup 2: Player 6 v Banker 7: Banker
    tb.result()
    reply, out = tb.command(
        id="fix-1", cmd="correct", coup=2, cards={"P1": "8D"}, reason="tape: P1 was 8D", confirm=True
    )
    assert reply["ok"], reply
    (corrected,) = [e for e in out if e["type"] == "coup.corrected"]
    return tb, corrected


def test_the_metrics_endpoint_counts_each_correction_and_the_coup_once() -> None:
    tb, _ = _corrected_table()
    m = Metrics(("127.0.0.1", 0))
    try:
        m.observe(tb.events, None, None)
        text = scrape(m.server)
        assert "shoe_controller_coups_corrected_total 1.0" in text
        # the coup was counted when it settled; its correction does not count it again
        assert 'shoe_controller_coups_total{outcome="settled"} 2.0' in text
        reply, out = tb.command(
            id="fix-2", cmd="correct", coup=2, cards={"P1": "9D"}, reason="again", confirm=True
        )
        assert reply["ok"], reply
        m.observe(out, None, None)
        assert "shoe_controller_coups_corrected_total 2.0" in scrape(m.server)
    finally:
        m.close()


def test_the_terminal_line_of_a_correction_says_the_coup_the_cards_the_winners_and_the_reason() -> None:
    tb, _ = _corrected_table()
    w = Winners()
    lines = [line for e in tb.events if (line := w.render(e)) is not None]
    assert lines[-1] == (
        "coup   2  CORRECTED P1 6S->8D: was banker wins, now player wins"
        " (Player 8D KD = 8, Banker 7C QD = 7); reason: tape: P1 was 8D (fix-1)"
    )
    # a second correction replaces the first: its 'was' is the first's winner
    reply, out = tb.command(
        id="fix-2", cmd="correct", coup=2, cards={"P1": "6D"}, reason="no, 6D", confirm=True
    )
    assert reply["ok"], reply
    (again,) = [line for e in out if (line := w.render(e)) is not None]
    assert again.startswith("coup   2  CORRECTED P1 8D->6D: was player wins, now banker wins")


def test_a_correction_of_a_result_not_rendered_says_its_winner_is_not_known() -> None:
    _, corrected = _corrected_table()
    line = render(corrected)
    assert line is not None and ": was not known, now player wins" in line


def test_the_reason_of_a_correction_is_shown_escaped() -> None:
    # the door refuses a control character in a command's reason; a journal
    # written before it (or by another writer) may still hold one
    _, corrected = _corrected_table()
    hostile = {**corrected, "reason": "ok\x1b[2J\nfake line\u202e"}
    line = render(hostile, "banker")
    assert line is not None and "\n" not in line and "\x1b" not in line and "\u202e" not in line
    assert line.endswith("reason: ok\\x1b[2J\\nfake line\\u202e (fix-1)")


def test_run_on_a_terminal_prints_the_winner_a_correction_replaces_from_the_journal(tmp_path: Path) -> None:
    # the output starts after the result was delivered (a restart): the
    # winner it replaces is read back from the journal
    tb, _ = _corrected_table()
    with Journal(tmp_path / "journal.sqlite3") as j:
        j.append_events(tb.events)
        corrected_seq = next(e["seq"] for e in tb.events if e["type"] == "coup.corrected")
        j.mark_delivered("stdout", corrected_seq - 1)
        out = io.StringIO()
        StdoutOutput(j, stream=out, text=True).pump()
        assert out.getvalue().splitlines() == [
            "coup   2  CORRECTED P1 6S->8D: was banker wins, now player wins"
            " (Player 8D KD = 8, Banker 7C QD = 7); reason: tape: P1 was 8D (fix-1)"
        ]
