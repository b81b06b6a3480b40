"""The Prometheus endpoint's HTTP server: one thread, bounded connections.

prometheus_client's ``start_http_server`` gives every connection a thread
and a descriptor with no timeout, so idle connections can exhaust the
process's descriptors. This server serves ``generate_latest(registry)`` on
every ``GET`` (or ``HEAD``) path from a single thread with a selector:

- at most ``MAX_CONNECTIONS`` connections are open at once; a connection
  beyond that evicts the oldest one still waiting for its request head (an
  idle or slow client), so a scraper that sends its request at once is
  served even while idle connections fill the server; if none is waiting,
  the new connection is closed at once;
- a connection is closed ``TIMEOUT_S`` seconds after it was accepted,
  whatever it is doing (sending its head, or not reading the response);
- a request head is at most ``MAX_HEAD_BYTES`` bytes, a longer one gets
  431 and the connection is closed;
- one response per connection (``Connection: close``).

The server so holds at most ``MAX_CONNECTIONS`` + 2 descriptors (the
listening socket and the selector) and one thread.
"""

from __future__ import annotations

import contextlib
import logging
import platform
import selectors
import socket
import threading
import time
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, Gauge, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4, choose_encoder

log = logging.getLogger(__name__)

#: Every metric's prefix, as Prometheus exporters name theirs (the
#: application, then what is measured): ``shoe_controller_cards_total``.
NAMESPACE = "shoe_controller"


def build_info(registry: CollectorRegistry, component: str) -> Gauge:
    """``shoe_controller_build_info{version, python, component} 1``: which
    build runs, the way Prometheus exporters say it (join on it to see a
    fleet's versions); ``component`` is ``table`` or ``archive``."""
    # imported here: the package's version, not a module of the daemon
    from controller import __version__

    info = Gauge(
        f"{NAMESPACE}_build_info",
        "Always 1: the running build's version, Python version and component",
        ["version", "python", "component"],
        registry=registry,
    )
    info.labels(__version__, platform.python_version(), component).set(1)
    return info


#: Connections open at once.
MAX_CONNECTIONS = 16
#: Seconds a connection may live, from accept to the last byte of the response.
TIMEOUT_S = 5.0
#: Bytes of a request head (request line and headers, up to the blank line).
MAX_HEAD_BYTES = 8192
#: Seconds between looks at the stop flag.
_TICK_S = 0.25


@dataclass
class _Conn:
    sock: socket.socket
    deadline: float
    head: bytearray = field(default_factory=bytearray)
    out: bytes | None = None  # the response, once the head is in


def _response(
    status: str, body: bytes, content_type: str = "text/plain; charset=utf-8", head_only: bool = False
) -> bytes:
    head = (
        f"HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {len(body)}\r\n"
        "Connection: close\r\n\r\n"
    ).encode("ascii")
    return head if head_only else head + body


