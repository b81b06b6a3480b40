"""The durable journal: every input the engine saw and every event it made,
in one append-only SQLite file (WAL, ``synchronous=FULL``).

Owns the on-disk schema and the three jobs it serves:

* **crash recovery**: ``inputs`` holds every device chunk (``rx``), every
  byte sent to the device (``tx``), every supervisor command (``cmd``),
  link changes (``link``) and timer ticks (``tick``) with their time, so
  after ``kill -9`` the daemon rebuilds the shoe by re-feeding them to a
  fresh, deterministic engine (``commands_seen`` remembers the commands
  taken within their freshness window, so none is taken twice, restarts
  included);
* **event store**: ``events`` keyed by the event's ``seq`` (per table,
  strictly increasing) with a unique ``event_id``. Re-appending an event
  that is already there with identical content is a no-op (the rebuild
  case); the same id or seq with different content is a ``JournalConflict``
  (the engine was not deterministic, or two tables share one journal);
* **outbox**: ``marks`` holds one high-water mark per output. Outputs
  deliver in ``seq`` order, so "everything up to the mark was delivered" is
  the whole delivery state;
* **history guard**: the daemon ``claim``s the journal, which keeps a small
  file beside it (``<journal>.hwm``) saying which journal this is, the last
  seq it committed and a seq bound no issued event exceeds. A journal that
  lost history (deleted, truncated, its WAL removed, an older copy put
  back) is told from a journal that is merely behind, and the daemon starts
  a new epoch above the bound, so an event id is never issued twice with
  different content.

The daemon moves SQLite's checkpoint (the WAL copied back into the database
file) out of the commits into a thread of its own (``checkpoint_ahead``).

Every write is one transaction committed (and, with ``synchronous=FULL``,
fsynced) before the call returns. A write that fails (disk full, read-only
file system, corrupt file) raises ``JournalError`` with a message meant for
an operator, never a bare ``sqlite3`` error.

The object is safe to share between threads (the MQTT network thread marks
deliveries while the main loop appends), and several processes may open the
same file (WAL readers never block the writer).
"""

from __future__ import annotations

import collections
import contextlib
import fcntl
import json
import os
import sqlite3
import threading
import time
import uuid
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal, NamedTuple

from controller.errors import RuntimeFailure
from controller.events import dumps
from controller.signing import SIGNING_FIELDS, Signer, digest, link_of

