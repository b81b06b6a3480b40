"""The Prometheus endpoint's server (controller/metrics_http.py), with real
sockets: connections bounded (idle ones evicted for a scraper, the rest
refused at once), each closed after its time, request heads bounded, one
thread, and never more descriptors than the bound."""

from __future__ import annotations

import os
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest
from prometheus_client import CollectorRegistry, Counter, Gauge

from controller.metrics import Metrics
from controller.metrics_http import MAX_CONNECTIONS, MAX_HEAD_BYTES, TIMEOUT_S, MetricsServer
from tests.conftest import eventually


def registry() -> CollectorRegistry:
    reg = CollectorRegistry()
    Counter("shoe_controller_cards_total", "Cards read", registry=reg).inc(7)
    return reg


@pytest.fixture
def server() -> Iterator[MetricsServer]:
    s = MetricsServer(("127.0.0.1", 0), registry())
    yield s
    s.close()


def scrape(server: MetricsServer, path: str = "/metrics") -> str:
    host, port = server.address
    with urllib.request.urlopen(f"http://{host}:{port}{path}", timeout=10) as r:
        assert r.status == 200
        return str(r.read().decode())


def connect(server: MetricsServer) -> socket.socket:
    return socket.create_connection(server.address, timeout=10)


def fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def answer_begun(s: socket.socket) -> bool:
    """Bytes of the answer wait to be read on it (peeked, none taken)."""
    s.setblocking(False)
    try:
        return bool(s.recv(1, socket.MSG_PEEK))
    except BlockingIOError:
        return False
    finally:
        s.setblocking(True)


def closed_by_server(s: socket.socket) -> bool:
    """The server closed it: EOF (or a reset) on read, without blocking."""
    s.setblocking(False)
    try:
        return s.recv(1) == b""
    except BlockingIOError:
        return False
    except ConnectionResetError:
        return True
    finally:
        s.setblocking(True)


def raw_request(server: MetricsServer, data: bytes) -> bytes:
    with connect(server) as s:
        s.sendall(data)
        got = b""
        while chunk := s.recv(65536):
            got += chunk
    return got


def test_idle_connections_past_the_bound_hold_at_most_the_bound_and_a_scrape_still_succeeds(
    server: MetricsServer,
) -> None:
    assert MAX_CONNECTIONS == 16
    threads, before = threading.active_count(), fds()
    extra = 24
    idle = [connect(server) for _ in range(MAX_CONNECTIONS + extra)]
    try:
        assert eventually(lambda: server.connections == MAX_CONNECTIONS, 10)
        # our own client sockets aside, the server holds no more than the bound
        assert eventually(lambda: fds() - before - len(idle) == MAX_CONNECTIONS, 10)
        # the oldest idle ones were closed at once to make room
        assert eventually(lambda: sum(closed_by_server(s) for s in idle[:extra]) == extra, 10)
        assert not any(closed_by_server(s) for s in idle[extra:])
        assert "shoe_controller_cards_total 7.0" in scrape(server)  # evicts one idle connection, is served
        assert threading.active_count() == threads  # no thread per connection
    finally:
        for s in idle:
            s.close()


def test_an_idle_connection_is_closed_after_the_timeout_and_its_descriptor_freed(
    server: MetricsServer,
) -> None:
    assert TIMEOUT_S == 5.0
    before = fds()
    idle = [connect(server) for _ in range(4)]
    start = time.monotonic()
    try:
        assert eventually(lambda: server.connections == 4, 5)
        time.sleep(TIMEOUT_S - 1.0)
        assert not any(closed_by_server(s) for s in idle), "closed before its time"
        assert eventually(lambda: all(closed_by_server(s) for s in idle), 5)
        assert time.monotonic() - start >= TIMEOUT_S
        assert server.connections == 0
        assert fds() - before == len(idle)  # only ours are left
    finally:
        for s in idle:
            s.close()


def test_a_client_sending_its_head_byte_by_byte_is_cut_at_the_total_timeout() -> None:
    server = MetricsServer(("127.0.0.1", 0), registry(), timeout_s=1.0)
    try:
        with connect(server) as s:
            start = time.monotonic()
            sent = 0
            with pytest.raises(OSError):  # reset or broken pipe once the server closed it
                for b in b"GET /metrics HTTP/1.1\r\nX-Slow: " + b"a" * 1000:
                    s.send(bytes([b]))
                    sent += 1
                    time.sleep(0.05)
                    if time.monotonic() - start > 10:
                        break
            assert time.monotonic() - start < 10 and sent < 200
    finally:
        server.close()


def test_a_request_head_of_the_bound_is_served_and_one_byte_more_gets_431(server: MetricsServer) -> None:
    def head(size: int) -> bytes:
        start = b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Pad: "
        end = b"\r\n\r\n"
        return start + b"a" * (size - len(start) - len(end)) + end

    ok = raw_request(server, head(MAX_HEAD_BYTES))
    assert ok.startswith(b"HTTP/1.1 200 OK\r\n") and b"shoe_controller_cards_total 7.0" in ok
    assert raw_request(server, head(MAX_HEAD_BYTES + 1)).startswith(b"HTTP/1.1 431 ")
    assert "shoe_controller_cards_total" in scrape(server)


