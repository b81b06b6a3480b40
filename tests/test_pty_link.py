"""The fake shoe's pty symlink: removed whenever the fake can remove it,
and never opened once stale (its maker killed with -9 and the pty number
handed to another program)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from drivers.base import LinkEvent
from drivers.ptylink import StaleLinkError, check_pty_link
from drivers.serial import SerialDriver


def _fake(*extra: str) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "controller.cli", "fake", "--pty", "--cards-per-second", "5", *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert proc.stdout is not None
    link = proc.stdout.readline().strip()
    assert os.path.islink(link), link
    return proc, link


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
def test_the_fake_removes_its_pty_link_when_it_is_told_to_stop(sig: signal.Signals) -> None:
    proc, link = _fake()
    proc.send_signal(sig)
    assert proc.wait(20) == 0
    assert not os.path.lexists(link)


def _take_pty_number(wanted: str) -> list[tuple[int, int]]:
    """Open ptys until the kernel hands out ``wanted`` (it gives the lowest
    free number, so normally at once); returns every pair opened."""
    opened: list[tuple[int, int]] = []
    for _ in range(64):
        master, slave = os.openpty()
        opened.append((master, slave))
        if os.ttyname(slave) == wanted:
            return opened
    for m, s in opened:
        os.close(m)
        os.close(s)
    pytest.skip(f"{wanted} was taken by another process meanwhile")


def test_a_link_left_by_a_killed_fake_is_not_opened_once_its_pty_number_is_reused() -> None:
    proc, link = _fake()
    pts = os.readlink(link)
    check_pty_link(link)  # live: fine
    # File times tick at the kernel's coarse clock (a few ms): a pty number
    # reused within the same tick as the link was made could not be told
    # apart (equal times pass). Let the fake live past a tick, as any real
    # one does, so the test checks the rule rather than the clock.
    time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)
    assert os.path.islink(link)  # kill -9: nobody could remove it
    opened = _take_pty_number(pts)  # "another program" now owns that pty
    master = opened[-1][0]
    try:
        os.write(master, b"$SH,0,HELLO,NOT-A-SHOE,1.0,000001*00\r\n")  # what that program says
        with pytest.raises(StaleLinkError, match="stale link"):
            check_pty_link(link)
        driver = SerialDriver(link, 115200)
        driver.open()
        try:
            assert not driver.is_up
            first = driver.read(0.5)
            assert isinstance(first, LinkEvent) and not first.up and "stale link" in first.detail
            deadline = time.monotonic() + 1.0
            while time.monotonic() < deadline:  # it keeps refusing: never a byte of the other pty
                item = driver.read(0.2)
                assert item is None or (isinstance(item, LinkEvent) and not item.up), item
        finally:
            driver.close()
    finally:
        for m, s in opened:
            os.close(m)
            os.close(s)
        os.unlink(link)


def test_a_link_made_again_after_the_pty_is_followed(tmp_path: Path) -> None:
    master, slave = os.openpty()
    try:
        link = tmp_path / "shoe"
        link.symlink_to(os.ttyname(slave))
        check_pty_link(str(link))
        # the same link made a second before the pty: stale
        old = os.lstat(link).st_mtime_ns - 1_000_000_000
        os.utime(link, ns=(old, old), follow_symlinks=False)
        with pytest.raises(StaleLinkError):
            check_pty_link(str(link))
        # a chain: the stale hop is found behind a fresh one
        outer = tmp_path / "outer"
        outer.symlink_to(link)
        with pytest.raises(StaleLinkError):
            check_pty_link(str(outer))
        # made again (as a restarted fake does): followed
        link.unlink()
        link.symlink_to(os.ttyname(slave))
        check_pty_link(str(outer))
    finally:
        os.close(master)
        os.close(slave)


def test_paths_that_are_no_pty_links_pass_untouched(tmp_path: Path) -> None:
    target = tmp_path / "file"
    target.write_text("x")
    (tmp_path / "to-file").symlink_to(target)
    for path in (str(target), str(tmp_path / "to-file"), str(tmp_path / "missing"), "/dev/null"):
        check_pty_link(path)
    dangling = tmp_path / "dangling"
    dangling.symlink_to(tmp_path / "nothing")
    check_pty_link(str(dangling))
