"""The archive's trust in each table's signing keys, and the
check of every live event's signature.

A table *signs* once the archive holds a key for it (``table_keys``):
pinned in the archive config (``signing.keys``), or learned from the
table's retained ``<prefix>/<table>/keys`` announcement: the first key of a
table never seen is trusted on first use (unless ``signing.trust_on_first_use``
is off), a later one only when endorsed by a key already trusted (a
rotation: ``keygen --rotate``). A pinned table learns nothing from the
broker. From then on an event of that table with no signature, an unknown
key or a bad signature is not the table's: the store keeps it aside in
``rejects``. An event of a table that has never signed is taken as before.
"""

from __future__ import annotations

import binascii
import json
import time
from collections.abc import Sequence
from typing import Any

import psycopg
import structlog

from controller.archive.parse import Event, printable
from controller.signing import KeyRing, endorsement_ok, key_id_of, split, unb64, vouch

log = structlog.get_logger("controller.archive")

#: The most keys read from one announcement (a key a year is a lot): the
#: newest ones, last in the list, the key the table signs with among them.
MAX_KEYS = 64
#: The largest announcement read; a larger one is refused whole.
MAX_ANNOUNCEMENT_BYTES = 64 * 1024


class TableKeys:
    def __init__(self, pinned: dict[str, list[str]], *, trust_on_first_use: bool = True) -> None:
        self.pinned = pinned
        self.tofu = trust_on_first_use
        self.rings: dict[str, KeyRing] | None = None
        #: rows learned, not yet written (``save``, in the batch's transaction)
        self._new: list[tuple[str, str, str, str, str | None]] = []
        self._reloaded: dict[str, float] = {}

    def _load(self, conn: psycopg.Connection[Any]) -> dict[str, KeyRing]:
        if self.rings is None:
            rings: dict[str, KeyRing] = {}
            for table, keys in self.pinned.items():
                ring = rings.setdefault(table, KeyRing())
                for public in keys:
                    kid = ring.add(public)
                    self._new.append((table, kid, public, "pinned", None))
            if not conn.autocommit:
                with conn.transaction():
                    rows = conn.execute("SELECT table_id, public_key FROM table_keys").fetchall()
            else:
                rows = conn.execute("SELECT table_id, public_key FROM table_keys").fetchall()
            for table, public in rows:
                if str(table) not in self.pinned:
                    rings.setdefault(str(table), KeyRing()).add(str(public))
            self.rings = rings
        return self.rings

    def check(
        self, conn: psycopg.Connection[Any], ev: Event, payload: bytes
    ) -> tuple[str | None, str | None]:
        """(why ``ev`` is not its table's, or None; its signed line, or None
        when it is unsigned)."""
        return self.check_batch(conn, [(ev, payload)])[0]

    def check_batch(
        self, conn: psycopg.Connection[Any], items: Sequence[tuple[Event, bytes]]
    ) -> list[tuple[str | None, str | None]]:
        """``check`` of each of a batch's live events, in order, with one
        signature verified per run of events linked by ``prev`` in a table
        (``signing.vouch``: the newest event's signature covers the digests
        of those before it; a run that fails is checked event by event)."""
        out: list[tuple[str | None, str | None]] = [(None, None)] * len(items)
        runs: dict[str, tuple[list[int], list[tuple[int, bytes, bytes, Any, Any]]]] = {}
        for n, (ev, payload) in enumerate(items):
            ring = self._load(conn).get(ev.table)
            signed, sig = split(payload)
            if sig is not None and (ring is None or ev.body.get("key_id") not in ring.keys):
                ring = self._reload(conn, ev.table)  # another archiver of the group may have learned it
            if sig is None:
                if ring is not None and ring.keys:
                    out[n] = (f"unsigned event from table {ev.table}, which signs", None)
                elif "sig" in ev.body:
                    out[n] = ("sig is not the event's last member or not 64 bytes of base64url", None)
                continue
            if ring is None or not ring.keys:
                why = f"signed, but no key of table {ev.table} is known (not announced, not pinned)"
                out[n] = (why, None)
                continue
            index, run = runs.setdefault(ev.table, ([], []))
            index.append(n)
            run.append((ev.seq, signed, sig, ev.body.get("key_id"), ev.body.get("prev")))
        for table, (index, run) in runs.items():
            ring = self._load(conn)[table]  # (as the last reload left it: keys are only added)
            for n, problem in zip(index, vouch(ring, run), strict=True):
                out[n] = (problem, None) if problem is not None else (None, items[n][1].decode("utf-8"))
        return out

    def may_learn(self, ev: Event, payload: bytes) -> bool:
        """Whether ``ev``, just refused by ``check``, is signed under a key
        id this archiver does not hold (even after ``_reload``) of a table
        that may yet teach it one: an announcement another archiver of a
        work queue took and has not committed yet (jetstream.py waits for
        it). Never so for a pinned table, an unsigned event, or a bad
        signature under a known key (a forgery: refused at once)."""
        if ev.table in self.pinned or split(payload)[1] is None:
            return False
        ring = (self.rings or {}).get(ev.table)
        if ring is None or not ring.keys:
            return self.tofu  # without trust on first use, no first key is learned
        return ev.body.get("key_id") not in ring.keys

    def _reload(self, conn: psycopg.Connection[Any], table: str) -> KeyRing | None:
        """The table's keys as the database holds them now, at most once a
        second per table (a flood of forgeries costs no query each)."""
        rings = self._load(conn)
        now = time.monotonic()
        if table in self.pinned or now - self._reloaded.get(table, -1e9) < 1.0:
            return rings.get(table)
        self._reloaded[table] = now
        query = "SELECT public_key FROM table_keys WHERE table_id = %s"
        if not conn.autocommit:
            with conn.transaction():
                rows = conn.execute(query, (table,)).fetchall()
        else:
            rows = conn.execute(query, (table,)).fetchall()
        ring = rings.setdefault(table, KeyRing())
        for (public,) in rows:
            ring.add(str(public))
        return ring

    def announced(self, conn: psycopg.Connection[Any], table: str, payload: bytes) -> str | None:
        """A table's ``keys`` announcement: learn what it may teach. Returns
        why the announcement was refused whole (over ``MAX_ANNOUNCEMENT_BYTES``,
        not JSON, nested past the parser's depth, not this table's
        ``{table, keys}``), or None. Of more than ``MAX_KEYS`` keys only the
        newest ``MAX_KEYS`` (the list's last) are read."""
        if table in self.pinned:
            return None
        rings = self._load(conn)
        try:
            if len(payload) > MAX_ANNOUNCEMENT_BYTES:
                raise ValueError(f"{len(payload)} bytes, the bound is {MAX_ANNOUNCEMENT_BYTES}")
            doc = json.loads(payload)
            if (
                not isinstance(doc, dict)
                or doc.get("table") != table
                or not isinstance(doc.get("keys"), list)
            ):
                raise ValueError("not {table, keys} of this table")
            keys = doc["keys"][-MAX_KEYS:]
        except (ValueError, RecursionError) as exc:  # RecursionError: JSON nested too deep
            reason = str(exc) if isinstance(exc, ValueError) else "JSON nested too deep"
            log.error("archive.keys_refused", table=printable(table), reason=printable(reason))
            return reason
        if len(doc["keys"]) > MAX_KEYS:
            log.warning(
                "archive.keys_cut",
                table=printable(table),
                listed=len(doc["keys"]),
                read=MAX_KEYS,
                reason="only the newest keys of a long list are read",
            )
        ring = rings.setdefault(table, KeyRing())
        for entry in keys:
            if not isinstance(entry, dict) or not isinstance(entry.get("public_key"), str):
                continue
            public = entry["public_key"]
            try:
                kid = key_id_of(unb64(public))
            except (ValueError, binascii.Error):
                continue
            if kid in ring.keys or entry.get("key_id") != kid:
                continue
            if not ring.keys:
                if not self.tofu:
                    log.error("archive.key_not_pinned", table=printable(table), key_id=kid)
                    continue
                trust, by = "tofu", None
            else:
                by = entry.get("endorsed_by")
                old = ring.publics.get(by) if isinstance(by, str) else None
                if old is None or not endorsement_ok(old, public, str(entry.get("endorsement"))):
                    log.error(
                        "archive.key_refused",
                        table=printable(table),
                        key_id=kid,
                        reason="a new key not endorsed by a key already trusted",
                    )
                    continue
                trust = "endorsed"
            try:
                ring.add(public)
            except (ValueError, binascii.Error):
                continue
            log.warning("archive.key_trusted", table=printable(table), key_id=kid, trust=trust)
            self._new.append((table, kid, public, trust, by if isinstance(by, str) else None))
        return None

    def save(self, cur: psycopg.Cursor[Any]) -> None:
        if not self._new:
            return
        rows, self._new = self._new, []
        cur.executemany(
            "INSERT INTO table_keys (table_id, key_id, public_key, trust, endorsed_by)"
            " VALUES (%s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
            rows,
        )
