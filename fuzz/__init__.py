"""Fuzz targets for the shoe controller (no crash, no hang,
no card invented).

One harness per surface that takes bytes from outside:

- ``fuzz_decoders``: wire bytes, split into reads, through each of the
  three protocol decoders;
- ``fuzz_shoelog``: ``.shoelog`` text through the capture reader, and what
  it reads through a decoder and an engine, as ``replay`` does;
- ``fuzz_commands``: supervisor command payloads through the parser, and
  the valid ones into a live engine mid-shoe;
- ``fuzz_config``: YAML bytes through the config and profile loaders;
- ``fuzz_engine``: frame sequences, commands and ticks into an engine.

Each runs under atheris (coverage-guided) when it is installed, or in a
plain seeded random-mutation mode when it is not (``FUZZ_MODE=random``
forces that mode); both apply the same invariants. ``python -m fuzz`` runs
them all; ``python -m fuzz.<harness> FILE`` replays one reproducer.

Nothing here is imported by the product, and ``make test`` needs no atheris.
"""
