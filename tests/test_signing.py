"""Signed and chained events: a real daemon signs
what it journals; ``verify`` checks a journal, the archive (real
PostgreSQL) and a shoe report's events, and names an edited, deleted,
inserted or swapped event in each; the archive sets aside a forgery
published before the real event, and learns a rotated key only when the
old one endorsed it."""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import sqlite3
import stat
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from controller import signing
from controller.archive import db, migrate
from controller.archive.backfill import backfill
from controller.archive.store import Store
from controller.cli import main
from controller.config import load_config
from controller.daemon import Daemon
from controller.journal import Journal
from tests.support.configs import write_config

SAMPLE = Path(__file__).resolve().parent.parent / "docs" / "sample-shoe.shoelog"


@pytest.fixture(scope="module")
def signed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A whole shoe dealt by a real daemon: its directory (journal, key)."""
    tmp = tmp_path_factory.mktemp("signed")
    cfg = load_config(
        write_config(tmp, {"driver": "replay", "file": str(SAMPLE)}, outputs={"stdout": False, "jsonl": None})
    )
    assert Daemon(cfg, stdout=io.StringIO(), stop_at_eof=True).run() == 0
    return tmp


def _copy(signed: Path, tmp_path: Path) -> Path:
    for name in ("journal.sqlite3", "signing.key"):
        shutil.copy2(signed / name, tmp_path / name)
    return tmp_path / "journal.sqlite3"


def _rows(journal: Path) -> list[tuple[int, str]]:
    with sqlite3.connect(journal) as c:
        return [(int(s), str(j)) for s, j in c.execute("SELECT seq, json FROM events ORDER BY seq")]


def _verify(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    capsys.readouterr()
    rc = main(["verify", *args])
    out = capsys.readouterr()
    assert out.err == ""
    lines = out.out.splitlines()
    assert len(lines) == 1, lines  # one line, never a traceback
    return rc, lines[0]


def _forged(line: str, key: Any | None = None) -> str:
    """``line`` with its winner changed, re-signed by another key (or unsigned)."""
    body, _ = signing.split(line.encode())
    ev = json.loads(body)
    ev["winner"] = "player" if ev.get("winner") != "player" else "banker"
    if key is None:
        for f in signing.SIGNING_FIELDS:
            ev.pop(f, None)
        return json.dumps(ev, separators=(",", ":"))
    thief = signing.Signer(key)
    ev["key_id"] = thief.key_id
    ev.pop("sig", None)
    return thief.seal(json.dumps(ev, separators=(",", ":")))


# --- what the daemon journals ------------------------------------------------------


def test_every_journalled_event_is_signed_and_chained(signed: Path) -> None:
    mode = stat.S_IMODE(os.stat(signed / "signing.key").st_mode)
    assert mode == 0o600
    rows = _rows(signed / "journal.sqlite3")
    assert len(rows) > 400
    signer = signing.Signer(signing.load_key(signed / "signing.key"))
    ring = signing.KeyRing()
    ring.add(signer.public_key)
    head = None
    ended = 0
    for _, line in rows:
        body, sig = signing.split(line.encode())
        assert sig is not None, line[:80]
        ev = json.loads(line)
        assert list(ev)[-1] == "sig" and ev["key_id"] == signer.key_id
        assert ring.check(body, sig, ev["key_id"]) is None
        assert ev["prev"] == head
        if ev["type"] == "shoe.ended":
            assert ev["chain_head"] == ev["prev"]
            ended += 1
        head = signing.digest(body)
    assert ended == 1
    # the secret never reaches an event, a log line or the key list
    secret = (signed / "signing.key").read_text()
    assert secret.splitlines()[1] not in "".join(line for _, line in rows)


def test_the_signed_bytes_are_the_line_without_its_sig(signed: Path) -> None:
    """The recipe docs/events.md gives any consumer: cut the 96-byte tail, put } back."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    signer = signing.Signer(signing.load_key(signed / "signing.key"))
    public = Ed25519PublicKey.from_public_bytes(signing.unb64(signer.public_key))
    _, line = _rows(signed / "journal.sqlite3")[10]
    raw = line.encode()
    sig = json.loads(raw)["sig"]
    assert raw.endswith(b',"sig":"' + sig.encode() + b'"}') and len(sig) == 86
    public.verify(signing.unb64(sig), raw[:-96] + b"}")  # raises if not


# --- verify: a journal ---------------------------------------------------------------


