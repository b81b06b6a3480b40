"""A deliberately straightforward live pipeline: the daemon's I/O and nothing
else, the floor under ``bench_latency``'s card-to-subscriber figure measured
in one piece (the pty, the disk and the broker one after another, as a card
meets them), not as a sum of each alone.

For every frame read from the serial port (pyserial, as the daemon's driver
reads it) it writes one commit's worth of bytes (``FLUSH_BYTES``, what a
card's durable commit writes to the journal's WAL) into a file and
``fdatasync``s it; then, for a card, it publishes a small JSON event at QoS 1
on the card topic with paho's network thread, as the daemon does. No decoder,
no engine, no SQLite, no ordering of other events: whatever the daemon's
p99 adds to this one's is the daemon's own.

    python -m benchmarks.pipeline_floor PORT TTY DIRECTORY TOPIC

Runs until SIGTERM, then writes how many frames it flushed into
``DIRECTORY/pipeline.flushed``. Not part of the product.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
from pathlib import Path

import paho.mqtt.client as mqtt
import serial
from paho.mqtt.enums import CallbackAPIVersion

from benchmarks.bench_latency import FLUSH_BYTES, FLUSH_FILE_BYTES


def main(argv: list[str]) -> int:
    port, tty, directory, topic = int(argv[0]), argv[1], Path(argv[2]), argv[3]
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    fd = os.open(directory / "pipeline-wal.bin", os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
    os.write(fd, bytes(FLUSH_FILE_BYTES))
    os.fsync(fd)
    block = os.urandom(FLUSH_BYTES)
    offset = 0
    client = mqtt.Client(callback_api_version=CallbackAPIVersion.VERSION2, client_id="pipeline-floor")
    connected = threading.Event()
    client.on_connect = lambda *a: connected.set()
    client.connect("127.0.0.1", port)
    client.loop_start()
    if not connected.wait(10):
        return 1
    port_ = serial.Serial(tty, 115200, timeout=0.2)
    buf = b""
    seq = flushed = 0
    try:
        while not stop.is_set():
            data = port_.read(port_.in_waiting or 1)
            if not data:
                continue
            buf += data
            *lines, buf = buf.split(b"\r\n")
            for line in lines:
                os.pwrite(fd, block, offset)
                os.fdatasync(fd)
                offset = (offset + FLUSH_BYTES) % (FLUSH_FILE_BYTES - FLUSH_BYTES)
                flushed += 1
                if b",CARD," in line:
                    seq += 1
                    card = line.split(b",CARD,")[1][:2].decode()
                    client.publish(topic, json.dumps({"seq": seq, "type": "card", "card": card}), qos=1)
    finally:
        port_.close()
        client.loop_stop()
        client.disconnect()
        os.close(fd)
        # for the benchmark to check that every frame was flushed
        (directory / "pipeline.flushed").write_text(str(flushed))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
