"""The project's code, help texts, configs and docs cite only the project.

A reader of the repository (or of an installed package) has the README,
the pages under ``docs/`` and the code, nothing else: a comment that says
"SPEC section 7", "RULES.md" or "issue 27" points at a document they cannot
open. Each such pointer names the project's own page instead
(``docs/operations.md, Configuration``) or is dropped. This test walks
every text file of the repository that is not generated, tests included
(a test is code that someone reads), and fails naming each file, line and
pointer that came back. Commit messages may name issues; files may not.

References to other projects' trackers stay allowed where they name the
project (``eclipse-mosquitto issue 2662``): anyone can open those.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

#: what is walked: the package, its tools, its configs and its docs
DIRS = (
    "controller",
    "drivers",
    "firmware_protocols",
    "tests",
    "benchmarks",
    "examples",
    "systemd",
    "deploy",
    "docs",
    "fuzz",
)
TOP_FILES = ("README.md", "Makefile", "pyproject.toml", "MANIFEST.in", "mkdocs.yml")
#: binary or generated files, never read
SKIP_SUFFIXES = {".png", ".pdf", ".pyc", ".sqlite3", ".shoelog", ".gz", ".zip", ".bin", ".der"}
SKIP_PARTS = {"__pycache__", ".venv", "var", ".mypy_cache", ".ruff_cache", ".pytest_cache", "site"}

#: another project's tracker, named: allowed
UPSTREAM = ("eclipse-mosquitto", "mosquitto", "nats-server", "paho-mqtt", "paho.mqtt")

#: (name, pattern): each a pointer to a document outside the repository
PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("the specification", re.compile(r"\bSPEC\b")),
    ("a specification section", re.compile(r"\bspec(?:\.md)?'?s?\s*(?:section|§)", re.IGNORECASE)),
    ("a section sign", re.compile(r"§")),
    ("an outside document", re.compile(r"\b(?:SPEC|RULES|ARCHITECTURE)\.md\b")),
    ("an issue number", re.compile(r"\bissues? #?\d+", re.IGNORECASE)),
    ("a rule-card seed", re.compile(r"\bseeds? \d{3}\b", re.IGNORECASE)),
    ("the shared reference folder", re.compile(r"/work/shared\b")),
)


def _files() -> list[Path]:
    out = [ROOT / name for name in TOP_FILES if (ROOT / name).is_file()]
    for d in DIRS:
        base = ROOT / d
        if not base.is_dir():
            continue
        for p in sorted(base.rglob("*")):
            rel = p.relative_to(ROOT)
            if not p.is_file() or p.suffix in SKIP_SUFFIXES or SKIP_PARTS & set(rel.parts):
                continue
            out.append(p)
    return [p for p in out if p.resolve() != Path(__file__).resolve()]


def _upstream(line: str, start: int) -> bool:
    before = line[:start].rstrip().lower()
    return any(before.endswith(name) for name in UPSTREAM)


def offending(text: str) -> list[tuple[int, str, str]]:
    """(line number, what, the matched text) of each outside pointer."""
    found = []
    for n, line in enumerate(text.splitlines(), 1):
        for what, pat in PATTERNS:
            for m in pat.finditer(line):
                if what == "an issue number" and _upstream(line, m.start()):
                    continue
                found.append((n, what, m.group(0)))
    return found


@pytest.mark.parametrize(
    "bad",
    [
        "config YAML (SPEC section 7)",
        "see spec §5",
        "the tableau (RULES.md)",
        "The layering of ARCHITECTURE.md, enforced",
        "signed (issue 29)",
        '"""Issue 11 item 2: a ts ahead"""',
        "reconciled from the Macau rules, seed 003",
        "as summarised in SPEC 1c",
    ],
)
def test_each_kind_of_outside_pointer_is_caught(bad: str) -> None:
    assert offending(bad), bad


@pytest.mark.parametrize(
    "good",
    [
        "config YAML (docs/operations.md, Configuration)",
        "the layering of docs/architecture.md",
        "a fault spec: gap:0.01,garbage:0.05",
        "(eclipse-mosquitto issue 2662), so a group member's session is short",
        "an event id is never re-issued",
        "spec = getattr(module, '__spec__', None)",
    ],
)
def test_the_projects_own_pointers_pass(good: str) -> None:
    assert offending(good) == [], good


def test_no_file_points_outside_the_repository() -> None:
    files = _files()
    assert len(files) > 100, "the walk found almost nothing: wrong root?"
    bad = []
    for p in files:
        try:
            text = p.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        for n, what, hit in offending(text):
            bad.append(f"{p.relative_to(ROOT)}:{n}: {what}: {hit!r}")
    assert bad == [], (
        "pointers to documents outside the repository (name the docs page instead, e.g."
        " 'docs/operations.md, Configuration', or drop the pointer; a commit message may"
        " name an issue):\n" + "\n".join(bad)
    )