def _tamper_journal(journal: Path, how: str) -> int:
    """Tamper with the journal as ``how`` says; the seq it touched."""
    rows = _rows(journal)
    seq, line = next((s, j) for s, j in rows[200:] if '"type":"coup.result"' in j)
    with sqlite3.connect(journal) as c:
        if how == "edit":
            c.execute(
                "UPDATE events SET json = ? WHERE seq = ?", (line.replace('"natural":', '"natural" :'), seq)
            )
            forged = json.loads(line)
            forged["winner"] = "tie"
            c.execute(
                "UPDATE events SET json = ? WHERE seq = ?", (json.dumps(forged, separators=(",", ":")), seq)
            )
        elif how == "delete":
            c.execute("DELETE FROM events WHERE seq = ?", (seq,))
        elif how == "insert":
            top = rows[-1][0]
            ev = json.loads(rows[-1][1])
            ev.update(
                seq=top + 1,
                event_id=f"T01/{ev['shoe'] or '-'}/{top + 1}",
                prev=signing.link_of(rows[-1][1].encode()),
            )
            forged = _forged(json.dumps(ev, separators=(",", ":")), Ed25519PrivateKey.generate())
            c.execute(
                "INSERT INTO events (seq, event_id, type, shoe, ts, json, created)"
                " VALUES (?, ?, ?, ?, ?, ?, 0)",
                (top + 1, ev["event_id"], ev["type"], ev["shoe"], ev["ts"], forged),
            )
            seq = top + 1
        elif how == "swap":
            other = next(j for s, j in rows if s == seq + 1)
            c.execute("UPDATE events SET json = ? WHERE seq = ?", (other, seq))
            c.execute("UPDATE events SET json = ? WHERE seq = ?", (line, seq + 1))
    return seq


TAMPERING = ["edit", "delete", "insert", "swap"]
#: what verify's line says for each, in every place
SAID = {
    "edit": "bad signature|differs from the line",
    "delete": "broken link",
    "insert": "unknown key|out of order|rows swapped|rows moved",
    "swap": "rows moved or swapped|rows swapped|out of order",
}


def _says(line: str, how: str) -> bool:
    return any(part in line for part in SAID[how].split("|"))


def test_verify_a_clean_journal(signed: Path, capsys: pytest.CaptureFixture[str]) -> None:
    n = len(_rows(signed / "journal.sqlite3"))
    rc, line = _verify(capsys, "--journal", str(signed / "journal.sqlite3"))
    assert rc == 0, line
    assert f"{n} events, seq 1..{n}, {n} signed" in line and "chain unbroken" in line
    rc, line = _verify(capsys, "-c", str(signed / "config.yaml"))
    assert rc == 0 and "verified journal" in line


@pytest.mark.parametrize("how", TAMPERING)
def test_verify_names_a_tampered_journal_event(
    signed: Path, tmp_path: Path, how: str, capsys: pytest.CaptureFixture[str]
) -> None:
    journal = _copy(signed, tmp_path)
    seq = _tamper_journal(journal, how)
    rc, line = _verify(capsys, "--journal", str(journal))
    assert rc == 1, line
    assert line.startswith("BROKEN: journal") and _says(line, how), line
    shown = seq + 1 if how == "delete" else seq
    assert f"seq {shown} " in line, line


