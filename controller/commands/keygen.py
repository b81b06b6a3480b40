"""``shoe-controller keygen``: make a table's signing key.

``keygen -c CONFIG`` (or ``--key PATH``) writes a new Ed25519 key, mode
0600, where the config's ``signing_key`` says (default: ``signing.key``
beside the journal), and never over an existing one; ``--rotate`` makes a
new key endorsed by the old (kept as ``PATH.<old key id>``); ``--public``
prints the key's id and public key (for an archive's ``signing.keys``).
Nothing secret is ever printed.
"""

from __future__ import annotations

import argparse

from controller import signing
from controller.errors import UsageError
from controller.textsafe import visible


def _path(args: argparse.Namespace) -> str:
    if (args.config is None) == (args.key is None):
        raise UsageError("keygen: give -c CONFIG or --key PATH")
    if args.key is not None:
        return str(args.key)
    from controller.config import load_config

    return load_config(args.config).signing_key_path()


def run(args: argparse.Namespace) -> int:
    path = _path(args)
    if args.public:
        signer = signing.Signer(signing.load_key(path))
        print(f"key_id {signer.key_id} public_key {signer.public_key}")
        return 0
    if args.rotate:
        old, new = signing.rotate(path)
        print(
            f"keygen: {visible(path)} is a new key {new}, endorsed by {old} (kept as {visible(path)}.{old});"
            " restart the daemon to sign with it"
        )
        return 0
    signer = signing.Signer(signing.create_key(path))
    print(f"keygen: {visible(path)}: key_id {signer.key_id} public_key {signer.public_key} (mode 0600)")
    return 0
