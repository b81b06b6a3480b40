"""The ``shoe-controller`` command line (docs/operations.md, Command line).

Argument definitions live here; each subcommand's work lives in
``controller.commands.<name>`` and is imported only when that subcommand
runs, so ``shoe-controller replay`` does not pay for paho or pyusb.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from controller import __version__
from controller.errors import ExpectedError
from controller.textsafe import ONE_LINE_RULE, one_line_problem, visible

if TYPE_CHECKING:
    # the subcommands of ``shoe-controller``, each added by a ``_<name>_parser``
    _Commands = argparse._SubParsersAction[argparse.ArgumentParser]


def _ctl_options(p: argparse.ArgumentParser, default: object) -> None:
    """``ctl``'s options common to every action; ``default`` None gives each
    its own default, ``argparse.SUPPRESS`` none at all."""

    def d(value: object) -> object:
        return value if default is None else default

    p.add_argument(
        "-c",
        "--config",
        default=d(None),
        help="a supervisor's config: table and outputs.mqtt, no device needed (required)",
    )
    p.add_argument("--table", default=d(None), help="the table to command (default: the config's table)")
    p.add_argument("--timeout", type=float, default=d(10.0), help="seconds to wait for the reply (0.1..600)")
    p.add_argument(
        "--json",
        action="store_true",
        default=d(False),
        help="print the controller's raw reply (one JSON line)",
    )


def _build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="shoe-controller", description="Baccarat card-reading shoe controller.")
    p.add_argument("--version", action="version", version=f"shoe-controller {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    _run_parser(sub)
    _replay_parser(sub)
    _fake_parser(sub)
    _record_parser(sub)
    _check_config_parser(sub)
    _odds_parser(sub)
    _roads_parser(sub)
    _board_parser(sub)
    _archive_parser(sub)
    _ctl_parser(sub)
    _report_parser(sub)
    _history_parser(sub)
    _integrity_parsers(sub)
    return p


def _run_parser(sub: _Commands) -> None:
    """``run``: the daemon."""
    run = sub.add_parser("run", help="run the daemon (no config: fake shoe, events on stdout)")
    run.add_argument("-c", "--config", help="config YAML (docs/operations.md, Configuration)")
    run.add_argument(
        "--json",
        action="store_true",
        help="JSON lines on stdout even on a terminal (elsewhere they always are)",
    )


def _replay_parser(sub: _Commands) -> None:
    """``replay``: captures through the engine."""
    rp = sub.add_parser("replay", help="replay .shoelog captures through the engine")
    rp.add_argument("files", nargs="+", metavar="FILE", help=".shoelog captures, replayed in turn")
    rp.add_argument("--profile", help="punto_banco | ez_baccarat | baccarat_27 | path to a profile YAML")
    rp.add_argument("--decks", type=int, help="1..12")
    rp.add_argument("--table", help="table id (default: from the file, else T01)")
    rp.add_argument("--protocol", help="override the capture's protocol")
    rp.add_argument("--realtime", action="store_true", help="pace the replay by the file's timestamps")
    rp.add_argument("--odds", action="store_true", help="emit odds.update events")
    rp.add_argument("--roads", action="store_true", help="emit roads events after every coup")
    rp.add_argument(
        "--out",
        choices=["jsonl", "mqtt"],
        default="jsonl",
        help="jsonl: JSON lines on stdout; mqtt: to the broker of -c (QoS 1, each event acknowledged)",
    )
    rp.add_argument("-c", "--config", help="for --out mqtt: a config with outputs.mqtt (no device needed)")
    rp.add_argument(
        "--mqtt-timeout",
        type=float,
        default=30.0,
        metavar="S",
        help="--out mqtt fails when the broker acknowledges nothing for S seconds (default 30, at most 600)",
    )
    rp.add_argument(
        "--force-live-table",
        action="store_true",
        help="--out mqtt: publish even to a table whose retained status says its controller is online",
    )
    rp.add_argument("--no-progress", action="store_true", help="never draw a progress bar")
    rp.add_argument(
        "--json",
        action="store_true",
        help="JSON lines on a terminal too (a line per coup there otherwise; piped, always JSON)",
    )


def _fake_parser(sub: _Commands) -> None:
    """``fake``: a fake shoe."""
    fk = sub.add_parser("fake", help="run a fake shoe")
    fk.add_argument("--pty", action="store_true", help="speak on a pseudo-terminal; prints its path first")
    fk.add_argument(
        "--seed", type=int, default=1, help="the shuffle seed: the same seed deals the same shoes (default 1)"
    )
    fk.add_argument(
        "--protocol",
        default="shoe-ascii/1",
        help="the wire protocol it speaks: shoe-ascii/1 (default), shoe-bin/1 or angel-eye/2",
    )
    fk.add_argument(
        "--cards-per-second",
        type=float,
        default=2.0,
        help="the dealing pace (default 2; 0 = as fast as the reader takes them)",
    )
    fk.add_argument("--faults", default="", help='e.g. "gap:0.01,garbage:0.05,extra:0.02"')
    fk.add_argument("--decks", type=int, default=8, help="decks in the shoe, 1..12 (default 8)")
    fk.add_argument("--shoes", type=int, default=0, help="stop after N shoes (0 = forever)")
    fk.add_argument("--log", help="write the fake shoe's own record of what it dealt (JSON lines)")


def _record_parser(sub: _Commands) -> None:
    """``record``: a device's bytes to a capture."""
    rec = sub.add_parser("record", help="capture a device's bytes to a .shoelog")
    rec.add_argument("-c", "--config", required=True, help="the table's config: its device is read")
    rec.add_argument("-o", "--output", required=True, help="the .shoelog file to write")
    rec.add_argument("--duration", type=float, default=0.0, help="stop after N seconds (0 = until SIGINT)")


