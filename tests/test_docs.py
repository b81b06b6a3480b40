"""The documentation site (``mkdocs.yml``, pages under ``docs/``) and every
pointer into it.

- The site builds with ``mkdocs build --strict``: mkdocs.yml's
  ``validation:`` makes a link to a missing page or anchor a warning, and
  ``--strict`` makes a warning an error (``make test`` runs the same build
  as ``make docs-check``; this test keeps the check inside pytest too, and
  shows it can fail).
- The README's links into ``docs/`` (which mkdocs never sees) resolve, to
  the page and to the heading.
- A code comment, help text or config that names a page
  (``docs/operations.md, Configuration``) names one that exists, and a
  section that page has.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from markdown.extensions.toc import slugify

from tests.test_no_outside_references import _files

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"


def _build(config: Path, site: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(config), "-d", str(site)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _headings(page: Path) -> list[str]:
    """Each heading's text (backticks dropped), outside code fences."""
    out, code = [], False
    for line in page.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            code = not code
        m = re.match(r"#{1,6} (.*)", line)
        if m and not code:
            out.append(m.group(1).replace("`", "").strip())
    return out


def _bold_leads(page: Path) -> list[str]:
    return [b.strip() for b in re.findall(r"\*\*([^*]+)\*\*", page.read_text(encoding="utf-8"))]


def test_the_site_builds_with_every_link_and_anchor_found(tmp_path: Path) -> None:
    done = _build(ROOT / "mkdocs.yml", tmp_path / "site")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "WARNING" not in done.stderr, done.stderr
    built = {p.name for p in (tmp_path / "site").glob("*.html")}
    pages = {p.stem + ".html" for p in DOCS.glob("*.md")}
    assert pages <= built, sorted(pages - built)


def test_a_broken_link_or_anchor_fails_the_build(tmp_path: Path) -> None:
    shutil.copytree(DOCS, tmp_path / "docs")
    shutil.copy(ROOT / "mkdocs.yml", tmp_path / "mkdocs.yml")
    index = tmp_path / "docs" / "index.md"
    index.write_text(index.read_text() + "\n[x](events.md#no-such-section) [y](no-such-page.md)\n")
    done = _build(tmp_path / "mkdocs.yml", tmp_path / "site")
    assert done.returncode != 0
    assert "no-such-section" in done.stderr and "no-such-page.md" in done.stderr, done.stderr


def test_every_page_is_in_the_nav() -> None:
    nav = (ROOT / "mkdocs.yml").read_text()
    for page in DOCS.glob("*.md"):
        assert f": {page.name}\n" in nav, page.name


README_LINK = re.compile(r"\]\(([^)\s]+)\)")


def test_the_readmes_links_resolve_to_a_page_and_a_heading() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    links = [t for t in README_LINK.findall(readme) if not re.match(r"[a-z]+://", t)]
    assert len(links) > 10, links
    for target in links:
        path, _, anchor = target.partition("#")
        assert (ROOT / path).is_file(), target
        if anchor:
            assert anchor in {slugify(h, "-") for h in _headings(ROOT / path)}, target


def test_the_readme_is_short() -> None:
    """The README is the short way in (about 150 lines); the rest is on the site."""
    lines = (ROOT / "README.md").read_text(encoding="utf-8").count("\n")
    assert 100 <= lines <= 200, lines


#: ``docs/<page>.md`` and, after ", " or ": ", a section: a capitalised phrase or a quoted one
POINTER = re.compile(
    r"docs/([a-z-]+)\.md(?:(?:,|:) +(?:[\"']([^\"'\n]+)[\"']?|([A-Z][\w/ .-]*?)(?=[),.;:]|$)))?", re.M
)


def pointers(text: str) -> list[tuple[str, str | None]]:
    return [(m.group(1), (m.group(2) or m.group(3) or "").strip() or None) for m in POINTER.finditer(text)]


def _has_section(page: Path, section: str) -> bool:
    want = " ".join(section.replace("`", "").split()).lower()
    names = [" ".join(n.split()).lower() for n in _headings(page) + _bold_leads(page)]
    return any(n.startswith(want) or want.startswith(n) for n in names if n)


def test_the_pointer_pattern_reads_pages_and_sections() -> None:
    assert pointers("(docs/operations.md, Configuration)") == [("operations", "Configuration")]
    quoted = '(docs/dealing-errors.md, "Dealing errors": fewer'
    assert pointers(quoted) == [("dealing-errors", "Dealing errors")]
    assert pointers("see docs/events.md for the rest") == [("events", None)]
    assert not _has_section(DOCS / "operations.md", "No such section")


def test_every_pointer_into_the_docs_names_a_page_and_a_section_it_has() -> None:
    bad, seen = [], 0
    for f in _files():
        if f.is_relative_to(DOCS) or f.name == "test_docs.py":
            continue
        try:
            text = f.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        for page, section in pointers(text):
            seen += 1
            target = DOCS / f"{page}.md"
            if not target.is_file():
                bad.append(f"{f.relative_to(ROOT)}: docs/{page}.md does not exist")
            elif section and not _has_section(target, section):
                bad.append(f"{f.relative_to(ROOT)}: docs/{page}.md has no section {section!r}")
    assert seen > 50, seen
    assert bad == [], "\n".join(bad)


@pytest.mark.parametrize("page", ["operations", "devices", "events", "dealing-errors", "archive"])
def test_the_pages_keep_the_contract(page: str) -> None:
    """A sample of what the README promised, still promised on its page."""
    text = (DOCS / f"{page}.md").read_text(encoding="utf-8")
    must = {
        "operations": ["Exit codes: 0 ok, 2 usage or configuration error", "`shoe-controller ctl ACTION"],
        "devices": ["`protocol: auto`", "socket://", "# protocol=shoe-ascii/1"],
        "events": ["`event_id` is\n`<table>/<shoe>/<seq>`", "`coup.corrected`", "`key_id`"],
        "dealing-errors": ["`EXTRA_CARD`", "`MISSING_RESULT`", "`SUPERVISOR_VOID`"],
        "archive": ["--migrate", "## Floor reports (`report`)", "archive/mark"],
    }[page]
    for phrase in must:
        assert phrase in text, (page, phrase)
