"""``shoe-controller board`` as a service: its config errors (one line
naming the bad key, exit code 2), its bounds (oversized MQTT payloads,
browsers streaming at once, a slow browser's queue), its read-only HTTP
side, the server-sent events, and catching up after a broker outage."""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import json
import socket
import subprocess
import sys
import threading
import time
import urllib.parse
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from controller.board.app import MAX_HEAD_BYTES, Hub
from controller.board.config import parse_board_config
from controller.journal import Journal
from tests.conftest import BrokerFactory, Subscriber, eventually, mqtt_client
from tests.support.board import Board, board_config, daemon_config, start_daemon, stop

REPO = Path(__file__).resolve().parent.parent


def run_board(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "controller.cli", "board", *args], capture_output=True, text=True, timeout=60
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("mqtt: {host: h}\ntables: [{table: T01, jornal: x}]\n", "tables.0.jornal: unknown key (did you mean 'journal'?)"),  # noqa: E501
        ("mqtt: {host: h}\ntables: [{table: T01}]\nodd: true\n", "odd: unknown key (did you mean 'odds'?)"),
        ("mqtt: {host: h, prot: 5}\ntables: [{table: T01}]\n", "mqtt.prot: unknown key"),
        ("mqtt: {host: h}\ntables: [{table: T01}]\nlimits: {max_clients: 0}\n", "limits.max_clients:"),
        ("mqtt: {host: h}\ntables: [{table: T01}]\nlimits: {max_payload_bytes: 99999999}\n", "limits.max_payload_bytes:"),  # noqa: E501
        ("mqtt: {host: h}\ntables: [{table: 'T 01'}]\n", "tables.0.table:"),
        ("mqtt: {host: h}\ntables: [{table: T01}, {table: T01}]\n", "tables: table 'T01' is listed twice"),
        ("mqtt: {host: h}\ntables: []\n", "tables:"),
        ("mqtt: {host: h}\ntables: [{table: T01}]\nlisten: localhost\n", "listen: must be host:port"),
        ("mqtt: {host: h, command_key_file: k}\ntables: [{table: T01}]\n", "the board is read-only"),
        ("tables: [{table: T01}]\n", "mqtt: required key missing"),
        ("mqtt: {host: h}\ntables:\n" + "".join(f"  - {{table: T{i:02d}}}\n" for i in range(65)), "tables:"),
        ("mqtt: {host: h}\ntables: [{table: T01}]\nallowed_hosts: ['evil com']\n", "allowed_hosts: 'evil com' is not a host"),  # noqa: E501
        ("mqtt: {host: h}\ntables: [{table: T01}]\nallowed_hosts: ['h:0']\n", "allowed_hosts: 'h:0' is not a host"),  # noqa: E501
        ("mqtt: {host: h}\ntables: [{table: T01}]\nallowed_hosts: []\n", "allowed_hosts:"),
        ("mqtt: {host: h}\ntables: [{table: T01}]\nallowed_hosts: [" + ",".join(f"h{i}" for i in range(33)) + "]\n", "allowed_hosts: List should have at most 32"),  # noqa: E501
    ],
)  # fmt: skip
def test_a_bad_config_is_one_line_naming_the_key_and_exit_code_2(
    tmp_path: Path, text: str, message: str
) -> None:
    path = tmp_path / "board.yaml"
    path.write_text(text)
    result = run_board("--config", str(path))
    assert result.returncode == 2, result.stderr
    assert message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "Traceback" not in result.stderr


def test_the_example_config_is_valid() -> None:
    result = run_board("--config", str(REPO / "examples" / "board.yaml"), "--check")
    assert result.returncode == 0 and ": ok (tables T01;" in result.stdout, result.stderr
    cfg = parse_board_config((REPO / "examples" / "board.yaml").read_text(), "examples/board.yaml")
    assert cfg.address == ("127.0.0.1", 8080)  # loopback unless told otherwise
    assert cfg.odds is False


