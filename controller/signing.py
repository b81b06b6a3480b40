"""Signed, chained events: the canonical bytes, the signature,
the chain link, a table's keys, and the checks a verifier makes.

Pure except for the key file (``load_key``/``create_key``). The format,
which docs/events.md, "Signed and chained events" documents for consumers in any
language:

* **signed bytes**: the event exactly as journalled and published, without
  its ``sig`` member. ``sig`` is always the event's last member, so the
  published line is the signed bytes with their closing ``}`` replaced by
  ``,"sig":"<86 characters>"}`` (``SIG_TAIL`` = 96 bytes). A verifier
  takes the line's bytes as received, checks that they end so, and puts
  ``}`` back in place of the tail: no JSON re-serialisation, so no
  canonical-JSON rules (key order, float format) to agree on.
* ``sig``: Ed25519 (RFC 8032) over the signed bytes, base64url without
  padding (64 bytes, 86 characters).
* ``key_id``: the first 16 hex digits of SHA-256 of the raw 32-byte public
  key.
* ``prev``: SHA-256 (64 hex digits) of the signed bytes of the table's
  previous event (for an unsigned predecessor, of its whole line); ``null``
  on a chain's first event.
* ``chain_reset``: present only on the first event of a new epoch after a
  lost journal (its text says why); its ``prev`` links to whatever the
  journal still held (``null`` if nothing).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from controller.errors import ExpectedError

SIG_CHARS = 86
#: ``,"sig":"`` + 86 characters + ``"}``
SIG_TAIL = 8 + SIG_CHARS + 2
_TAIL_HEAD = b',"sig":"'
#: Fields the journal adds to an event when it signs it (the engine never writes them).
SIGNING_FIELDS = ("key_id", "prev", "chain_reset", "chain_head", "sig")
#: The largest key file read.
MAX_KEY_FILE_BYTES = 4096
#: Context of a key endorsement (an old key signing a new one at rotation).
_ENDORSE = b"shoe-controller key endorsement v1\n"


class SigningKeyError(ExpectedError):
    """The signing key cannot be read, made or trusted (one line)."""


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def key_id_of(public_raw: bytes) -> str:
    return hashlib.sha256(public_raw).hexdigest()[:16]


def public_raw(key: Ed25519PublicKey) -> bytes:
    return key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def digest(signed: bytes) -> str:
    """A chain link: the hex SHA-256 of an event's signed bytes."""
    return hashlib.sha256(signed).hexdigest()


def split(line: bytes) -> tuple[bytes, bytes | None]:
    """(signed bytes, signature) of a journalled or published line; (line,
    None) when it carries no well-formed ``sig`` tail."""
    if len(line) > SIG_TAIL and line.endswith(b'"}') and line[-SIG_TAIL:].startswith(_TAIL_HEAD):
        try:
            sig = unb64(line[-SIG_TAIL + 8 : -2].decode("ascii"))
        except (binascii.Error, UnicodeDecodeError, ValueError):
            return line, None
        if len(sig) == 64:
            return line[:-SIG_TAIL] + b"}", sig
    return line, None


def link_of(line: bytes) -> str:
    """The digest the next event's ``prev`` must hold."""
    return digest(split(line)[0])


class Signer:
    """A table's signing key and the chain it extends."""

    def __init__(self, key: Ed25519PrivateKey) -> None:
        self._key = key
        raw = public_raw(key.public_key())
        self.public_key = b64(raw)
        self.key_id = key_id_of(raw)

    def seal(self, text: str) -> str:
        """``text`` (an event's JSON, compact, ending in ``}``) with its ``sig``."""
        data = text.encode()
        return text[:-1] + ',"sig":"' + b64(self._key.sign(data)) + '"}'

    def endorse(self, new_public: str) -> str:
        """This key's signature over a new key (rotation)."""
        return b64(self._key.sign(_ENDORSE + unb64(new_public)))


def load_key(path: str | os.PathLike[str]) -> Ed25519PrivateKey:
    """The PKCS#8 PEM private key at ``path``: it must exist, be small, and
    be readable by its owner only (mode 0600 or stricter)."""
    p = Path(path)
    try:
        st = p.stat()
        if st.st_mode & 0o077:
            raise SigningKeyError(
                f"signing key {p}: mode {st.st_mode & 0o777:04o} lets others read it; chmod 600 {p}"
            )
        if st.st_size > MAX_KEY_FILE_BYTES:
            raise SigningKeyError(
                f"signing key {p}: {st.st_size} bytes, a key file is at most {MAX_KEY_FILE_BYTES}"
            )
        data = p.read_bytes()
    except OSError as exc:
        raise SigningKeyError(f"signing key {p}: {exc.strerror or exc}") from None
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError):
        raise SigningKeyError(f"signing key {p}: not an unencrypted PKCS#8 PEM private key") from None
    if not isinstance(key, Ed25519PrivateKey):
        raise SigningKeyError(f"signing key {p}: not an Ed25519 key")
    return key


