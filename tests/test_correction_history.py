"""``history`` shows a supervisor's correction: the
coup's timeline has the ``coup.corrected`` entry and the command that made
it; ``history coups`` shows the corrected result, marked corrected."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from controller.cli import main
from controller.journal import Journal
from tests.test_history import JournalledTable


def _journal(path: Path) -> str:
    with Journal(path) as j:
        t = JournalledTable(j)
        t.start()
        t.cards("9S", "2C", "KH", "3D")
        t.result()
        t.cards("6S", "7C", "KD", "QD")  # Player 6, Banker 7
        t.result()
        t.cards("4S", "4C", "3S", "3C")
        t.result()
        reply, _ = t.command(
            id="fix-1", cmd="correct", coup=2, cards={"P1": "8D"}, reason="tape: P1 was 8D", confirm=True
        )
        assert reply["ok"], reply
        shoe = t.last("shoe.started")["shoe"]
        assert isinstance(shoe, str)
        return shoe


def test_history_shows_the_corrected_result_and_the_correction_in_the_timeline(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "journal.sqlite3"
    shoe = _journal(path)
    assert main(["history", "coups", "--journal", str(path), "--shoe", shoe, "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    assert [(r["coup"], r["winner"], r["corrected"]) for r in rows] == [
        (1, "player", None),
        (2, "player", "P1 6S->8D (was BANKER)"),
        (3, "tie", None),
    ]
    assert (
        rows[1]["player"] == ["8D", "KD"] and rows[1]["player_total"] == 8 and rows[1]["status"] == "settled"
    )

    assert main(["history", "coup", shoe, "2", "--journal", str(path), "--json"]) == 0
    tl = json.loads(capsys.readouterr().out)
    assert tl["result"]["winner"] == "banker"  # the result as settled, kept
    (fix,) = tl["corrections"]
    assert fix["supersedes"] == tl["result"]["event_id"] and fix["winner"] == "player"
    kinds = [e["kind"] for e in tl["entries"]]
    assert kinds[-2:] == ["command", "corrected"]
    command = tl["entries"][-2]["command"]
    assert command["cmd"] == "correct" and command["reply"]["ok"] is True
    assert command["reply"]["effects"] == [fix["seq"]]

    assert main(["history", "coup", shoe, "2", "--journal", str(path)]) == 0
    text = capsys.readouterr().out
    assert (
        "CORRECTED by supervisor (P1 6S->8D): PLAYER wins: Player 8 (8D KD) v Banker 7 (7C QD);"
        " settlement player +1, banker -1, tie -1, player_pair -1, banker_pair -1;"
        f" supersedes {fix['supersedes']}; reason: tape: P1 was 8D"
    ) in text
    assert "correct id=fix-1 coup=2" in text
    assert "\nnow:    CORRECTED by supervisor (P1 6S->8D): PLAYER wins" in text
    assert main(["history", "coups", "--journal", str(path), "--shoe", shoe]) == 0
    print(capsys.readouterr().out)