def _check_config_parser(sub: _Commands) -> None:
    """``check-config``."""
    cc = sub.add_parser("check-config", help="validate a config file")
    cc.add_argument("file", help="the config YAML to check (a table's, a supervisor's, the board's)")


def _odds_parser(sub: _Commands) -> None:
    """``odds``: the exact odds of every bet."""
    od = sub.add_parser("odds", help="exact probabilities and house edge of every bet")
    od.add_argument("--decks", type=int, default=8, help="decks in the shoe, 1..12 (default 8)")
    od.add_argument(
        "--profile",
        default="punto_banco",
        help="punto_banco (default) | ez_baccarat | baccarat_27 | path to a profile YAML",
    )
    od.add_argument("--remove", default="", help="cards to remove, e.g. 7H,7S,KD")
    od.add_argument("--json", action="store_true", help="one JSON document instead of the table")


def _roads_parser(sub: _Commands) -> None:
    """``roads``: a capture's scoreboard roads."""
    rd = sub.add_parser("roads", help="scoreboard roads of the last shoe in a capture")
    rd.add_argument("file", help="a .shoelog capture; the roads of its last shoe are drawn")
    rd.add_argument("--svg", metavar="OUT", help="write the roads as an SVG picture to OUT")
    rd.add_argument(
        "--json", action="store_true", help="JSON on a terminal too (piped or redirected it always is)"
    )
    rd.add_argument(
        "--profile", help="punto_banco | ez_baccarat | baccarat_27 | a profile YAML (default: the file's)"
    )
    rd.add_argument("--decks", type=int, help="1..12 (default: the file's, else 8)")


def _board_parser(sub: _Commands) -> None:
    """``board``: the live roadmap display."""
    bd = sub.add_parser("board", help="the live roadmap display of one or more tables (read-only web page)")
    bd.add_argument(
        "--config", "-c", help="board config YAML (examples/board.yaml); default: T01 on localhost"
    )
    bd.add_argument("--listen", metavar="HOST:PORT", help="override the config's listen address")
    bd.add_argument("--check", action="store_true", help="validate the config and exit (0: valid)")


def _archive_parser(sub: _Commands) -> None:
    """``archive``: the broker's events into PostgreSQL."""
    ar = sub.add_parser(
        "archive",
        help="archive every table's events from the broker into PostgreSQL",
        description="Subscribe to every table's events and write them to PostgreSQL, exactly once.",
    )
    ar.add_argument("--config", "-c", required=True, help="the archiver's config YAML (docs/archive.md)")
    ar_mode = ar.add_mutually_exclusive_group()
    ar_mode.add_argument("--migrate", action="store_true", help="apply the schema migrations, then exit")
    ar_mode.add_argument("--stats", action="store_true", help="print the archive's counters, then exit")
    ar_mode.add_argument(
        "--backfill", nargs="+", metavar="JOURNAL", help="write tables' journals into the archive, then exit"
    )
    ar.add_argument(
        "--json",
        action="store_true",
        help="--stats and --backfill print JSON on a terminal too (sentences there otherwise)",
    )


