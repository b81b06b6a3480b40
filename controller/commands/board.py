"""``shoe-controller board [--config board.yaml]``: the live roadmap display
(controller/board). Without ``--config``: table T01 from the broker on
127.0.0.1:1883, served on 127.0.0.1:8080."""

from __future__ import annotations

import argparse
import logging
import os
from typing import TYPE_CHECKING

from controller.errors import RuntimeFailure, UsageError
from controller.textsafe import visible

if TYPE_CHECKING:
    from controller.board.config import BoardConfig

DEFAULT_CONFIG = "mqtt: {host: 127.0.0.1, port: 1883}\ntables: [{table: T01}]\n"


def missing_journals(cfg: BoardConfig, source: str) -> list[str]:
    """A line for each table whose ``journal`` names no file."""
    out = []
    for i, t in enumerate(cfg.tables):
        if t.journal is not None and not os.path.lexists(t.journal):
            out.append(
                f"{source}: tables.{i}.journal: {t.journal}: no journal there (the table's daemon writes"
                f" it; an installed table keeps it at /var/lib/shoe-controller/{t.table}/journal.sqlite3)"
            )
    return out


def run(args: argparse.Namespace) -> int:
    from controller import logs
    from controller.board.config import load_board_config, parse_board_config
    from controller.config import parse_host_port

    cfg = load_board_config(args.config) if args.config else parse_board_config(DEFAULT_CONFIG, "<default>")
    if args.listen:
        try:
            parse_host_port(args.listen)
        except ValueError:
            raise UsageError(
                f"--listen: must be host:port (e.g. 127.0.0.1:8080), not {args.listen!r}"
            ) from None
        cfg = cfg.model_copy(update={"listen": args.listen})
    missing = missing_journals(cfg, args.config or "<default>")
    if args.check:
        if missing:
            # a path that names no journal is a mistake to catch now, not a
            # history page answering 503 later
            raise UsageError(missing[0])
        tables = ", ".join(t.table for t in cfg.tables)
        where = f"tables {tables}; listen {cfg.listen}; broker {cfg.mqtt.host}"
        print(visible(f"{args.config or '<default>'}: ok ({where})"))
        return 0
    logs.setup()

    from controller.board.app import bind, serve

    try:
        sock = bind(cfg.address)
    except OSError as exc:
        raise RuntimeFailure(f"cannot listen on {cfg.listen}: {exc.strerror or exc}") from None
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    tables = ", ".join(t.table for t in cfg.tables)

    def announce() -> None:
        # through the log: JSON under systemd, a readable line on a terminal
        log = logging.getLogger("controller.board")
        log.info("board: tables %s on http://%s:%s/", visible(tables), shown, port)
        for line in missing:
            # the daemon may not have written it yet: served, and said
            log.warning("board: %s; its history pages answer 503 until it is there", visible(line))
        if host in ("0.0.0.0", "::") and cfg.allowed_hosts is None:
            log.warning(
                "board: listening on every address but answering only localhost, 127.0.0.1 and [::1]:"
                " list the names other screens use in allowed_hosts"
            )

    serve(cfg, sock, announce=announce)
    return 0
