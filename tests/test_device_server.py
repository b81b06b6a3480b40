"""The serial driver through a serial device server: ``socket://`` (a box in
TCP-server mode) and ``rfc2217://``, on real sockets on 127.0.0.1 served by
tests/support/device_server.py. Stopped and restarted mid-coup, the server's
loss shows as link down/up with nothing invented, exactly as an unplugged
local port does (tests/test_serial_driver.py)."""

from __future__ import annotations

import os
import select
import socket
import threading
import time
import tty
from collections.abc import Iterator
from pathlib import Path

import pytest

from controller.cli import main
from controller.config import parse_config
from controller.errors import ConfigError
from drivers.base import Driver, LinkDownError, LinkEvent
from drivers.fake import FakeShoe
from drivers.serial import (
    DEAD_PEER_S,
    KEEPALIVE_IDLE_S,
    KEEPALIVE_INTERVAL_S,
    KEEPALIVE_PROBES,
    SerialDriver,
    parse_port,
)
from tests.conftest import free_port
from tests.support.device_server import Rfc2217Server, ShoeServer

pytestmark = pytest.mark.filterwarnings("ignore:set(Daemon|Name)\\(\\) is deprecated:DeprecationWarning")


def shoe() -> FakeShoe:
    # one 1-deck shoe whose line drops mid-coup several times (seed 5)
    return FakeShoe(seed=5, shoes=1, decks=1, cut_card_min=12, faults="disconnect:0.3")


def disconnects(fake: FakeShoe) -> int:
    return sum(1 for c in fake.coups for f in c["faults"] if f["kind"] == "disconnect")


def read_all(drv: Driver, want: int, timeout: float = 30.0) -> tuple[bytes, list[bool]]:
    """Bytes and link states read until ``want`` bytes came (bounded)."""
    got = b""
    links: list[bool] = []
    deadline = time.monotonic() + timeout
    while len(got) < want and time.monotonic() < deadline:
        item = drv.read(0.5)
        if isinstance(item, LinkEvent):
            links.append(item.up)
        elif item is not None:
            got += item[1]
    return got, links


def next_link_event(drv: Driver, timeout: float = 10.0) -> LinkEvent:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        item = drv.read(0.5)
        if isinstance(item, LinkEvent):
            return item
        assert item is None, f"unexpected data while waiting for a link event: {item!r}"
    raise AssertionError("no link event")


def read_bytes(drv: Driver, want: int, timeout: float = 10.0) -> bytes:
    out = b""
    deadline = time.monotonic() + timeout
    while len(out) < want and time.monotonic() < deadline:
        item = drv.read(0.5)
        assert not isinstance(item, LinkEvent), item
        if item is not None:
            out += item[1]
    return out


def read_pty(master: int, want: int, timeout: float = 10.0) -> bytes:
    """Up to ``want`` bytes from a pty's master side, in as many reads as
    they take to come."""
    out = b""
    deadline = time.monotonic() + timeout
    while len(out) < want and time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 0.1)
        if ready:
            out += os.read(master, want - len(out))
    return out


class OneShot:
    """A bare TCP server on 127.0.0.1: accepts, runs ``script(conn)``."""

    def __init__(self, port: int = 0) -> None:
        self.listener = socket.socket()
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", port))
        self.listener.listen(1)
        self.port = self.listener.getsockname()[1]
        self.url = f"socket://127.0.0.1:{self.port}"

    def accept(self, timeout: float = 10.0) -> socket.socket:
        ready, _, _ = select.select([self.listener], [], [], timeout)
        assert ready, "no client connected"
        conn, _ = self.listener.accept()
        return conn

    def close(self) -> None:
        self.listener.close()


# -- socket:// ---------------------------------------------------------------