def _ctl_parser(sub: _Commands) -> None:
    """``ctl``: a supervisor command, an action each."""
    ctl = sub.add_parser(
        "ctl",
        help="send a supervisor command through the broker",
        description="Send one supervisor command to a table's controller and say what it did.",
    )
    # The options every action takes, given before the action (ctl -c sup.yaml
    # void ...) or after it (ctl void ... -c sup.yaml): on ctl itself with
    # their defaults, and on each action with none (SUPPRESS), so that one
    # given after the action wins and one given before is kept.
    common = argparse.ArgumentParser(add_help=False)
    _ctl_options(common, argparse.SUPPRESS)
    _ctl_options(ctl, None)
    actions = ctl.add_subparsers(dest="action", metavar="ACTION")
    actions.required = True
    coup_help = "the coup's number in the current shoe"
    confirm_help = (
        "apply it even where it goes beyond the card or coup (sets a dealt card aside, voids a coup,"
        " counts coups lost whole); without: the controller says what it would do"
    )
    void = actions.add_parser("void", parents=[common], help="void a coup (Article X)")
    void.add_argument("--coup", type=int, required=True, metavar="N", help=coup_help)
    void.add_argument("--reason", default="", help="recorded in the misdeal event")
    enter = actions.add_parser(
        "enter-card",
        parents=[common],
        help="enter an unread or lost card; the reply names the position it filled",
    )
    enter.add_argument("--coup", type=int, required=True, metavar="N", help=coup_help)
    enter.add_argument("--card", required=True, help="card code, e.g. TD (ten of diamonds), 7H")
    enter.add_argument("--confirm", action="store_true", help=confirm_help)
    accept = actions.add_parser(
        "accept",
        parents=[common],
        help="accept a coup's gap, wrong hand or device fault (or, numbering lost: the next coup's number)",
    )
    accept.add_argument("--coup", type=int, required=True, metavar="N", help=coup_help)
    accept.add_argument("--confirm", action="store_true", help=confirm_help)
    correct = actions.add_parser(
        "correct",
        parents=[common],
        help="correct a settled coup's cards (coup.corrected); without --confirm, says what it would do",
    )
    correct.add_argument("--coup", type=int, required=True, metavar="N", help=coup_help)
    correct.add_argument(
        "--card",
        action="append",
        required=True,
        metavar="POS=CARD",
        help="a corrected card by position (P1 B1 P2 B2 P3 B3), e.g. P1=9H; 1 to 6, each position once",
    )
    correct.add_argument("--reason", required=True, help="why (one line), recorded in coup.corrected")
    correct.add_argument(
        "--confirm", action="store_true", help="apply it (without: the controller says what it would do)"
    )
    actions.add_parser("new-shoe", parents=[common], help="a fresh shoe is loaded")
    actions.add_parser("end-shoe", parents=[common], help="end the shoe in play")


