"""Seed inputs for each harness, taken from the regression captures
(``tests/captures/*.shoelog``): their bytes as they are, and what they
carry (wire bytes, decoded frames) in the form each harness reads.

Read from the source tree at fuzz time only; nothing in the product reads
them.
"""

from __future__ import annotations

import json
from pathlib import Path

from controller.shoelog import Record, parse_lines
from firmware_protocols.detect import make_decoder, make_encoder
from firmware_protocols.frames import Frame
from fuzz import ops

ROOT = Path(__file__).resolve().parent.parent
CAPTURES = ROOT / "tests" / "captures"
PROTOCOLS = ("shoe-ascii/1", "shoe-bin/1", "angel-eye/2")


def capture_paths() -> list[Path]:
    return sorted(CAPTURES.glob("*.shoelog"))


def capture_bytes() -> list[bytes]:
    """Each capture file's bytes, as they are."""
    return [p.read_bytes() for p in capture_paths()]


def capture_reads() -> list[tuple[str, list[bytes]]]:
    """(protocol, the device reads) of each capture."""
    out = []
    for path in capture_paths():
        meta: dict[str, str] = {}
        reads: list[bytes] = []
        for rec in parse_lines(path.read_text("utf-8").splitlines(), str(path)):
            if isinstance(rec, Record):
                if rec.direction == "<":
                    reads.append(rec.data)
            else:
                meta.update(rec)
        out.append((meta.get("protocol", "shoe-ascii/1"), reads))
    return out


def capture_frames() -> list[list[Frame]]:
    """The frames each capture decodes to."""
    out = []
    for protocol, reads in capture_reads():
        decoder = make_decoder(protocol)
        frames: list[Frame] = []
        for i, data in enumerate(reads):
            frames += decoder.feed(ops.T0 + i, data)
        out.append(frames)
    return out


def bin_streams() -> list[list[bytes]]:
    """The captures' frames as ``shoe-bin/1`` reads (no capture is in that
    protocol; the frames it cannot carry are left out), one frame a read."""
    encoder = make_encoder("shoe-bin/1")
    out = []
    for frames in capture_frames():
        reads = []
        for f in frames:
            try:
                reads.append(encoder.encode(f))
            except ValueError:
                continue
        if reads:
            out.append(reads)
    return out


def bin_shoelogs() -> list[bytes]:
    """The same, as ``.shoelog`` files."""
    out = []
    for reads in bin_streams():
        lines = ["# protocol=shoe-bin/1 table=T01"]
        lines += [f"{ops.T0 + i:.3f} < hex:{data.hex()}" for i, data in enumerate(reads)]
        out.append("\n".join(lines).encode() + b"\n")
    return out


def decoder_input(stream: bytes, chunk_sizes: tuple[int, ...] = ()) -> bytes:
    """The decoder harness's input for ``stream`` read in chunks of the
    given sizes (cycled; 0 = the rest at once)."""
    plan = bytes(chunk_sizes[:7])
    return bytes([len(plan)]) + plan + stream


def decoder_seeds() -> list[bytes]:
    seeds = [decoder_input(b) for b in capture_bytes()]
    for _, reads in capture_reads():
        stream = b"".join(reads)
        seeds.append(decoder_input(stream))
        seeds.append(decoder_input(stream, (1,)))
        seeds.append(decoder_input(stream, (7, 3, 64)))
    for reads in bin_streams():
        seeds.append(decoder_input(b"".join(reads)))
        seeds.append(decoder_input(b"".join(reads), (5, 11)))
    return seeds


def shoelog_seeds() -> list[bytes]:
    return capture_bytes() + bin_shoelogs()


def command_lines() -> list[bytes]:
    """Valid supervisor commands of every kind."""
    cmds = [
        {"id": 1, "cmd": "enter_card", "coup": 1, "card": "9H"},
        {"id": "a", "cmd": "accept", "coup": 1},
        {"id": "b", "cmd": "void", "coup": 1, "reason": "dealer error"},
        {"id": 2, "cmd": "enter_card", "coup": 2, "card": "10d"},
        {"id": 3, "cmd": "accept", "coup": 2},
        {"id": 4, "cmd": "new_shoe"},
        {"id": 5, "cmd": "end_shoe"},
        {"id": "c", "cmd": "void", "coup": 3, "reason": ""},
    ]
    return [json.dumps(c).encode() for c in cmds]


def command_seeds() -> list[bytes]:
    lines = command_lines()
    seeds = [bytes([scenario]) + b"\n".join(lines[i : i + 3]) for scenario in range(9) for i in (0, 3, 5)]
    seeds += [
        bytes([0xC0 | scenario]) + b"\n".join(lines[i : i + 2]) for scenario in range(9) for i in (1, 3)
    ]
    seeds += [bytes([s]) + line for s in range(9) for line in lines]
    return seeds + capture_bytes()


def config_seeds() -> list[bytes]:
    seeds = [
        (ROOT / "examples" / "config.yaml").read_bytes(),
        b"table: T01\ndevice: {driver: fake}\n",
        b"table: T01\nprofile: ez_baccarat\ndecks: 6\ndevice:\n  driver: fake\n  seed: 3\n"
        b"  faults: 'gap:0.01,garbage:0.05'\nrules:\n  burn: fixed:3\n  demo_coups: 2\n",
        b"table: T-2\ndevice: {driver: usb, vendor_id: 0x1234, product_id: '5678'}\n"
        b"outputs: {stdout: false, mqtt: {host: localhost, port: 8883, protocol: 5}}\n"
        b"metrics: '[::1]:10108'\n",
        b"table: T01\ndevice: {driver: serial, port: /dev/ttyUSB0, baudrate: 9600, protocol: angel-eye/2}\n",
    ]
    seeds += [p.read_bytes() for p in sorted((ROOT / "controller" / "profiles").glob("*.yaml"))]
    return seeds + capture_bytes()


def engine_seeds() -> list[bytes]:
    seeds = []
    for i, frames in enumerate(capture_frames()):
        seeds.append(ops.encode_frames(frames, c0=i % 3, c1=7, c2=11))
        seeds.append(ops.encode_frames(frames, c0=(i % 3) | 0x04, c1=0x41, c2=3))
    return seeds + capture_bytes()


SEEDS = {
    "fuzz_decoders": decoder_seeds,
    "fuzz_shoelog": shoelog_seeds,
    "fuzz_commands": command_seeds,
    "fuzz_config": config_seeds,
    "fuzz_engine": engine_seeds,
}