def test_a_socket_port_reads_the_fake_shoe_byte_for_byte_across_server_restarts() -> None:
    fake = shoe()
    expected = b"".join(d for _, d in shoe().stream())
    with ShoeServer(fake, outage=0.3) as server:
        drv = SerialDriver(server.url, 9600, backoff_initial=0.05, backoff_max=0.4)
        assert isinstance(drv, Driver)
        drv.open()
        try:
            got, links = read_all(drv, len(expected))
        finally:
            drv.close()
    n = disconnects(fake)
    assert n >= 2 and server.restarts == n
    # nothing invented, nothing lost but what the shoe sent while the box was away
    assert got == expected == bytes(server.sent)
    assert links == [False, True] * n
    assert drv.reconnects == n


def test_a_device_server_that_closes_the_connection_is_a_link_down_then_reconnects() -> None:
    server = OneShot()
    drv = SerialDriver(server.url, 9600, backoff_initial=0.05, backoff_max=0.2)
    drv.open()
    try:
        conn = server.accept()
        time.sleep(0.3)  # let pyserial's open finish its input flush
        conn.sendall(b"$SH,1,BTN,RESULT*00\r\n")
        assert read_bytes(drv, 21) == b"$SH,1,BTN,RESULT*00\r\n"
        conn.close()  # the box restarts: FIN, no more bytes
        down = next_link_event(drv)
        assert down.up is False
        assert down.detail == f"{server.url}: the device server closed the connection"
        # it had delivered bytes: a fresh start (first retry after 0.05 s, next 0.1)
        assert drv._backoff == 0.1
        with pytest.raises(LinkDownError):
            drv.write(b"$HO,0,REQ,STAT*00\r\n")
        # the listener is still there: the driver comes back on its own
        up = next_link_event(drv)
        assert up.up is True and drv.reconnects == 1
        conn = server.accept()
        time.sleep(0.3)
        conn.sendall(b"after")
        assert read_bytes(drv, 5) == b"after"
        conn.close()
    finally:
        drv.close()
        server.close()


def test_a_device_server_absent_at_open_is_reported_down_and_picked_up_when_it_listens() -> None:
    port = free_port()
    drv = SerialDriver(f"socket://127.0.0.1:{port}", 9600, backoff_initial=0.05, backoff_max=0.2)
    drv.open()
    server: OneShot | None = None
    try:
        first = drv.read(0.1)
        assert isinstance(first, LinkEvent) and first.up is False
        assert "Connection refused" in first.detail
        # refused again and again: reads keep returning nothing, no new event
        for _ in range(3):
            assert drv.read(0.1) is None
        server = OneShot(port)
        assert next_link_event(drv).up is True
        server.accept().close()
    finally:
        drv.close()
        if server is not None:
            server.close()


def test_host_commands_reach_the_device_server() -> None:
    server = OneShot()
    drv = SerialDriver(server.url, 9600)
    drv.open()
    try:
        conn = server.accept()
        drv.write(b"$HO,0,REQ,STAT*00\r\n")
        conn.settimeout(5)
        assert conn.recv(100) == b"$HO,0,REQ,STAT*00\r\n"
        conn.close()
    finally:
        drv.close()
        server.close()


def test_a_network_port_has_tcp_keepalive_so_a_vanished_device_server_is_noticed() -> None:
    # A box that loses power sends no FIN; without keepalive a reading-only
    # client would wait on the dead connection for ever. (Dropping packets
    # on loopback needs privileges: the options themselves are checked.)
    server = OneShot()
    drv = SerialDriver(server.url, 9600)
    drv.open()
    try:
        conn = server.accept()
        sock = drv._serial._socket  # type: ignore[union-attr]
        assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE) == 1
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE) == KEEPALIVE_IDLE_S
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL) == KEEPALIVE_INTERVAL_S
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT) == KEEPALIVE_PROBES
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT) == DEAD_PEER_S * 1000
        conn.close()
    finally:
        drv.close()
        server.close()


