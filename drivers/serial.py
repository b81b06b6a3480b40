"""The serial transport (RS-232 and USB-CDC shoes) over pyserial.

Owns one port: opens it 8N1 at the configured baud rate (use the stable
``/dev/serial/by-id/...`` path, which survives re-enumeration), hands out
chunks exactly as read with the time taken right after the read, writes
host commands, and survives unplug/replug: any I/O error closes the port,
reports ``LinkEvent(up=False)`` and retries the open with capped
exponential backoff until the device is back (``LinkEvent(up=True)``).

Waiting is always done by the operating system (``select`` on the port,
``time.sleep`` between reopen attempts), so an idle or unplugged shoe costs
no CPU.
"""

from __future__ import annotations

import contextlib
import select
import time
from collections import deque
from collections.abc import Callable

import serial

from drivers.base import Chunk, LinkDownError, LinkEvent
from drivers.ptylink import check_pty_link

#: Largest single read; a shoe sends far less than this between two reads.
READ_SIZE = 4096


class SerialDriver:
    """A :class:`drivers.base.Driver` for a serial port.

    ``backoff_initial`` is the delay before the first reopen attempt after a
    failure; it doubles after each failed attempt up to ``backoff_max``.
    """

    def __init__(
        self,
        port: str,
        baudrate: int = 9600,
        *,
        backoff_initial: float = 0.1,
        backoff_max: float = 5.0,
        exclusive: bool = True,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if backoff_initial <= 0 or backoff_max < backoff_initial:
            raise ValueError("backoff: need 0 < backoff_initial <= backoff_max")
        self.port = port
        self.baudrate = baudrate
        self.backoff_initial = backoff_initial
        self.backoff_max = backoff_max
        self.exclusive = exclusive
        self._clock = clock
        self._serial: serial.Serial | None = None
        self._events: deque[LinkEvent] = deque()
        self._started = False
        self._closed = False
        self._backoff = backoff_initial
        self._next_attempt = 0.0  # monotonic time of the next reopen attempt
        #: Number of successful reopens after a loss (for tests and metrics).
        self.reconnects = 0

    # -- state ---------------------------------------------------------------

    @property
    def is_up(self) -> bool:
        return self._serial is not None

    def open(self) -> None:
        """Open the port. A port that cannot be opened now is not an error:
        the first :meth:`read` reports ``LinkEvent(up=False)`` and the driver
        keeps retrying."""
        self._started = True
        self._closed = False
        if self._serial is not None:
            return
        try:
            self._serial = self._open_port()
        except (serial.SerialException, OSError) as exc:
            self._go_down(f"cannot open {self.port}: {exc}")

    def close(self) -> None:
        self._closed = True
        self._started = False
        self._drop_port()

    # -- I/O -----------------------------------------------------------------

    def read(self, timeout: float) -> Chunk | LinkEvent | None:
        if not self._started:
            raise RuntimeError("SerialDriver.read before open()")
        if self._events:
            return self._events.popleft()
        if self._serial is None:
            return self._wait_for_device(timeout)
        port = self._serial
        try:
            ready, _, _ = select.select([port.fileno()], [], [], max(0.0, timeout))
            if not ready:
                return None
            # The port is opened non-blocking (timeout=0): this is one
            # os.read of whatever has arrived, so chunks are exactly as read.
            data = port.read(READ_SIZE)
        except (serial.SerialException, OSError, ValueError) as exc:
            self._go_down(f"{self.port}: {exc}")
            return self._events.popleft()
        t = self._clock()
        if not data:
            # select said readable but nothing came: a hang-up on some ports.
            self._go_down(f"{self.port}: device returned no data (disconnected)")
            return self._events.popleft()
        return (t, data)

    def write(self, data: bytes) -> None:
        port = self._serial
        if port is None:
            raise LinkDownError(f"{self.port} is disconnected; {len(data)} bytes not sent")
        try:
            port.write(data)
            port.flush()
        except (serial.SerialException, OSError) as exc:
            self._go_down(f"{self.port}: write failed: {exc}")
            raise LinkDownError(f"{self.port}: write failed: {exc}") from exc

    # -- internals -----------------------------------------------------------

    def _open_port(self) -> serial.Serial:
        check_pty_link(self.port)  # a pty's symlink left by a killed program: never opened
        return serial.Serial(
            port=self.port,
            baudrate=self.baudrate,
            bytesize=serial.EIGHTBITS,
            parity=serial.PARITY_NONE,
            stopbits=serial.STOPBITS_ONE,
            timeout=0,
            write_timeout=2.0,
            exclusive=self.exclusive,
        )

    def _drop_port(self) -> None:
        port, self._serial = self._serial, None
        if port is not None:
            # The device may already be gone; there is nothing left to release.
            with contextlib.suppress(serial.SerialException, OSError):
                port.close()

    def _go_down(self, detail: str) -> None:
        self._drop_port()
        # First retry after backoff_initial, then twice as long each time.
        self._next_attempt = time.monotonic() + self.backoff_initial
        self._backoff = min(self.backoff_initial * 2.0, self.backoff_max)
        self._events.append(LinkEvent(self._clock(), False, detail))

    def _wait_for_device(self, timeout: float) -> LinkEvent | None:
        deadline = time.monotonic() + max(0.0, timeout)
        while not self._closed:
            now = time.monotonic()
            if now >= self._next_attempt:
                try:
                    self._serial = self._open_port()
                except (serial.SerialException, OSError):
                    self._next_attempt = now + self._backoff
                    self._backoff = min(self._backoff * 2.0, self.backoff_max)
                else:
                    self.reconnects += 1
                    return LinkEvent(self._clock(), True, f"{self.port} reopened")
            now = time.monotonic()
            if now >= deadline:
                return None
            time.sleep(min(self._next_attempt, deadline) - now)
        return None
