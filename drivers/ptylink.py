"""Never open a stale symlink to a pseudo-terminal.

A program that serves a device on a pty (the fake shoe, ``socat
pty,link=...``) makes a stable symlink to ``/dev/pts/N``. Killed with
``kill -9`` it cannot remove it, and the kernel soon hands ``N`` to another
program (a terminal, another fake): opening the link would read that
program's bytes as shoe frames.

The rule: a symlink to a pty slave is followed only if no link on the way
is older than the pty. devpts makes ``/dev/pts/N`` afresh (a new inode,
its ctime "now") each time the number is allocated, and the serving
program makes its link after opening the pty, so a live link is never
older than its pty, and a link to a reused number always is. (Changing a
pty's owner or mode also moves its ctime; a link that then looks stale is
refused too: the safe side.)
"""

from __future__ import annotations

import errno
import os
import stat

#: Linux UNIX98 pty slaves: majors 136..143 (wherever devpts is mounted).
_PTS_MAJORS = range(136, 144)
_MAX_HOPS = 40  # the kernel's own limit on nested symlinks


class StaleLinkError(OSError):
    """The symlink points to a pty number that was reused after its maker died."""


def check_pty_link(port: str) -> None:
    """Raise :class:`StaleLinkError` if ``port`` is a symlink (or a chain of
    them) to a pseudo-terminal slave created after one of the links. Any
    other path (a real serial device, a URL, a missing file) passes: opening
    it says what is wrong with it."""
    links: list[tuple[str, int]] = []
    path = port
    for _ in range(_MAX_HOPS):
        try:
            st = os.lstat(path)
        except OSError:
            return
        if not stat.S_ISLNK(st.st_mode):
            break
        links.append((path, st.st_mtime_ns))
        path = os.path.join(os.path.dirname(path), os.readlink(path))
    if not links:
        return
    try:
        target = os.stat(path)
    except OSError:
        return
    if not stat.S_ISCHR(target.st_mode) or os.major(target.st_rdev) not in _PTS_MAJORS:
        return
    for link, made in links:
        if made < target.st_ctime_ns:
            raise StaleLinkError(
                errno.ESTALE,
                f"stale link: {link} is older than the pseudo-terminal {os.path.normpath(path)} it points"
                " to (the program that made it is gone and the pty number was reused); not opened",
            )
