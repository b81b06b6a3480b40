"""Serial device servers on 127.0.0.1 for the tests (and for trying docs/devices.md by hand):
what a MOXA NPort-like box does between a shoe's serial line and the
controller, in its two modes.

- :class:`ShoeServer` is a device server in TCP-server mode with the fake
  shoe on its serial line (``device.port: socket://127.0.0.1:PORT``): the
  raw bytes of :meth:`drivers.fake.FakeShoe.events` on a TCP connection. At
  each ``disconnect`` fault of the fake (always mid-coup) the server is
  stopped and restarted: it stops listening (reconnect attempts are
  refused), closes the connection after the bytes already sent, and listens
  again on the same port ``outage`` seconds later. The frames the fake
  loses in that fault are what the shoe sent while the box was away.
- :class:`Rfc2217Server` is a device server in RFC 2217 mode over a real
  serial port (a pty in the tests), built on pyserial's own server side
  (``serial.rfc2217.PortManager``), as pyserial's example
  ``rfc2217_server.py`` is.

Run as a program it serves the fake shoe for a demo::

    python -m tests.support.device_server --port 4001 --seed 5 \\
        --faults disconnect:0.3 --cards-per-second 10 --shoes 1 --decks 1
"""

from __future__ import annotations

import argparse
import contextlib
import os
import select
import socket
import sys
import threading
import time
from typing import Any

import serial
from serial.rfc2217 import PortManager

from drivers.fake import Disconnect, FakeShoe, real_delay

LOCALHOST = "127.0.0.1"


def _listen(port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    # the same port again right after a restart (the old connection may be
    # in TIME_WAIT)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((LOCALHOST, port))
    sock.listen(1)
    return sock


def _close_gracefully(conn: socket.socket, limit: float = 5.0) -> None:
    """FIN after the bytes already sent, then wait (at most ``limit`` s) for
    the client to close its side, discarding what it writes: closing with
    unread input would send a reset instead."""
    with contextlib.suppress(OSError):
        conn.shutdown(socket.SHUT_WR)
        deadline = time.monotonic() + limit
        while (left := deadline - time.monotonic()) > 0:
            ready, _, _ = select.select([conn], [], [], min(left, 0.2))
            if ready and not conn.recv(4096):
                break
    conn.close()


class _Stopped(Exception):
    pass


class ShoeServer:
    """The fake shoe behind a device server in TCP-server mode; see the
    module docstring. The port is bound at construction (``port=0``: a
    free one), so a client may be configured before :meth:`start`."""

    def __init__(
        self,
        fake: FakeShoe,
        *,
        port: int = 0,
        cards_per_second: float = 0.0,
        outage: float = 0.3,
        settle: float = 0.3,
        log: Any = None,
    ) -> None:
        self.fake = fake
        self.cards_per_second = cards_per_second
        self.outage = outage
        self.settle = settle
        self._log = log
        self._listener: socket.socket | None = _listen(port)
        self.port: int = self._listener.getsockname()[1]
        self.url = f"socket://{LOCALHOST}:{self.port}"
        self._conn: socket.socket | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="shoe server", daemon=True)
        #: Set once every byte of the fake's stream has been sent.
        self.finished = threading.Event()
        #: Connections accepted, and restarts made.
        self.accepted = 0
        self.restarts = 0
        #: Bytes sent, in order (what a client may read, nothing else).
        self.sent = bytearray()

    def start(self) -> ShoeServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(15)
        if self._conn is not None:
            _close_gracefully(self._conn, limit=1.0)
            self._conn = None
        if self._listener is not None:
            self._listener.close()
            self._listener = None

    def __enter__(self) -> ShoeServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _say(self, message: str) -> None:
        if self._log is not None:
            print(f"device server: {message}", file=self._log, flush=True)

    def _check(self) -> None:
        if self._stop.is_set():
            raise _Stopped

    def _wait(self, seconds: float) -> None:
        """Sleep, discarding whatever the client writes (the fake does not answer)."""
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            self._check()
            conn = self._conn
            if conn is None:
                time.sleep(min(left, 0.1))
                continue
            ready, _, _ = select.select([conn], [], [], min(left, 0.1))
            if ready:
                try:
                    data = conn.recv(4096)
                except OSError:
                    data = b""
                if not data:
                    self._drop("the client closed the connection")

    def _drop(self, why: str) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            self._say(why)
            with contextlib.suppress(OSError):
                conn.close()

    def _client(self) -> socket.socket:
        """The connected client, waiting for one (and letting it finish
        opening: pyserial discards input that arrives while it opens)."""
        while self._conn is None:
            self._check()
            listener = self._listener
            assert listener is not None
            ready, _, _ = select.select([listener], [], [], 0.1)
            if ready:
                conn, addr = listener.accept()
                self.accepted += 1
                self._conn = conn
                self._say(f"client {addr[0]}:{addr[1]} connected")
                self._wait(self.settle)
        return self._conn

    def _restart(self) -> None:
        self.restarts += 1
        self._say(f"restart {self.restarts}: stopped (connection closed, port {self.port} refused)")
        listener, self._listener = self._listener, None
        if listener is not None:
            listener.close()
        conn, self._conn = self._conn, None
        if conn is not None:
            _close_gracefully(conn)
        self._wait(self.outage)
        self._listener = _listen(self.port)
        self._say(f"restart {self.restarts}: listening again on {LOCALHOST}:{self.port}")

    def _serve(self) -> None:
        last_t: float | None = None
        try:
            self._say(f"listening on {LOCALHOST}:{self.port}")
            for item in self.fake.events():
                t = item.t if isinstance(item, Disconnect) else item[0]
                if last_t is not None:
                    self._wait(real_delay(self.fake, t - last_t, self.cards_per_second))
                last_t = t
                if isinstance(item, Disconnect):
                    self._restart()
                    last_t = t + item.downtime
                    continue
                data = item[1]
                while True:
                    conn = self._client()
                    try:
                        conn.sendall(data)
                    except OSError:
                        # tests never leave on their own; a demo client
                        # that does gets this chunk again when it is back
                        self._drop("the client went away")
                        continue
                    break
                self.sent += data
            self.finished.set()
            self._say(f"every shoe dealt: {len(self.sent)} bytes sent")
            while True:
                self._wait(0.5)  # a device server stays up
        except _Stopped:
            pass


