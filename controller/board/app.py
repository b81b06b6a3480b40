"""The board's web side: a Starlette app served by uvicorn.

Pages and API (GET and HEAD only; anything else is 405: there is no
command path):

``/``                              the tables, each a link to its display
``/table/{table}``                 the roadmap display (a kiosk opens this)
``/api/table/{table}``             the display's view as JSON
``/api/table/{table}/events``      the view, live: server-sent events
``/api/stats``                     the board's counters (drops, clients)
``/static/...``                    the page's CSS and JS (no CDN)
``/history/...``, ``/api/history/...``  the surveillance review of the
                                   tables whose config names a journal
                                   (``controller.history_web``)

The hub is the only link between the MQTT thread and the streams: a
message is applied to its table's state on the event loop; changes are
coalesced (one view per table per loop turn, however many messages a
reconnect's retained burst brings) and each browser gets the whole view
in its own bounded queue. A full queue loses its oldest view (counted):
each view replaces the last, so a slow browser only skips frames and can
never hold anything up. Browsers streaming at once are bounded
(``limits.max_clients``; one more gets 503), and so are requests served at
once (the streams and 32 more; one more gets 503). A connection counts
only once its request head is whole: until then (and between two requests)
it is bounded by :class:`Heads` (``limits.head_timeout_s`` for the whole
head, :data:`MAX_HEAD_BYTES` of it, ``limits.max_idle_connections`` such
connections), so idle sockets never hold a request or a stream out.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import html
import importlib
import json
import logging
import pathlib
import signal
import socket
import threading
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from controller.board.config import BoardConfig, host_entry
from controller.board.state import BadMessage, TableState

log = logging.getLogger(__name__)

STATIC = pathlib.Path(__file__).parent / "static"
#: Messages from the MQTT thread waiting for the event loop; more are
#: dropped (counted). The daemon publishes a few per card.
MAX_PENDING = 10_000


@dataclass(eq=False)
class Client:
    """One browser's stream: its queue of views, oldest dropped when full."""

    table: str
    queue: collections.deque[str]
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    dropped: int = 0


@dataclass
class Stats:
    messages: int = 0
    bad_messages: int = 0
    dropped_pending: int = 0
    dropped_views: int = 0
    refused_clients: int = 0
    refused_hosts: int = 0
    clients: int = 0
    #: requests answered 503 because ``max_requests`` were being served
    refused_requests: int = 0
    #: connections closed at the head deadline, refused a head over
    #: ``MAX_HEAD_BYTES`` (431), closed to make room for a newer idle one
    heads_timed_out: int = 0
    heads_too_large: int = 0
    idle_closed: int = 0
    #: connections open with no request being served, now
    idle: int = 0