def test_a_read_keeps_its_timeout_while_a_connect_hangs() -> None:
    # Nothing listens at first (refused: down). Then a listener that never
    # accepts, its one-place queue taken: the next SYN is dropped, so a
    # connect hangs as toward a powered-off box (until pyserial's 5 s
    # timeout). Reconnects run in a thread: reads still return.
    port = free_port()
    drv = SerialDriver(f"socket://127.0.0.1:{port}", 9600, backoff_initial=0.05, backoff_max=0.05)
    drv.open()
    listener = socket.socket()
    filler: socket.socket | None = None
    try:
        first = drv.read(0.1)
        assert isinstance(first, LinkEvent) and first.up is False
        listener.bind(("127.0.0.1", port))
        listener.listen(0)
        filler = socket.create_connection(("127.0.0.1", port), timeout=5)
        in_flight = 0
        for _ in range(10):
            assert drv.read(0.1) is None
            attempt = drv._attempt
            in_flight += attempt is not None and not attempt.done.is_set()
        assert in_flight > 0, "a hanging connect was never seen in flight"
        assert not drv.is_up
    finally:
        drv.close()
        if filler is not None:
            filler.close()
        listener.close()


def test_a_device_server_that_accepts_and_closes_at_once_is_not_hammered() -> None:
    # Another client holds the box's only connection: it accepts and closes.
    # Each reconnect that fails at once keeps the backoff growing.
    server = OneShot()
    stop = threading.Event()
    accepted: list[float] = []

    def serve() -> None:
        while not stop.is_set():
            ready, _, _ = select.select([server.listener], [], [], 0.05)
            if ready:
                conn, _ = server.listener.accept()
                accepted.append(time.monotonic())
                conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    drv = SerialDriver(server.url, 9600, backoff_initial=0.05, backoff_max=0.4)
    drv.open()
    states: list[bool] = []
    try:
        deadline = time.monotonic() + 3.0
        while time.monotonic() < deadline:
            item = drv.read(0.1)
            if isinstance(item, LinkEvent):
                states.append(item.up)
    finally:
        drv.close()
        stop.set()
        thread.join(5)
        server.close()
    # delays 0.05, 0.1, 0.2, 0.4, 0.4, ...: at most 10 connections in 3 s
    # (without the growing backoff it would be one every 0.05 s, about 60)
    assert 4 <= len(accepted) <= 10, accepted
    assert states[:4] == [False, True, False, True]
    assert drv._backoff == 0.4  # grown to its cap, never started over


def cpu_while(action: object, seconds: float) -> float:
    assert callable(action)
    start_cpu = time.process_time()
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        action()
    return time.process_time() - start_cpu


def test_waiting_on_a_quiet_device_server_costs_no_cpu() -> None:
    server = OneShot()
    drv = SerialDriver(server.url, 9600)
    drv.open()
    try:
        conn = server.accept()
        assert cpu_while(lambda: drv.read(0.05), 1.0) < 0.15
        conn.close()
    finally:
        drv.close()
        server.close()


# -- rfc2217:// --------------------------------------------------------------


@pytest.fixture
def pty_line() -> Iterator[tuple[int, str]]:
    """The shoe's serial line: a pty whose slave the device server opens."""
    master, slave = os.openpty()
    tty.setraw(slave)
    name = os.ttyname(slave)
    os.close(slave)
    yield master, name
    os.close(master)


@pytest.fixture
def rfc2217(pty_line: tuple[int, str]) -> Iterator[Rfc2217Server]:
    with Rfc2217Server(pty_line[1]) as server:
        yield server