class MetricsServer:
    """Listens on ``addr`` at construction (``OSError`` if it cannot) and
    serves until ``close()``."""

    def __init__(
        self,
        addr: tuple[str, int],
        registry: CollectorRegistry,
        *,
        max_connections: int = MAX_CONNECTIONS,
        timeout_s: float = TIMEOUT_S,
        max_head_bytes: int = MAX_HEAD_BYTES,
    ) -> None:
        self._registry = registry
        self._max = max_connections
        self._timeout = timeout_s
        self._max_head = max_head_bytes
        host, port = addr
        family = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0][
            0
        ]
        self._listener = socket.create_server((host, port), family=family, backlog=64)
        self._listener.setblocking(False)
        self.address: tuple[str, int] = self._listener.getsockname()[:2]
        self._sel = selectors.DefaultSelector()
        self._sel.register(self._listener, selectors.EVENT_READ)
        self._conns: dict[socket.socket, _Conn] = {}
        self._accept_paused_until: float | None = None
        #: connections closed without metrics: timed out, evicted, refused
        #: (every slot serving), gone early, or with a head over the bound
        self.dropped = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="metrics-http", daemon=True)
        self._thread.start()

    # ------------------------------------------------------------ loop

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                now = time.monotonic()
                if self._accept_paused_until is not None and now >= self._accept_paused_until:
                    self._accept_paused_until = None
                    self._sel.register(self._listener, selectors.EVENT_READ)
                wait = _TICK_S
                if self._conns:
                    wait = max(0.0, min(wait, min(c.deadline for c in self._conns.values()) - now))
                for key, mask in self._sel.select(wait):
                    if key.fileobj is self._listener:
                        self._accept()
                    else:
                        conn = self._conns.get(key.fileobj)  # type: ignore[call-overload]
                        if conn is None:
                            continue
                        if mask & selectors.EVENT_READ:
                            self._read(conn)
                        elif mask & selectors.EVENT_WRITE:
                            self._write(conn)
                now = time.monotonic()
                for conn in [c for c in self._conns.values() if c.deadline <= now]:
                    self._drop(conn)
        except Exception:  # a bug here must not take the daemon down, only its metrics
            log.exception("metrics server stopped")
        finally:
            for conn in list(self._conns.values()):
                self._close(conn)
            with contextlib.suppress(OSError):
                self._sel.close()
            with contextlib.suppress(OSError):
                self._listener.close()

    def _accept(self) -> None:
        for _ in range(self._max + 1):  # a burst is taken in one go, bounded
            try:
                sock, _addr = self._listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:  # EMFILE and the like: no busy loop, try again in a second
                log.warning("metrics: accept failed: %s; accepting again in 1 s", exc.strerror or exc)
                self._sel.unregister(self._listener)
                self._accept_paused_until = time.monotonic() + 1.0
                return
            if len(self._conns) >= self._max:
                waiting = [c for c in self._conns.values() if c.out is None]
                if not waiting:
                    self.dropped += 1
                    with contextlib.suppress(OSError):
                        sock.close()
                    continue
                self._drop(min(waiting, key=lambda c: c.deadline))
            sock.setblocking(False)
            conn = _Conn(sock, time.monotonic() + self._timeout)
            self._conns[sock] = conn
            self._sel.register(sock, selectors.EVENT_READ)

    def _read(self, conn: _Conn) -> None:
        try:
            data = conn.sock.recv(self._max_head + 1 - len(conn.head))
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self._drop(conn)
            return
        if not data:
            self._drop(conn)
            return
        conn.head += data
        sep = b"\r\n\r\n"
        end = conn.head.find(sep)
        if end < 0:
            sep = b"\n\n"  # a lenient client
            end = conn.head.find(sep)
        if end < 0 and len(conn.head) <= self._max_head:
            return
        if end < 0 or end + len(sep) > self._max_head:
            self.dropped += 1
            self._respond(conn, _response("431 Request Header Fields Too Large", b"request head too large\n"))
            return
        self._respond(conn, self._answer(bytes(conn.head[:end])))

    def _answer(self, head: bytes) -> bytes:
        lines = head.replace(b"\r\n", b"\n").split(b"\n")
        parts = lines[0].split()
        if len(parts) != 3 or not parts[2].startswith(b"HTTP/"):
            return _response("400 Bad Request", b"bad request\n")
        method = parts[0]
        if method not in (b"GET", b"HEAD"):
            return _response("405 Method Not Allowed", b"only GET\n")
        accept = ""
        for line in lines[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"accept":
                accept = value.strip().decode("latin-1")
        try:
            # the text format the scraper asks for, as start_http_server did
            encoder, content_type = choose_encoder(accept)
        except Exception:  # a hostile Accept header: the plain format
            encoder, content_type = generate_latest, CONTENT_TYPE_PLAIN_0_0_4
        try:
            body = encoder(self._registry)
        except Exception:
            log.exception("metrics: cannot render the registry")
            return _response("500 Internal Server Error", b"cannot render the metrics\n")
        return _response("200 OK", body, content_type, head_only=method == b"HEAD")

    def _respond(self, conn: _Conn, data: bytes) -> None:
        conn.out = data
        self._sel.modify(conn.sock, selectors.EVENT_WRITE)
        self._write(conn)

    def _write(self, conn: _Conn) -> None:
        assert conn.out is not None
        try:
            n = conn.sock.send(conn.out)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self._close(conn)
            return
        conn.out = conn.out[n:]
        if not conn.out:
            with contextlib.suppress(OSError):
                conn.sock.shutdown(socket.SHUT_WR)
            self._close(conn)

    def _drop(self, conn: _Conn) -> None:
        self.dropped += 1
        self._close(conn)

    def _close(self, conn: _Conn) -> None:
        self._conns.pop(conn.sock, None)
        with contextlib.suppress(KeyError, ValueError, OSError):
            self._sel.unregister(conn.sock)
        with contextlib.suppress(OSError):
            conn.sock.close()

    # ------------------------------------------------------------ control

    @property
    def connections(self) -> int:
        """Connections open now."""
        return len(self._conns)

    def close(self) -> None:
        """Stop serving and close every descriptor (within ``_TICK_S``)."""
        self._stop.set()
        self._thread.join(timeout=5.0)