class Hub:
    """The tables' states and the browsers' streams, on one event loop."""

    def __init__(self, cfg: BoardConfig) -> None:
        self.cfg = cfg
        prefix = cfg.mqtt.topic_prefix
        self.tables = {
            t.table: TableState(t.table, prefix=prefix, title=t.title, odds=cfg.odds) for t in cfg.tables
        }
        self.stats = Stats()
        self.clients: set[Client] = set()
        self.closing = asyncio.Event()
        self.loop: asyncio.AbstractEventLoop | None = None
        #: messages handed over by the MQTT thread, not yet applied (both
        #: threads count them: under a lock)
        self._pending = 0
        self._pending_lock = threading.Lock()
        self._dirty: set[str] = set()
        self._flush_scheduled = False
        #: oversized payloads, counted by the subscriber
        self.oversized: Callable[[], int] = lambda: 0

    # --- from the MQTT thread -----------------------------------------------------

    def deliver_threadsafe(self, table: str, topic: str, payload: bytes) -> None:
        loop = self.loop
        if loop is None or loop.is_closed():
            return
        with self._pending_lock:
            if self._pending >= MAX_PENDING:
                self.stats.dropped_pending += 1
                return
            self._pending += 1
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
            loop.call_soon_threadsafe(self.deliver, table, topic, payload)

    def connection_threadsafe(self, up: bool) -> None:
        loop = self.loop
        if loop is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(self.connection, up)

    # --- on the event loop ----------------------------------------------------------

    def deliver(self, table: str, topic: str, payload: bytes) -> None:
        with self._pending_lock:
            self._pending = max(0, self._pending - 1)
        state = self.tables.get(table)
        if state is None:
            return
        self.stats.messages += 1
        try:
            changed = state.apply(topic, payload)
        except BadMessage as exc:
            self.stats.bad_messages += 1
            log.warning("board: %s: message on %r refused: %s", table, topic, exc)
            return
        if changed:
            self._mark(table)

    def connection(self, up: bool) -> None:
        for name, state in self.tables.items():
            state.connected(up)
            self._mark(name)

    def _mark(self, table: str) -> None:
        self._dirty.add(table)
        if not self._flush_scheduled:
            self._flush_scheduled = True
            asyncio.get_running_loop().call_soon(self._flush)

    def _flush(self) -> None:
        self._flush_scheduled = False
        dirty, self._dirty = self._dirty, set()
        for table in dirty:
            views = [c for c in self.clients if c.table == table]
            if not views:
                continue
            data = self.view_json(table)
            for c in views:
                if len(c.queue) == c.queue.maxlen:
                    c.dropped += 1
                    self.stats.dropped_views += 1
                c.queue.append(data)
                c.wake.set()

    def view_json(self, table: str) -> str:
        return json.dumps(self.tables[table].view(), separators=(",", ":"))

    def open_stream(self, table: str) -> Client | None:
        if len(self.clients) >= self.cfg.limits.max_clients:
            self.stats.refused_clients += 1
            return None
        client = Client(table, collections.deque(maxlen=self.cfg.limits.client_queue))
        client.queue.append(self.view_json(table))
        self.clients.add(client)
        self.stats.clients = len(self.clients)
        return client

    def close_stream(self, client: Client) -> None:
        self.clients.discard(client)
        self.stats.clients = len(self.clients)

    async def stream(self, client: Client) -> AsyncIterator[str]:
        heartbeat = self.cfg.limits.heartbeat_s
        try:
            yield "retry: 2000\n\n"
            while not self.closing.is_set():
                while client.queue:
                    yield f"event: view\ndata: {client.queue.popleft()}\n\n"
                client.wake.clear()
                if client.queue:
                    continue
                try:
                    await asyncio.wait_for(client.wake.wait(), heartbeat)
                except TimeoutError:
                    yield ": keep-alive\n\n"
        finally:
            self.close_stream(client)

    def close(self) -> None:
        """End every stream (the server is stopping)."""
        self.closing.set()
        for c in self.clients:
            c.wake.set()


# --- HTTP ---------------------------------------------------------------------------

