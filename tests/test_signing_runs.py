"""One signature per run of linked events: ``signing.vouch``
takes a table's signed events of an archive batch and verifies one
signature per run of events each linked to the one before it, falling back
to each event on its own when a run's signature does not verify."""

from __future__ import annotations

import json
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from controller import signing
from controller.events import dumps


def _chain(signer: signing.Signer, n: int, start: int = 1, prev: str | None = None) -> list[bytes]:
    lines = []
    for seq in range(start, start + n):
        ev: dict[str, Any] = {"v": 1, "type": "card", "table": "T01", "seq": seq, "card": "AS"}
        ev["key_id"] = signer.key_id
        ev["prev"] = prev
        line = signer.seal(dumps(ev)).encode()
        prev = signing.link_of(line)
        lines.append(line)
    return lines


def _items(lines: list[bytes]) -> list[tuple[int, bytes, bytes, Any, Any]]:
    out = []
    for line in lines:
        signed, sig = signing.split(line)
        assert sig is not None
        ev = json.loads(line)
        out.append((ev["seq"], signed, sig, ev.get("key_id"), ev.get("prev")))
    return out


class CountingRing(signing.KeyRing):
    calls: int = 0

    def check(self, signed: bytes, sig: bytes, key_id: Any) -> str | None:
        self.calls += 1
        return super().check(signed, sig, key_id)


@pytest.fixture
def signer() -> signing.Signer:
    return signing.Signer(Ed25519PrivateKey.generate())


@pytest.fixture
def ring(signer: signing.Signer) -> CountingRing:
    r = CountingRing()
    r.add(signer.public_key)
    return r


def test_a_linked_run_costs_one_verification_and_every_event_is_the_tables(
    signer: signing.Signer, ring: CountingRing
) -> None:
    lines = _chain(signer, 50)
    items = _items(lines)
    items.reverse()  # any order: the batch's
    assert signing.vouch(ring, items) == [None] * 50
    assert ring.calls == 1


def test_a_forgery_at_the_head_of_a_run_is_named_and_the_run_before_it_kept(
    signer: signing.Signer, ring: CountingRing
) -> None:
    lines = _chain(signer, 5)
    forger = signing.Signer(Ed25519PrivateKey.generate())
    ev = {"v": 1, "type": "coup.result", "table": "T01", "seq": 6, "key_id": signer.key_id}
    ev["prev"] = signing.link_of(lines[-1])  # linked as the real one would be
    forged = forger.seal(dumps(ev)).encode()
    out = signing.vouch(ring, _items([*lines, forged]))
    assert out[:5] == [None] * 5 and out[5] == "bad signature"


def test_a_forgery_beside_the_real_event_is_named_and_the_real_chain_kept(
    signer: signing.Signer, ring: CountingRing
) -> None:
    lines = _chain(signer, 8)
    forger = signing.Signer(Ed25519PrivateKey.generate())
    real4 = json.loads(lines[3])
    fake = dict(real4, card="KD")
    del fake["sig"]
    forged = forger.seal(dumps(fake)).encode()
    items = _items([forged, *lines])  # the forgery first, as published first
    out = signing.vouch(ring, items)
    assert out[0] == "bad signature" and out[1:] == [None] * 8


def test_an_edited_event_in_the_middle_breaks_its_link_and_is_named(
    signer: signing.Signer, ring: CountingRing
) -> None:
    lines = _chain(signer, 6)
    edited = lines[2].replace(b'"card":"AS"', b'"card":"KS"')
    out = signing.vouch(ring, _items([*lines[:2], edited, *lines[3:]]))
    assert out == [None, None, "bad signature", None, None, None]


def test_unlinked_events_are_each_verified(signer: signing.Signer, ring: CountingRing) -> None:
    a = _chain(signer, 3, start=1)
    b = _chain(signer, 3, start=10, prev="0" * 64)  # a hole in seq: two runs
    assert signing.vouch(ring, _items([*a, *b])) == [None] * 6
    assert ring.calls == 2


def test_a_run_whose_newest_key_is_unknown_is_checked_event_by_event(
    signer: signing.Signer, ring: CountingRing
) -> None:
    lines = _chain(signer, 3)
    other = signing.Signer(Ed25519PrivateKey.generate())
    ev = {"v": 1, "type": "card", "table": "T01", "seq": 4, "key_id": other.key_id}
    ev["prev"] = signing.link_of(lines[-1])
    tail = other.seal(dumps(ev)).encode()
    out = signing.vouch(ring, _items([*lines, tail]))
    assert out[:3] == [None] * 3
    assert out[3] is not None and "unknown key" in out[3]