class _PtyPort(serial.Serial):
    """A serial port on a pty. A pty has no modem lines (TIOCMGET fails),
    which pyserial's RFC 2217 server reads when a client agrees on RFC 2217,
    and sets when the client asks for DTR and RTS: they are a three-wire
    cable's, with DSR, CTS and CD tied high and DTR, RTS going nowhere.
    ``purged`` is set when a client's open purged the transmit buffer: the
    last step of pyserial's open, after it purged the receive buffer and
    emptied its own queue (bytes the server sent before that are dropped
    by the client), so a test writes only what the client will see."""

    purged: threading.Event

    def _update_dtr_state(self) -> None:
        pass  # no DTR line to drive on a pty

    def _update_rts_state(self) -> None:
        pass  # nor RTS

    @property
    def cts(self) -> bool:
        return True

    @property
    def dsr(self) -> bool:
        return True

    @property
    def ri(self) -> bool:
        return False

    @property
    def cd(self) -> bool:
        return True

    def reset_output_buffer(self) -> None:
        super().reset_output_buffer()
        self.purged.set()


class _Connection:
    """What PortManager writes its Telnet answers to."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self._lock = threading.Lock()

    def write(self, data: bytes) -> None:
        with self._lock:
            self.sock.sendall(data)


class Rfc2217Server:
    """A device server in RFC 2217 mode over the serial port at
    ``serial_path``, on 127.0.0.1 (``port=0``: a free port). One client at a
    time; the serial port is open only while a client is connected.

    :attr:`ready` is set once a client has finished opening (and cleared by
    :meth:`restart`); :attr:`baudrates` lists the speeds clients set."""

    def __init__(self, serial_path: str, *, port: int = 0) -> None:
        self.serial_path = serial_path
        self._listener: socket.socket | None = _listen(port)
        self.port: int = self._listener.getsockname()[1]
        self.url = f"rfc2217://{LOCALHOST}:{self.port}"
        self.ready = threading.Event()
        self.baudrates: list[int] = []
        self.accepted = 0
        self._stop = threading.Event()
        self._restart = threading.Event()
        self._restarted = threading.Event()
        self._outage = 0.0
        self._thread = threading.Thread(target=self._serve, name="rfc2217 server", daemon=True)

    def start(self) -> Rfc2217Server:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(15)
        if self._listener is not None:
            self._listener.close()
            self._listener = None

    def __enter__(self) -> Rfc2217Server:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def restart(self, outage: float = 0.3, timeout: float = 10.0) -> None:
        """Stop (close the client's connection and the listening socket) and
        listen again on the same port ``outage`` seconds later."""
        self._outage = outage
        self._restarted.clear()
        self.ready.clear()
        self._restart.set()
        if not self._restarted.wait(timeout):
            raise TimeoutError("the RFC 2217 server did not restart")

    def _serve(self) -> None:
        while not self._stop.is_set():
            listener = self._listener
            if self._restart.is_set():
                self._restart.clear()
                if listener is not None:
                    listener.close()
                self._listener = None
                time.sleep(self._outage)
                self._listener = _listen(self.port)
                self._restarted.set()
                continue
            assert listener is not None
            ready, _, _ = select.select([listener], [], [], 0.1)
            if ready:
                conn, _ = listener.accept()
                self.accepted += 1
                self._session(conn)

    def _session(self, conn: socket.socket) -> None:
        port = _PtyPort()
        port.purged = threading.Event()
        port.port = self.serial_path
        port.timeout = 0
        port.open()
        port.purged.clear()  # that was the open's own flush, not the client's
        connection = _Connection(conn)
        manager = PortManager(port, connection)
        try:
            while not (self._stop.is_set() or self._restart.is_set()):
                if port.purged.is_set() and not self.ready.is_set():
                    self.baudrates.append(port.baudrate)
                    self.ready.set()
                ready, _, _ = select.select([conn, port.fileno()], [], [], 0.1)
                if conn in ready:
                    data = conn.recv(4096)
                    if not data:
                        break  # the client left
                    to_port = b"".join(manager.filter(data))
                    if to_port:
                        port.write(to_port)
                if port.fileno() in ready:
                    data = port.read(4096)
                    if data:
                        connection.write(b"".join(manager.escape(data)))
        except OSError:
            pass
        finally:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
            conn.close()
            port.close()


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--protocol", default="shoe-ascii/1")
    parser.add_argument("--decks", type=int, default=8)
    parser.add_argument("--shoes", type=int, default=0)
    parser.add_argument("--faults", default="")
    parser.add_argument("--cards-per-second", type=float, default=2.0)
    parser.add_argument("--outage", type=float, default=1.0)
    args = parser.parse_args()
    fake = FakeShoe(
        seed=args.seed,
        protocol=args.protocol,
        decks=args.decks,
        faults=args.faults or None,
        shoes=args.shoes,
        cut_card_min=12 if args.decks == 1 else 14,
        cards_per_second=args.cards_per_second,
    )
    server = ShoeServer(
        fake, port=args.port, cards_per_second=args.cards_per_second, outage=args.outage, log=sys.stderr
    )
    print(server.url, flush=True)
    server.start()
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
