"""A table's configuration written for a test: the daemon tests' common
base (table T01, punto banco, 8 decks, no odds, journal and JSON lines in
the test's directory), with any top-level key overridden."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml


def write_config(tmp_path: Path, device: dict[str, Any], **extra: Any) -> Path:
    cfg = {
        "table": "T01",
        "profile": "punto_banco",
        "decks": 8,
        "device": device,
        "journal": str(tmp_path / "journal.sqlite3"),
        "odds": False,
        "outputs": {"stdout": False, "jsonl": str(tmp_path / "events.jsonl")},
        **extra,
    }
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path
