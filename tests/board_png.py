"""Regenerates ``docs/board.png``: the roadmap display of a whole shoe, for
the README (``make board-png``).

A real Mosquitto on a free loopback port, the board, and the daemon
replaying one whole fake shoe (EZ Baccarat, 8 decks, odds on, so the side
bets and the odds panel show) at 60 cards a second; once the shoe has
ended, headless Chromium takes the picture.

    python -m tests.board_png [--out docs/board.png] [--seed 7]
"""

from __future__ import annotations

import argparse
import getpass
import shutil
import sys
import tempfile
import time
from pathlib import Path

from controller.shoelog import ShoelogWriter
from drivers.fake import FakeShoe
from tests.conftest import Broker, free_port
from tests.support.board import Board, board_config, chromium, start_daemon, stop
from tests.support.configs import write_config


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="docs/board.png")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--width", type=int, default=1920)
    ap.add_argument("--height", type=int, default=1080)
    args = ap.parse_args(argv)
    binary = shutil.which("mosquitto") or "/usr/sbin/mosquitto"
    with tempfile.TemporaryDirectory(prefix="board-png-") as tmp:
        d = Path(tmp)
        port = free_port()
        conf = d / "mosquitto.conf"
        conf.write_text(
            f"listener {port} 127.0.0.1\nallow_anonymous true\npersistence false\n"
            f"log_dest file {d}/mosquitto.log\nuser {getpass.getuser()}\n"
        )
        broker = Broker(binary=binary, directory=d, port=port, config=conf)
        broker.start()
        capture = d / "shoe.shoelog"
        with open(capture, "w", encoding="utf-8") as fh:
            w = ShoelogWriter(fh, {"protocol": "shoe-ascii/1", "table": "T01"})
            for t, data in FakeShoe(seed=args.seed, shoes=1, decks=8, cards_per_second=60).stream():
                w.write(t, "<", data)
        cfg = write_config(
            d,
            {"driver": "replay", "file": str(capture), "realtime": True},
            profile="ez_baccarat",
            odds=True,
            outputs={"stdout": False, "mqtt": {"host": broker.host, "port": port, "client_id": "shoe-T01"}},
        )
        tables = [{"table": "T01", "title": "Baccarat 1 (EZ)"}]
        board = Board(board_config(d, broker, tables, odds=True), d / "board.log")
        daemon = None
        try:
            deadline = time.monotonic() + 30
            while not board.view()["broker"]:
                if time.monotonic() > deadline:
                    raise SystemExit("the board did not connect to the broker")
                time.sleep(0.1)
            daemon = start_daemon(cfg)
            deadline = time.monotonic() + 300
            while not board.view()["ended"]:
                if time.monotonic() > deadline or daemon.poll() is not None:
                    raise SystemExit(f"the shoe did not end:\n{(d / 'board.log').read_text()}")
                time.sleep(0.2)
            with chromium(args.width, args.height) as driver:
                driver.get(board.url + "table/T01")
                deadline = time.monotonic() + 30
                while not driver.execute_script("return document.body.dataset.version !== undefined;"):
                    if time.monotonic() > deadline:
                        raise SystemExit("the page did not draw")
                    time.sleep(0.1)
                out = Path(args.out)
                out.parent.mkdir(parents=True, exist_ok=True)
                driver.save_screenshot(str(out))
            view = board.view()
            print(f"{out}: shoe {view['shoe']}, {view['tally']['coups']} coups, tally {view['tally']}")
        finally:
            if daemon is not None:
                stop(daemon)
            board.stop()
            broker.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