@pytest.mark.parametrize(
    ("request_bytes", "status"),
    [
        (b"POST /metrics HTTP/1.1\r\n\r\n", b"405"),
        (b"\x00\xff\xfe\x1b[2J\r\n\r\n", b"400"),
        (b"GET /\xed\xa0\x80 HTTP/1.1\r\n\r\n", b"200"),  # a lone surrogate's bytes in the path
        (b"HEAD /metrics HTTP/1.0\r\n\r\n", b"200"),
    ],
)
def test_hostile_request_lines_are_answered_and_the_server_serves_on(
    server: MetricsServer, request_bytes: bytes, status: bytes
) -> None:
    got = raw_request(server, request_bytes)
    assert got.split(b" ", 2)[1] == status
    if request_bytes.startswith(b"HEAD"):
        assert got.endswith(b"\r\n\r\n")  # no body
    assert "shoe_controller_cards_total" in scrape(server)


def test_new_connections_are_refused_while_every_slot_sends_to_a_client_reading_nothing() -> None:
    reg = CollectorRegistry()
    # An answer of about 10 MB: more than the kernel's socket buffers on
    # both sides can take (loopback autotunes a sender's up to 4 MiB), so a
    # client that reads nothing keeps its slot busy sending.
    big = Gauge("shoe_big", "A response larger than the socket buffers", ["n"], registry=reg)
    for i in range(100):
        big.labels(f"{i:03d}" + "x" * 100_000).set(i)
    # The stuck senders must outlive the refusal check below even on a loaded
    # box (rendering 40,000 samples takes seconds there): 10 s, then awaited.
    server = MetricsServer(("127.0.0.1", 0), reg, max_connections=2, timeout_s=10.0)
    stuck = []
    try:
        for _ in range(2):
            s = socket.socket()
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            s.connect(server.address)
            s.sendall(b"GET /metrics HTTP/1.1\r\n\r\n")  # and never read
            stuck.append(s)
        assert eventually(lambda: server.connections == 2, 5)
        # both are being answered (their answer has begun to arrive), not
        # still waiting for their request: only then is a third refused
        assert eventually(lambda: all(answer_begun(s) for s in stuck), 20)
        assert server.connections == 2, "the answers fit the socket buffers: the test needs a larger one"
        with connect(server) as refused:
            assert eventually(lambda: closed_by_server(refused), 5)  # closed at once, not evicting a sender
        assert eventually(lambda: server.connections == 0, 40)  # the stuck ones time out
        host, port = server.address
        with urllib.request.urlopen(f"http://{host}:{port}/metrics", timeout=10) as r:
            assert (b'shoe_big{n="099' + b"x" * 100_000 + b'"} 99.0') in r.read()
    finally:
        for s in stuck:
            s.close()
        server.close()


def test_close_frees_every_descriptor_and_the_thread() -> None:
    threads, before = threading.active_count(), fds()
    server = MetricsServer(("127.0.0.1", 0), registry())
    idle = [connect(server) for _ in range(3)]
    assert eventually(lambda: server.connections == 3, 5)
    server.close()
    for s in idle:
        s.close()
    assert fds() == before and threading.active_count() == threads


def test_the_daemons_metrics_serve_through_the_bounded_server() -> None:
    m = Metrics(("127.0.0.1", 0))
    try:
        assert isinstance(m.server, MetricsServer)
        m.cards.inc()
        assert "shoe_controller_cards_total 1.0" in scrape(m.server)
    finally:
        m.close()


def test_a_port_in_use_is_an_oserror_with_no_thread_left() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        threads, before = threading.active_count(), fds()
        with pytest.raises(OSError):
            MetricsServer(taken.getsockname(), registry())
        assert threading.active_count() == threads and fds() == before


def test_the_archivers_metrics_serve_through_the_bounded_server() -> None:
    from controller.archive.metrics import ArchiveMetrics

    m = ArchiveMetrics(("127.0.0.1", 0))
    try:
        assert isinstance(m.server, MetricsServer)
        assert 'shoe_controller_archive_messages_total{outcome="archived"} 0.0' in scrape(m.server)
    finally:
        m.server.close()


def test_every_metric_is_in_the_namespace_and_each_endpoint_says_its_build() -> None:
    """As Prometheus exporters do: one prefix for every family, and a
    ``*_build_info`` gauge of 1 labelled with the version."""
    import platform

    from controller import __version__
    from controller.archive.metrics import ArchiveMetrics

    for m, component in ((Metrics(("127.0.0.1", 0)), "table"), (ArchiveMetrics(("127.0.0.1", 0)), "archive")):
        try:
            text = scrape(m.server)
            families = {line.split()[2] for line in text.splitlines() if line.startswith("# TYPE ")}
            assert families and all(f.startswith("shoe_controller_") for f in families), families
            info = (
                f'shoe_controller_build_info{{component="{component}",python="{platform.python_version()}",'
                f'version="{__version__}"}} 1.0'
            )
            assert info in text, text[:2000]
        finally:
            m.server.close()
