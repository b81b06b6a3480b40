"""``shoe-controller record -c config.yaml -o FILE [--duration S]``: capture
a device's bytes to a ``.shoelog`` (docs/devices.md, Captures), chunk-exact.

Opens the config's device through its driver and writes every read as one
``hex:`` record with its read time; link drops and returns are kept as
comments. The header carries ``protocol`` and ``table`` (and the decks,
built-in profile and rule overrides of the config) so a replay needs no
options. Stops on SIGINT/SIGTERM or after ``--duration`` seconds, exit 0.

Nothing is decoded here: a capture must hold what the wire carried, even
bytes no decoder would accept.
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from types import FrameType
from typing import IO, Any

from controller.config import BUILTIN_PROFILES, Config, FakeDevice, SerialDevice, UsbDevice, load_config
from controller.errors import ConfigError, RuntimeFailure, UsageError
from controller.shoelog import ShoelogWriter
from controller.textsafe import visible
from drivers.base import Driver, LinkEvent

#: A protocol's usual line speed when the config gives none.
DEFAULT_BAUD = {"angel-eye/2": 4800}
#: How many bytes ``protocol: auto`` may hold back while detecting.
DETECT_LIMIT = 4096


class _Stop(Exception):
    """SIGINT or SIGTERM: finish the capture, exit 0."""


def _raise_stop(signum: int, frame: FrameType | None) -> None:
    raise _Stop(signal.Signals(signum).name)


def open_driver(config: Config) -> Driver:
    """The driver for the config's device (not yet opened)."""
    device = config.device
    if isinstance(device, SerialDevice):
        from drivers.serial import SerialDriver

        baud = device.baudrate or DEFAULT_BAUD.get(device.protocol, 9600)
        return SerialDriver(device.port, baud)
    if isinstance(device, FakeDevice):
        from drivers.fake import FakeDriver, FakeShoe

        protocol = "shoe-ascii/1" if device.protocol == "auto" else device.protocol
        fake = FakeShoe(
            seed=device.seed,
            protocol=protocol,
            decks=config.decks,
            faults=device.faults,
            cards_per_second=device.cards_per_second,
            record=False,  # dealt for as long as it runs; nobody reads the record
        )
        return FakeDriver(fake)
    if isinstance(device, UsbDevice):
        try:
            from drivers.usb import UsbDriver  # type: ignore[import-not-found,unused-ignore]
        except ImportError:
            raise ConfigError("device.driver: the usb driver is not available in this build") from None
        driver: Driver = UsbDriver(device.vendor_id, device.product_id, device.serial_number)
        return driver
    raise ConfigError(
        f"device.driver: record captures a live device (serial, usb or fake), not {device.driver!r}"
    )


def capture_meta(config: Config, protocol: str | None) -> dict[str, Any]:
    """The ``# key=value`` header of the capture."""
    meta: dict[str, Any] = {}
    if protocol is not None:
        meta["protocol"] = protocol
    meta["table"] = config.table
    if config.profile in BUILTIN_PROFILES:
        meta["profile"] = config.profile  # a path may hold spaces; leave it to the replay's options
    meta["decks"] = config.decks
    for key, value in config.rules.overrides().items():
        meta[key] = value
    return meta


def _device_protocol(config: Config) -> str | None:
    protocol = getattr(config.device, "protocol", None)
    if isinstance(config.device, FakeDevice) and protocol == "auto":
        return "shoe-ascii/1"
    return None if protocol in (None, "auto") else str(protocol)


def _detect(data: bytes) -> str | None:
    try:
        from firmware_protocols.detect import detect  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        return None
    found = detect(data)
    return None if found is None else str(found)


class _Capture:
    """Writes reads as they come; with ``protocol: auto`` it holds the first
    reads back until the protocol is recognised (or enough bytes passed)."""

    def __init__(self, out: IO[str], config: Config) -> None:
        self.out = out
        self.config = config
        self.protocol = _device_protocol(config)
        self.auto = self.protocol is None
        self.writer: ShoelogWriter | None = (
            None if self.auto else ShoelogWriter(out, capture_meta(config, self.protocol))
        )
        self.held: list[tuple[float, bytes] | LinkEvent] = []
        self.held_bytes = b""
        self.chunks = 0
        self.bytes = 0

    def chunk(self, t: float, data: bytes) -> None:
        self.chunks += 1
        self.bytes += len(data)
        if self.writer is None:
            self.held.append((t, data))
            self.held_bytes += data
            protocol = _detect(self.held_bytes)
            if protocol is not None or len(self.held_bytes) >= DETECT_LIMIT:
                self._release(protocol)
            return
        self.writer.write(t, "<", data)

    def link(self, event: LinkEvent) -> None:
        if self.writer is None:
            self.held.append(event)
            return
        state = "up" if event.up else "down"
        # "=" would make a comment read as metadata.
        self.writer.comment(f"link {state} at {event.t:.3f}: {event.detail}".replace("=", ":"))

    def _release(self, protocol: str | None) -> None:
        self.writer = ShoelogWriter(self.out, capture_meta(self.config, protocol))
        held, self.held = self.held, []
        for item in held:
            if isinstance(item, LinkEvent):
                self.link(item)
            else:
                self.writer.write(item[0], "<", item[1])

    def finish(self) -> None:
        if self.writer is None:
            self._release(None)


def run(args: argparse.Namespace) -> int:
    if args.duration < 0:
        raise UsageError("--duration must be >= 0 (0 = until SIGINT)")
    config = load_config(args.config)
    driver = open_driver(config)
    # A device that cannot be opened at the start is a mistake to fix (a
    # wrong path, no permission), not a link to wait for: say so and stop,
    # before any file is written. A link lost later is waited for and kept
    # in the capture as a comment.
    try:
        driver.open()
    except RuntimeError as exc:  # e.g. no USB backend: waiting would not help
        raise RuntimeFailure(str(exc)) from None
    first = driver.read(0)
    if isinstance(first, LinkEvent) and not first.up:
        driver.close()
        raise RuntimeFailure(f"{first.detail}; nothing recorded")
    try:
        out = open(args.output, "w", encoding="utf-8")  # noqa: SIM115 - closed below
    except OSError as exc:
        driver.close()
        raise RuntimeFailure(f"cannot write {args.output}: {exc.strerror or exc}") from None

    previous = {signum: signal.signal(signum, _raise_stop) for signum in (signal.SIGTERM, signal.SIGINT)}
    capture = _Capture(out, config)
    deadline = time.monotonic() + args.duration if args.duration > 0 else None
    try:
        if isinstance(first, LinkEvent):
            capture.link(first)
        elif first is not None:
            capture.chunk(*first)
        while True:
            timeout = 0.5
            if deadline is not None:
                timeout = deadline - time.monotonic()
                if timeout <= 0:
                    break
                timeout = min(timeout, 0.5)
            item = driver.read(timeout)
            if item is None:
                continue
            if isinstance(item, LinkEvent):
                capture.link(item)
                print(
                    f"shoe-controller record: link {'up' if item.up else 'down'}: {visible(item.detail)}",
                    file=sys.stderr,
                )
            else:
                capture.chunk(*item)
    except (_Stop, KeyboardInterrupt):
        pass
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        driver.close()
        capture.finish()
        out.close()
    print(
        f"shoe-controller record: {capture.chunks} reads, {capture.bytes} bytes -> {visible(args.output)}",
        file=sys.stderr,
    )
    return 0