@pytest.mark.parametrize("end", ["first", "last"])
def test_verify_names_a_journal_without_its_first_or_last_event(
    signed: Path, tmp_path: Path, end: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """The chain alone cannot tell a journal's first or last event deleted
    (nothing links to the last; the first's link is cut with it): the
    journal's own records can. Its first event must be seq 1 (or follow
    what retention pruned), its last must reach the seq its high-water
    mark (``<journal>.hwm``) says was committed."""
    journal = _copy(signed, tmp_path)
    shutil.copy2(signed / "journal.sqlite3.hwm", tmp_path / "journal.sqlite3.hwm")
    rows = _rows(journal)
    rc, line = _verify(capsys, "--journal", str(journal))
    assert rc == 0 and f"last against its high-water mark (seq {rows[-1][0]})" in line, line
    seq = rows[0][0] if end == "first" else rows[-1][0]
    with sqlite3.connect(journal) as c:
        c.execute("DELETE FROM events WHERE seq = ?", (seq,))
    rc, line = _verify(capsys, "--journal", str(journal))
    assert rc == 1 and line.startswith("BROKEN: journal"), line
    assert f"seq {seq} was deleted" in line, line
    if end == "last":
        assert "high-water mark" in line, line


def test_verify_a_pruned_journal_starts_after_what_retention_pruned(
    signed: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Retention is no deletion: the first event left links to the last one
    pruned (``retired_link``), and deleting the first one left is named."""
    journal = _copy(signed, tmp_path)
    rows = _rows(journal)
    with Journal(str(journal)) as j:  # the size bound: the oldest events go, in batches
        j.retention(1e9, 1e12, outputs=[], max_bytes=j.size_bytes() // 2, batch=100)
    left = _rows(journal)
    assert 1 < left[0][0] <= rows[-1][0]
    rc, line = _verify(capsys, "--journal", str(journal))
    assert rc == 0, line
    assert f"first event checked against the last event retention pruned (seq {left[0][0] - 1})" in line
    with sqlite3.connect(journal) as c:
        c.execute("DELETE FROM events WHERE seq = ?", (left[0][0],))
    rc, line = _verify(capsys, "--journal", str(journal))
    assert rc == 1 and f"retention pruned through seq {left[0][0] - 1}: seq {left[0][0]} was deleted" in line


def test_verify_a_journal_in_use_is_not_taken_for_a_deleted_end(
    signed: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: Any
) -> None:
    """A daemon at work moves the journal while verify reads it: its
    high-water mark is read before the events (appends only add events past
    it), and retention pruning the first events meanwhile is told from a
    deletion by the journal's meta as it is then."""
    from controller.commands import verify

    journal = _copy(signed, tmp_path)
    shutil.copy2(signed / "journal.sqlite3.hwm", tmp_path / "journal.sqlite3.hwm")
    hwm = verify._hwm

    def prune_meanwhile(path: str, journal_id: Any) -> int | None:
        with Journal(str(journal)) as j:  # after verify read meta, before it reads the events
            j.retention(1e9, 1e12, outputs=[], max_bytes=j.size_bytes() // 2, batch=100)
        return hwm(path, journal_id)

    monkeypatch.setattr(verify, "_hwm", prune_meanwhile)
    rc, line = _verify(capsys, "--journal", str(journal))
    assert rc == 0, line
    first = _rows(journal)[0][0]
    assert first > 1 and f"seq {first}.." in line, line


@pytest.mark.parametrize(
    ("content", "used"),
    [
        ("at the bound", True),
        ("one byte over", False),
        ("not JSON", False),
        ("nested too deep", False),
        ("committed true", False),
        ("committed 1e400", False),
        ("a lone surrogate", False),
        ("another journal's", False),
    ],
)
def test_verify_reads_the_high_water_mark_within_its_bound(
    signed: Path, tmp_path: Path, content: str, used: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    """The mark beside the journal is outside input too: at most
    ``MAX_HWM_BYTES`` read, and only a well-formed mark of this very journal
    is evidence; anything else is said and never a traceback."""
    from controller.commands import verify

    journal = _copy(signed, tmp_path)
    mark = json.loads((signed / "journal.sqlite3.hwm").read_text())
    n = len(_rows(journal))
    mark["committed"] = n + 5  # would name 5 deleted events, if taken
    raw = json.dumps(mark).encode()
    if content in ("at the bound", "one byte over"):
        raw = raw.ljust(verify.MAX_HWM_BYTES + (content == "one byte over"))
    elif content == "not JSON":
        raw = b"\xff\x00committed"
    elif content == "nested too deep":
        raw = b"[" * 2000
    elif content == "committed true":
        raw = json.dumps(dict(mark, committed=True)).encode()
    elif content == "committed 1e400":
        raw = json.dumps(mark).replace(str(n + 5), "1e400").encode()
    elif content == "a lone surrogate":
        raw = json.dumps(dict(mark, journal="\ud800")).encode()
    else:
        raw = json.dumps(dict(mark, journal="0" * 32)).encode()
    (tmp_path / "journal.sqlite3.hwm").write_bytes(raw)
    rc, line = _verify(capsys, "--journal", str(journal))
    if used:
        assert rc == 1 and f"seq {n + 1}..{n + 5} were deleted" in line, line
    else:
        assert rc == 0 and "last against no high-water mark" in line, line


def test_verify_journal_errors_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    assert main(["verify", "--journal", str(tmp_path / "none.sqlite3")]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no such journal" in err[0]
    (tmp_path / "junk.sqlite3").write_bytes(b"not sqlite" * 100)
    assert main(["verify", "--journal", str(tmp_path / "junk.sqlite3")]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "not a readable" in err[0]


# --- verify: a shoe report's events -------------------------------------------------


def _report(signed: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    journal = signed / "journal.sqlite3"
    with sqlite3.connect(journal) as c:
        shoe = c.execute("SELECT shoe FROM events WHERE type = 'shoe.ended'").fetchone()[0]
    out = tmp_path / "shoe.events.jsonl"
    assert main(["history", "report", shoe, "--journal", str(journal), "--events", str(out)]) == 0
    capsys.readouterr()
    return out


def test_verify_a_clean_shoe_report(signed: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = _report(signed, tmp_path, capsys)
    lines = out.read_text().splitlines()
    assert any(json.loads(x)["type"] == "shoe.ended" for x in lines[1:])
    rc, line = _verify(capsys, "--events", str(out))
    assert rc == 0 and f"{len(lines) - 1} events" in line and "chain unbroken" in line, line
    assert "; from the shoe's shoe.started to its shoe.ended" in line, line
    public = signing.Signer(signing.load_key(signed / "signing.key")).public_key
    rc, line = _verify(capsys, "--events", str(out), f"--key={public}")
    assert rc == 0 and "report's own" not in line
    stranger = signing.Signer(Ed25519PrivateKey.generate()).public_key
    rc, line = _verify(capsys, "--events", str(out), f"--key={stranger}")
    assert rc == 1 and "unknown key" in line


@pytest.mark.parametrize("how", TAMPERING)
def test_verify_names_a_tampered_report_event(
    signed: Path, tmp_path: Path, how: str, capsys: pytest.CaptureFixture[str]
) -> None:
    out = _report(signed, tmp_path, capsys)
    lines = out.read_text().splitlines()
    k = next(i for i in range(len(lines) // 2, len(lines)) if '"type":"coup.result"' in lines[i])
    if how == "edit":
        lines[k] = lines[k].replace('"winner":"', '"winner":"x', 1)
    elif how == "delete":
        del lines[k]
    elif how == "insert":
        lines.insert(k, lines[k - 20])  # a real, validly signed event, out of its place
    elif how == "swap":
        lines[k], lines[k + 1] = lines[k + 1], lines[k]
    out.write_text("\n".join(lines) + "\n")
    rc, line = _verify(capsys, "--events", str(out))
    assert rc == 1 and line.startswith("BROKEN: report"), line
    assert f"line {k + 1}" in line and (_says(line, how) or "broken link" in line), line


@pytest.mark.parametrize("end", ["first", "last"])
def test_verify_names_a_report_without_its_first_or_last_event(
    signed: Path, tmp_path: Path, end: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A shoe report runs from its shoe's shoe.started to its shoe.ended."""
    out = _report(signed, tmp_path, capsys)
    lines = out.read_text().splitlines()
    assert json.loads(lines[1])["type"] == "shoe.started" and json.loads(lines[-1])["type"] == "shoe.ended"
    del lines[1 if end == "first" else -1]
    out.write_text("\n".join(lines) + "\n")
    rc, line = _verify(capsys, "--events", str(out))
    assert rc == 1 and line.startswith("BROKEN: report"), line
    want = "shoe.started: the events before it" if end == "first" else "shoe.ended: the events after it"
    assert want in line and "were deleted" in line, line


def test_verify_report_file_bound(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: Any
) -> None:
    from controller.commands import verify

    path = tmp_path / "big.jsonl"
    head = json.dumps({"format": verify.REPORT_FORMAT, "table": "T01", "shoe": "s", "keys": []})
    path.write_text(head + "\n")
    monkeypatch.setattr(verify, "MAX_EVENTS_FILE_BYTES", len(head) + 1)
    rc, line = _verify(capsys, "--events", str(path))
    assert rc == 1 and "no events; a shoe report runs from shoe.started" in line  # at the bound: read
    path.write_text(head + "\n\n")
    capsys.readouterr()
    assert main(["verify", "--events", str(path)]) == 1  # one byte over
    assert "at most" in capsys.readouterr().err


# --- the archive (real PostgreSQL) -----------------------------------------------------


@pytest.fixture
def conn(pg_dsn: str) -> Any:
    with db.connect(pg_dsn, autocommit=True) as c:
        migrate.apply(c)
    c = db.connect(pg_dsn)
    yield c
    c.close()


def _store(**kw: Any) -> Store:
    return Store(
        archiver="test", prefix="baccarat", max_payload_bytes=256 * 1024, retention_months=24 * 12,
        partitions_ahead=2, **kw,
    )  # fmt: skip


def _archived(signed: Path, conn: Any) -> None:
    counts = backfill(conn, _store(), [str(signed / "journal.sqlite3")])
    (c,) = counts.values()
    assert c["rejects"] == 0 and c["archived"] == len(_rows(signed / "journal.sqlite3"))


def _archive_verify(capsys: pytest.CaptureFixture[str], dsn: str) -> tuple[int, str]:
    return _verify(capsys, "--dsn", dsn, "--table", "T01", "--from", "2025-11-01", "--to", "2025-11-30")


def test_verify_a_clean_archive(
    signed: Path, conn: Any, pg_dsn: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    _archived(signed, conn)
    n = len(_rows(signed / "journal.sqlite3"))
    rc, line = _archive_verify(capsys, pg_dsn)
    assert rc == 0 and f"{n} events" in line and f"{n} signed" in line, line
    # the same through the archiver's own config (-c archive.yaml)
    from tests.support.archiver import write_archive_config

    cfg = write_archive_config(tmp_path, host="127.0.0.1", port=1883, dsn=pg_dsn)
    rc, line = _verify(capsys, "-c", str(cfg), "--table", "T01", "--from", "2025-11-22", "--to", "2025-11-22")
    assert rc == 0 and f"{n} events" in line, line
    capsys.readouterr()
    too_long = ["--from", "2024-12-30", "--to", "2025-12-31"]  # 366 days is the bound: one over
    assert main(["verify", "--dsn", pg_dsn, "--table", "T01", *too_long]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "367 days; at most 366" in err[0]
    rc, line = _verify(
        capsys, "--dsn", pg_dsn, "--table", "T01", "--from", "2025-01-01", "--to", "2025-12-31"
    )
    assert rc == 0 and "2025-01-01..2025-12-31" in line  # at the bound


@pytest.mark.parametrize("how", TAMPERING)
def test_verify_names_a_tampered_archive_event(
    signed: Path, conn: Any, pg_dsn: str, how: str, capsys: pytest.CaptureFixture[str]
) -> None:
    _archived(signed, conn)
    rows = _rows(signed / "journal.sqlite3")
    seq, line = next((s, j) for s, j in rows[200:] if '"type":"coup.result"' in j)
    ev = json.loads(line)
    with conn.transaction():
        if how == "edit":  # what report reads
            conn.execute(
                "UPDATE events SET payload = jsonb_set(payload, '{winner}', '\"tie\"') WHERE event_id = %s",
                (ev["event_id"],),
            )
        elif how == "delete":
            conn.execute("DELETE FROM events WHERE event_id = %s", (ev["event_id"],))
            conn.execute("DELETE FROM signed_lines WHERE event_id = %s", (ev["event_id"],))
        elif how == "insert":
            fake = dict(ev, seq=seq + 1000, event_id=f"T01/{ev['shoe']}/{seq + 1000}")
            forged = _forged(json.dumps(fake, separators=(",", ":")), Ed25519PrivateKey.generate())
            conn.execute(
                "INSERT INTO events (event_id, ts, table_id, shoe, seq, type, payload) "
                "VALUES (%s, %s, 'T01', %s, %s, 'coup.result', %s)",
                (fake["event_id"], ev["ts"], ev["shoe"], fake["seq"], forged),
            )
            conn.execute(
                "INSERT INTO signed_lines VALUES (%s, %s, 'T01', %s, %s)",
                (fake["event_id"], ev["ts"], fake["seq"], forged),
            )
            seq = seq + 1000
            # the forged row goes last by seq: move it between two real ones
            conn.execute("UPDATE events SET seq = %s WHERE event_id = %s", (seq, fake["event_id"]))
        elif how == "swap":  # two rows trade places (their seq columns)
            nxt = json.loads(next(j for s, j in rows if s == seq + 1))
            conn.execute("UPDATE events SET seq = -1 WHERE event_id = %s", (ev["event_id"],))
            conn.execute("UPDATE events SET seq = %s WHERE event_id = %s", (seq, nxt["event_id"]))
            conn.execute("UPDATE events SET seq = %s WHERE event_id = %s", (seq + 1, ev["event_id"]))
    rc, line = _archive_verify(capsys, pg_dsn)
    assert rc == 1 and line.startswith("BROKEN: archive table T01"), line
    assert _says(line, how), line


@pytest.mark.parametrize("end", ["first", "last"])
def test_verify_names_an_archive_without_its_first_or_last_event(
    signed: Path, conn: Any, pg_dsn: str, end: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """The archive's mark (``archive_table_marks``: the table held from
    first_seq through seq, as the archiver keeps it after each batch) tells
    a deleted first or last event from a record that simply starts or ends
    there."""
    from controller.archive import marks

    _archived(signed, conn)
    marks.advance(conn, "T01")
    conn.commit()
    rows = _rows(signed / "journal.sqlite3")
    rc, line = _archive_verify(capsys, pg_dsn)
    assert rc == 0, line
    assert "first event checked against the chain's start (seq 1)" in line, line
    assert f"last against the archive's mark (seq {rows[-1][0]})" in line, line
    seq = rows[0][0] if end == "first" else rows[-1][0]
    eid = json.loads(rows[0][1] if end == "first" else rows[-1][1])["event_id"]
    with conn.transaction():
        conn.execute("DELETE FROM events WHERE event_id = %s", (eid,))
        conn.execute("DELETE FROM signed_lines WHERE event_id = %s", (eid,))
    rc, line = _archive_verify(capsys, pg_dsn)
    assert rc == 1 and line.startswith("BROKEN: archive table T01"), line
    assert f"seq {seq} was deleted" in line and "the archive's mark holds the table" in line, line


def test_retention_moves_the_archive_mark_so_verify_tells_it_from_a_deletion(
    signed: Path, conn: Any, pg_dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Retention drops whole months: the mark then holds the table from the
    first event left, which is no deleted first event."""
    import datetime as dt

    from controller.archive import marks, partitions

    _archived(signed, conn)
    marks.advance(conn, "T01")
    rows = _rows(signed / "journal.sqlite3")
    half = rows[len(rows) // 2][0]
    with conn.transaction():
        partitions.ensure(conn, [dt.date(2025, 10, 1)])
    with conn.transaction():  # the first half of the record a month older
        conn.execute(
            "UPDATE events SET ts = ts - interval '40 days' WHERE table_id = 'T01' AND seq < %s", (half,)
        )
    assert partitions.drop_expired(conn, dt.datetime(2025, 11, 15, tzinfo=dt.UTC), 0)
    assert (
        conn.execute("SELECT first_seq FROM archive_table_marks WHERE table_id = 'T01'").fetchone()[0] == half
    )
    conn.commit()
    rc, line = _archive_verify(capsys, pg_dsn)
    assert rc == 0 and f"seq {half}..{rows[-1][0]}" in line, line
    assert f"the table is archived from seq {half}, mid-chain" in line, line
    with conn.transaction():
        conn.execute("DELETE FROM events WHERE table_id = 'T01' AND seq = %s", (half,))
    rc, line = _archive_verify(capsys, pg_dsn)
    assert rc == 1 and f"seq {half} was deleted" in line, line


def test_verify_an_archive_range_checks_its_ends_against_the_events_around_it(
    signed: Path, conn: Any, pg_dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A day range's first event links to the archived event before the
    range, and the event after the range links to its last: deleting
    either end of the range is named, whatever the mark says."""
    _archived(signed, conn)
    rows = _rows(signed / "journal.sqlite3")
    # spread the record over three days: the middle third is the range
    third = len(rows) // 3
    with conn.transaction():
        for n, (s, _) in enumerate(rows):
            day = 21 if n < third else 22 if n < 2 * third else 23
            conn.execute(
                "UPDATE events SET ts = ts + make_interval(days => %s - 22)"
                " WHERE table_id = 'T01' AND seq = %s",
                (day, s),
            )
    one_day = ("--dsn", pg_dsn, "--table", "T01", "--from", "2025-11-22", "--to", "2025-11-22")
    rc, line = _verify(capsys, *one_day)
    assert rc == 0, line
    assert (
        f"first event checked against the archived event before the range (seq {rows[third - 1][0]})" in line
    )
    assert f"last against the archived event after the range (seq {rows[2 * third][0]})" in line
    for k in (third, 2 * third - 1):
        with conn.transaction():
            conn.execute("DELETE FROM events WHERE table_id = 'T01' AND seq = %s", (rows[k][0],))
        rc, line = _verify(capsys, *one_day)
        assert rc == 1 and "broken link" in line, line
        if k == third:
            assert f"seq {rows[k + 1][0]} " in line, line  # the new first event names the cut
        else:
            assert "the event after the range" in line, line
        with conn.transaction():  # put it back for the next end
            conn.execute(
                "INSERT INTO events (event_id, ts, table_id, shoe, seq, type, payload)"
                " SELECT s.event_id, s.ts + make_interval(days => 0), 'T01', %s, s.seq, %s, s.line::jsonb"
                " FROM signed_lines s WHERE s.table_id = 'T01' AND s.seq = %s",
                (json.loads(rows[k][1])["shoe"], json.loads(rows[k][1])["type"], rows[k][0]),
            )


# --- the forgery first (item 1's demonstration) ---------------------------------------------


def _keys_message(signed: Path) -> tuple[str, bytes]:
    with sqlite3.connect(signed / "journal.sqlite3") as c:
        keys = json.loads(c.execute("SELECT value FROM meta WHERE key = 'signing_keys'").fetchone()[0])
    return "baccarat/T01/keys", json.dumps({"table": "T01", "keys": keys}).encode()


def _real_result(signed: Path) -> str:
    return next(j for _, j in _rows(signed / "journal.sqlite3") if '"type":"coup.result"' in j)


@pytest.mark.parametrize("forgery", ["unsigned", "another key", "bad signature"])
def test_a_forgery_published_first_is_set_aside_and_the_real_event_archived(
    signed: Path, conn: Any, forgery: str
) -> None:
    real = _real_result(signed)
    if forgery == "unsigned":
        fake = _forged(real)
    elif forgery == "another key":
        fake = _forged(real, Ed25519PrivateKey.generate())
    else:  # the table's key id, a signature that is not the table's
        body = _forged(real, Ed25519PrivateKey.generate())
        ev = json.loads(body)
        ev["key_id"] = json.loads(real)["key_id"]
        fake = json.dumps(ev, separators=(",", ":"))
    s = _store()
    topic = "baccarat/T01/coup/result"
    s.write(conn, [_keys_message(signed)])
    with conn.transaction():
        first = s.write(conn, [(topic, fake.encode())])
    assert first.counts["rejects"] == 1 and first.counts["bad_signatures"] == 1
    assert first.reject_reasons[0].startswith(f"{topic}: signature:")
    then = s.write(conn, [(topic, real.encode())])
    assert then.counts["archived"] == 1 and then.counts["conflicts"] == 0
    eid = json.loads(real)["event_id"]
    stored = conn.execute("SELECT payload->>'winner' FROM events WHERE event_id = %s", (eid,)).fetchone()[0]
    assert stored == json.loads(real)["winner"]
    assert conn.execute("SELECT count(*) FROM conflicts").fetchone()[0] == 0
    reason = conn.execute("SELECT reason FROM rejects").fetchone()[0]
    assert reason.startswith("signature:")
    counted = conn.execute("SELECT value FROM archive_counters WHERE name = 'bad_signatures'").fetchone()
    assert counted[0] == 1


def test_a_signed_event_waits_for_its_key_announced_to_another_archiver(signed: Path, conn: Any) -> None:
    """Two archivers on one work queue (NATS, jetstream.py): the table's key
    announcement went to ``a``, its event to ``b`` before ``a`` committed the
    key. Allowed to defer it (``deferrable``), ``b`` neither writes nor
    rejects nor counts it; offered again once ``a`` has committed the key,
    it is archived and verified. Without the allowance (the bound passed)
    it is rejected as before, with the reason."""
    real = _real_result(signed)
    topic = "baccarat/T01/coup/result"
    a, b = _store(), Store(
        archiver="b", prefix="baccarat", max_payload_bytes=256 * 1024, retention_months=24 * 12,
        partitions_ahead=2,
    )  # fmt: skip
    out = b.write(conn, [(topic, real.encode())], deferrable={0})
    assert out.deferred == [0] and not out.rejected, out
    assert out.counts["rejects"] == out.counts["bad_signatures"] == out.counts["received"] == 0
    assert conn.execute("SELECT count(*) FROM rejects").fetchone()[0] == 0
    assert conn.execute("SELECT count(*) FROM event_ids").fetchone()[0] == 0

    a.write(conn, [_keys_message(signed)])
    b.keys._reloaded.clear()  # its redelivery comes KEY_WAIT_S (2 s) later: past the 1 s reload throttle
    out = b.write(conn, [(topic, real.encode())], deferrable={0})
    assert out.deferred == [] and out.counts["archived"] == 1 and out.counts["received"] == 1, out
    assert conn.execute("SELECT count(*) FROM signed_lines").fetchone()[0] == 1
    assert conn.execute("SELECT count(*) FROM rejects").fetchone()[0] == 0

    # the bound passed (not deferrable): an unknown key is rejected, with the reason
    late = Store(
        archiver="c", prefix="baccarat", max_payload_bytes=256 * 1024, retention_months=24 * 12,
        partitions_ahead=2,
    )  # fmt: skip
    other = _forged(real, Ed25519PrivateKey.generate())
    out = late.write(conn, [(topic, other.encode())])
    assert out.deferred == [] and out.counts["rejects"] == 1 and "unknown key" in out.reject_reasons[0]


@pytest.mark.parametrize("forgery", ["unsigned", "bad signature", "pinned table"])
def test_a_forgery_under_a_known_key_never_waits(signed: Path, conn: Any, forgery: str) -> None:
    """Waiting is only for a key the archive may yet learn: a bad signature
    under a known key, an unsigned event of a table that signs, and an
    unknown key of a pinned table are rejected at once, deferrable or not."""
    real = _real_result(signed)
    topic = "baccarat/T01/coup/result"
    if forgery == "unsigned":
        fake = _forged(real)
    elif forgery == "bad signature":
        ev = json.loads(_forged(real, Ed25519PrivateKey.generate()))
        ev["key_id"] = json.loads(real)["key_id"]
        fake = json.dumps(ev, separators=(",", ":"))
    else:
        fake = _forged(real, Ed25519PrivateKey.generate())
    pinned = {"T01": [signing.Signer(Ed25519PrivateKey.generate()).public_key]}
    s = _store(pinned=pinned) if forgery == "pinned table" else _store()
    s.write(conn, [_keys_message(signed)])
    out = s.write(conn, [(topic, fake.encode())], deferrable={0})
    assert out.deferred == [] and out.counts["rejects"] == out.counts["bad_signatures"] == 1, out
    assert out.reject_reasons[0].startswith(f"{topic}: signature:")


def test_a_table_that_never_signed_is_archived_as_before(conn: Any) -> None:
    """An older producer (no sig, no key): the archive takes its events as it
    always did (and so the forgery-first of the issue stays possible there:
    the first copy of an id wins, the second goes to conflicts)."""
    from tests.test_archive import msg, result

    s = _store()
    real = result(3, 1)
    fake = dict(real, winner="tie")
    assert s.write(conn, [msg(fake)]).counts["archived"] == 1
    assert s.write(conn, [msg(real)]).counts["conflicts"] == 1


def test_the_previous_envelope_decoder_reads_a_signed_event(signed: Path) -> None:
    """An older consumer that ignores unknown fields: the envelope 1.0
    fields decode from a signed line unchanged."""
    import msgspec

    class Envelope10(msgspec.Struct):
        v: int
        type: str
        event_id: str
        table: str
        shoe: str | None
        seq: int
        ts: str

    line = _real_result(signed)
    ev = msgspec.json.decode(line, type=Envelope10)
    assert ev.v == 1 and ev.type == "coup.result" and ev.event_id == json.loads(line)["event_id"]


# --- keys: pinned, rotation, a lost journal -------------------------------------------------------


def test_a_pinned_table_learns_no_key_from_the_broker(signed: Path, conn: Any) -> None:
    real = _real_result(signed)
    stranger = signing.Signer(Ed25519PrivateKey.generate())
    s = _store(pinned={"T01": [stranger.public_key]})
    s.write(conn, [_keys_message(signed)])  # the table's real announcement: not taken
    out = s.write(conn, [("baccarat/T01/coup/result", real.encode())])
    assert out.counts["rejects"] == 1 and "unknown key" in out.reject_reasons[0]
    real_key = json.loads(real)["key_id"]
    assert s.keys.rings is not None and real_key not in s.keys.rings["T01"].keys
    tofu_off = _store(trust_on_first_use=False)
    tofu_off.write(conn, [("baccarat/T02/keys", _keys_message(signed)[1].replace(b'"T01"', b'"T02"'))])
    assert tofu_off.keys.rings is not None
    assert not tofu_off.keys.rings["T02"].keys  # T02's first key: not trusted on first use


def _events(n: int, start: int = 1) -> list[dict[str, Any]]:
    ts = "2025-11-22T08:26:41.000Z"
    return [
        {"v": 1, "type": "card", "event_id": f"T01/s/{i}", "table": "T01", "shoe": "s", "seq": i,
         "ts": ts, "coup": 1, "position": "P1", "card": "9S", "value": 9, "face_up": True}
        for i in range(start, start + n)
    ]  # fmt: skip


def test_rotation_a_new_key_endorsed_old_events_still_verify(
    tmp_path: Path, conn: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    key = tmp_path / "signing.key"
    capsys.readouterr()
    assert main(["keygen", "--key", str(key)]) == 0
    assert "public_key" in capsys.readouterr().out
    assert main(["keygen", "--key", str(key)]) == 1  # never over an existing key
    j = Journal(tmp_path / "journal.sqlite3")
    j.claim("T01")

    def start() -> None:
        signer = signing.Signer(signing.load_key(key))
        entry: dict[str, Any] = {"key_id": signer.key_id, "public_key": signer.public_key}
        entry.update(signing.read_endorsement(key, signer.key_id) or {})
        j.add_signing_key(entry)
        j.enable_signing(signer)

    start()
    j.append_events(_events(5))
    assert main(["keygen", "--key", str(key), "--rotate"]) == 0
    start()
    j.append_events(_events(5, 6))
    keys = j.signing_keys()
    j.close()
    assert len(keys) == 2 and keys[1]["endorsed_by"] == keys[0]["key_id"]
    rc, line = _verify(capsys, "--journal", str(tmp_path / "journal.sqlite3"))
    assert rc == 0 and "10 events" in line and keys[0]["key_id"] in line and keys[1]["key_id"] in line
    # the archive: the first key on first use, the second by its endorsement
    s = _store()
    announce = ("baccarat/T01/keys", json.dumps({"table": "T01", "keys": keys}).encode())
    s.write(conn, [announce])
    assert s.keys.rings is not None and set(s.keys.rings["T01"].keys) == {k["key_id"] for k in keys}
    trust = dict(conn.execute("SELECT key_id, trust FROM table_keys").fetchall())
    assert trust == {keys[0]["key_id"]: "tofu", keys[1]["key_id"]: "endorsed"}
    # a third key nobody endorsed is not learned
    rogue = signing.Signer(Ed25519PrivateKey.generate())
    bad = [*keys, {"key_id": rogue.key_id, "public_key": rogue.public_key}]
    s.write(conn, [("baccarat/T01/keys", json.dumps({"table": "T01", "keys": bad}).encode())])
    assert rogue.key_id not in s.keys.rings["T01"].keys


def test_a_lost_journal_new_epoch_says_so_in_the_chain(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    key = signing.Signer(signing.create_key(tmp_path / "k"))
    path = tmp_path / "journal.sqlite3"
    j = Journal(path)
    j.claim("T01")
    j.add_signing_key({"key_id": key.key_id, "public_key": key.public_key})
    j.enable_signing(key)
    j.append_events(_events(3))
    j.close()
    for suffix in ("", "-wal", "-shm"):
        with contextlib.suppress(FileNotFoundError):
            os.remove(str(path) + suffix)
    j = Journal(path)
    history = j.claim("T01")
    assert history.lost is not None
    j.add_signing_key({"key_id": key.key_id, "public_key": key.public_key})
    j.enable_signing(key, chain_reset=f"new epoch above seq {history.seq_floor}: {history.lost}")
    j.append_events(_events(2, history.seq_floor + 1))
    j.append_events(_events(1, history.seq_floor + 3))
    rows = _rows(path)
    j.close()
    first, second, third = (json.loads(line) for _, line in rows)
    assert first["prev"] is None and first["chain_reset"].startswith("new epoch above seq")
    assert "chain_reset" not in second and second["prev"] == signing.link_of(rows[0][1].encode())
    assert third["prev"] == signing.link_of(rows[1][1].encode())
    rc, line = _verify(capsys, "--journal", str(path))
    assert rc == 0 and "1 new epoch(s)" in line


def test_a_key_readable_by_others_is_refused(tmp_path: Path) -> None:
    key = tmp_path / "k"
    signing.create_key(key)
    os.chmod(key, 0o640)
    with pytest.raises(signing.SigningKeyError, match="chmod 600"):
        signing.load_key(key)


def test_the_chain_runs_on_after_retention_pruned_every_event(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A table idle past its retention: every event pruned, and the next one,
    after a restart, still links to the last one the journal held."""
    key = signing.Signer(signing.create_key(tmp_path / "k"))
    path = tmp_path / "journal.sqlite3"
    j = Journal(path)
    j.claim("T01")
    j.enable_signing(key)
    j.append_events(_events(3), now=0.0)
    last = _rows(path)[-1][1]
    j.mark_delivered("out", 3)
    assert j.retention(1, 10 * 86400.0).events_deleted == 3
    j.close()
    j = Journal(path)
    j.claim("T01")
    j.enable_signing(key)  # a restart
    j.append_events(_events(1, 4))
    (row,) = _rows(path)
    j.close()
    assert json.loads(row[1])["prev"] == signing.link_of(last.encode())


def test_verify_a_journal_nothing_signed_is_no_pass(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    j = Journal(tmp_path / "journal.sqlite3")
    j.append_events(_events(2))  # signing off
    j.close()
    rc, line = _verify(capsys, "--journal", str(tmp_path / "journal.sqlite3"))
    assert rc == 1 and "2 events, none signed: nothing to verify" in line


def test_retention_drops_the_signed_lines_with_their_events(signed: Path, conn: Any) -> None:
    _archived(signed, conn)
    n = len(_rows(signed / "journal.sqlite3"))
    assert conn.execute("SELECT count(*) FROM signed_lines").fetchone()[0] == n
    import datetime as dt

    later = _store(now=lambda: dt.datetime(2026, 1, 2, tzinfo=dt.UTC))  # the events are of 2025-11
    later.retention_months = 1
    later.maintain(conn)
    assert conn.execute("SELECT count(*) FROM events").fetchone()[0] == 0
    assert conn.execute("SELECT count(*) FROM signed_lines").fetchone()[0] == 0