SECURITY_HEADERS = [
    (b"content-security-policy", b"default-src 'self'; img-src 'self' data:; frame-ancestors 'none'"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
]


#: Distinct refused ``Host`` headers logged (each once); more are only counted.
MAX_LOGGED_HOSTS = 16


class ReadOnly:
    """GET and HEAD only, on every route (the history pages' too), only for
    the allowed ``Host`` names (``allowed_hosts``: a page on another name,
    one that DNS rebinding points at this board, is refused 400 and cannot
    read it), and the security headers on every answer. At most
    ``max_requests`` requests are served at once (the streams among them);
    one more is answered 503. Connections that have sent no request do not
    count (:class:`Heads` bounds them)."""

    def __init__(
        self,
        app: ASGIApp,
        hosts: frozenset[tuple[str, int | None]],
        stats: Stats | None = None,
        max_requests: int = 1 << 16,
    ) -> None:
        self.app = app
        self.hosts = hosts
        self.stats = stats if stats is not None else Stats()
        self.max_requests = max_requests
        self.in_flight = 0
        self._logged: set[str] = set()

    def host_allowed(self, scope: Scope) -> bool:
        values = [v for k, v in scope.get("headers", []) if k == b"host"]
        raw = b", ".join(values).decode("latin-1")
        allowed = False
        if len(values) == 1:  # not none (HTTP/1.0), not two
            with contextlib.suppress(ValueError):
                allowed = host_entry(raw) in self.hosts
        if not allowed:
            self.stats.refused_hosts += 1
            if len(self._logged) < MAX_LOGGED_HOSTS and raw not in self._logged:
                self._logged.add(raw)
                log.warning("board: refused a request for Host %r (not in allowed_hosts)", raw[:100])
        return allowed

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                # a route that sets its own policy (the history pages allow
                # their inline styles) keeps it: two CSP headers would both
                # be enforced, and the stricter would block those styles
                headers = list(message.get("headers", []))
                have = {name.lower() for name, _ in headers}
                message["headers"] = headers + [(k, v) for k, v in SECURITY_HEADERS if k not in have]
            await send(message)

        if self.in_flight >= self.max_requests:
            self.stats.refused_requests += 1
            response: Response = PlainTextResponse(
                "too many requests at once\n", status_code=503, headers={"Retry-After": "2"}
            )
            await response(scope, receive, send_with_headers)
            return
        self.in_flight += 1
        try:
            await self._serve(scope, receive, send_with_headers)
        finally:
            self.in_flight -= 1

    async def _serve(self, scope: Scope, receive: Receive, send_with_headers: Send) -> None:
        if not self.host_allowed(scope):
            response: Response = PlainTextResponse(
                "this board does not answer for that Host (see allowed_hosts)\n", status_code=400
            )
            await response(scope, receive, send_with_headers)
            return
        if scope["method"] not in ("GET", "HEAD"):
            response = PlainTextResponse(
                "the board is read-only\n", status_code=405, headers={"Allow": "GET, HEAD"}
            )
            await response(scope, receive, send_with_headers)
            return
        await self.app(scope, receive, send_with_headers)


def _page(name: str, **values: str) -> str:
    text = (STATIC / name).read_text(encoding="utf-8")
    for key, value in values.items():
        text = text.replace("{{" + key + "}}", html.escape(value, quote=True))
    return text


def history_routes(journals: Mapping[str, pathlib.Path]) -> list[BaseRoute]:
    """The surveillance review's routes (``controller.history_web``), for the
    tables that name a journal; none when that module is
    not in this build."""
    if not journals:
        return []
    try:
        module = importlib.import_module("controller.history_web")
    except ModuleNotFoundError as exc:
        if exc.name != "controller.history_web":
            raise
        log.warning("board: controller.history_web is not in this build: no history pages")
        return []
    routes: list[BaseRoute] = module.history_routes(journals)
    return routes


def build_app(cfg: BoardConfig, hub: Hub) -> Starlette:
    extra = history_routes(cfg.journals())
    history_tables = set(cfg.journals()) if extra else set()

    def table_of(request: Request) -> str:
        table = str(request.path_params["table"])
        if table not in hub.tables:
            raise _NotFound
        return table

    async def index(request: Request) -> Response:
        items = "\n".join(
            f'<li><a href="/table/{html.escape(t)}">{html.escape(s.title)}</a></li>'
            for t, s in hub.tables.items()
        )
        return HTMLResponse(_page("index.html").replace("{{tables}}", items))

    async def table_page(request: Request) -> Response:
        table = table_of(request)
        history = f"/history/{table}" if table in history_tables else ""
        # the view as the board knows it now, in the page itself: the first
        # paint shows it, not zeros until the stream's first event
        return HTMLResponse(
            _page(
                "board.html",
                table=table,
                title=hub.tables[table].title,
                history=history,
                view=hub.view_json(table),
            )
        )

    async def table_view(request: Request) -> Response:
        return Response(hub.view_json(table_of(request)), media_type="application/json")

    async def events(request: Request) -> Response:
        client = hub.open_stream(table_of(request))
        if client is None:
            return PlainTextResponse(
                "too many displays are streaming from this board\n",
                status_code=503,
                headers={"Retry-After": "10"},
            )
        return StreamingResponse(
            hub.stream(client),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
        )

    async def stats(request: Request) -> Response:
        return JSONResponse(_stats(cfg, hub))

    async def not_found(request: Request, exc: Exception) -> Response:
        return PlainTextResponse("not found\n", status_code=404)

    routes: list[BaseRoute] = [
        Route("/", index),
        Route("/table/{table}", table_page),
        Route("/api/table/{table}", table_view),
        Route("/api/table/{table}/events", events),
        Route("/api/stats", stats),
        Mount("/static", app=StaticFiles(directory=STATIC), name="static"),
        *extra,
    ]
    app = Starlette(routes=routes, exception_handlers={_NotFound: not_found})
    app.add_middleware(ReadOnly, hosts=cfg.hosts(), stats=hub.stats, max_requests=max_requests(cfg))
    return app


def _stats(cfg: BoardConfig, hub: Hub) -> dict[str, Any]:
    """The board's counters, for ``/api/stats``."""
    s = hub.stats
    return {
        "messages": s.messages,
        "bad_messages": s.bad_messages,
        "oversized_messages": hub.oversized(),
        "dropped_pending": s.dropped_pending,
        "dropped_views": s.dropped_views,
        "refused_clients": s.refused_clients,
        "refused_hosts": s.refused_hosts,
        "refused_requests": s.refused_requests,
        "clients": s.clients,
        "max_clients": cfg.limits.max_clients,
        "idle_connections": s.idle,
        "idle_closed": s.idle_closed,
        "heads_timed_out": s.heads_timed_out,
        "heads_too_large": s.heads_too_large,
    }


def max_requests(cfg: BoardConfig) -> int:
    """Requests served at once: the streams, and a few requests beside them."""
    return cfg.limits.max_clients + 32


class _NotFound(Exception):
    pass


# --- connections waiting for a request head --------------------------------------------

#: The largest request head taken, in bytes: the request line and headers
#: with the blank line that ends them. One byte more is answered 431.
MAX_HEAD_BYTES = 16 * 1024
_END_OF_HEAD = b"\r\n\r\n"
_TOO_LARGE_BODY = b"request head too large (at most 16384 bytes)\n"
_TOO_LARGE = (
    b"HTTP/1.1 431 Request Header Fields Too Large\r\n"
    b"content-type: text/plain; charset=utf-8\r\n"
    b"content-length: %d\r\nconnection: close\r\n\r\n" % len(_TOO_LARGE_BODY) + _TOO_LARGE_BODY
)


class Heads:
    """The server's connections waiting for a request head: just opened, or
    idle between two requests. Each has ``timeout_s`` from the start of its
    wait to its head's blank line (one that sends nothing, or a byte a
    second, is closed then); at most ``limit`` wait at once, one more
    closing the one waiting longest. A connection counts against the
    streams and requests limits only once its head is whole."""

    def __init__(self, limit: int, timeout_s: float, stats: Stats) -> None:
        self.limit = limit
        self.timeout_s = timeout_s
        self.stats = stats
        self.waiting: dict[Any, None] = {}  # insertion-ordered: the oldest first

    def start(self, conn: Any) -> None:
        self.waiting.pop(conn, None)
        self.waiting[conn] = None
        while len(self.waiting) > self.limit:
            oldest = next(iter(self.waiting))
            self.stats.idle_closed += 1
            oldest.close_waiting()
        self.stats.idle = len(self.waiting)

    def stop(self, conn: Any) -> None:
        self.waiting.pop(conn, None)
        self.stats.idle = len(self.waiting)


class _HeadScan:
    """The end of a request head looked for across reads, and whether the
    head fits within :data:`MAX_HEAD_BYTES`."""

    def __init__(self) -> None:
        self.scanning = False  # the end of the head not seen yet
        self._length = 0
        self._tail = b""

    def start(self) -> None:
        self.scanning = True
        self._length, self._tail = 0, b""

    def fits(self, data: bytes) -> bool:
        """Whether the head, with ``data``, may still end within the bound."""
        buf = self._tail + data
        offset = self._length - len(self._tail)  # where buf starts in the head
        self._length += len(data)
        end = buf.find(_END_OF_HEAD)
        if end >= 0:
            self.scanning = False
            return offset + end + len(_END_OF_HEAD) <= MAX_HEAD_BYTES
        self._tail = buf[-(len(_END_OF_HEAD) - 1) :]
        return self._length < MAX_HEAD_BYTES


def head_bounded_protocol(heads: Heads) -> type[asyncio.Protocol]:
    """uvicorn's h11 protocol with the request head bounded by ``heads``:
    its time (``heads.timeout_s``, the whole head, however it trickles),
    its size (:data:`MAX_HEAD_BYTES`, else 431) and the connections waiting
    for one (``heads.limit``)."""
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class HeadBounded(H11Protocol):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self._head_timer: asyncio.TimerHandle | None = None
            self._waiting = False
            self._scan = _HeadScan()
            self._refused = False  # answered 431: what else comes is dropped

        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            super().connection_made(transport)  # type: ignore[arg-type]
            self._wait_for_head()

        def connection_lost(self, exc: Exception | None) -> None:
            self._head_done()
            super().connection_lost(exc)

        def _wait_for_head(self) -> None:
            self._head_done()
            self._waiting = True
            self._scan.start()
            self._head_timer = self.loop.call_later(heads.timeout_s, self._head_late)
            heads.start(self)

        def _head_done(self) -> None:
            self._waiting = False
            if self._head_timer is not None:
                self._head_timer.cancel()
                self._head_timer = None
            heads.stop(self)

        def _head_late(self) -> None:
            self._head_timer = None
            if self._waiting:
                if not self._refused:
                    heads.stats.heads_timed_out += 1
                self.close_waiting()

        def close_waiting(self) -> None:
            self._head_done()
            if not self.transport.is_closing():
                self.transport.close()

        def data_received(self, data: bytes) -> None:
            if self._refused:
                return
            if self._waiting and self._scan.scanning and not self._scan.fits(data):
                # answered without h11 (which has seen none of this head), then
                # only read and dropped until the client closes or the deadline
                self._refused = True
                heads.stats.heads_too_large += 1
                self.transport.write(_TOO_LARGE)
                if self.transport.can_write_eof():
                    self.transport.write_eof()
                else:
                    self.close_waiting()
                return
            cycle = self.cycle
            super().data_received(data)
            if self._waiting and self.cycle is not cycle:
                self._head_done()  # a request has started

        def on_response_complete(self) -> None:
            cycle = self.cycle
            super().on_response_complete()
            if not self.transport.is_closing() and self.cycle is cycle:
                self._wait_for_head()  # idle until the next request

    return HeadBounded


def bind(address: tuple[str, int]) -> socket.socket:
    """The listening socket (an ``OSError`` says why not)."""
    host, port = address
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(128)
    except OSError:
        sock.close()
        raise
    sock.set_inheritable(True)
    return sock


def serve(cfg: BoardConfig, sock: socket.socket, *, announce: Any = None) -> None:
    """Run the board until SIGTERM or SIGINT: the MQTT subscriber, the app
    and uvicorn on ``sock``."""
    import uvicorn

    from controller.board.subscriber import BoardSubscriber

    hub = Hub(cfg)
    subscriber = BoardSubscriber(cfg, hub.deliver_threadsafe, hub.connection_threadsafe)
    hub.oversized = lambda: subscriber.oversized

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        hub.loop = asyncio.get_running_loop()
        if announce is not None:
            announce()  # first where it serves, then what the broker says
        subscriber.start()
        try:
            yield
        finally:
            subscriber.stop()

    app = build_app(cfg, hub)
    app.router.lifespan_context = lifespan
    config = uvicorn.Config(
        app,
        # uvicorn's loggers left to the process's one format (controller.logs)
        log_config=None,
        log_level="warning",
        access_log=False,
        server_header=False,
        proxy_headers=False,
        # bounds on the HTTP side: requests at once (ReadOnly), the request
        # head's size and time and the connections waiting for one (Heads,
        # as the protocol), idle keep-alive. No limit_concurrency: uvicorn
        # counts every open connection against it, so that idle sockets
        # would have every request answered 503.
        http=head_bounded_protocol(
            Heads(cfg.limits.max_idle_connections, cfg.limits.head_timeout_s, hub.stats)
        ),
        timeout_keep_alive=5,
        h11_max_incomplete_event_size=MAX_HEAD_BYTES,
        timeout_graceful_shutdown=5,
        lifespan="on",
    )

    class Server(uvicorn.Server):
        def handle_exit(self, sig: int, frame: Any) -> None:
            if not self.should_exit:
                log.info("board: stopping (%s)", signal.Signals(sig).name)
            # the streams would otherwise keep the shutdown waiting
            if hub.loop is not None and not hub.loop.is_closed():
                hub.loop.call_soon_threadsafe(hub.close)
            # as uvicorn's, less its re-raising the signal once stopped: a
            # stop asked for is a clean end (exit status 0)
            if self.should_exit and sig == signal.SIGINT:
                self.force_exit = True
            else:
                self.should_exit = True

    Server(config).run(sockets=[sock])
