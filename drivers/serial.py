"""The serial transport (RS-232 and USB-CDC shoes, and shoes behind a serial
device server) over pyserial.

Owns one port: opens it 8N1 at the configured baud rate, hands out chunks
exactly as read with the time taken right after the read, writes host
commands, and survives unplug/replug: any I/O error closes the port,
reports ``LinkEvent(up=False)`` and retries the open with capped
exponential backoff until the device is back (``LinkEvent(up=True)``).

The port is one of:

- a local device path (use the stable ``/dev/serial/by-id/...`` path, which
  survives re-enumeration), opened exclusively;
- ``socket://HOST:PORT``: a serial device server in TCP-server mode (the
  raw bytes of its serial line on a TCP connection, e.g. a MOXA NPort in
  "TCP Server" mode); the line speed is set on the device server;
- ``rfc2217://HOST:PORT``: a device server speaking RFC 2217 (Telnet COM
  port control); the line settings are negotiated with it.

Both URLs are opened by pyserial's own handlers (``serial.serial_for_url``);
:func:`drivers.ports.parse_port` says which URLs are accepted. For the driver, a network
port behaves exactly as a local one: the same chunks, the same link events
and backoff. The differences are underneath:

- a peer that closes the connection (the device server restarted, or
  dropped us) is a link down, as an unplugged tty is;
- a peer that vanished without closing (power cut, cable pulled: no FIN
  ever comes) is noticed by TCP keepalive: after :data:`KEEPALIVE_IDLE_S`
  of silence the kernel probes the peer every :data:`KEEPALIVE_INTERVAL_S`
  and declares the connection dead after :data:`KEEPALIVE_PROBES`
  unanswered probes (``TCP_USER_TIMEOUT`` bounds unacknowledged writes the
  same way), so such a link is reported down within
  :data:`DEAD_PEER_S` seconds. There is deliberately no bound on silence
  itself: a shoe is silent for as long as the table is closed, and a
  device server answers keepalive probes while its shoe says nothing;
- opening a network port may take seconds (TCP connect, RFC 2217
  negotiation), so reopen attempts run in a thread of their own and
  :meth:`SerialDriver.read` still returns within its timeout.

Waiting is always done by the operating system (``select`` on the port's
file descriptor; for an ``rfc2217://`` port, which pyserial reads in a
thread and which has no descriptor, a blocking queue; ``time.sleep`` and
``Event.wait`` between reopen attempts), so an idle or unplugged shoe costs
no CPU.
"""

from __future__ import annotations

import contextlib
import queue
import select
import socket
import threading
import time
from collections import deque
from collections.abc import Callable

import serial

from drivers.base import Chunk, LinkDownError, LinkEvent
from drivers.ports import parse_port
from drivers.ptylink import check_pty_link

#: Largest single read; a shoe sends far less than this between two reads.
READ_SIZE = 4096

#: Seconds of silence on a network port before TCP starts probing the peer.
KEEPALIVE_IDLE_S = 10
#: Seconds between two keepalive probes.
KEEPALIVE_INTERVAL_S = 5
#: Unanswered probes after which the connection is dead.
KEEPALIVE_PROBES = 3
#: A peer that vanished without closing is reported down within this many
#: seconds (of silence, or of a write left unacknowledged).
DEAD_PEER_S = KEEPALIVE_IDLE_S + KEEPALIVE_INTERVAL_S * KEEPALIVE_PROBES