def _report_parser(sub: _Commands) -> None:
    """``report``: floor reports over the archive."""
    rpt = sub.add_parser(
        "report",
        help="floor reports over the PostgreSQL archive",
        description="Per table and per shift or day: coups, pace, results against the exact odds "
        "(chi-square), void rate, dealing errors, supervisor interventions, hold per bet.",
    )
    db = rpt.add_mutually_exclusive_group()
    db.add_argument("--dsn", help="PostgreSQL connection string (libpq), e.g. 'host=db1 dbname=floor'")
    db.add_argument("-c", "--config", help="the archiver's config file (its database DSN is used)")
    rpt.add_argument(
        "--from", dest="since", metavar="DATE", help="first local date YYYY-MM-DD (default: --to)"
    )
    rpt.add_argument("--to", metavar="DATE", help="last local date, inclusive (default: today)")
    rpt.add_argument("--tz", default="UTC", help="IANA time zone of the dates and shifts (default UTC)")
    rpt.add_argument(
        "--shifts",
        default="00:00",
        metavar="HH:MM,...",
        help="period boundaries, e.g. 06:00,14:00,22:00; one boundary: gaming days starting there "
        "(default 00:00, calendar days)",
    )
    rpt.add_argument("--table", help="one table (default: every table)")
    rpt.add_argument("--alpha", type=float, default=0.001, help="flag a test when p < ALPHA (default 0.001)")
    rpt.add_argument(
        "--idle-minutes",
        type=float,
        default=5.0,
        help="a gap between coups longer than this is not dealing time (default 5)",
    )
    rpt.add_argument(
        "--gaps",
        action="store_true",
        help="also count holes in each table's event seq: events the archive is missing (reads every event)",
    )
    rpt.add_argument(
        "--replays",
        action="store_true",
        help="report the replayed shoes (replay --out mqtt, archived apart) instead of the live ones",
    )
    fmt = rpt.add_mutually_exclusive_group()
    fmt.add_argument("--csv", action="store_true", help="one CSV row per table and period")
    fmt.add_argument("--json", action="store_true", help="the whole report as one JSON object")


def _integrity_parsers(sub: _Commands) -> None:
    """``keygen`` and ``verify`` (signed, chained events)."""
    kg = sub.add_parser(
        "keygen",
        help="make the table's signing key (mode 0600), or --rotate it",
        description=(
            "Make the Ed25519 key a table signs its events with (docs/events.md: Signed and chained events)."
        ),
    )
    kg.add_argument("-c", "--config", help="the table's config (the key goes to its signing_key path)")
    kg.add_argument("--key", metavar="PATH", help="the key file (instead of -c)")
    kg.add_argument(
        "--rotate", action="store_true", help="a new key, endorsed by the old one (kept as PATH.<key id>)"
    )
    kg.add_argument("--public", action="store_true", help="print the existing key's id and public key only")
    vf = sub.add_parser(
        "verify",
        help="check the signatures and the chain of a journal, the archive or a shoe report's events",
        description="Name the first broken link or bad signature (exit 1), or say what was verified.",
    )
    src = vf.add_mutually_exclusive_group(required=True)
    src.add_argument("--journal", metavar="PATH", help="a table's journal")
    src.add_argument("-c", "--config", help="a table's config (its journal) or an archiver's (its dsn)")
    src.add_argument("--dsn", help="the archive's PostgreSQL DSN")
    src.add_argument("--events", metavar="FILE", help="a shoe report's events (history report --events)")
    vf.add_argument("--table", help="the archive: the table to verify (required with --dsn or an archive -c)")
    vf.add_argument("--from", dest="day_from", metavar="DAY", help="the archive: first day (UTC), 2026-11-20")
    vf.add_argument("--to", dest="day_to", metavar="DAY", help="the archive: last day (UTC), included")
    vf.add_argument(
        "--key",
        action="append",
        metavar="PUBLIC_KEY",
        help="trust only these public keys (base64url), not the ones the source lists; give it as"
        " --key=KEY (a base64url key may begin with '-')",
    )


