"""Outside text, made safe for the two places it can do harm.

At the door: a command's string fields (and the CLI's text arguments) are
one line of text, or refused: ``one_line_problem`` says what is wrong with
one. A lone surrogate (valid JSON, ``"\\ud800"``, and what Python's
surrogateescape makes of a non-UTF-8 argument) cannot be written as UTF-8
at all; a control character (C0, DEL, C1) or a line or paragraph separator
would let one line of text move the cursor, erase a line or start another.

At the output: ``visible`` is the one rule for text a person reads at a
terminal or in a spreadsheet (every human output of the CLI: history, ctl,
report, replay and run lines, check-config...). Journals written before the
door closed may hold such text, and device texts, paths and error messages
are not commands, so the output escapes whatever it is given. HTML pages
escape for HTML instead (``html.escape``).

The rule (``visible``): every character that Python's ``str.isprintable``
refuses, which is what ``repr`` escapes (Unicode categories Cc: C0, DEL and
C1 controls; Cs: lone surrogates; Zl, Zp: U+2028, U+2029; Cf: format
characters such as the bidirectional overrides; Co, Cn: private-use and
unassigned; Zs other than the space), is shown as Python writes it in a
string literal: ``\\t``, ``\\n``, ``\\r``, else ``\\xNN`` below U+0100,
``\\uNNNN`` below U+10000 and ``\\UNNNNNNNN`` above. Everything else, a
backslash included, is shown as it is: the escapes are for a person's
eyes, not a reversible encoding (``--json`` gives the exact text).
"""

from __future__ import annotations

import re

#: What a command's string field (and a CLI text argument) may not hold.
NOT_ONE_LINE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]")

#: The bound, as the refusals state it.
ONE_LINE_RULE = (
    "one line of text: no control character (U+0000-U+001F, U+007F-U+009F),"
    " no line or paragraph separator (U+2028, U+2029), no lone surrogate (U+D800-U+DFFF)"
)

_NAMED = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}


def one_line_problem(text: str) -> str | None:
    """None if ``text`` is one line of UTF-8 text; else what is wrong, e.g.
    ``"found control character U+001B at character 3"`` (1-based)."""
    m = NOT_ONE_LINE.search(text)
    if m is None:
        return None
    n = ord(m.group())
    if 0xD800 <= n <= 0xDFFF:
        what = "a lone surrogate (not UTF-8: an undecodable byte, or an escape no UTF-8 can carry)"
    elif n in (0x2028, 0x2029):
        what = "a line or paragraph separator"
    else:
        what = "a control character"
    return f"found {what}, U+{n:04X}, at character {m.start() + 1}"


def _escape(ch: str) -> str:
    named = _NAMED.get(ch)
    if named is not None:
        return named
    n = ord(ch)
    if n < 0x100:
        return f"\\x{n:02x}"
    if n < 0x10000:
        return f"\\u{n:04x}"
    return f"\\U{n:08x}"


def visible(value: object) -> str:
    """``value`` (a string, or anything ``str`` makes one of) as a person
    may safely read it: every character ``str.isprintable`` refuses shown
    as its escape (module docstring). The result is printable, holds no
    control character, separator or surrogate, and encodes as UTF-8."""
    text = value if isinstance(value, str) else str(value)
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else _escape(ch) for ch in text)


#: A spreadsheet reads a cell starting with one of these as a formula.
_FORMULA_START = ("=", "+", "-", "@")


def csv_cell(value: object) -> str:
    """A CSV cell's text: ``visible``, and a text a spreadsheet would run as
    a formula (``=HYPERLINK(...)``, ``@SUM(...)``, ``-2+3``) starting with a
    ``'``, as spreadsheets themselves mark a text; a number (``-1``,
    ``+0.95``) is left a number."""
    text = visible(value)
    if text.startswith(_FORMULA_START):
        try:
            float(text)
        except ValueError:
            return "'" + text
    return text


def visible_lines(text: str) -> str:
    """``visible`` applied to each line of a text of several lines (its
    ``\\n`` kept, every other control shown escaped)."""
    return "\n".join(visible(line) for line in text.split("\n"))