def create_key(path: str | os.PathLike[str]) -> Ed25519PrivateKey:
    """A new key written to ``path`` (mode 0600, created exclusively: an
    existing key is never overwritten)."""
    p = Path(path)
    key = Ed25519PrivateKey.generate()
    pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.write(fd, pem)
            os.fsync(fd)
        finally:
            os.close(fd)
    except FileExistsError:
        raise SigningKeyError(
            f"signing key {p} already exists; never overwritten (rotate with keygen --rotate)"
        ) from None
    except OSError as exc:
        raise SigningKeyError(f"signing key {p}: cannot write it: {exc.strerror or exc}") from None
    return key


def load_or_create(path: str | os.PathLike[str]) -> tuple[Ed25519PrivateKey, bool]:
    if Path(path).exists():
        return load_key(path), False
    return create_key(path), True


def endorsement_ok(old_public: str, new_public: str, endorsement: str) -> bool:
    try:
        key = Ed25519PublicKey.from_public_bytes(unb64(old_public))
        key.verify(unb64(endorsement), _ENDORSE + unb64(new_public))
    except (InvalidSignature, ValueError, binascii.Error):
        return False
    return True


@dataclass
class KeyRing:
    """The public keys a verifier trusts, by key id."""

    keys: dict[str, Ed25519PublicKey] = field(default_factory=dict)
    #: the same keys as published (base64url), by key id
    publics: dict[str, str] = field(default_factory=dict)

    def add(self, public: str) -> str:
        raw = unb64(public)
        kid = key_id_of(raw)
        self.keys[kid] = Ed25519PublicKey.from_public_bytes(raw)
        self.publics[kid] = public
        return kid

    def check(self, signed: bytes, sig: bytes, key_id: Any) -> str | None:
        """Why the signature is bad, or None when it verifies."""
        key = self.keys.get(key_id) if isinstance(key_id, str) else None
        if key is None:
            return f"signed with an unknown key {str(key_id)[:32]!r}"
        try:
            key.verify(sig, signed)
        except InvalidSignature:
            return "bad signature"
        return None

    @classmethod
    def from_announcement(cls, keys: Iterable[Mapping[str, Any]]) -> KeyRing:
        """The keys of a table's key list (journal or ``<table>/keys``), each
        after the first trusted only when endorsed by one before it."""
        ring = cls()
        for entry in keys:
            public = entry.get("public_key")
            if not isinstance(public, str):
                continue
            if ring.keys:
                by = entry.get("endorsed_by")
                old = next((k for k in keys if k.get("key_id") == by), None)
                if (
                    old is None
                    or by not in ring.keys
                    or not endorsement_ok(str(old.get("public_key")), public, str(entry.get("endorsement")))
                ):
                    continue
            try:
                ring.add(public)
            except (ValueError, binascii.Error):
                continue
        return ring


def vouch(ring: KeyRing, items: Sequence[tuple[int, bytes, bytes, Any, Any]]) -> list[str | None]:
    """Each item's problem (None: the table's own), for one table's signed
    events of a batch, given as ``(seq, signed bytes, sig, key_id, prev)``
    in any order, with one Ed25519 verification per *run* instead of one per
    event (verification was most of the archiver's CPU).

    A run is a stretch of the events in seq order where each event's
    ``prev`` is the digest of the one before it (``seq`` one higher). The
    newest event's signature covers its ``prev``, which is the SHA-256 of
    the event before it, whose signed bytes hold its own ``prev``, and so
    on: when that one signature verifies under a trusted key, every event
    of the run is what the table signed, byte for byte (changing any of
    them changes a digest the signature covers; SHA-256 second preimages
    are out of reach). When it does not verify, every event of the run is
    checked on its own, so the bad one is named and the others are kept.
    What a run does not check is an earlier event's own ``sig`` member,
    which no digest covers: a signature altered in transit on content the
    run vouches for is archived, and ``verify`` names it afterwards.
    Duplicated seqs (a forgery beside the real event) end a run, so each
    copy is judged by its own chain."""
    out: list[str | None] = [None] * len(items)
    order = sorted(range(len(items)), key=lambda i: items[i][0])
    runs: list[list[int]] = []
    for i in order:
        if runs:
            run = runs[-1]
            j = run[-1]
            if items[i][0] == items[j][0] + 1 and items[i][4] == digest(items[j][1]):
                run.append(i)
                continue
        runs.append([i])
    for run in runs:
        _, signed, sig, key_id, _ = items[run[-1]]
        problem = ring.check(signed, sig, key_id)
        if problem is None:
            continue
        out[run[-1]] = problem
        for i in run[:-1]:
            _, signed, sig, key_id, _ = items[i]
            out[i] = ring.check(signed, sig, key_id)
    return out


