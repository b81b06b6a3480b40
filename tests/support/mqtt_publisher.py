"""Runs one MqttOutput in a process of its own, for tests that must kill
the publisher (the Last Will only fires when the connection dies unclean).

Usage: python mqtt_publisher.py JOURNAL TABLE MQTT_CONFIG_JSON
Prints "connected" once the broker has accepted it; SIGTERM stops it cleanly.
Valid commands are answered ok and echoed on stdout as JSON.
"""

from __future__ import annotations

import json
import signal
import sys
import threading
import time

from controller.commands_schema import Received, command_dict
from controller.config import MqttConfig
from controller.journal import Journal
from controller.outputs.mqtt import MqttOutput


def main() -> int:
    journal_path, table, cfg_json = sys.argv[1:4]
    cfg = MqttConfig.model_validate(json.loads(cfg_json))
    journal = Journal(journal_path)
    stop = threading.Event()

    def on_command(received: Received) -> None:
        print(json.dumps(command_dict(received.cmd)), flush=True)
        output.reply({"id": received.cmd.id, "ok": True, "error": None})

    output = MqttOutput(cfg, table, journal, on_command=on_command, poll_interval=0.1)
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    output.start()
    while not output.connected:
        time.sleep(0.02)
    print("connected", flush=True)
    stop.wait()
    output.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