def test_an_rfc2217_port_negotiates_the_baud_rate_and_reads_the_shoe_across_a_restart(
    pty_line: tuple[int, str], rfc2217: Rfc2217Server
) -> None:
    master, _ = pty_line
    stream = b"".join(d for _, d in FakeShoe(seed=2, shoes=1, decks=1, cut_card_min=12).stream())
    half = len(stream) // 2
    drv = SerialDriver(rfc2217.url, 4800, backoff_initial=0.05, backoff_max=0.4)
    drv.open()
    try:
        assert drv.is_up
        assert rfc2217.ready.wait(10)
        assert rfc2217.baudrates == [4800]  # negotiated: the box's line runs at the config's speed
        sock = drv._serial._socket  # type: ignore[union-attr]
        assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE) == 1
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT) == DEAD_PEER_S * 1000
        os.write(master, stream[:half])
        assert read_bytes(drv, half) == stream[:half]

        command = b"$HO,0,REQ,STAT*00\r\n"
        drv.write(command)
        assert read_pty(master, len(command)) == command  # through the box, in any number of pieces

        rfc2217.restart(outage=0.3)
        down = next_link_event(drv)
        assert down.up is False
        assert down.detail == f"{rfc2217.url}: the device server closed the connection"
        up = next_link_event(drv)
        assert up.up is True and drv.reconnects == 1
        assert rfc2217.ready.wait(10) and rfc2217.baudrates == [4800, 4800]
        os.write(master, stream[half:])
        assert read_bytes(drv, len(stream) - half) == stream[half:]
        assert drv.read(0.3) is None  # and nothing more: nothing invented
    finally:
        drv.close()


def test_waiting_on_a_quiet_rfc2217_port_costs_no_cpu(rfc2217: Rfc2217Server) -> None:
    # pyserial reads RFC 2217 in a thread and the port has no descriptor to
    # select on: the driver waits on a queue, it does not poll
    drv = SerialDriver(rfc2217.url, 9600)
    drv.open()
    try:
        assert rfc2217.ready.wait(10)
        assert cpu_while(lambda: drv.read(0.05), 1.0) < 0.15
    finally:
        drv.close()


def test_an_rfc2217_server_absent_at_open_is_reported_down() -> None:
    drv = SerialDriver(f"rfc2217://127.0.0.1:{free_port()}", 9600, backoff_initial=0.05)
    drv.open()
    try:
        first = drv.read(0.1)
        assert isinstance(first, LinkEvent) and first.up is False and "Connection refused" in first.detail
    finally:
        drv.close()


# -- which ports are accepted --------------------------------------------------


@pytest.mark.parametrize(
    ("port", "want"),
    [
        ("/dev/serial/by-id/usb-ACME_Shoe-if00", None),
        ("/dev/ttyS0", None),
        ("socket://10.20.0.31:4001", ("socket", "10.20.0.31", 4001)),
        ("SOCKET://nport-t07.casino.lan:4001", ("socket", "nport-t07.casino.lan", 4001)),
        ("socket://[fd00::31]:4001", ("socket", "fd00::31", 4001)),
        ("rfc2217://10.20.0.31:1", ("rfc2217", "10.20.0.31", 1)),
        ("rfc2217://10.20.0.31:65535?timeout=5&ign_set_control", ("rfc2217", "10.20.0.31", 65535)),
    ],
)
def test_local_paths_and_device_server_urls_are_accepted(
    port: str, want: tuple[str, str, int] | None
) -> None:
    net = parse_port(port)
    assert (None if net is None else (net.scheme, net.host, net.port)) == want
    cfg = parse_config(f"table: T01\ndevice: {{driver: serial, port: '{port}'}}\n")
    assert cfg.device.port == port  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("port", "says"),
    [
        ("loop://", "loop:// is not a way to reach a shoe"),
        ("spy:///dev/ttyUSB0", "spy:// is not a way to reach a shoe"),
        ("alt:///dev/ttyUSB0?class=PosixPollSerial", "alt:// is not a way"),
        ("hwgrep://0403:6001", "hwgrep:// is not a way"),
        ("socket://", "host is missing"),
        ("socket://:4001", "host is missing"),
        ("socket://10.20.0.31", "TCP port is missing"),
        ("socket://10.20.0.31:0", "must be in 1..65535, not 0"),
        ("socket://10.20.0.31:65536", "must be a number in 1..65535"),
        ("socket://10.20.0.31:telnet", "must be a number in 1..65535"),
        ("socket://bad_host!:4001", "is not a host name or address"),
        ("socket://[fd00::zz]:4001", "IPv6 address"),
        ("socket://user@10.20.0.31:4001", "no user name"),
        ("socket://10.20.0.31:4001/ttyS1", "nothing may follow HOST:PORT"),
        ("socket://10.20.0.31:4001?logging=debug", "socket:// takes no options"),
        ("rfc2217://10.20.0.31:4001?logging=debug", "unknown or refused option 'logging'"),
        ("rfc2217://10.20.0.31:4001?poll_modem", "unknown or refused option 'poll_modem'"),
        ("rfc2217://10.20.0.31:4001?timeout=0", "timeout must be seconds in (0, 60]"),
        ("rfc2217://10.20.0.31:4001?timeout=61", "timeout must be seconds in (0, 60]"),
        ("rfc2217://10.20.0.31:4001?timeout=nan", "timeout must be seconds in (0, 60]"),
        ("rfc2217://10.20.0.31:4001?timeout=1&timeout=2", "given twice"),
        ("rfc2217://10.20.0.31:4001?ign_set_control=1", "is a flag"),
    ],
)
def test_other_urls_are_refused_naming_device_port_and_what_is_expected(port: str, says: str) -> None:
    with pytest.raises(ValueError) as driver_error:
        SerialDriver(port)
    assert says in str(driver_error.value)
    with pytest.raises(ConfigError) as config_error:
        parse_config(f"table: T01\ndevice: {{driver: serial, port: '{port}'}}\n", "t.yaml")
    message = str(config_error.value)
    assert message.startswith("t.yaml: device.port: ") and says in message
    assert "\n" not in message