def test_check_refuses_a_journal_path_that_names_no_journal(tmp_path: Path) -> None:
    """``board --check`` catches a wrong journal path now, naming the key,
    instead of a history page answering 503 later."""
    path = tmp_path / "board.yaml"
    journal = tmp_path / "T01" / "journal.sqlite3"
    path.write_text(f"mqtt: {{host: 127.0.0.1, port: 1883}}\ntables: [{{table: T01, journal: {journal}}}]\n")
    result = run_board("--config", str(path), "--check")
    assert result.returncode == 2 and result.stdout == "", result.stderr
    assert result.stderr == (
        f"shoe-controller board: {path}: tables.0.journal: {journal}: no journal there (the table's daemon"
        " writes it; an installed table keeps it at /var/lib/shoe-controller/T01/journal.sqlite3)\n"
    )
    journal.parent.mkdir()
    Journal(journal).close()
    result = run_board("--config", str(path), "--check")
    assert result.returncode == 0 and ": ok (tables T01;" in result.stdout, result.stderr


def test_an_address_in_use_is_one_line_and_exit_code_1(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        path = tmp_path / "board.yaml"
        path.write_text("mqtt: {host: 127.0.0.1}\ntables: [{table: T01}]\n")
        result = run_board("--config", str(path), "--listen", f"127.0.0.1:{port}")
    assert result.returncode == 1, result.stderr
    assert f"cannot listen on 127.0.0.1:{port}" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert run_board("--listen", "nowhere").returncode == 2


def test_the_board_never_publishes() -> None:
    """Read-only by construction: no code of the board calls publish (the
    MQTT client is subscribe-only) and there is no command module."""
    for path in (REPO / "controller" / "board").rglob("*.py"):
        assert ".publish(" not in path.read_text(), path
        assert "command" not in path.name


# --- the hub, without a server ------------------------------------------------------


def test_a_slow_browser_loses_its_oldest_views_and_nothing_waits_for_it() -> None:
    cfg = parse_board_config("mqtt: {host: h}\ntables: [{table: T01}]\nlimits: {client_queue: 3}\n")

    async def scenario() -> tuple[int, int, list[int]]:
        hub = Hub(cfg)
        hub.loop = asyncio.get_running_loop()
        client = hub.open_stream("T01")
        assert client is not None
        for i in range(10):  # ten changes; the browser reads none of them
            hub.deliver("T01", "baccarat/T01/status", b"online" if i % 2 else b"offline")
            await asyncio.sleep(0)  # the coalesced flush runs
        versions = [json.loads(v)["version"] for v in client.queue]
        return len(client.queue), hub.stats.dropped_views, versions

    length, dropped, versions = asyncio.run(scenario())
    assert length == 3  # the bound
    assert dropped == 8  # the initial view and ten updates: eleven, three kept
    assert versions == sorted(versions) and versions[-1] == 10  # the newest kept


# --- the service, against a real broker -----------------------------------------------


def sse_open(board: Board, table: str = "T01") -> http.client.HTTPConnection:
    url = urllib.parse.urlsplit(board.url)
    conn = http.client.HTTPConnection(url.hostname or "127.0.0.1", url.port, timeout=10)
    conn.request("GET", f"/api/table/{table}/events")
    return conn


def sse_next_view(resp: http.client.HTTPResponse) -> dict[str, Any]:
    event = ""
    while True:
        line = resp.fp.readline().decode()
        if line.startswith("event:"):
            event = line.split(":", 1)[1].strip()
        elif line.startswith("data:") and event == "view":
            data: dict[str, Any] = json.loads(line.split(":", 1)[1])
            return data


@pytest.mark.mqtt
def test_http_is_read_only_and_streams_views(tmp_path: Path, mosquitto: BrokerFactory) -> None:
    broker = mosquitto()
    board = Board(board_config(tmp_path, broker), tmp_path / "board.log")
    try:
        status, body = board.get("/table/T01")
        assert status == 200 and b'data-table="T01"' in body
        assert board.get("/table/T99")[0] == 404
        assert board.get("/api/table/T99")[0] == 404
        assert board.get("/static/board.js")[0] == 200
        url = urllib.parse.urlsplit(board.url)
        for method in ("POST", "PUT", "DELETE", "PATCH"):
            conn = http.client.HTTPConnection(url.hostname or "", url.port, timeout=10)
            conn.request(method, "/api/table/T01", body=b"{}")
            resp = conn.getresponse()
            assert resp.status == 405, method
            assert resp.getheader("Allow") == "GET, HEAD"
            conn.close()
        conn = http.client.HTTPConnection(url.hostname or "", url.port, timeout=10)
        conn.request("GET", "/")
        resp = conn.getresponse()
        assert "default-src 'self'" in (resp.getheader("Content-Security-Policy") or "")
        assert resp.getheader("X-Content-Type-Options") == "nosniff"
        conn.close()
        # over the wire too: a name that is not the board's is refused
        conn = http.client.HTTPConnection(url.hostname or "", url.port, timeout=10)
        conn.request("GET", "/api/table/T01", headers={"Host": f"rebound.example:{url.port}"})
        resp = conn.getresponse()
        assert resp.status == 400
        assert resp.read() == b"this board does not answer for that Host (see allowed_hosts)\n"
        conn.close()

        stream = sse_open(board)
        resp = stream.getresponse()
        assert resp.status == 200 and resp.getheader("Content-Type", "").startswith("text/event-stream")
        first = sse_next_view(resp)
        assert first["table"] == "T01"
        # a change arrives on the open stream
        pub = mqtt_client(broker)[0]
        pub.publish("baccarat/T01/status", "online", qos=1, retain=True).wait_for_publish(10)
        while first.get("status") != "online":
            first = sse_next_view(resp)
        assert first["status"] == "online"
        pub.disconnect()
        # a stop with a browser still streaming: the stream ends, the exit is clean
        assert board.stop() == 0, board.log.read_text()
        assert resp.fp.read() is not None  # returns (end of stream) rather than hanging
        stream.close()
    finally:
        board.stop()


@pytest.mark.mqtt
def test_too_many_browsers_get_503_and_are_counted(tmp_path: Path, mosquitto: BrokerFactory) -> None:
    broker = mosquitto()
    board = Board(board_config(tmp_path, broker, limits={"max_clients": 2}), tmp_path / "board.log")
    try:
        streams = [sse_open(board), sse_open(board)]
        for s in streams:
            resp = s.getresponse()
            assert resp.status == 200
            sse_next_view(resp)
        third = sse_open(board)
        resp = third.getresponse()
        assert resp.status == 503
        assert resp.getheader("Retry-After") == "10"
        third.close()
        stats = board.stats()
        assert stats["refused_clients"] == 1 and stats["clients"] == 2
        # a browser that goes away frees its place
        streams[0].close()
        assert eventually(lambda: board.stats()["clients"] == 1, 30)
        again = sse_open(board)
        assert again.getresponse().status == 200
        again.close()
        streams[1].close()
    finally:
        assert board.stop() == 0, board.log.read_text()


def _address(board: Board) -> tuple[str, int]:
    url = urllib.parse.urlsplit(board.url)
    return url.hostname or "127.0.0.1", url.port or 80


def _raw_get(address: tuple[str, int], path: str, *, pad: int = 0) -> bytes:
    """A GET request head, with ``pad`` bytes of an ``X-Pad`` header."""
    head = f"GET {path} HTTP/1.1\r\nHost: {address[0]}:{address[1]}\r\n"
    if pad:
        head += "X-Pad: " + "a" * pad + "\r\n"
    return (head + "\r\n").encode()


def _status_of(sock: socket.socket) -> int:
    data = b""
    while b"\r\n" not in data:
        chunk = sock.recv(4096)
        if not chunk:
            break
        data += chunk
    return int(data.split(b" ", 2)[1])


def _closed_by_server(sock: socket.socket, within: float) -> bool:
    sock.settimeout(within)
    try:
        while sock.recv(4096):
            pass
    except TimeoutError:
        return False
    except ConnectionResetError:
        pass
    return True


@pytest.mark.mqtt
def test_idle_connections_hold_no_request_and_are_closed_at_the_head_deadline(
    tmp_path: Path, mosquitto: BrokerFactory
) -> None:
    """40 connections that send nothing (with 8 streams
    allowed) and one that sends its head a byte at a time: a request and a
    stream are still answered at once, and every one of them is closed at
    the head deadline (the dribbling one too, though its bytes still come)."""
    broker = mosquitto()
    limits = {"max_clients": 8, "head_timeout_s": 2}
    board = Board(board_config(tmp_path, broker, limits=limits), tmp_path / "board.log")
    address = _address(board)
    idle: list[socket.socket] = []
    try:
        opened = time.monotonic()
        idle = [socket.create_connection(address, timeout=10) for _ in range(40)]
        dribbler = socket.create_connection(address, timeout=10)
        head = _raw_get(address, "/api/table/T01", pad=200)
        dribbled = 0

        def dribble() -> None:
            nonlocal dribbled
            with contextlib.suppress(OSError):
                for b in head:  # a byte every 0.1 s: the head would take 25 s
                    dribbler.send(bytes([b]))
                    dribbled += 1
                    time.sleep(0.1)

        threading.Thread(target=dribble, daemon=True).start()
        time.sleep(0.3)  # every connection is in
        started = time.monotonic()
        status, body = board.get("/api/table/T01")
        assert status == 200 and json.loads(body)["table"] == "T01"
        stream = sse_open(board)
        resp = stream.getresponse()
        assert resp.status == 200 and sse_next_view(resp)["table"] == "T01"
        assert time.monotonic() - started < 1.5  # not after the idle ones are gone
        stats = board.stats()
        assert stats["idle_connections"] >= 41 and stats["refused_requests"] == 0, stats
        # the head deadline closes them all: 2 s from their opening
        for sock in [*idle, dribbler]:
            assert _closed_by_server(sock, 10)
        waited = time.monotonic() - opened
        assert 1.5 < waited < 6, waited
        assert 5 < dribbled < len(head)  # it was still sending when it was closed
        stats = board.stats()
        assert stats["heads_timed_out"] >= 41 and stats["idle_connections"] == 0, stats
        # the stream is a request being served, not an idle connection: it stays
        assert stats["clients"] == 1, stats
        stream.close()
    finally:
        for sock in idle:
            sock.close()
        assert board.stop() == 0, board.log.read_text()


@pytest.mark.mqtt
def test_the_connections_waiting_for_a_head_are_bounded_the_oldest_closed_first(
    tmp_path: Path, mosquitto: BrokerFactory
) -> None:
    broker = mosquitto()
    limits = {"max_idle_connections": 8, "head_timeout_s": 30}
    board = Board(board_config(tmp_path, broker, limits=limits), tmp_path / "board.log")
    address = _address(board)
    socks: list[socket.socket] = []
    try:
        for _ in range(8):
            socks.append(socket.create_connection(address, timeout=10))
        time.sleep(0.3)
        assert not any(_closed_by_server(sock, 0.05) for sock in socks)  # the bound: all stay
        socks.append(socket.create_connection(address, timeout=10))  # one more
        assert _closed_by_server(socks[0], 5)  # the oldest made room
        assert not any(_closed_by_server(sock, 0.05) for sock in socks[1:])
        # a request still comes through (its connection the newest)
        with socket.create_connection(address, timeout=10) as sock:
            sock.sendall(_raw_get(address, "/api/table/T01"))
            assert _status_of(sock) == 200
        assert board.stats()["idle_closed"] >= 2
    finally:
        for sock in socks:
            sock.close()
        assert board.stop() == 0, board.log.read_text()


@pytest.mark.mqtt
def test_a_request_head_of_exactly_the_bound_is_served_and_one_byte_more_is_refused(
    tmp_path: Path, mosquitto: BrokerFactory
) -> None:
    broker = mosquitto()
    board = Board(board_config(tmp_path, broker), tmp_path / "board.log")
    address = _address(board)
    try:
        base = len(_raw_get(address, "/api/table/T01", pad=1)) - 1
        for size, expected in ((MAX_HEAD_BYTES, 200), (MAX_HEAD_BYTES + 1, 431)):
            head = _raw_get(address, "/api/table/T01", pad=size - base)
            assert len(head) == size
            for pieces in (1, 7):  # at once, and in pieces
                with socket.create_connection(address, timeout=10) as sock:
                    step = -(-size // pieces)
                    for i in range(0, size, step):
                        sock.sendall(head[i : i + step])
                        time.sleep(0.02 if pieces > 1 else 0)
                    assert _status_of(sock) == expected, (size, pieces)
        # a head far past the bound (uvicorn alone took 64 KiB): 431
        with socket.create_connection(address, timeout=10) as sock:
            sock.sendall(_raw_get(address, "/api/table/T01", pad=64 * 1024))
            assert _status_of(sock) == 431
            assert _closed_by_server(sock, 10)
        assert board.stats()["heads_too_large"] == 3
    finally:
        assert board.stop() == 0, board.log.read_text()


@pytest.mark.mqtt
@pytest.mark.parametrize("protocol", ["5", "3.1.1"])
def test_an_oversized_payload_is_never_applied(
    tmp_path: Path, mosquitto: BrokerFactory, protocol: str
) -> None:
    broker = mosquitto()
    cfg = board_config(tmp_path, broker, limits={"max_payload_bytes": 1024})
    text = cfg.read_text().replace(f"port: {broker.port}", f"port: {broker.port}\n  protocol: '{protocol}'")
    cfg.write_text(text)
    board = Board(cfg, tmp_path / "board.log")
    pub = mqtt_client(broker)[0]
    try:
        assert eventually(lambda: board.view()["broker"], 30)
        cell = {"w": "B", "pp": False, "bp": False}
        empty: list[Any] = []
        roads = {"v": 1, "type": "roads", "event_id": "T01/20261123T050000Z/1", "table": "T01",
                 "shoe": "20261123T050000Z", "seq": 1, "ts": "2026-11-23T05:00:00.000Z",
                 "bead_plate": [[cell] * 6] * 10, "big_road": empty,
                 "big_eye_boy": empty, "small_road": empty, "cockroach_pig": empty}  # fmt: skip
        big = json.dumps(roads).encode()
        assert len(big) > 1024
        pub.publish("baccarat/T01/roads", big, qos=1).wait_for_publish(10)
        # a message at the bound is taken: after it, the big one has had its chance
        small = {**roads, "bead_plate": [[{"w": "P", "pp": False, "bp": False}]]}
        payload = json.dumps(small).encode()
        payload += b" " * (1024 - len(payload))
        assert len(payload) == 1024
        pub.publish("baccarat/T01/roads", payload, qos=1).wait_for_publish(10)
        assert eventually(lambda: len(board.view()["roads"]["bead_plate"]) == 1, 30)
        assert [c["w"] for c in board.view()["roads"]["bead_plate"]] == ["P"]
        # MQTT 5: the broker never sends it (the CONNECT's maximum packet
        # size); 3.1.1: it arrives and is dropped unread, counted
        assert board.stats()["oversized_messages"] == (0 if protocol == "5" else 1)
    finally:
        pub.disconnect()
        assert board.stop() == 0, board.log.read_text()


@pytest.mark.mqtt
def test_the_board_catches_up_after_a_broker_outage(
    tmp_path: Path, mosquitto: BrokerFactory, subscriber: Callable[..., Subscriber]
) -> None:
    broker = mosquitto(persistence=True)
    daemon = start_daemon(daemon_config(tmp_path, broker, cards_per_second=20, seed=7))
    board = Board(board_config(tmp_path, broker), tmp_path / "board.log")
    try:
        assert eventually(lambda: len(board.view()["roads"]["bead_plate"]) >= 3, 60), board.log.read_text()
        broker.stop()
        assert eventually(lambda: not board.view()["broker"], 30)
        view = board.view()
        before, shoe = len(view["roads"]["bead_plate"]), view["shoe"]
        time.sleep(3)  # the shoe goes on while the broker is away (events wait in the journal)
        broker.start()
        assert eventually(lambda: board.view()["broker"], 30)
        late = subscriber(broker, ["baccarat/T01/roads"])

        def same_as_retained() -> bool:
            roads = late.on("baccarat/T01/roads")
            if not roads:
                return False
            latest = json.loads(roads[-1].payload)
            want = [c["w"] for col in latest["bead_plate"] for c in col]
            view = board.view()
            return view["shoe"] == latest["shoe"] and [c["w"] for c in view["roads"]["bead_plate"]] == want

        assert eventually(same_as_retained, 60), board.log.read_text()
        # what it shows is new: coups dealt during the outage (or a new shoe)
        view = board.view()
        assert len(view["roads"]["bead_plate"]) > before or view["shoe"] != shoe
    finally:
        stop(daemon)
        assert board.stop() == 0, board.log.read_text()


# --- the surveillance review's routes (controller/history_web) ---------


def asgi(
    app: Any, path: str, method: str = "GET", hosts: tuple[bytes, ...] = (b"127.0.0.1:8080",)
) -> tuple[int, bytes]:
    """One request straight into the ASGI app (no server, no network), with
    these ``Host`` headers (the default config's listen address)."""
    return asgi_full(app, path, method, hosts)[::2]


def asgi_full(
    app: Any, path: str, method: str = "GET", hosts: tuple[bytes, ...] = (b"127.0.0.1:8080",)
) -> tuple[int, dict[str, str], bytes]:
    async def go() -> tuple[int, dict[str, str], bytes]:
        sent: list[dict[str, Any]] = []
        scope = {
            "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": method,
            "scheme": "http", "path": path, "raw_path": path.encode(), "query_string": b"", "root_path": "",
            "headers": [(b"host", h) for h in hosts], "client": ("127.0.0.1", 1), "server": ("127.0.0.1", 80),
        }  # fmt: skip

        async def receive() -> dict[str, Any]:
            return {"type": "http.request", "body": b"", "more_body": False}

        async def send(message: dict[str, Any]) -> None:
            sent.append(message)

        await app(scope, receive, send)
        start = next(m for m in sent if m["type"] == "http.response.start")
        headers = {k.decode().lower(): v.decode() for k, v in start["headers"]}
        body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
        return start["status"], headers, body

    return asyncio.run(go())


def test_history_routes_are_mounted_for_the_tables_with_a_journal_and_stay_read_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from starlette.responses import PlainTextResponse
    from starlette.routing import Route

    from controller.board.app import build_app

    given: list[dict[str, Path]] = []

    def history_routes(journals: dict[str, Path]) -> list[Route]:
        given.append(dict(journals))

        async def coup(request: Any) -> PlainTextResponse:
            p = request.path_params
            return PlainTextResponse(f"timeline {p['table']} {p['shoe']} {p['coup']}")

        return [Route("/history/{table}/coup/{shoe}/{coup}", coup)]

    stub = type(sys)("controller.history_web")
    stub.history_routes = history_routes  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "controller.history_web", stub)
    journal = tmp_path / "T01.sqlite3"
    cfg = parse_board_config(
        f"mqtt: {{host: h}}\ntables: [{{table: T01, journal: '{journal}'}}, {{table: T02}}]\n"
    )
    app = build_app(cfg, Hub(cfg))
    assert given == [{"T01": journal}]
    status, body = asgi(app, "/table/T01")
    assert status == 200 and b'data-history="/history/T01"' in body
    status, body = asgi(app, "/table/T02")
    assert status == 200 and b'data-history=""' in body  # no journal: no links
    assert asgi(app, "/history/T01/coup/20261123T050000Z/7") == (200, b"timeline T01 20261123T050000Z 7")
    assert asgi(app, "/history/T01/coup/20261123T050000Z/7", "POST")[0] == 405
    assert asgi(app, "/api/table/T01", "DELETE")[0] == 405


def test_only_the_allowed_host_names_are_answered() -> None:
    """DNS rebinding: a hostile page whose name now points at 127.0.0.1
    sends its own name as Host; the board refuses it (400, one line, and
    counted) so the page cannot read the board."""
    from controller.board.app import build_app

    cfg = parse_board_config("mqtt: {host: h}\ntables: [{table: T01}]\n")  # listen 127.0.0.1:8080
    hub = Hub(cfg)
    app = build_app(cfg, hub)
    for host in (b"127.0.0.1:8080", b"localhost:8080", b"LocalHost:8080", b"[::1]:8080"):
        assert asgi(app, "/api/table/T01", hosts=(host,))[0] == 200, host
    refused = [
        (b"evil.example:8080",),  # a rebinding page's own name
        (b"evil.example",),
        (b"localhost:8081",),  # another port
        (b"localhost",),  # the default entries carry the listen port
        (b"127.0.0.1:8080@evil",),
        (b"127.0.0.1:8080", b"evil.example:8080"),  # two Host headers
        (),  # none (HTTP/1.0)
        (b"x" * 300,),
    ]
    for hosts in refused:
        status, headers, body = asgi_full(app, "/api/table/T01", hosts=hosts)
        assert status == 400, hosts
        assert body == b"this board does not answer for that Host (see allowed_hosts)\n"
        assert headers["x-frame-options"] == "DENY"
        assert "default-src 'self'" in headers["content-security-policy"]
    # the host check comes first: a refused name learns nothing, not even 405
    assert asgi(app, "/api/table/T01", "POST", hosts=(b"evil.example:8080",))[0] == 400
    assert asgi(app, "/api/table/T01", "POST")[0] == 405
    assert hub.stats.refused_hosts == len(refused) + 1
    assert json.loads(asgi(app, "/api/stats")[1])["refused_hosts"] == len(refused) + 1

    # a configured list replaces the default; an entry without a port
    # allows the listen port and none (a reverse proxy's)
    cfg = parse_board_config(
        "mqtt: {host: h}\ntables: [{table: T01}]\nlisten: '0.0.0.0:8080'\n"
        "allowed_hosts: [board.pit.local, '10.1.2.3:8080']\n"
    )
    app = build_app(cfg, Hub(cfg))
    for host, status in (
        (b"board.pit.local", 200),
        (b"board.pit.local:8080", 200),
        (b"board.pit.local:9000", 400),
        (b"10.1.2.3:8080", 200),
        (b"10.1.2.3", 400),
        (b"localhost:8080", 400),
        (b"0.0.0.0:8080", 400),
    ):
        assert asgi(app, "/", hosts=(host,))[0] == status, host


@pytest.mark.mqtt
def test_a_board_on_every_address_says_which_names_it_answers(
    tmp_path: Path, mosquitto: BrokerFactory
) -> None:
    from tests.conftest import free_port

    port = free_port()
    board = Board(board_config(tmp_path, mosquitto(), listen=f"0.0.0.0:{port}"), tmp_path / "board.log")
    try:
        assert board.get("/api/table/T01")[0] == 200  # Host 0.0.0.0:port, the listen address
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        conn.request("GET", "/api/table/T01", headers={"Host": f"10.9.8.7:{port}"})
        assert conn.getresponse().status == 400  # a LAN name not listed
        conn.close()
    finally:
        assert board.stop() == 0
    assert "list the names other screens use in allowed_hosts" in board.log.read_text()


def test_check_config_knows_a_board_config(tmp_path: Path) -> None:
    def check(path: Path) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "controller.cli", "check-config", str(path)],
            capture_output=True,
            text=True,
            timeout=60,
        )

    good = check(REPO / "examples" / "board.yaml")
    assert good.returncode == 0 and good.stdout.startswith("ok: "), good.stderr
    assert "roadmap display" in good.stdout and "tables: T01" in good.stdout
    bad = tmp_path / "board.yaml"
    bad.write_text("mqtt: {host: h}\ntables: [{table: T01, jornal: x}]\n")
    result = check(bad)
    assert result.returncode == 2
    assert result.stderr.strip().endswith("tables.0.jornal: unknown key (did you mean 'journal'?)")
    # a table's config is still checked as one
    assert check(REPO / "examples" / "config.yaml").stdout.startswith("ok: ")
