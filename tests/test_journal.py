"""The journal's promises: durable before return, append-only with
idempotent re-appends, conflicts refused, delivery marks that only move
forward, retention that never drops undelivered events, and loud errors
when the disk will not take a write."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
import textwrap
import threading
from pathlib import Path
from typing import Any

import pytest

from controller.journal import Journal, JournalConflict, JournalError


def event(
    seq: int, type_: str = "card", table: str = "T01", shoe: str = "20261122T065611Z", **payload: Any
) -> dict[str, Any]:
    ev: dict[str, Any] = {
        "v": 1,
        "type": type_,
        "event_id": f"{table}/{shoe}/{seq}",
        "table": table,
        "shoe": shoe,
        "seq": seq,
        "ts": "2026-11-22T06:56:11.125Z",
    }
    ev.update(payload or {"coup": 1, "position": "P1", "card": "QS", "value": 0, "face_up": False})
    return ev


@pytest.fixture
def journal(tmp_path: Path) -> Journal:
    return Journal(tmp_path / "var" / "journal.sqlite3")


def test_new_journal_is_created_with_its_directory_in_wal_mode_with_incremental_vacuum(
    tmp_path: Path,
) -> None:
    path = tmp_path / "state" / "sub" / "j.sqlite3"
    Journal(path).close()
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert db.execute("PRAGMA auto_vacuum").fetchone()[0] == 2  # INCREMENTAL


def test_inputs_come_back_in_order_byte_for_byte(journal: Journal) -> None:
    chunks = [
        (1.5, "rx", b"$SH,0,HELLO*00\r\n"),
        (1.6, "tx", b"\x02OPLK01\x03"),
        (2.0, "cmd", b'{"cmd":"new_shoe"}'),
    ]
    ids = [journal.append_input(t, kind, data) for t, kind, data in chunks]
    assert ids == sorted(ids) and len(set(ids)) == 3
    assert [(r.t, r.kind, r.data) for r in journal.inputs_since()] == chunks
    assert [r.id for r in journal.inputs_since(ids[0])] == ids[1:]
    assert journal.last_input_id() == ids[-1]


def test_inputs_since_reads_across_batches(journal: Journal) -> None:
    for i in range(25):
        journal.append_input(float(i), "rx", bytes([i]))
    assert [r.data for r in journal.inputs_since(batch=7)] == [bytes([i]) for i in range(25)]


def test_unknown_input_kind_is_refused(journal: Journal) -> None:
    with pytest.raises(ValueError, match="input kind"):
        journal.append_input(1.0, "frame", b"")


def test_new_events_are_stored_and_returned(journal: Journal) -> None:
    stored = journal.append_events([event(1), event(2, "coup.result", winner="banker")])
    assert [e["seq"] for e in stored] == [1, 2]
    assert journal.last_seq() == 2
    assert [(p.seq, p.event_id, p.type) for p in journal.pending("mqtt")] == [
        (1, "T01/20261122T065611Z/1", "card"),
        (2, "T01/20261122T065611Z/2", "coup.result"),
    ]


def test_stored_json_is_the_event_itself(journal: Journal) -> None:
    ev = event(1, "coup.result", winner="tie", tags=["dragon7"])
    journal.append_events([ev])
    assert json.loads(journal.pending("x")[0].json) == ev


def test_reappending_identical_events_is_a_no_op_the_crash_rebuild_case(journal: Journal) -> None:
    journal.append_events([event(1), event(2)])
    assert journal.append_events([event(1), event(2), event(3)]) == [event(3)]
    assert [p.seq for p in journal.pending("out")] == [1, 2, 3]


def test_same_event_id_with_different_content_is_a_conflict_and_stores_nothing(journal: Journal) -> None:
    journal.append_events([event(1)])
    changed = event(1, coup=1, position="P1", card="KD", value=0, face_up=False)
    with pytest.raises(JournalConflict, match="different content"):
        journal.append_events([event(2), changed])
    assert journal.last_seq() == 1  # event 2 of the failed call was rolled back


def test_same_seq_under_another_event_id_is_a_conflict(journal: Journal) -> None:
    journal.append_events([event(1)])
    with pytest.raises(JournalConflict):
        journal.append_events([event(1, table="T02")])


def test_event_id_reused_with_a_new_seq_is_a_conflict(journal: Journal) -> None:
    journal.append_events([event(1)])
    clash = event(2)
    clash["event_id"] = event(1)["event_id"]
    with pytest.raises(JournalConflict, match="another seq"):
        journal.append_events([clash])


def test_an_unseen_seq_below_the_last_one_is_a_conflict(journal: Journal) -> None:
    journal.append_events([event(1), event(5)])
    with pytest.raises(JournalConflict, match="already at seq 5"):
        journal.append_events([event(3)])


def test_event_without_envelope_is_a_programming_error(journal: Journal) -> None:
    with pytest.raises(ValueError, match="seq"):
        journal.append_events([{"type": "card"}])


def test_pending_starts_after_each_outputs_own_mark(journal: Journal) -> None:
    journal.append_events([event(i) for i in range(1, 6)])
    journal.mark_delivered("mqtt", 3)
    assert [p.seq for p in journal.pending("mqtt")] == [4, 5]
    assert [p.seq for p in journal.pending("jsonl", limit=2)] == [1, 2]
    assert journal.backlog("mqtt") == 2 and journal.backlog("jsonl") == 5
    assert journal.outputs() == {"mqtt": 3}


def test_delivery_mark_never_moves_back(journal: Journal) -> None:
    journal.append_events([event(i) for i in range(1, 4)])
    journal.mark_delivered("mqtt", 3)
    journal.mark_delivered("mqtt", 1)
    assert journal.mark("mqtt") == 3 and journal.backlog("mqtt") == 0


def test_marks_and_events_survive_reopening(tmp_path: Path) -> None:
    path = tmp_path / "j.sqlite3"
    with Journal(path) as j:
        j.append_events([event(1), event(2)])
        j.mark_delivered("mqtt", 1)
    with Journal(path) as j:
        assert [p.seq for p in j.pending("mqtt")] == [2]


def test_marks_can_come_from_another_thread(journal: Journal) -> None:
    journal.append_events([event(i) for i in range(1, 201)])

    def ack_all() -> None:
        for seq in range(1, 201):
            journal.mark_delivered("mqtt", seq)

    acker = threading.Thread(target=ack_all)
    acker.start()
    journal.append_events([event(i) for i in range(201, 301)])
    acker.join()
    assert journal.mark("mqtt") == 200 and journal.backlog("mqtt") == 100


WRITER = textwrap.dedent(
    """
    import sys
    from controller.journal import Journal
    j = Journal(sys.argv[1])
    for seq in range(1, 100000):
        j.append_input(seq / 10, "rx", b"$SH,%d,CARD,QS*00\\r\\n" % seq)
        j.append_events([{"v": 1, "type": "card", "event_id": f"T01/S/{seq}", "table": "T01", "shoe": "S",
                          "seq": seq, "ts": "2026-11-22T06:56:11.125Z", "card": "QS"}])
        print(seq, flush=True)
    """
)


def test_everything_acknowledged_before_a_sigkill_is_there_after_reopening(tmp_path: Path) -> None:
    path = tmp_path / "j.sqlite3"
    child = subprocess.Popen([sys.executable, "-c", WRITER, str(path)], stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None
    acknowledged = 0
    for line in child.stdout:
        acknowledged = int(line)
        if acknowledged >= 40:
            break
    child.send_signal(signal.SIGKILL)
    rest = child.stdout.read()  # lines printed before the kill landed
    child.wait()
    acknowledged = max([acknowledged, *(int(x) for x in rest.split())])
    assert child.returncode == -signal.SIGKILL

    with Journal(path) as j:
        seqs = [p.seq for p in j.events_since()]
        assert seqs[:acknowledged] == list(range(1, acknowledged + 1))
        assert len(list(j.inputs_since())) >= acknowledged
        # And the journal is whole: the writer can carry on from where it was killed.
        j.append_events([event(len(seqs) + 1)])
    assert sqlite3.connect(path).execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def test_disk_full_is_a_loud_journal_error_and_the_journal_recovers(journal: Journal) -> None:
    journal.append_events([event(1)])
    db = journal._db  # simulate a full disk: forbid the file from growing
    pages = db.execute("PRAGMA page_count").fetchone()[0]
    db.execute(f"PRAGMA max_page_count = {pages}")
    with pytest.raises(JournalError, match="DISK IS FULL"):
        for i in range(1000):
            journal.append_input(float(i), "rx", os.urandom(4096))
    assert journal.last_seq() == 1  # reads still work
    db.execute("PRAGMA max_page_count = 1073741823")
    journal.append_events([event(2)])  # no transaction was left dangling
    assert journal.last_seq() == 2


def test_read_only_journal_is_a_journal_error_naming_the_problem() -> None:
    # Root ignores file modes, so the attempt runs as 'nobody' when we are root.
    base = Path(tempfile.mkdtemp(prefix="journal-ro-"))
    try:
        path = base / "j.sqlite3"
        Journal(path).close()
        path.chmod(0o444)
        base.chmod(0o555)
        code = textwrap.dedent(
            f"""
            import os
            from controller.journal import Journal, JournalError
            if os.geteuid() == 0:
                os.setgid(65534); os.setuid(65534)
            try:
                Journal({str(path)!r}).append_input(1.0, "rx", b"x")
            except JournalError as exc:
                print("JournalError:", exc)
            """
        )
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
        assert out.startswith("JournalError:")
        assert "read-only" in out
    finally:
        base.chmod(0o755)
        for p in base.iterdir():
            p.unlink()
        base.rmdir()


def test_retention_drops_old_delivered_events_but_keeps_undelivered_ones(journal: Journal) -> None:
    day = 86400.0
    journal.append_events([event(i) for i in range(1, 11)], now=0.0)  # old
    journal.append_events([event(i) for i in range(11, 16)], now=100 * day)  # recent
    journal.mark_delivered("mqtt", 15)
    journal.mark_delivered("jsonl", 6)
    result = journal.retention(90, now=100 * day, batch=3)
    assert result.events_deleted == 6
    assert [p.seq for p in journal.events_since()] == list(range(7, 16))
    assert journal.pending("jsonl")[0].seq == 7


def test_retention_only_counts_the_outputs_named(journal: Journal) -> None:
    journal.append_events([event(i) for i in range(1, 6)], now=0.0)
    journal.mark_delivered("mqtt", 5)
    journal.mark_delivered("removed-output", 0)
    assert journal.retention(1, now=10 * 86400.0, outputs=["mqtt"]).events_deleted == 5
    journal.append_events([event(6)], now=0.0)
    assert journal.retention(1, now=10 * 86400.0, outputs=["mqtt", "jsonl"]).events_deleted == 0


def test_pruned_events_regenerated_by_a_rebuild_are_skipped_not_conflicts(journal: Journal) -> None:
    journal.append_events([event(i) for i in range(1, 6)], now=0.0)
    journal.mark_delivered("mqtt", 5)
    journal.retention(1, now=10 * 86400.0)
    assert journal.append_events([event(i) for i in range(1, 7)]) == [event(6)]
    assert journal.last_seq() == 6


def test_retention_keeps_every_input_unless_told_where_the_rebuild_starts(journal: Journal) -> None:
    ids = [journal.append_input(float(i), "rx", b"x" * 1000) for i in range(100)]
    assert journal.retention(1, now=10 * 86400.0).inputs_deleted == 0
    result = journal.retention(1, now=10 * 86400.0, keep_inputs_from=ids[60], batch=7)
    assert result.inputs_deleted == 60
    assert [r.id for r in journal.inputs_since()] == ids[60:]
    assert journal._db.execute("PRAGMA freelist_count").fetchone()[0] == 0