def set_keepalive(sock: socket.socket) -> None:
    """Make a dead peer show as a socket error within :data:`DEAD_PEER_S`."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    # Linux names; elsewhere the system's keepalive defaults (hours) apply.
    for name, value in (
        ("TCP_KEEPIDLE", KEEPALIVE_IDLE_S),
        ("TCP_KEEPINTVL", KEEPALIVE_INTERVAL_S),
        ("TCP_KEEPCNT", KEEPALIVE_PROBES),
        ("TCP_USER_TIMEOUT", DEAD_PEER_S * 1000),
    ):
        option = getattr(socket, name, None)
        if option is not None:
            sock.setsockopt(socket.IPPROTO_TCP, option, value)


def _port_socket(port: serial.Serial) -> socket.socket | None:
    # pyserial offers no way to set socket options; both of its network
    # handlers (pyserial 3.5: urlhandler/protocol_socket.py and rfc2217.py)
    # keep the connection in ``_socket``. tests/test_device_server.py checks
    # that keepalive really is on, so a pyserial that moves it is noticed.
    sock = getattr(port, "_socket", None)
    return sock if isinstance(sock, socket.socket) else None


_EOF = object()  # the connection was closed


class _ThreadReader:
    """Reads a port that has no file descriptor (pyserial's ``rfc2217://``
    handler reads its socket in a thread of its own and queues the bytes)
    in a thread, so that :meth:`SerialDriver.read` can wait on a queue with
    its caller's timeout: no polling, and a closed connection is seen as
    closed (pyserial returns an empty read for it, which a read with a
    timeout could not tell from silence).

    The port is opened with no timeout: ``read(1)`` blocks until a byte
    comes, or returns nothing only when the connection has ended.
    """

    def __init__(self, port: serial.Serial, clock: Callable[[], float], name: str) -> None:
        self.port = port
        self._clock = clock
        self.items: queue.Queue[Chunk | BaseException | object] = queue.Queue()
        self._thread = threading.Thread(target=self._run, name=f"read {name}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            while True:
                first = self.port.read(1)
                if not first:
                    break
                waiting = self.port.in_waiting
                rest = self.port.read(waiting) if waiting else b""
                self.items.put((self._clock(), first + rest))
                if len(rest) < waiting:  # the end of the connection came with them
                    break
        except Exception as exc:  # whatever ends the connection ends it: reported, never lost in a thread
            self.items.put(exc)
            return
        self.items.put(_EOF)

    def get(self, timeout: float) -> Chunk | BaseException | object | None:
        try:
            return self.items.get(timeout=max(0.0, timeout))
        except queue.Empty:
            return None


class _OpenAttempt:
    """One attempt to open the port: at once (a local tty opens in
    microseconds) or, for a network port, in a thread so that a read never
    waits longer than its timeout for a TCP connect or an RFC 2217
    negotiation. An attempt the driver no longer wants (it was closed
    meanwhile) closes whatever it opened."""

    def __init__(self, open_port: Callable[[], serial.Serial], *, background: bool, name: str) -> None:
        self._open_port = open_port
        self.done = threading.Event()
        self.port: serial.Serial | None = None
        self.error: BaseException | None = None
        self._lock = threading.Lock()
        self._abandoned = False
        if background:
            threading.Thread(target=self._run, name=f"open {name}", daemon=True).start()
        else:
            self._run()

    def _run(self) -> None:
        try:
            port = self._open_port()
        except (serial.SerialException, OSError, ValueError) as exc:
            self.error = exc
            self.done.set()
            return
        with self._lock:
            if self._abandoned:
                _close_quietly(port)
            else:
                self.port = port
        self.done.set()

    def abandon(self) -> None:
        with self._lock:
            self._abandoned = True
            port, self.port = self.port, None
        if port is not None:
            _close_quietly(port)


def _close_quietly(port: serial.Serial) -> None:
    # The device may already be gone; there is nothing left to release.
    with contextlib.suppress(serial.SerialException, OSError, ValueError, TypeError):
        port.close()


class SerialDriver:
    """A :class:`drivers.base.Driver` for a serial port, local or behind a
    device server (see the module docstring for the accepted ports).

    ``backoff_initial`` is the delay before the first reopen attempt after a
    failure; it doubles after each failed attempt up to ``backoff_max``. A
    link that drops again before it delivered a byte, less than
    ``backoff_max`` seconds after it came back, keeps the backoff it had
    reached instead of starting over, so a port that opens and at once
    fails (a device server whose only connection another client holds
    accepts and closes) is retried at most once per ``backoff_max``, not
    several times a second.
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
        #: The device server's address, or None for a local port.
        self.network = parse_port(port)
        self.port = port
        self.baudrate = baudrate
        self.backoff_initial = backoff_initial
        self.backoff_max = backoff_max
        self.exclusive = exclusive
        self._clock = clock
        self._serial: serial.Serial | None = None
        self._reader: _ThreadReader | None = None  # a port without a file descriptor
        self._attempt: _OpenAttempt | None = None
        self._events: deque[LinkEvent] = deque()
        self._started = False
        self._closed = False
        self._backoff = backoff_initial
        self._next_attempt = 0.0  # monotonic time of the next reopen attempt
        self._up_since: float | None = None  # monotonic time the port last opened
        self._delivered = False  # a byte came since the port last opened
        #: Number of successful reopens after a loss (for tests and metrics).
        self.reconnects = 0

    # -- state ---------------------------------------------------------------

    @property
    def is_up(self) -> bool:
        return self._serial is not None

    def open(self) -> None:
        """Open the port. A port that cannot be opened now is not an error:
        the first :meth:`read` reports ``LinkEvent(up=False)`` and the driver
        keeps retrying. (This first attempt is made at once, also for a
        network port: up to pyserial's 5 s connect timeout.)"""
        self._started = True
        self._closed = False
        if self._serial is not None:
            return
        try:
            self._set_port(self._open_port())
        except (serial.SerialException, OSError, ValueError) as exc:
            self._go_down(f"cannot open {self.port}: {exc}")

    def close(self) -> None:
        self._closed = True
        self._started = False
        if self._attempt is not None:
            self._attempt.abandon()
            self._attempt = None
        self._drop_port(wait=True)

    # -- I/O -----------------------------------------------------------------

    def read(self, timeout: float) -> Chunk | LinkEvent | None:
        if not self._started:
            raise RuntimeError("SerialDriver.read before open()")
        if self._events:
            return self._events.popleft()
        if self._serial is None:
            return self._wait_for_device(timeout)
        if self._reader is not None:
            return self._read_queued(self._reader, timeout)
        port = self._serial
        try:
            ready, _, _ = select.select([port.fileno()], [], [], max(0.0, timeout))
            if not ready:
                return None
            # The port is opened non-blocking (timeout=0): this is one
            # os.read (socket: one recv) of whatever has arrived, so chunks
            # are exactly as read.
            data = port.read(READ_SIZE)
        except (serial.SerialException, OSError, ValueError) as exc:
            self._go_down(f"{self.port}: {self._why(exc)}")
            return self._events.popleft()
        t = self._clock()
        if not data:
            # select said readable but nothing came: a hang-up on some ports.
            self._go_down(f"{self.port}: device returned no data (disconnected)")
            return self._events.popleft()
        self._delivered = True
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

    def _read_queued(self, reader: _ThreadReader, timeout: float) -> Chunk | LinkEvent | None:
        item = reader.get(timeout)
        if item is None:
            return None
        if isinstance(item, tuple):
            self._delivered = True
            return item
        why = "the device server closed the connection" if item is _EOF else self._why(item)
        self._go_down(f"{self.port}: {why}")
        return self._events.popleft()

    def _why(self, exc: object) -> str:
        if self.network is not None and "socket disconnected" in str(exc):
            return "the device server closed the connection"
        return str(exc)

    def _open_port(self) -> serial.Serial:
        if self.network is None:
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
        rfc2217 = self.network.scheme == "rfc2217"
        port = serial.serial_for_url(
            self.port,
            baudrate=self.baudrate,
            bytesize=serial.EIGHTBITS,
            parity=serial.PARITY_NONE,
            stopbits=serial.STOPBITS_ONE,
            # rfc2217: read in our own thread, blocking (see _ThreadReader);
            # its writes are bounded by the socket's own 5 s timeout (it
            # supports no write_timeout). socket: as a local port.
            timeout=None if rfc2217 else 0,
            write_timeout=None if rfc2217 else 2.0,
        )
        sock = _port_socket(port)
        if sock is not None:
            try:
                set_keepalive(sock)
            except OSError:
                _close_quietly(port)
                raise
        return port

    def _set_port(self, port: serial.Serial) -> None:
        self._serial = port
        self._up_since = time.monotonic()
        self._delivered = False
        if self.network is not None and self.network.scheme == "rfc2217":
            self._reader = _ThreadReader(port, self._clock, self.port)

    def _drop_port(self, *, wait: bool = False) -> None:
        port, self._serial = self._serial, None
        self._reader = None
        if port is None:
            return
        if self.network is None or wait:
            _close_quietly(port)
        else:
            # pyserial's network close waits (0.3 s, and up to 7 s for its
            # RFC 2217 reader thread): not on the reading thread. The socket
            # itself is shut at the start of that close.
            threading.Thread(
                target=_close_quietly, args=(port,), name=f"close {self.port}", daemon=True
            ).start()

    def _go_down(self, detail: str) -> None:
        self._drop_port()
        now = time.monotonic()
        up_since, self._up_since = self._up_since, None
        if up_since is None or self._delivered or now - up_since >= self.backoff_max:
            # First retry after backoff_initial, then twice as long each time.
            delay = self.backoff_initial
        else:
            # It came back and failed at once, silent: no fresh start.
            delay = self._backoff
        self._next_attempt = now + delay
        self._backoff = min(delay * 2.0, self.backoff_max)
        self._events.append(LinkEvent(self._clock(), False, detail))

    def _wait_for_device(self, timeout: float) -> LinkEvent | None:
        deadline = time.monotonic() + max(0.0, timeout)
        while not self._closed:
            now = time.monotonic()
            if self._attempt is None and now >= self._next_attempt:
                self._attempt = _OpenAttempt(
                    self._open_port, background=self.network is not None, name=self.port
                )
            attempt = self._attempt
            if attempt is not None:
                if not attempt.done.wait(max(0.0, deadline - now)):
                    return None  # still connecting
                self._attempt = None
                if attempt.port is not None:
                    self._set_port(attempt.port)
                    self.reconnects += 1
                    return LinkEvent(self._clock(), True, f"{self.port} reopened")
                self._next_attempt = time.monotonic() + self._backoff
                self._backoff = min(self._backoff * 2.0, self.backoff_max)
            now = time.monotonic()
            if now >= deadline:
                return None
            time.sleep(min(self._next_attempt, deadline) - now)
        return None