@dataclass
class Finding:
    ok: bool
    line: str


@dataclass
class ChainCheck:
    """Walks one table's events in seq order: the first broken link or bad
    signature is the finding. ``anchored``: the first event's ``prev`` is
    not checked (a range that starts mid-chain); otherwise it must be
    ``head`` as given (None: the chain's start). ``resets_link``: a new
    epoch's first event (``chain_reset``) must link to the event before it
    too (in a journal it links to whatever the journal still held, so a
    reset that links elsewhere had events deleted before it; in the archive
    the table may have published events its journal then lost)."""

    ring: KeyRing
    anchored: bool = True
    resets_link: bool = False
    count: int = 0
    signed: int = 0
    resets: int = 0
    head: str | None = None
    first_seq: int | None = None
    last_seq: int | None = None
    signing_seen: bool = False

    def feed(self, where: str, line: bytes) -> str | None:
        """One event line; the problem with it (naming ``where``), or None."""
        signed, sig = split(line)
        try:
            event = json.loads(line)
        except ValueError:
            return f"{where}: not JSON"
        if not isinstance(event, dict):
            return f"{where}: not an event"
        seq = event.get("seq")
        if sig is None:
            if "sig" in event:
                return f"{where}: its sig is not the last member or not 64 bytes of base64url"
            if self.signing_seen:
                return f"{where}: unsigned, after signed events of the same table"
        else:
            self.signing_seen = True
            problem = self.ring.check(signed, sig, event.get("key_id"))
            if problem is not None:
                return f"{where}: {problem}"
            self.signed += 1
            prev = event.get("prev")
            reset = "chain_reset" in event
            if reset:
                self.resets += 1
            if (
                (not reset or self.resets_link)
                and (self.head is not None or not self.anchored)
                and prev != self.head
            ):
                if self.head is None:
                    return (
                        f"{where}: links to {str(prev)[:16]}..., but nothing comes before it here:"
                        " the events before it were deleted"
                    )
                return (
                    f"{where}: broken link: prev {str(prev)[:16]}... is not the digest of the event"
                    f" before it ({self.head[:16]}...): an event before it was edited, deleted,"
                    " inserted or moved"
                )
            if event.get("type") == "shoe.ended" and "chain_head" in event and event["chain_head"] != prev:
                return f"{where}: shoe.ended's chain_head is not its prev"
        if isinstance(seq, int):
            if self.last_seq is not None and seq <= self.last_seq:
                return f"{where}: seq {seq} after seq {self.last_seq}: out of order"
            if self.first_seq is None:
                self.first_seq = seq
            self.last_seq = seq
        self.head = digest(signed)
        self.count += 1
        return None


def lines_of(text: bytes) -> Iterator[bytes]:
    for line in text.split(b"\n"):
        if line.strip():
            yield line.rstrip(b"\r")


def endorsement_path(key_path: str | os.PathLike[str]) -> Path:
    return Path(str(key_path) + ".endorsement")


def read_endorsement(key_path: str | os.PathLike[str], key_id: str) -> dict[str, str] | None:
    """What ``keygen --rotate`` left beside the new key: the old key's
    signature over it (None when there is none for this key)."""
    p = endorsement_path(key_path)
    try:
        if p.stat().st_size > MAX_KEY_FILE_BYTES:
            return None
        data = json.loads(p.read_text("utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("key_id") != key_id:
        return None
    by, sig = data.get("endorsed_by"), data.get("endorsement")
    if not isinstance(by, str) or not isinstance(sig, str):
        return None
    return {"endorsed_by": by, "endorsement": sig}


def rotate(key_path: str | os.PathLike[str]) -> tuple[str, str]:
    """A new key at ``key_path``; the old one kept as ``<path>.<old key id>``
    (mode 0600) after it endorsed the new one. Returns (old id, new id)."""
    p = Path(key_path)
    old = Signer(load_key(p))
    kept = Path(f"{p}.{old.key_id}")
    try:
        os.replace(p, kept)
    except OSError as exc:
        raise SigningKeyError(f"signing key {p}: cannot move it aside: {exc.strerror or exc}") from None
    new = Signer(create_key(p))
    record = {"key_id": new.key_id, "endorsed_by": old.key_id, "endorsement": old.endorse(new.public_key)}
    endorsement_path(p).write_text(json.dumps(record) + "\n", "utf-8")
    return old.key_id, new.key_id
