"""The archive's reading of a table's retained key announcement
(``<prefix>/<table>/keys``) at its bounds: ``keys.MAX_ANNOUNCEMENT_BYTES``
(a larger announcement is refused whole) and ``keys.MAX_KEYS`` (of a longer
list only the newest keys are read), and hostile text in it. Each refused
announcement is counted (``keys_refused``) and logged in one line; none
stops the archiver (real PostgreSQL, through ``Store.write``)."""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from controller import signing
from controller.archive.keys import MAX_ANNOUNCEMENT_BYTES, MAX_KEYS
from controller.archive.store import counters
from tests.test_archive import conn, count, store

__all__ = ["conn"]  # the fixture, used by name

TOPIC = "baccarat/T01/keys"


def _chain(n: int) -> list[dict[str, str]]:
    """A table's key list after ``n - 1`` rotations: each key after the
    first endorsed by the one before it, oldest first."""
    signers = [signing.Signer(Ed25519PrivateKey.generate()) for _ in range(n)]
    out = [{"key_id": signers[0].key_id, "public_key": signers[0].public_key}]
    for old, new in itertools.pairwise(signers):
        out.append(
            {
                "key_id": new.key_id,
                "public_key": new.public_key,
                "endorsed_by": old.key_id,
                "endorsement": old.endorse(new.public_key),
            }
        )
    return out


def _announce(conn: Any, payload: bytes) -> Any:
    r = store().write(conn, [(TOPIC, payload)])
    conn.commit()
    assert r.counts["received"] == r.counts["ignored"] == 1, r.counts  # never an event, never a crash
    return r


def _trusted(conn: Any) -> set[str]:
    return {str(k) for (k,) in conn.execute("SELECT key_id FROM table_keys WHERE table_id = 'T01'")}


def _padded(doc: dict[str, Any], size: int) -> bytes:
    """``doc`` as JSON, padded with spaces (JSON's own whitespace) to ``size`` bytes."""
    raw = json.dumps(doc, separators=(",", ":")).encode()
    assert len(raw) <= size
    return raw + b" " * (size - len(raw))


@pytest.mark.parametrize(("extra", "taken"), [(0, True), (1, False)])
def test_an_announcement_at_the_byte_bound_is_read_one_byte_over_is_refused(
    conn: Any, extra: int, taken: bool, caplog: Any
) -> None:
    keys = _chain(1)
    payload = _padded({"table": "T01", "keys": keys}, MAX_ANNOUNCEMENT_BYTES + extra)
    assert len(payload) == MAX_ANNOUNCEMENT_BYTES + extra
    r = _announce(conn, payload)
    if taken:
        assert _trusted(conn) == {keys[0]["key_id"]}
        assert r.counts["keys_refused"] == 0
    else:
        assert _trusted(conn) == set()
        assert r.counts["keys_refused"] == 1
        assert counters(conn)["test"]["keys_refused"] == 1  # the durable counter too


@pytest.mark.parametrize(("listed", "read"), [(MAX_KEYS, MAX_KEYS), (MAX_KEYS + 1, MAX_KEYS)])
def test_a_key_list_at_the_bound_is_read_whole_one_over_its_newest_keys(
    conn: Any, listed: int, read: int
) -> None:
    keys = _chain(listed)
    payload = json.dumps({"table": "T01", "keys": keys}).encode()
    assert len(payload) <= MAX_ANNOUNCEMENT_BYTES  # the key bound, not the byte bound, is what bites
    r = _announce(conn, payload)
    assert r.counts["keys_refused"] == 0
    trusted = _trusted(conn)
    assert len(trusted) == read
    # the newest keys (the one the table signs with last) are the ones read
    assert trusted == {k["key_id"] for k in keys[-read:]}
    assert keys[-1]["key_id"] in trusted
    if listed > read:
        assert keys[0]["key_id"] not in trusted


LONE = "\ud800"
HOSTILE: list[tuple[str, bytes, bool]] = [
    # (what, payload, refused whole)
    ("not UTF-8", b'{"table":"T01","keys":[\xff\xfe]}', True),
    ("not JSON", b"keys", True),
    ("a list", b"[]", True),
    ("nested past the parser's depth", b"[" * 32_000 + b"]" * 32_000, True),
    ("a lone surrogate as the table", json.dumps({"table": "T01" + LONE, "keys": []}).encode(), True),
    ("a control character as the table", json.dumps({"table": "T01\x1b[2J", "keys": []}).encode(), True),
    ("NaN as the key list", b'{"table":"T01","keys":NaN}', True),
    ("Infinity as a key", b'{"table":"T01","keys":[Infinity,-Infinity,1e400]}', False),
    ("NaN as the public key", b'{"table":"T01","keys":[{"key_id":"x","public_key":NaN}]}', False),
    (
        "a lone surrogate in the public key",
        json.dumps({"table": "T01", "keys": [{"key_id": "x", "public_key": "AAAA" + LONE}]}).encode(),
        False,
    ),
    (
        "control characters in the key id",
        json.dumps({"table": "T01", "keys": [{"key_id": "\x00\x1b\u2028", "public_key": "AAAA"}]}).encode(),
        False,
    ),
]


@pytest.mark.parametrize(("what", "payload", "refused"), HOSTILE, ids=[h[0] for h in HOSTILE])
def test_hostile_announcements_teach_nothing_and_stop_nothing(
    conn: Any, what: str, payload: bytes, refused: bool, capsys: Any
) -> None:
    assert len(payload) <= MAX_ANNOUNCEMENT_BYTES, what
    r = _announce(conn, payload)
    assert r.counts["keys_refused"] == (1 if refused else 0), what
    assert _trusted(conn) == set()
    # the archiver goes on: a real announcement after it is read
    keys = _chain(2)
    r = _announce(conn, json.dumps({"table": "T01", "keys": keys}).encode())
    assert r.counts["keys_refused"] == 0
    assert _trusted(conn) == {k["key_id"] for k in keys}
    assert count(conn, "rejects") == 0
    # every log line printable (no control character, no lone surrogate)
    logged = capsys.readouterr()
    for line in (logged.out + logged.err).splitlines():
        assert line.isprintable(), line[:200]
