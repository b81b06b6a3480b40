"""``python -m tests.soak --coups 10000``: the long soak and fault campaign
(``make soak``).

Starts its own Mosquitto (free loopback port, own config and persistence in
a temporary directory), runs :func:`tests.soak.campaign.run_campaign` and
prints the summary table. Exit status 0 when every check passed, 1 when
the campaign found a problem, 2 when it could not run.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

from tests.soak.campaign import (
    DEFAULT_FAULTS,
    CampaignError,
    Run,
    Settings,
    analyse,
    load_run,
    run_campaign,
    start_broker,
)


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m tests.soak", description=__doc__.split("\n\n")[0])
    p.add_argument("--coups", type=int, default=10_000, help="at least this many coups (whole shoes)")
    p.add_argument("--seed", type=int, default=2026)
    p.add_argument("--protocol", default="shoe-ascii/1")
    p.add_argument("--cards-per-second", type=float, default=500.0)
    p.add_argument("--faults", default=DEFAULT_FAULTS)
    p.add_argument("--broker-restarts", type=int, default=6)
    p.add_argument("--daemon-kills", type=int, default=5)
    p.add_argument(
        "--deadline",
        type=float,
        default=0.5,
        help="rules.correction_deadline_s (default 0.5 s: at 500 cards/s a hold then spans some 250 "
        "cards, about what 120 s spans at a live table; longer holds run across shoe ends)",
    )
    p.add_argument("--no-odds", action="store_true", help="turn the daemon's live odds off")
    p.add_argument("--workdir", type=Path, help="keep everything here (default: a temporary directory)")
    p.add_argument("--timeout", type=float, default=4 * 3600.0, help="give up after this many seconds")
    p.add_argument(
        "--analyse", type=Path, metavar="DIR", help="only analyse again the campaign kept in DIR (or DIR/run)"
    )
    return p.parse_args(argv)


def report(run: Run, directory: Path) -> bool:
    """Print the summary, keep the per-coup verdicts; True if it passed."""
    result = analyse(run)
    result.write_verdicts(directory / "verdicts.jsonl")
    print(result.summary(), flush=True)
    return not result.problems()


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    if args.analyse is not None:
        kept = args.analyse if (args.analyse / "run.json").exists() else args.analyse / "run"
        return 0 if report(load_run(kept), kept) else 1
    settings = Settings(
        coups=args.coups,
        seed=args.seed,
        protocol=args.protocol,
        faults=args.faults,
        cards_per_second=args.cards_per_second,
        broker_restarts=args.broker_restarts,
        daemon_kills=args.daemon_kills,
        correction_deadline_s=args.deadline,
        odds=not args.no_odds,
        broker_down_s=(1.0, 3.0),
        daemon_down_s=(0.2, 2.0),
        rss_interval_s=1.0,
        timeout_s=args.timeout,
    )
    keep = args.workdir is not None
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="shoe-soak-"))
    workdir.mkdir(parents=True, exist_ok=True)

    def say(line: str) -> None:
        print(f"[{time.strftime('%H:%M:%S')}] {line}", file=sys.stderr, flush=True)

    say(f"soak campaign in {workdir}")
    broker = start_broker(workdir / "mosquitto")
    try:
        run = run_campaign(settings, workdir / "run", broker, say=say)
    except CampaignError as exc:
        say(f"the campaign could not run: {exc}")
        say(f"files kept in {workdir}")
        return 2
    finally:
        broker.kill()
    say("analysing")
    failed = not report(run, workdir / "run")
    if keep or failed:
        say(f"files kept in {workdir}")
    else:
        shutil.rmtree(workdir, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