SCHEMA_VERSION = 1
#: ``meta``: the first input whose supervisor command is the bytes received
#: (``Journal.received_commands_from``).
RECEIVED_COMMANDS_KEY = "commands_received_from"
INPUT_KINDS: frozenset[str] = frozenset({"rx", "tx", "cmd", "link", "tick"})
InputKind = Literal["rx", "tx", "cmd", "link", "tick"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS inputs (
    id    INTEGER PRIMARY KEY AUTOINCREMENT,
    t     REAL NOT NULL,
    kind  TEXT NOT NULL CHECK (kind IN ('rx', 'tx', 'cmd', 'link', 'tick')),
    data  BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS inputs_t ON inputs (t);
CREATE TABLE IF NOT EXISTS events (
    seq      INTEGER PRIMARY KEY,
    event_id TEXT NOT NULL UNIQUE,
    type     TEXT NOT NULL,
    shoe     TEXT,
    ts       TEXT NOT NULL,
    json     TEXT NOT NULL,
    created  REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS events_created ON events (created);
CREATE TABLE IF NOT EXISTS marks (
    output TEXT PRIMARY KEY,
    seq    INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS commands_seen (
    key     TEXT PRIMARY KEY,
    expires REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS commands_seen_expires ON commands_seen (expires);
"""


class JournalError(RuntimeFailure):
    """The journal cannot record or read: the daemon must not deal on as if
    events were safe."""


class JournalRefused(JournalError):
    """The journal is not taken (``Journal.claim``): it belongs to another
    table, another process holds it, or its high-water mark cannot be
    trusted. The message says what to do; nothing was written."""


class JournalConflict(JournalError):
    """An event clashes with what the journal already holds under its id or
    seq: the engine did not reproduce its own past, or two tables share a
    journal."""


#: Above every seq (SQLite's largest integer): ``pending`` holds nothing back.
_NO_SEQ = 2**63 - 1

#: Beside the journal: ``<journal>`` + this suffix (see ``Journal.claim``).
HWM_SUFFIX = ".hwm"
#: Seqs reserved ahead in the high-water mark: one fsync of it per this many events.
HWM_RESERVE = 10_000
#: The largest ``committed`` or ``reserved`` a mark may hold: a journal that
#: lost history carries on above ``reserved``, and its seqs must still fit
#: SQLite's integers (2**63 - 1) with room for a table's lifetime of events
#: (2**62 more: over 10**10 years at a million events a second).
MAX_MARK_SEQ = 2**62
#: The mark is one JSON line padded to this size and rewritten in place.
_HWM_SIZE = 512
#: Commits between two checkpoints taken ahead (``Journal.checkpoint_ahead``):
#: about 300 WAL frames (1.2 MB) at a card's 6.
CHECKPOINT_AHEAD_COMMITS = 50
#: With checkpoints taken ahead, SQLite's own (which runs inside the commit
#: that crosses it) waits for this many WAL frames (about 40 MB): a backstop
#: should the thread fall behind or fail.
WAL_BACKSTOP_FRAMES = 10_000
#: SQLite's default ``wal_autocheckpoint``, put back should the thread fail.
_WAL_AUTOCHECKPOINT_DEFAULT = 1000
_BOOT_ID = "/proc/sys/kernel/random/boot_id"


def boot_id() -> str:
    """This boot's id (Linux), or "" when unknown: tells a ``kill -9`` (the
    page cache, and the last ``committed`` written to it, survived) from a
    power cut (it may not have)."""
    try:
        with open(_BOOT_ID, encoding="ascii") as f:
            return f.read(64).strip()
    except OSError:
        return ""


def _same_boot(recorded: str) -> bool:
    now = boot_id()
    return bool(now) and recorded == now


class History(NamedTuple):
    """What ``Journal.claim`` found. ``lost`` says why the journal cannot
    vouch for every event id already issued (``None``: it can); then
    ``seq_floor`` is a seq no issued event exceeds, above which a new epoch
    must continue."""

    lost: str | None
    seq_floor: int
    note: str | None = None  # something worth a warning that is no loss


class InputRecord(NamedTuple):
    id: int
    t: float
    kind: str
    data: bytes


class PendingEvent(NamedTuple):
    """An event an output has not yet delivered (``json`` exactly as stored)."""

    seq: int
    event_id: str
    json: str
    type: str


class RetentionResult(NamedTuple):
    events_deleted: int
    inputs_deleted: int
    pages_freed: int
    #: events pruned for the size bound (``max_bytes``) before every output
    #: in ``outputs`` had them: the caller raises the alarm
    undelivered_deleted: int = 0


def _explain(exc: sqlite3.Error) -> str:
    text = str(exc)
    lowered = text.lower()
    if "full" in lowered:
        return f"{text}: THE DISK IS FULL, nothing new is being recorded; free space for the journal"
    if "readonly" in lowered or "read-only" in lowered:
        return f"{text}: the journal is read-only (file permissions, owner, or a read-only file system)"
    if "locked" in lowered or "busy" in lowered:
        return f"{text}: another process holds the journal's write lock"
    if "malformed" in lowered or "not a database" in lowered:
        return f"{text}: the journal file is damaged; move it aside and restore from backup"
    return text


class _Checkpointer:
    """One thread with its own connection to the journal, taking a
    ``PASSIVE`` checkpoint each time it is started (``Journal.checkpoint_ahead``)."""

    def __init__(self, path: str) -> None:
        self._db = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=10.0)
        self._db.execute("PRAGMA synchronous = FULL")
        self._wake = threading.Event()
        self._busy = False
        self._closing = False
        #: why the last checkpoint failed (the thread has then stopped)
        self.error: str | None = None
        #: checkpoints done, and frames they copied back, so far
        self.done = 0
        self.frames = 0
        self._thread = threading.Thread(target=self._run, name="journal-checkpoint", daemon=True)
        self._thread.start()

    def start(self) -> bool:
        """Start a checkpoint, unless one is under way (False)."""
        if self._busy or self.error is not None:
            return False
        self._busy = True
        self._wake.set()
        return True

    def _run(self) -> None:
        while True:
            self._wake.wait()
            self._wake.clear()
            if self._closing:
                return
            try:
                row = self._db.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
            except sqlite3.Error as exc:
                self.error = _explain(exc)
                return
            finally:
                self._busy = False
            self.done += 1
            self.frames += max(0, int(row[2]))

    def close(self) -> None:
        self._closing = True
        self._wake.set()
        self._thread.join(10)
        with contextlib.suppress(sqlite3.Error):
            self._db.close()


class Journal:
    """An open journal file. ``Journal(path)`` creates it (and its directory)
    if needed."""

    def __init__(
        self, path: str | os.PathLike[str], *, synchronous: Literal["FULL", "NORMAL"] = "FULL"
    ) -> None:
        self.path = os.fspath(path)
        self._synchronous = synchronous
        #: a commit without its own fsync (``durable=False``) since the last
        #: durable one: ``close`` syncs the WAL before the mark says clean
        self._unsynced = False
        #: commits without an fsync of their own so far (``sync`` tells by
        #: it which of them its fsync covered)
        self._relaxed_commits = 0
        #: inputs stored by ``append_input(durable=False)`` not yet made
        #: durable by ``sync``: (relaxed commit number, first seq stored).
        #: ``pending`` hands out nothing from the first such seq on.
        self._held: collections.deque[tuple[int, int]] = collections.deque()
        #: the highest seq stored so far (0: none since open)
        self._stored_top = 0
        self._wal_fd: int | None = None
        #: guards the five fields above (and the high-water mark's
        #: ``committed``): a thread syncing takes it, never ``_lock``, which a
        #: whole transaction holds
        self._sync_lock = threading.Lock()
        self._lock = threading.RLock()
        #: the events the last ``append_input``/``append_events`` stored, as
        #: stored (``json`` byte for byte what ``pending`` returns), for the
        #: committing thread to hand straight to an output
        self.last_stored: list[PendingEvent] = []
        self._hwm: _HighWaterMark | None = None
        #: commits so far, and at the last checkpoint taken ahead
        self._commits = 0
        self._commits_checkpointed = 0
        self._ahead: _Checkpointer | None = None
        #: signing (``enable_signing``): the key, the chain head (the link
        #: the next event's ``prev`` holds), and a new epoch's reason, put on
        #: the next event stored; ``_pending_head`` is the head a transaction
        #: under way moves to, taken once it commits
        self._signer: Signer | None = None
        self._head: str | None = None
        self._pending_head: str | None = None
        self._reset: str | None = None
        self._pending_reset: str | None = None
        #: why checkpoints are no longer taken ahead (None: they are, or
        #: were never asked for); SQLite's own came back in their place
        self.ahead_failure: str | None = None
        # Seen before SQLite opens (and so creates) it: after an unclean
        # stop a missing WAL means the journal's tail is gone.
        self._wal_at_open = os.path.exists(self.path + "-wal")
        try:
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise JournalError(
                f"journal {self.path}: cannot create its directory: {exc.strerror or exc}"
            ) from None
        with self._guard("open"):
            self._db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False, timeout=10.0)
        try:
            with self._guard("open"):
                self._setup(synchronous)
        except JournalError:
            self._db.close()
            raise

    def _setup(self, synchronous: str) -> None:
        db = self._db
        db.execute("PRAGMA busy_timeout = 10000")
        # Must precede the first table: it decides the file's layout.
        db.execute("PRAGMA auto_vacuum = INCREMENTAL")
        mode = db.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        if str(mode).lower() != "wal":
            raise sqlite3.OperationalError(f"cannot switch to WAL mode (got {mode})")
        db.execute(f"PRAGMA synchronous = {synchronous}")
        with self._transaction():
            # executescript() would commit on its own; one statement at a time
            # keeps the schema and its version in one transaction.
            for statement in filter(None, (s.strip() for s in _SCHEMA.split(";"))):
                db.execute(statement)
            row = db.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
            if row is None:
                db.execute("INSERT INTO meta (key, value) VALUES ('schema', ?)", (str(SCHEMA_VERSION),))
            elif int(row[0]) > SCHEMA_VERSION:
                raise JournalError(
                    f"journal {self.path}: schema version {row[0]} is newer than this build understands"
                    f" ({SCHEMA_VERSION}); upgrade shoe-controller"
                )

    # --- plumbing -------------------------------------------------------

    @contextmanager
    def _guard(self, action: str) -> Iterator[None]:
        try:
            yield
        except sqlite3.Error as exc:
            raise JournalError(f"journal {self.path}: {action} failed: {_explain(exc)}") from exc

    @contextmanager
    def _transaction(self, *, durable: bool = True) -> Iterator[sqlite3.Connection]:
        # BEGIN IMMEDIATE takes the write lock up front, so a concurrent
        # writer waits (busy_timeout) instead of failing half-way.
        db = self._db
        relaxed = not durable and self._synchronous != "NORMAL"
        if relaxed:
            # WAL with synchronous=NORMAL: written, not fsynced; the next
            # durable commit's fsync covers it (the WAL is appended in order)
            db.execute("PRAGMA synchronous = NORMAL")
            with self._sync_lock:
                self._unsynced = True
                self._relaxed_commits += 1
        try:
            db.execute("BEGIN IMMEDIATE")
            changes = db.total_changes
            try:
                yield db
                db.execute("COMMIT")
                self._commits += 1
                if durable and db.total_changes > changes:
                    with self._sync_lock:
                        self._unsynced = False  # its fsync covered the WAL before it
                        self._held.clear()
            except BaseException:
                # Also after a failed COMMIT (disk full): leave no transaction open.
                if db.in_transaction:
                    db.rollback()
                raise
        finally:
            if relaxed:
                db.execute(f"PRAGMA synchronous = {self._synchronous}")

    def checkpoint_ahead(self) -> bool:
        """Start a checkpoint (the WAL's frames copied back into the database
        file, and both synced) in a thread of its own, if one is due; True
        if one was started. Called by the daemon while idle.

        SQLite otherwise runs its checkpoint inside the commit that takes
        the WAL past 1,000 frames: every 160th card or so waited for it
        (its fsync of the database file on top of the card's own fsync).
        From the first call on, that automatic checkpoint is moved out to
        ``WAL_BACKSTOP_FRAMES``, and one is taken here every
        ``CHECKPOINT_AHEAD_COMMITS`` commits on a second connection, in
        SQLite's ``PASSIVE`` mode: it never blocks a commit, and a commit
        never waits for it (the GIL is released while SQLite works). The
        WAL is rewritten from its start after each, so its file keeps its
        size and a commit's fsync carries no size change.

        Should a checkpoint fail, SQLite's own is put back, the reason kept
        in ``ahead_failure``, and none is taken ahead again: the commits go
        on as before (a real fault of the disk shows in them)."""
        if (
            self.ahead_failure is not None
            or self._commits - self._commits_checkpointed < CHECKPOINT_AHEAD_COMMITS
        ):
            return False
        ahead = self._ahead
        if ahead is not None and ahead.error is not None:
            self.ahead_failure = ahead.error
            ahead.close()
            self._ahead = None
            with self._lock, self._guard("restoring SQLite's checkpoints"):
                self._db.execute(f"PRAGMA wal_autocheckpoint = {_WAL_AUTOCHECKPOINT_DEFAULT}")
            return False
        if ahead is None:
            with self._lock, self._guard("starting checkpoints ahead"):
                ahead = self._ahead = _Checkpointer(self.path)
                self._db.execute(f"PRAGMA wal_autocheckpoint = {WAL_BACKSTOP_FRAMES}")
        if not ahead.start():
            return False
        self._commits_checkpointed = self._commits
        return True

    def close(self) -> None:
        if self._ahead is not None:
            # first: the main connection, closed last, checkpoints the rest
            self._ahead.close()
            self._ahead = None
        with self._lock:
            if self._hwm is not None:
                # a clean stop: the mark says exactly where the journal ends
                # (if that fails the next start takes the stop as unclean: safe)
                with contextlib.suppress(OSError, sqlite3.Error):
                    if self._unsynced:
                        # the commits without an fsync of their own must be
                        # on disk before the mark vouches for them
                        fd = os.open(self.path + "-wal", os.O_RDONLY)
                        try:
                            os.fsync(fd)
                        finally:
                            os.close(fd)
                        self._unsynced = False
                    committed = max(self._hwm.committed, self._last_seq_now())
                    self._hwm.update(committed=committed, clean=True, sync=True)
                self._hwm.close()
                self._hwm = None
            if self._wal_fd is not None:
                with contextlib.suppress(OSError):
                    os.close(self._wal_fd)
                self._wal_fd = None
            self._db.close()

    def __enter__(self) -> Journal:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- inputs ---------------------------------------------------------

    def append_input(
        self,
        t: float,
        kind: InputKind | str,
        data: bytes,
        events: Sequence[dict[str, Any]] = (),
        *,
        durable: bool = True,
    ) -> int:
        """Record one input, and the events applying it caused, in one
        transaction (one fsync: both or neither are durable); returns the
        input's id once it is. The events are stored as by ``append_events``.

        ``durable=False``: the same transaction, committed without its fsync,
        which ``sync`` does later (from another thread, while the caller
        goes on). Until then ``pending`` hands out none of its events, nor
        any stored after them: no output publishes an event a power cut
        could still take back. The high-water mark follows at the ``sync``."""
        if kind not in INPUT_KINDS:
            raise ValueError(f"input kind must be one of {sorted(INPUT_KINDS)}, not {kind!r}")
        with self._lock:
            self._reserve(events)
            with self._guard("recording an input"), self._transaction(durable=durable) as db:
                cur = db.execute(
                    "INSERT INTO inputs (t, kind, data) VALUES (?, ?, ?)", (t, kind, bytes(data))
                )
                stored: list[PendingEvent] = []
                new = self._store_events(db, events, time.time(), stored) if events else []
            self._chain_committed(new)
            self.last_stored = stored
            with self._sync_lock:
                if stored:
                    self._stored_top = max(self._stored_top, stored[-1].seq)
                if not durable and stored:
                    self._held.append((self._relaxed_commits, stored[0].seq))
            if durable:
                self._committed(new)
            return int(cur.lastrowid or 0)

    def stored_top(self) -> int:
        """The highest seq stored through this object since it was opened
        (0: none yet). An output that has read ``pending`` to its end once
        needs no query while this is not past what it has sent."""
        with self._sync_lock:
            return self._stored_top

    def sync_point(self) -> tuple[int, int]:
        """Where the commits stand now, for a ``sync`` begun after this call:
        (relaxed commits so far, the highest seq stored)."""
        with self._sync_lock:
            return self._relaxed_commits, self._stored_top

    def sync(self, point: tuple[int, int] | None = None) -> None:
        """Make every commit made up to ``point`` (``sync_point``; default:
        now) durable: one fdatasync of the WAL, the sync SQLite itself does
        on a ``synchronous=FULL`` commit (it appends the WAL in order, so one
        covers every commit before it). The journal's lock is not held
        meanwhile: commits go on, and another thread may sync at the same
        time. Then the events of the inputs ``append_input(durable=False)``
        stored up to ``point`` are handed out by ``pending``, and the
        high-water mark moves past them."""
        upto, top = self.sync_point() if point is None else point
        fd = self._wal_fd
        if fd is None:
            with self._sync_lock:
                if self._wal_fd is None:
                    try:
                        self._wal_fd = os.open(self.path + "-wal", os.O_RDONLY)
                    except OSError as exc:
                        raise JournalError(
                            f"journal {self.path}: cannot open its WAL to sync: {exc}"
                        ) from None
                fd = self._wal_fd
        try:
            os.fdatasync(fd)
        except OSError as exc:
            raise JournalError(f"journal {self.path}: syncing its WAL failed: {exc}") from None
        with self._sync_lock:
            while self._held and self._held[0][0] <= upto:
                self._held.popleft()
            if self._relaxed_commits == upto:
                self._unsynced = False
        mark = self._hwm
        if mark is not None:
            mark.advance(top)

    def inputs_since(self, after_id: int = 0, *, batch: int = 1000) -> Iterator[InputRecord]:
        """Every input with id > ``after_id``, oldest first, read in batches
        (the lock is never held between batches)."""
        last = after_id
        while True:
            with self._lock, self._guard("reading inputs"):
                rows = self._db.execute(
                    "SELECT id, t, kind, data FROM inputs WHERE id > ? ORDER BY id LIMIT ?", (last, batch)
                ).fetchall()
            if not rows:
                return
            for row in rows:
                yield InputRecord(int(row[0]), float(row[1]), str(row[2]), bytes(row[3]))
            last = int(rows[-1][0])

    def first_input_id(self) -> int:
        """The oldest input kept (0: none); above 1 once retention pruned some."""
        with self._lock, self._guard("reading inputs"):
            return int(self._db.execute("SELECT coalesce(min(id), 0) FROM inputs").fetchone()[0])

    def last_input_id(self) -> int:
        with self._lock, self._guard("reading inputs"):
            return int(self._db.execute("SELECT coalesce(max(id), 0) FROM inputs").fetchone()[0])

    # --- events ---------------------------------------------------------

    def append_events(
        self, events: Sequence[dict[str, Any]], *, now: float | None = None, durable: bool = True
    ) -> list[dict[str, Any]]:
        """Store events in one transaction and return those that are new.

        ``durable=False``: committed without an fsync of its own (a process
        that dies keeps it; a power cut may lose it until the next durable
        commit, which covers it), for events the journal's inputs reproduce
        under the same ids: the analytics of an input already stored. The
        high-water mark's ``committed`` is not moved for them (a power cut
        must not make them look like lost history); the next durable commit
        moves it past them.

        An event already stored with the same id, seq and content is skipped
        (a rebuild re-creates the past); so is one whose seq was pruned by
        ``retention`` after delivery. Anything else at or below the last
        stored seq raises ``JournalConflict`` and stores nothing of this
        call."""
        if not events:
            return []
        created = time.time() if now is None else now
        with self._lock:
            self._reserve(events)
            stored: list[PendingEvent] = []
            with self._guard("recording events"), self._transaction(durable=durable) as db:
                new = self._store_events(db, events, created, stored)
            self._chain_committed(new)
            self.last_stored = stored
            if stored:
                with self._sync_lock:
                    self._stored_top = max(self._stored_top, stored[-1].seq)
            if durable:
                self._committed(new)
            return new

    def _store_events(
        self,
        db: sqlite3.Connection,
        events: Sequence[dict[str, Any]],
        created: float,
        stored: list[PendingEvent] | None = None,
    ) -> list[dict[str, Any]]:
        new: list[dict[str, Any]] = []
        retired = self._retired_seq(db)
        last = max(self._last_seq(db), retired)
        self._pending_head = self._head
        self._pending_reset = self._reset
        for event in events:
            seq, event_id, text = _identity(event)
            if seq <= last:
                row = db.execute("SELECT event_id, json FROM events WHERE seq = ?", (seq,)).fetchone()
                if row is None:
                    if seq <= retired:
                        continue  # delivered and pruned long ago
                    raise JournalConflict(
                        f"journal {self.path}: event {event_id} has seq {seq}, but the journal is"
                        f" already at seq {last} and holds no event {seq}"
                    )
                if row[0] != event_id or (row[1] != text and _unsigned(row[1]) != _unsigned(text)):
                    raise JournalConflict(
                        f"journal {self.path}: seq {seq} is already {row[0]} with different content than"
                        f" the new {event_id}; the engine did not reproduce its past (or two tables share"
                        " this journal)"
                    )
                continue
            if self._signer is not None:
                text = self._sign(event, text)
            try:
                db.execute(
                    "INSERT INTO events (seq, event_id, type, shoe, ts, json, created)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (
                        seq,
                        event_id,
                        str(event["type"]),
                        event.get("shoe"),
                        str(event["ts"]),
                        text,
                        created,
                    ),
                )
            except sqlite3.IntegrityError:
                raise JournalConflict(
                    f"journal {self.path}: event id {event_id} is already stored under another seq"
                ) from None
            last = seq
            new.append(event)
            if stored is not None:
                stored.append(PendingEvent(seq, event_id, text, str(event["type"])))
        return new

    # --- signing ---------------------------------------------

    def enable_signing(self, signer: Signer, *, chain_reset: str | None = None) -> None:
        """Sign every event stored from now on with ``signer`` and chain it
        to the last event stored (``chain_reset``: the journal lost history,
        the next event says so). The key is added to the journal's key list
        (``signing_keys``) when new, endorsed by the key before it when
        ``endorsement`` is given by ``keygen --rotate``."""
        with self._lock, self._guard("reading events"):
            row = self._db.execute("SELECT json FROM events ORDER BY seq DESC LIMIT 1").fetchone()
            # every event pruned by retention: the link to the newest of them
            self._head = link_of(str(row[0]).encode()) if row else self.get_meta("retired_link")
            self._signer = signer
            self._reset = chain_reset

    def signing_keys(self) -> list[dict[str, Any]]:
        """The table's key list: every key it has signed with, oldest first."""
        raw = self.get_meta("signing_keys")
        if raw is None:
            return []
        keys = json.loads(raw)
        return keys if isinstance(keys, list) else []

    def add_signing_key(self, entry: dict[str, Any]) -> list[dict[str, Any]]:
        """Add a key to the list (no-op when its ``key_id`` is there)."""
        with self._lock:
            keys = self.signing_keys()
            if all(k.get("key_id") != entry.get("key_id") for k in keys):
                keys.append(entry)
                self.set_meta("signing_keys", json.dumps(keys, separators=(",", ":")))
            return keys

    def _sign(self, event: dict[str, Any], text: str) -> str:
        """``event``'s stored line, signed and chained; ``event`` gets the
        fields too (so that ``dumps(event)`` is the line)."""
        signer = self._signer
        assert signer is not None
        if any(f in event for f in SIGNING_FIELDS):
            for f in SIGNING_FIELDS:
                event.pop(f, None)
            text = dumps(event)
        prev = self._pending_head
        event["key_id"] = signer.key_id
        event["prev"] = prev
        tail = f',"key_id":"{signer.key_id}","prev":' + ("null" if prev is None else f'"{prev}"')
        if self._pending_reset is not None:
            event["chain_reset"] = self._pending_reset
            tail += ',"chain_reset":' + json.dumps(self._pending_reset, ensure_ascii=False)
            self._pending_reset = None
        if event.get("type") == "shoe.ended":
            event["chain_head"] = prev
            tail += ',"chain_head":' + ("null" if prev is None else f'"{prev}"')
        body = text[:-1] + tail + "}"
        line = signer.seal(body)
        event["sig"] = line[len(body) + 7 : -2]
        self._pending_head = digest(body.encode())
        return line

    def _chain_committed(self, new: Sequence[dict[str, Any]]) -> None:
        if self._signer is not None and new:
            self._head = self._pending_head
            self._reset = self._pending_reset

    @staticmethod
    def _last_seq(db: sqlite3.Connection) -> int:
        return int(db.execute("SELECT coalesce(max(seq), 0) FROM events").fetchone()[0])

    @staticmethod
    def _retired_seq(db: sqlite3.Connection) -> int:
        row = db.execute("SELECT value FROM meta WHERE key = 'retired_seq'").fetchone()
        return int(row[0]) if row else 0

    def last_seq(self) -> int:
        """The highest event seq ever stored (0 for a new journal)."""
        with self._lock, self._guard("reading events"):
            return self._last_seq_now()

    def _last_seq_now(self) -> int:
        return max(self._last_seq(self._db), self._retired_seq(self._db))

    # --- history guard --------------------------------------------------

    def claim(self, table: str) -> History:
        """Take this journal for ``table``'s daemon (one process at a time)
        and check it against its high-water mark, ``<journal>.hwm``.

        The mark holds the journal's identity (a random id kept in its
        ``meta``), ``committed`` (the last seq stored: rewritten after every
        commit, not fsynced, so exact after a ``kill -9`` and possibly behind
        after a power cut), ``reserved`` (fsynced before any event above it
        is stored: no issued seq exceeds it), and whether the last stop was
        clean, on which boot. The journal lost history, and ``History.lost``
        says how, when the mark names another journal (this one was deleted,
        truncated or replaced), when the journal ends below ``committed``
        (its WAL deleted, an older copy restored), or when after an unclean
        stop on an earlier boot its WAL is missing. With no mark the journal
        is taken as it is (a first start, or one from a version without
        marks). From here on every commit keeps the mark up to date.

        Raises ``JournalRefused`` when another process holds the journal, when
        the mark belongs to another table, or when it cannot be read or holds
        a seq outside 0..``MAX_MARK_SEQ``."""
        with self._lock:
            if self._hwm is not None:
                raise RuntimeError("journal already claimed")
            path = self.path + HWM_SUFFIX
            with self._guard("reading meta"):
                journal_id = self.get_meta("journal_id")
                last = self._last_seq_now()
                has_inputs = self.last_input_id() > 0
            mark = _HighWaterMark.open(path)
            try:
                found = mark.read()
                lost: str | None = None
                note: str | None = None
                floor = 0
                if found is None:
                    if journal_id is not None or has_inputs or last:
                        note = (
                            f"no high-water mark {path} beside the journal (deleted, or made by an older"
                            f" version): taking the journal as it is, at seq {last}"
                        )
                    committed, reserved = last, last
                else:
                    if found["table"] != table:
                        raise JournalRefused(
                            f"journal {self.path} belongs to table {found['table']} (its high-water mark"
                            f" {path} says so), not {table}: give every table its own journal"
                        )
                    committed = max(found["committed"], last)
                    reserved = max(found["reserved"], last)
                    if found["journal"] != journal_id:
                        state = "new and empty" if not (last or has_inputs) else "another journal"
                        lost = (
                            f"the journal is {state}, but events up to seq {found['committed']} were"
                            " issued from the one before it (deleted, truncated to 0 bytes or replaced)"
                        )
                    elif last < found["committed"]:
                        lost = (
                            f"the journal ends at seq {last}, but seq {found['committed']} was committed"
                            " (its WAL deleted after a crash, or an older copy put back)"
                        )
                    elif not found["clean"] and not _same_boot(found["boot"]) and not self._wal_at_open:
                        lost = (
                            "the journal's WAL is missing after an unclean stop on an earlier boot: its"
                            f" tail cannot be vouched for (it ends at seq {last})"
                        )
                    if lost is not None:
                        floor = reserved
                if journal_id is None:
                    journal_id = uuid.uuid4().hex
                    self.set_meta("journal_id", journal_id)
                mark.table, mark.journal = table, journal_id
                mark.committed, mark.reserved = committed, max(reserved, last) + HWM_RESERVE
                mark.update(clean=False, sync=True)
            except BaseException:
                mark.close()
                raise
            self._hwm = mark
            return History(lost, floor, note)

    def _reserve(self, events: Sequence[dict[str, Any]]) -> None:
        """Before events are stored (and so may be published): raise the
        mark's bound above them, durably."""
        mark = self._hwm
        if mark is None or not events:
            return
        top = max((s for e in events if isinstance(s := e.get("seq"), int)), default=0)
        if top > mark.reserved:
            try:
                mark.reserved = top + HWM_RESERVE
                mark.update(sync=True)
            except OSError as exc:
                raise JournalError(
                    f"journal {self.path}: cannot write its high-water mark {mark.path}:"
                    f" {exc.strerror or exc}"
                ) from None

    def _committed(self, new: Sequence[dict[str, Any]]) -> None:
        mark = self._hwm
        if mark is None or not new:
            return
        mark.advance(max(int(e["seq"]) for e in new))

    def events_since(self, after_seq: int = 0, *, batch: int = 1000) -> Iterator[PendingEvent]:
        """Every stored event with seq > ``after_seq``, in order."""
        last = after_seq
        while True:
            with self._lock, self._guard("reading events"):
                rows = self._db.execute(
                    "SELECT seq, event_id, json, type FROM events WHERE seq > ? ORDER BY seq LIMIT ?",
                    (last, batch),
                ).fetchall()
            if not rows:
                return
            for row in rows:
                yield PendingEvent(int(row[0]), str(row[1]), str(row[2]), str(row[3]))
            last = int(rows[-1][0])

    # --- delivery -------------------------------------------------------

    def mark(self, output: str) -> int:
        """The seq up to which ``output`` has delivered everything."""
        with self._lock, self._guard("reading marks"):
            return self._mark(self._db, output)

    @staticmethod
    def _mark(db: sqlite3.Connection, output: str) -> int:
        row = db.execute("SELECT seq FROM marks WHERE output = ?", (output,)).fetchone()
        return int(row[0]) if row else 0

    def pending(self, output: str, limit: int = 100, *, after: int = 0) -> list[PendingEvent]:
        """Up to ``limit`` events after ``output``'s mark (and after seq
        ``after``: an output with messages in flight asks for what follows
        them), in seq order."""
        with self._lock, self._guard("reading the outbox"):
            # nothing from an input stored without its fsync on (``sync``)
            with self._sync_lock:
                below = self._held[0][1] if self._held else _NO_SEQ
            rows = self._db.execute(
                "SELECT seq, event_id, json, type FROM events WHERE seq > ? AND seq < ? ORDER BY seq LIMIT ?",
                (max(self._mark(self._db, output), after), below, limit),
            ).fetchall()
        return [PendingEvent(int(r[0]), str(r[1]), str(r[2]), str(r[3])) for r in rows]

    def mark_delivered(self, output: str, seq: int, *, durable: bool = True) -> None:
        """Everything up to ``seq`` reached ``output``. The mark never moves
        back (an old acknowledgement arriving late changes nothing).
        ``durable=False``: no fsync of its own (see ``append_events``), for
        an output that delivers at least once: a mark lost to a power cut
        only sends again what it covered."""
        with (
            self._lock,
            self._guard("recording a delivery"),
            self._transaction(durable=durable) as db,
        ):
            db.execute(
                "INSERT INTO marks (output, seq) VALUES (?, ?)"
                " ON CONFLICT (output) DO UPDATE SET seq = max(seq, excluded.seq)",
                (output, seq),
            )

    def unconfirmed(self, after: int, through: int, created_before: float, limit: int) -> list[PendingEvent]:
        """Up to ``limit`` stored events with ``after`` < seq <= ``through``
        stored before ``created_before`` (wall time), in seq order: what the
        MQTT output re-offers above the archive's mark."""
        with self._lock, self._guard("reading the outbox"):
            rows = self._db.execute(
                "SELECT seq, event_id, json, type FROM events WHERE seq > ? AND seq <= ? AND created < ?"
                " ORDER BY seq LIMIT ?",
                (after, through, created_before, limit),
            ).fetchall()
        return [PendingEvent(int(r[0]), str(r[1]), str(r[2]), str(r[3])) for r in rows]

    def event_id_at(self, seq: int) -> str | None:
        """The id of the stored event ``seq``; None if none is stored (never
        issued, or pruned: see ``retired_seq``)."""
        with self._lock, self._guard("reading events"):
            row = self._db.execute("SELECT event_id FROM events WHERE seq = ?", (seq,)).fetchone()
        return None if row is None else str(row[0])

    def retired_seq(self) -> int:
        """The highest seq retention has pruned (0: none)."""
        with self._lock, self._guard("reading meta"):
            return self._retired_seq(self._db)

    def size_bytes(self) -> int:
        """The database's pages in use (the file less its free pages; the WAL
        is not counted: its checkpoint gives it back)."""
        with self._lock, self._guard("reading the size"):
            count = int(self._db.execute("PRAGMA page_count").fetchone()[0])
            free = int(self._db.execute("PRAGMA freelist_count").fetchone()[0])
            size = int(self._db.execute("PRAGMA page_size").fetchone()[0])
        return (count - free) * size

    def backlog(self, output: str) -> int:
        """How many stored events ``output`` has not delivered yet."""
        with self._lock, self._guard("reading the outbox"):
            return int(
                self._db.execute(
                    "SELECT count(*) FROM events WHERE seq > ?", (self._mark(self._db, output),)
                ).fetchone()[0]
            )

    def outputs(self) -> dict[str, int]:
        """Every output that has a mark, with its mark."""
        with self._lock, self._guard("reading marks"):
            return {
                str(o): int(s) for o, s in self._db.execute("SELECT output, seq FROM marks ORDER BY output")
            }

    # --- meta -----------------------------------------------------------

    def get_meta(self, key: str) -> str | None:
        with self._lock, self._guard("reading meta"):
            row = self._db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def set_meta(self, key: str, value: str, *, durable: bool = True) -> None:
        """``durable=False``: no fsync of its own (see ``append_events``), for
        a value whose loss to a power cut costs only time (the engine
        checkpoint: the previous one is used, and more inputs re-fed); the
        next durable commit covers it, and so precedes anything relying on it."""
        with self._lock, self._guard("writing meta"), self._transaction(durable=durable) as db:
            db.execute(
                "INSERT INTO meta (key, value) VALUES (?, ?)"
                " ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (key, value),
            )

    def received_commands_from(self) -> int:
        """The first input id from which a supervisor's ``cmd`` input holds
        the bytes received (``commands_schema.Received``); the inputs before
        it hold the daemon's ``command_json`` of the command, written by an
        older version. Noted in ``meta`` (durably) by the first call, before
        this version journals any command, so each input is read back as it
        was written."""
        with self._lock, self._guard("writing meta"), self._transaction() as db:
            row = db.execute("SELECT value FROM meta WHERE key = ?", (RECEIVED_COMMANDS_KEY,)).fetchone()
            if row is not None:
                return int(row[0])
            first = int(db.execute("SELECT coalesce(max(id), 0) FROM inputs").fetchone()[0]) + 1
            db.execute("INSERT INTO meta (key, value) VALUES (?, ?)", (RECEIVED_COMMANDS_KEY, str(first)))
            return first

    # --- supervisor commands already taken ---------------------------------

    def remember_command(self, key: str, expires: float, now: float) -> bool:
        """Note a command (its signature or digest) as taken until
        ``expires`` (wall time: when its ``ts`` leaves the freshness window);
        False if it was already noted and has not expired, i.e. a replay.
        Expired notes are dropped in the same transaction, so the table
        holds at most the commands taken within one window (bounded by the
        command rate limit). Survives restarts: a captured command cannot
        be applied again after one."""
        with self._lock, self._guard("recording a command"), self._transaction() as db:
            db.execute("DELETE FROM commands_seen WHERE expires < ?", (now,))
            cur = db.execute(
                "INSERT OR IGNORE INTO commands_seen (key, expires) VALUES (?, ?)", (key, expires)
            )
            return cur.rowcount == 1

    def commands_remembered(self) -> int:
        with self._lock, self._guard("reading commands"):
            return int(self._db.execute("SELECT count(*) FROM commands_seen").fetchone()[0])

    # --- retention ------------------------------------------------------

    def retention(
        self,
        days: float,
        now: float,
        *,
        outputs: Iterable[str] | None = None,
        keep_inputs_from: int | None = None,
        batch: int = 500,
        vacuum_pages: int = 256,
        max_bytes: int | None = None,
    ) -> RetentionResult:
        """Delete what is older than ``days`` in small transactions, so the
        writer never waits long, then give the freed pages back to the file
        system (incremental vacuum).

        * an event goes only once every output in ``outputs`` (default:
          every output with a mark) has delivered it;
        * inputs go only below ``keep_inputs_from`` (the id the daemon's
          crash rebuild starts from); with ``None`` no input is deleted,
          because a rebuild re-feeds inputs from the very first one;
        * ``max_bytes``: if the journal still uses more (``size_bytes``), the
          oldest events go whatever their age or marks, and the oldest inputs
          below ``keep_inputs_from``, until it uses at most 90% of it (or
          nothing more may go); ``undelivered_deleted`` counts the events so
          pruned that an output in ``outputs`` had not delivered.
        """
        cutoff = now - days * 86400.0
        with self._lock, self._guard("reading marks"):
            marks = self._db.execute("SELECT output, seq FROM marks").fetchall()
            last = self._last_seq(self._db)
        wanted = None if outputs is None else set(outputs)
        relevant = [int(seq) for name, seq in marks if wanted is None or name in wanted]
        if wanted is not None:
            relevant += [0] * len(wanted - {str(name) for name, _ in marks})  # never delivered at all
        deliverable = min(relevant) if relevant else last

        events_deleted = 0
        while True:
            with self._lock, self._guard("pruning events"), self._transaction() as db:
                rows = db.execute(
                    "SELECT seq FROM events WHERE seq <= ? AND created < ? ORDER BY seq LIMIT ?",
                    (deliverable, cutoff, batch),
                ).fetchall()
                if rows:
                    top = int(rows[-1][0])
                    # the chain's link to the newest event pruned: the next
                    # event links to it even when no event is left
                    tail = db.execute("SELECT json FROM events WHERE seq = ?", (top,)).fetchone()
                    db.execute("DELETE FROM events WHERE seq <= ? AND seq >= ?", (top, int(rows[0][0])))
                    db.execute(
                        "INSERT INTO meta (key, value) VALUES ('retired_link', ?)"
                        " ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                        (link_of(str(tail[0]).encode()),),
                    )
                    db.execute(
                        "INSERT INTO meta (key, value) VALUES ('retired_seq', ?)"
                        " ON CONFLICT (key) DO UPDATE"
                        " SET value = max(CAST(value AS INTEGER), CAST(excluded.value AS INTEGER))",
                        (str(top),),
                    )
            if not rows:
                break
            events_deleted += len(rows)
            if len(rows) < batch:
                break

        inputs_deleted = 0
        while keep_inputs_from is not None:
            with self._lock, self._guard("pruning inputs"), self._transaction() as db:
                cur = db.execute(
                    "DELETE FROM inputs WHERE id IN"
                    " (SELECT id FROM inputs WHERE id < ? AND t < ? ORDER BY id LIMIT ?)",
                    (keep_inputs_from, cutoff, batch),
                )
                n = cur.rowcount
            inputs_deleted += n
            if n < batch:
                break

        pages_freed = self._vacuum(vacuum_pages)
        undelivered = 0
        while max_bytes is not None and self.size_bytes() > max_bytes * 0.9:
            with self._lock, self._guard("pruning for size"), self._transaction() as db:
                rows = db.execute("SELECT seq FROM events ORDER BY seq LIMIT ?", (batch,)).fetchall()
                if rows:
                    top = int(rows[-1][0])
                    undelivered += sum(1 for (seq,) in rows if int(seq) > deliverable)
                    # the chain's link to the newest event pruned, as above
                    tail = db.execute("SELECT json FROM events WHERE seq = ?", (top,)).fetchone()
                    db.execute(
                        "INSERT INTO meta (key, value) VALUES ('retired_link', ?)"
                        " ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                        (link_of(str(tail[0]).encode()),),
                    )
                    db.execute("DELETE FROM events WHERE seq <= ?", (top,))
                    db.execute(
                        "INSERT INTO meta (key, value) VALUES ('retired_seq', ?)"
                        " ON CONFLICT (key) DO UPDATE"
                        " SET value = max(CAST(value AS INTEGER), CAST(excluded.value AS INTEGER))",
                        (str(top),),
                    )
                n = 0
                if keep_inputs_from is not None:
                    n = db.execute(
                        "DELETE FROM inputs WHERE id IN"
                        " (SELECT id FROM inputs WHERE id < ? ORDER BY id LIMIT ?)",
                        (keep_inputs_from, batch),
                    ).rowcount
            events_deleted += len(rows)
            inputs_deleted += n
            pages_freed += self._vacuum(vacuum_pages)
            if not rows and not n:
                break
        return RetentionResult(events_deleted, inputs_deleted, pages_freed, undelivered)

    def _vacuum(self, vacuum_pages: int) -> int:
        pages_freed = 0
        while True:
            with self._lock, self._guard("vacuuming"):
                free = int(self._db.execute("PRAGMA freelist_count").fetchone()[0])
                if free == 0:
                    break
                step = min(free, vacuum_pages)
                self._db.execute(f"PRAGMA incremental_vacuum({step})").fetchall()
            pages_freed += step
        return pages_freed


def check_unclaimed(journal: str) -> None:
    """Raise ``JournalRefused`` when another process holds ``journal`` (its
    high-water mark is locked), touching nothing: no file is created or
    written. A daemon asks this first, so that a second daemon started on
    the same journal is told that, not some later clash (its metrics port);
    the claim itself (``Journal.claim``) takes the lock for good."""
    path = journal + HWM_SUFFIX
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return  # no mark yet (or unreadable): the claim says what is wrong
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        raise JournalRefused(
            f"another shoe-controller process is using this journal ({path} is locked)"
        ) from None
    finally:
        os.close(fd)


class _HighWaterMark:
    """``<journal>.hwm``: one JSON line, space-padded to a fixed size and
    rewritten in place (one small write: never half old, half new), kept
    open and locked (``flock``) by the daemon that claimed the journal."""

    def __init__(self, path: str, fd: int) -> None:
        self.path = path
        self._fd = fd
        self.table = ""
        self.journal = ""
        self.committed = 0
        self.reserved = 0
        self._clean = False
        self._boot = boot_id()
        #: one write at a time, each of the fields as they are then (a
        #: thread syncing the journal moves ``committed`` beside the one
        #: that reserves): no older copy ever overwrites a newer one
        self._write_lock = threading.Lock()

    @classmethod
    def open(cls, path: str) -> _HighWaterMark:
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o640)
            # its name must survive a power cut as much as its content
            dir_fd = os.open(os.path.dirname(os.path.abspath(path)), os.O_RDONLY | os.O_CLOEXEC)
            try:
                os.fsync(dir_fd)
            finally:
                os.close(dir_fd)
        except OSError as exc:
            raise JournalError(
                f"cannot open the journal's high-water mark {path}: {exc.strerror or exc}"
            ) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            raise JournalRefused(
                f"another shoe-controller process is using this journal ({path} is locked)"
            ) from None
        return cls(path, fd)

    def read(self) -> dict[str, Any] | None:
        """The mark's fields, or ``None`` if it is new (empty)."""
        raw = os.pread(self._fd, _HWM_SIZE * 2, 0)
        if not raw.strip(b" \n\0"):
            return None
        try:
            data = json.loads(raw)
            fields = {
                "table": str(data["table"]),
                "journal": str(data["journal"]),
                "committed": data["committed"],
                "reserved": data["reserved"],
                "clean": bool(data["clean"]),
                "boot": str(data["boot"]),
            }
        except (ValueError, KeyError, TypeError, RecursionError):
            raise JournalRefused(
                f"the journal's high-water mark {self.path} is unreadable; it guards event ids against"
                " reuse after a lost journal: if the journal is intact, delete the mark and start again"
            ) from None
        for key in ("committed", "reserved"):
            value = fields[key]
            # a seq: an integer (not a bool, a float or a string) the journal
            # can carry on above (SQLite's integers end at 2**63 - 1)
            if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= MAX_MARK_SEQ:
                text = json.dumps(value)
                shown = text if len(text) <= 40 else text[:40] + "..."
                raise JournalRefused(
                    f"the journal's high-water mark {self.path} holds {key} {shown}, not a seq (an"
                    f" integer 0..{MAX_MARK_SEQ}); it guards event ids against reuse after a lost"
                    " journal: if the journal is intact, delete the mark and start again; if it was"
                    " lost, see docs/operations.md, 'A journal that lost history'"
                )
        return fields

    def update(self, *, clean: bool | None = None, committed: int | None = None, sync: bool) -> None:
        with self._write_lock:
            if clean is not None:
                self._clean = clean
            if committed is not None:
                self.committed = committed
            line = json.dumps(
                {
                    "table": self.table,
                    "journal": self.journal,
                    "committed": self.committed,
                    "reserved": self.reserved,
                    "clean": self._clean,
                    "boot": self._boot,
                },
                separators=(",", ":"),
            ).encode()
            os.pwrite(self._fd, line.ljust(_HWM_SIZE - 1) + b"\n", 0)
            if sync:
                os.fsync(self._fd)

    def advance(self, committed: int) -> None:
        """``committed`` moved up to ``committed`` (never down), written
        without an fsync (a kill -9 keeps it; a power cut is covered by
        ``reserved`` and the WAL check)."""
        with self._write_lock:
            if committed <= self.committed:
                return
            self.committed = committed
        with contextlib.suppress(OSError):
            self.update(sync=False)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self._fd)


def _unsigned(text: str) -> Any:
    """An event's content without what signing added (a rebuild compares
    the engine's event with the signed line stored)."""
    obj = json.loads(text)
    if isinstance(obj, dict):
        for f in SIGNING_FIELDS:
            obj.pop(f, None)
    return obj


def _identity(event: dict[str, Any]) -> tuple[int, str, str]:
    try:
        seq = event["seq"]
        event_id = event["event_id"]
        for key in ("type", "ts"):  # required for the columns
            event[key]
    except KeyError as exc:
        raise ValueError(f"an event needs {exc.args[0]!r}: {event!r:.200}") from None
    if not isinstance(seq, int) or isinstance(seq, bool) or seq < 1:
        raise ValueError(f"event seq must be a positive integer, not {seq!r}")
    return seq, str(event_id), dumps(event)
