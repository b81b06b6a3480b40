"""Device reads during a command flood.

The daemon runs in this process (``controller.daemon.Daemon``) with the
fake shoe dealing ``CARDS_PER_S`` cards per second through a wrapper
driver that notes ``time.monotonic()`` each time a read returns device
data, a journal with an fsync per commit, and MQTT to a throwaway
mosquitto; the controller has a command key. Once cards flow, one client
publishes ``FLOOD`` unsigned commands (QoS 0) as fast as it can (about a
quarter of a second here): each is refused by the origin check.

Reported: the longest gap between two device reads from the start of the
flood until ``SETTLE_S`` after it, the same figure over a quiet stretch of
the same length before the flood (the floor: the fake's own pacing), and
how many command inputs and COMMAND_REJECTED alerts the flood left in
the journal, and how many messages the rate limit let through. Needs the
``mosquitto`` binary (``make deps-system``).
"""

from __future__ import annotations

import itertools
import json
import os
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import paho.mqtt.client as mqtt
import yaml
from paho.mqtt.enums import CallbackAPIVersion

from benchmarks.bench_latency import broker
from controller.config import load_config
from controller.daemon import Daemon
from controller.journal import Journal
from drivers.base import LinkEvent
from drivers.fake import FakeDriver, FakeShoe

FLOOD = 2000
CARDS_PER_S = 40.0
SETTLE_S = 12.0  # past the 10 s alert window, so its one summary alert is counted
QUIET_S = 3.0


class TimedDriver:
    """The fake driver, noting when each read returned device bytes."""

    def __init__(self, inner: FakeDriver) -> None:
        self.inner = inner
        self.reads: list[float] = []

    def open(self) -> None:
        self.inner.open()

    def read(self, timeout: float) -> Any:
        item = self.inner.read(timeout)
        if item is not None and not isinstance(item, LinkEvent):
            self.reads.append(time.monotonic())
        return item

    def write(self, data: bytes) -> None:
        self.inner.write(data)

    def close(self) -> None:
        self.inner.close()


def _max_gap(reads: list[float], start: float, end: float) -> float:
    """The longest gap between reads over [start, end], counting the last
    read before ``start`` and the first one after ``end``."""
    before = [t for t in reads if t < start][-1:]
    after = [t for t in reads if t > end][:1]
    inside = before + [t for t in reads if start <= t <= end] + after
    return max((b - a for a, b in itertools.pairwise(inside)), default=float("nan"))


def measure(directory: Path, port: int) -> dict[str, float]:
    key = directory / "command.key"
    key.write_bytes(b"bench-key\n")
    key.chmod(0o600)
    cfg_path = directory / "c.yaml"
    cfg_path.write_text(
        yaml.safe_dump(
            {
                "table": "T01",
                "device": {"driver": "fake", "cards_per_second": CARDS_PER_S},
                "journal": str(directory / "j.sqlite3"),
                "outputs": {
                    "stdout": False,
                    "mqtt": {"host": "127.0.0.1", "port": port, "command_key_file": str(key)},
                },
            }
        )
    )
    driver = TimedDriver(FakeDriver(FakeShoe(seed=5, t0=time.time()), CARDS_PER_S))
    daemon = Daemon(load_config(cfg_path), driver=driver)
    runner = threading.Thread(target=daemon.run)
    runner.start()
    flooder = mqtt.Client(callback_api_version=CallbackAPIVersion.VERSION2, client_id="flooder")
    try:
        deadline = time.monotonic() + 30
        while not (daemon.mqtt is not None and daemon.mqtt.ready and len(driver.reads) > 50):
            if time.monotonic() > deadline:
                raise RuntimeError("the daemon did not come up")
            time.sleep(0.05)
        quiet_start = time.monotonic()
        time.sleep(QUIET_S)
        flooder.max_inflight_messages_set(0)  # no client-side pacing: a flood
        flooder.connect("127.0.0.1", port)
        flooder.loop_start()
        with Journal(directory / "j.sqlite3") as j:
            first_input = j.last_input_id()
            first_seq = j.last_seq()
        flood_start = time.monotonic()
        sent = []
        for i in range(FLOOD):
            cmd = {"id": f"f{i}", "cmd": "void", "coup": 1, "reason": "flood", "ts": time.time()}
            sent.append(flooder.publish("baccarat/T01/cmd", json.dumps(cmd), qos=1))
        for info in sent:
            info.wait_for_publish(30)
        flood_sent = time.monotonic()
        time.sleep(SETTLE_S)
        flood_end = time.monotonic()
        # until reads resume (a flood may hold them past the settling time)
        while driver.reads[-1] < flood_end and time.monotonic() < flood_end + 60:
            time.sleep(0.05)
    finally:
        flooder.disconnect()
        flooder.loop_stop()
        daemon.request_stop()
        runner.join(60)
    with Journal(directory / "j.sqlite3") as j:
        cmd_inputs = sum(1 for r in j.inputs_since(first_input) if r.kind == "cmd")
        alerts = sum(
            1
            for p in j.events_since(first_seq)
            if p.type == "security.alert" and json.loads(p.json)["code"] == "COMMAND_REJECTED"
        )
    return {
        "quiet_gap": _max_gap(driver.reads, quiet_start, quiet_start + QUIET_S),
        "flood_gap": _max_gap(driver.reads, flood_start, flood_end),
        "send_s": flood_sent - flood_start,
        "cmd_inputs": cmd_inputs,
        "alerts": alerts,
        # (a build without the bounds has neither: all read, none dropped)
        "admitted": getattr(daemon._commands, "admitted", FLOOD),
        "dropped": getattr(daemon._commands, "dropped_rate", 0)
        + getattr(daemon._commands, "dropped_full", 0),
    }


def run() -> list[dict[str, Any]]:
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        with broker(directory) as port:
            r = measure(directory, port)
    limits = f"{r['admitted']} read, {r['dropped']} dropped over the rate or queue bound"
    note = f"{FLOOD} unsigned commands published in {r['send_s']:.2f} s, fake at {CARDS_PER_S:g} cards/s"
    return [
        {
            "name": "device read gap during a command flood (max)",
            "value": r["flood_gap"] * 1000,
            "unit": "ms",
            "note": note,
        },
        {
            "name": "device read gap, same daemon, no flood (max)",
            "value": r["quiet_gap"] * 1000,
            "unit": "ms",
            "note": "the floor: the fake's pacing",
        },
        {
            "name": "command inputs journalled from the flood",
            "value": r["cmd_inputs"],
            "unit": "inputs",
            "note": limits,
        },
        {"name": "COMMAND_REJECTED alerts from the flood", "value": r["alerts"], "unit": "events"},
    ]


if __name__ == "__main__":
    for row in run():
        print(f"{row['name']}: {row['value']:.1f} {row['unit']}  {row.get('note', '')}")
    os._exit(0)