def test_a_port_longer_than_the_bound_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"device\.port"):
        parse_config("table: T01\ndevice: {driver: serial, port: '/dev/" + "x" * 4092 + "'}\n")
    assert parse_config("table: T01\ndevice: {driver: serial, port: '/dev/" + "x" * 4091 + "'}\n")


def check_config(tmp_path: Path, device: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    path = tmp_path / "table.yaml"
    path.write_text(f"table: T07\ndevice: {device}\n")
    rc = main(["check-config", str(path)])
    captured = capsys.readouterr()
    return rc, captured.out, captured.err


def test_check_config_says_the_baud_rate_is_set_on_a_tcp_server_mode_box(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rc, out, _ = check_config(
        tmp_path, "{driver: serial, protocol: angel-eye/2, port: 'socket://10.20.0.31:4001'}", capsys
    )
    assert rc == 0
    assert "device server 10.20.0.31:4001 in TCP-server mode" in out
    assert f"noticed within {DEAD_PEER_S} s (TCP keepalive)" in out
    assert (
        "note: socket:// sends no line settings: set the device server's serial port to "
        "4800 baud 8N1 (the usual speed of angel-eye/2)"
    ) in out
    rc, out, _ = check_config(
        tmp_path, "{driver: serial, port: 'socket://10.20.0.31:4001', baudrate: 19200}", capsys
    )
    assert rc == 0 and "serial port to 19200 baud 8N1 (device.baudrate)" in out


def test_check_config_says_rfc2217_negotiates_the_baud_rate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rc, out, _ = check_config(tmp_path, "{driver: serial, port: 'rfc2217://[fd00::31]:4001'}", capsys)
    assert rc == 0
    assert "device server fd00::31:4001 in RFC 2217 mode: 9600 baud 8N1 negotiated" in out
    assert "note:" not in out


def test_check_config_refuses_a_loop_url_in_one_line_naming_device_port(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rc, out, err = check_config(tmp_path, "{driver: serial, port: 'loop://'}", capsys)
    assert rc == 2 and out == ""
    assert err.count("\n") == 1 and "device.port: loop:// is not a way to reach a shoe" in err
    assert "socket://HOST:PORT or rfc2217://HOST:PORT" in err


def test_a_local_tty_config_gets_no_device_server_lines(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rc, out, _ = check_config(tmp_path, "{driver: serial, port: /dev/ttyUSB0}", capsys)
    assert rc == 0 and "on /dev/ttyUSB0" in out and "device server" not in out
