"""The serial driver on a pseudo-terminal: chunks exactly as read with their
read time, writes, unplug/replug at a stable path (as a ``/dev/serial/by-id``
link behaves), capped exponential backoff, and no CPU burnt while waiting.

Everything runs on ``os.openpty`` in this process: no hardware, no socat.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import threading
import time
import tty
from collections.abc import Iterator
from pathlib import Path

import pytest

from drivers.base import Driver, LinkDownError, LinkEvent
from drivers.fake import FakeShoe, serve_pty
from drivers.serial import SerialDriver


class Line:
    """A pty whose slave is reachable at ``link``, like a by-id symlink."""

    def __init__(self, link: Path) -> None:
        self.link = link
        self.master = -1
        self.plug()

    def plug(self) -> None:
        self.master, slave = os.openpty()
        tty.setraw(slave)
        name = os.ttyname(slave)
        os.close(slave)
        with contextlib.suppress(FileNotFoundError):
            self.link.unlink()
        self.link.symlink_to(name)

    def unplug(self) -> None:
        # as udev does: the by-id link goes, then the device
        self.link.unlink()
        os.close(self.master)
        self.master = -1

    def send(self, data: bytes) -> None:
        os.write(self.master, data)

    def receive(self, size: int, timeout: float = 10.0) -> bytes:
        """What the host wrote, up to ``size`` bytes: a pty hands a write
        over in as many reads as it likes, so read until all of it came (or
        ``timeout``)."""
        import select

        data = b""
        deadline = time.monotonic() + timeout
        while len(data) < size and time.monotonic() < deadline:
            ready, _, _ = select.select([self.master], [], [], 0.1)
            if ready:
                data += os.read(self.master, size - len(data))
        return data

    def close(self) -> None:
        if self.master >= 0:
            os.close(self.master)
        with contextlib.suppress(FileNotFoundError):
            self.link.unlink()


@pytest.fixture
def line(tmp_path: Path) -> Iterator[Line]:
    ln = Line(tmp_path / "usb-FAKE_Shoe-if00")
    yield ln
    ln.close()


@pytest.fixture
def driver(line: Line) -> Iterator[SerialDriver]:
    drv = SerialDriver(str(line.link), 9600, backoff_initial=0.05, backoff_max=0.4)
    drv.open()
    yield drv
    drv.close()


def read_until(drv: Driver, want: int, timeout: float = 5.0) -> bytes:
    """Bytes from ``drv`` until ``want`` bytes arrived (link events not allowed)."""
    out = b""
    deadline = time.monotonic() + timeout
    while len(out) < want and time.monotonic() < deadline:
        item = drv.read(0.5)
        assert not isinstance(item, LinkEvent), item
        if item is not None:
            out += item[1]
    return out


def next_link_event(drv: Driver, timeout: float = 5.0) -> LinkEvent:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        item = drv.read(0.5)
        if isinstance(item, LinkEvent):
            return item
        assert item is None, f"unexpected data while waiting for a link event: {item!r}"
    raise AssertionError("no link event")


def test_the_driver_satisfies_the_driver_protocol(driver: SerialDriver) -> None:
    assert isinstance(driver, Driver)


def test_a_read_returns_the_chunk_with_the_time_it_was_read(line: Line, driver: SerialDriver) -> None:
    line.send(b"$SH,0,HELLO,X,1,2*00\r\n")
    before = time.time()
    item = driver.read(2.0)
    after = time.time()
    assert isinstance(item, tuple)
    t, data = item
    assert data == b"$SH,0,HELLO,X,1,2*00\r\n"
    assert before - 0.5 <= t <= after


def test_bytes_come_through_unchanged_in_raw_mode(line: Line, driver: SerialDriver) -> None:
    payload = bytes(range(256)) * 4
    line.send(payload)
    assert read_until(driver, len(payload)) == payload


def test_a_read_with_nothing_to_read_returns_none_after_its_timeout(driver: SerialDriver) -> None:
    start = time.monotonic()
    assert driver.read(0.3) is None
    assert 0.25 <= time.monotonic() - start < 5.0  # returned after its timeout, not hung (a loaded machine)


def test_host_commands_are_written_to_the_device(line: Line, driver: SerialDriver) -> None:
    command = b"$HO,0,REQ,STAT*00\r\n"
    driver.write(command)
    assert line.receive(len(command)) == command


def test_unplug_and_replug_report_link_down_then_up_and_reading_resumes(
    line: Line, driver: SerialDriver
) -> None:
    line.send(b"before")
    assert read_until(driver, 6) == b"before"

    line.unplug()
    down = next_link_event(driver)
    assert down.up is False and str(line.link) in down.detail
    with pytest.raises(LinkDownError):
        driver.write(b"lost")
    # while the device is away, reads keep to their timeout and say nothing
    for _ in range(3):
        start = time.monotonic()
        assert driver.read(0.2) is None
        assert time.monotonic() - start < 0.6

    line.plug()
    up = next_link_event(driver)
    assert up.up is True and driver.reconnects == 1
    line.send(b"after")
    assert read_until(driver, 5) == b"after"


def test_a_device_absent_at_open_is_reported_down_and_picked_up_when_it_appears(tmp_path: Path) -> None:
    link = tmp_path / "later"
    drv = SerialDriver(str(link), 9600, backoff_initial=0.05, backoff_max=0.2)
    drv.open()
    ln: Line | None = None
    try:
        first = drv.read(0.1)
        assert isinstance(first, LinkEvent) and first.up is False
        assert drv.read(0.2) is None
        ln = Line(link)
        assert next_link_event(drv).up is True
        ln.send(b"hi")
        assert read_until(drv, 2) == b"hi"
    finally:
        drv.close()
        if ln is not None:
            ln.close()


def test_reopen_attempts_back_off_exponentially_up_to_the_cap(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    drv = SerialDriver(str(tmp_path / "absent"), 9600, backoff_initial=0.02, backoff_max=0.16)
    attempts: list[float] = []
    real_open = drv._open_port

    def counting_open() -> object:
        attempts.append(time.monotonic())
        return real_open()

    monkeypatch.setattr(drv, "_open_port", counting_open)
    drv.open()
    deadline = time.monotonic() + 1.2
    while time.monotonic() < deadline:
        drv.read(0.1)
    drv.close()
    gaps = [b - a for a, b in itertools.pairwise(attempts)]
    # first retry after 0.02 s, then 0.04, 0.08, 0.16, 0.16, ...
    assert len(gaps) >= 6
    for gap, want in zip(gaps, [0.02, 0.04, 0.08, 0.16, 0.16, 0.16], strict=False):
        assert want * 0.9 <= gap <= want + 0.08, (gaps, want)


def test_backoff_settings_are_checked() -> None:
    with pytest.raises(ValueError):
        SerialDriver("/dev/null", backoff_initial=0)
    with pytest.raises(ValueError):
        SerialDriver("/dev/null", backoff_initial=1.0, backoff_max=0.5)


def cpu_while(action: object, seconds: float) -> float:
    assert callable(action)
    start_cpu = time.process_time()
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        action()
    return time.process_time() - start_cpu


def test_waiting_on_a_quiet_line_costs_no_cpu(driver: SerialDriver) -> None:
    # one second of reads with a short timeout: select sleeps, nothing spins
    assert cpu_while(lambda: driver.read(0.05), 1.0) < 0.15


def test_waiting_for_an_unplugged_device_costs_no_cpu(line: Line, driver: SerialDriver) -> None:
    line.unplug()
    assert next_link_event(driver).up is False
    assert cpu_while(lambda: driver.read(0.05), 1.0) < 0.15


def test_the_fake_shoe_on_a_pty_reaches_the_driver_byte_for_byte_across_disconnects(tmp_path: Path) -> None:
    def shoe() -> FakeShoe:
        return FakeShoe(seed=5, shoes=1, decks=1, cut_card_min=12, faults="disconnect:0.3")

    fake = shoe()
    expected = b"".join(d for _, d in shoe().stream())
    link = tmp_path / "fake-shoe"
    ready = threading.Event()
    stop = threading.Event()
    server = threading.Thread(
        target=serve_pty,
        args=(fake, 0.0, lambda path: ready.set()),
        kwargs={"link": str(link), "stop": stop, "reconnect_delay": 0.1, "settle": 0.1},
        daemon=True,
    )
    server.start()
    assert ready.wait(5)
    drv = SerialDriver(str(link), 9600, backoff_initial=0.05, backoff_max=0.2)
    drv.open()
    got = b""
    links: list[bool] = []
    try:
        deadline = time.monotonic() + 30
        while len(got) < len(expected) and time.monotonic() < deadline:
            item = drv.read(0.5)
            if isinstance(item, LinkEvent):
                links.append(item.up)
            elif item is not None:
                got += item[1]
    finally:
        drv.close()
        stop.set()
        server.join(10)
    assert got == expected
    n = sum(1 for c in fake.coups for f in c["faults"] if f["kind"] == "disconnect")
    assert n > 0 and links == [False, True] * n
