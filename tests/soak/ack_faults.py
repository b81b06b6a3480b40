"""``python -m tests.soak.ack_faults``: the long form of the issue-28 fault
runs (tests/test_archive_ack_faults.py is the short one): N real table
daemons, a Mosquitto that persists only at its autosave, one archiver and
PostgreSQL (a database of its own, dropped after), and for each fault a
fresh floor: deal, inject the fault, deal on, stop the shoes, then wait for
the archive to hold every journal, with no ``--backfill``. Prints the fault
table (fault, journalled, archived, missing, duplicates, recovered without
backfill) as Markdown, and one JSON line per fault. ``--no-ack`` runs the
tables with ``archive_ack: false`` (the behaviour before end-to-end
acknowledgement: a PUBACK is delivery) for comparison. Exit status 0 when every fault ended
with 0 missing and 0 duplicates, 1 otherwise.

    .venv/bin/python -m tests.soak.ack_faults --tables 6 --events 3000 --down 15
"""

from __future__ import annotations

import argparse
import getpass
import shutil
import sys
import tempfile
from pathlib import Path

from tests.conftest import Broker, free_port
from tests.support import postgres
from tests.support.floor_faults import BROKER_CONFIG, FAULTS, Floor, Row, print_table, run_fault, summary

MOSQUITTO = ("/usr/sbin/mosquitto", "/usr/local/sbin/mosquitto")


def start_broker(directory: Path) -> Broker:
    binary = next((p for p in MOSQUITTO if Path(p).exists()), None) or shutil.which("mosquitto")
    if binary is None:
        raise SystemExit("mosquitto is not installed (make deps-system installs it)")
    port = free_port()
    config = directory / "mosquitto.conf"
    config.write_text(
        BROKER_CONFIG.replace("@PORT@", str(port))
        + f"persistence true\npersistence_location {directory}/\nlog_dest file {directory}/mosquitto.log\n"
        + f"user {getpass.getuser()}\n"
    )
    broker = Broker(binary=binary, directory=directory, port=port, config=config)
    broker.start()
    return broker


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tests.soak.ack_faults", description=__doc__.split("\n\n")[0])
    p.add_argument("--tables", type=int, default=6)
    p.add_argument("--events", type=int, default=3000, help="events dealt per phase")
    p.add_argument("--down", type=float, default=15.0, help="seconds the broker stays down")
    p.add_argument("--settle", type=float, default=600.0, help="seconds allowed for the archive to catch up")
    p.add_argument("--reoffer-after", type=float, default=5.0)
    p.add_argument("--cards-per-second", type=int, default=30)
    p.add_argument("--no-ack", action="store_true", help="archive_ack: false")
    p.add_argument("--faults", default=",".join(str(i) for i in range(len(FAULTS))), help="indexes, e.g. 0,1")
    args = p.parse_args(argv)
    if (problem := postgres.unavailable()) is not None:
        print(problem, file=sys.stderr)
        return 2
    names = list(FAULTS)
    rows: list[Row] = []
    for index in (int(i) for i in args.faults.split(",")):
        fault = names[index]
        with tempfile.TemporaryDirectory(prefix="ack-faults-") as tmp, postgres.temporary_database() as dsn:
            root = Path(tmp)
            (root / "broker").mkdir()
            broker = start_broker(root / "broker")
            tables = tuple(f"T{i:02d}" for i in range(1, args.tables + 1))
            floor = Floor(
                root, broker, dsn, tables=tables, archive_ack=not args.no_ack,
                reoffer_after_s=args.reoffer_after, cards_per_second=args.cards_per_second,
            )  # fmt: skip
            try:
                floor.start()
                row = run_fault(floor, fault, events=args.events, down_s=args.down, settle_s=args.settle)
            finally:
                floor.close()
                broker.kill()
            rows.append(row)
            print(summary(row, floor), flush=True)
    print(print_table(rows))
    return 0 if all(r.missing == 0 and r.duplicates == 0 for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