def _history_parser(sub: _Commands) -> None:
    hs = sub.add_parser(
        "history",
        help="surveillance review of a journal (read-only, safe while the daemon runs)",
        description="Review a table's journal: its shoes, coups, one coup's timeline, dealing errors,"
        " a shoe report. Read-only; safe while the daemon runs.",
    )
    src = argparse.ArgumentParser(add_help=False)
    src.add_argument("-c", "--config", help="the daemon's config: its journal is read")
    src.add_argument(
        "--journal", metavar="PATH", help="the journal file (default: the config's, else ./var/)"
    )
    fmt = src.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true", help="one JSON document")
    fmt.add_argument("--csv", action="store_true", help="CSV with a header row")
    limit = argparse.ArgumentParser(add_help=False)
    limit.add_argument("--limit", type=int, metavar="N", help="at most N rows (default 200, at most 10000)")
    when = argparse.ArgumentParser(add_help=False)
    when.add_argument(
        "--since", metavar="T", help="from T: 2026-11-23T04:30:00Z, '2026-11-23 04:30' (UTC), 2h"
    )
    when.add_argument("--until", metavar="T", help="before T (same forms)")
    actions = hs.add_subparsers(dest="action", metavar="ACTION")
    actions.required = True
    actions.add_parser("shoes", parents=[src, limit], help="the shoes in the journal")
    cp = actions.add_parser("coups", parents=[src, limit, when], help="coups of a shoe or of a time range")
    cp.add_argument("--shoe", metavar="ID", help="this shoe's coups (or give --since/--until)")
    one = actions.add_parser("coup", parents=[src], help="one coup's whole timeline")
    one.add_argument("shoe", metavar="SHOE", help="the shoe's id (history shoes lists them)")
    one.add_argument("coup", metavar="N", help="the coup's number in that shoe")
    er = actions.add_parser("errors", parents=[src, limit, when], help="every coup with a dealing error")
    er.add_argument("code", metavar="CODE", help="a dealing-error code, e.g. UNREAD_CARD")
    er.add_argument("--shoe", metavar="ID", help="only this shoe's coups")
    rp = actions.add_parser("report", parents=[src], help="the printable report of an ended shoe")
    rp.add_argument("shoe", metavar="SHOE", help="the ended shoe's id (history shoes lists them)")
    rp.add_argument("--html", metavar="OUT", help="write the report page here")
    rp.add_argument("--pdf", metavar="OUT", help="print it to PDF with headless Chromium")
    rp.add_argument("--chromium", metavar="PATH", help="the Chromium binary (default: found on PATH)")
    rp.add_argument(
        "--events",
        metavar="OUT",
        help="write the shoe's signed events, shoe.started to shoe.ended (JSON lines), for verify --events",
    )


#: Arguments that name a file (or a program): any name the file system
#: takes, non-UTF-8 bytes included. Every other string argument is text
#: (a reason, a table, a shoe id, a time, a DSN) and must be one line of
#: it (``textsafe.ONE_LINE_RULE``): argparse gives a non-UTF-8 argument as
#: lone surrogates (surrogateescape), which no output or event can carry.
PATH_ARGS = frozenset(
    {
        "config",
        "journal",
        "files",
        "file",
        "output",
        "svg",
        "html",
        "pdf",
        "chromium",
        "backfill",
        "log",
        "key",
        "events",
    }
)


def _arg_names(
    parser: argparse.ArgumentParser, args: argparse.Namespace, out: dict[str, str]
) -> dict[str, str]:
    """Each argument's dest and how a person types it (``--reason``, ``SHOE``),
    over the parser and the sub-commands ``args`` chose."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            sub = action.choices.get(getattr(args, action.dest, None) or "")
            if sub is not None:
                _arg_names(sub, args, out)
        elif action.option_strings:
            out.setdefault(action.dest, max(action.option_strings, key=len))
        else:
            out.setdefault(action.dest, str(action.metavar or action.dest))
    return out


def text_args_problem(parser: argparse.ArgumentParser, args: argparse.Namespace) -> str | None:
    """The first text argument (not a path) that is not one line of UTF-8
    text, said in one line; None if every one is."""
    names: dict[str, str] | None = None
    for dest, value in vars(args).items():
        if dest in PATH_ARGS:
            continue
        for item in value if isinstance(value, list) else [value]:
            if not isinstance(item, str):
                continue
            problem = one_line_problem(item)
            if problem is None:
                continue
            names = names if names is not None else _arg_names(parser, args, {})
            return f"{names.get(dest, dest)} must be {ONE_LINE_RULE}; {problem}"
    return None


def main(argv: Sequence[str] | None = None) -> int:
    parser = _build_parser()
    args = parser.parse_args(argv)
    problem = text_args_problem(parser, args)
    if problem is not None:
        # before anything is read, sent or published
        print(f"shoe-controller {args.command}: {problem}", file=sys.stderr)
        return 2
    module_name = args.command.replace("-", "_")
    try:
        module = importlib.import_module(f"controller.commands.{module_name}")
    except ModuleNotFoundError as exc:
        if exc.name == f"controller.commands.{module_name}":
            print(f"shoe-controller: '{args.command}' is not available in this build", file=sys.stderr)
            return 2
        raise
    try:
        return int(module.run(args))
    except ExpectedError as exc:
        print(f"shoe-controller {args.command}: {visible(exc)}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
