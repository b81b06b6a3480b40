"""Which ports the serial driver opens: a local device path, or a serial
device server's ``socket://`` or ``rfc2217://`` URL.

Pure (no port is opened, nothing is imported of pyserial), so a config can
be checked against it without loading the serial driver, its threads and
sockets: ``controller.config`` validates ``device.port`` with
:func:`parse_port`, and ``drivers.serial`` opens what it accepts.
"""

from __future__ import annotations

import re
import socket
from dataclasses import dataclass
from urllib.parse import parse_qsl, urlsplit

#: The URL schemes ``device.port`` may use: pyserial's handlers for a serial
#: device server. Other pyserial URLs (``loop://``, ``spy://``, ``alt://``,
#: ``hwgrep://``, ``cp2110://``) are test or debugging aids, not a way to
#: reach a shoe, and are refused.
NETWORK_SCHEMES: tuple[str, ...] = ("socket", "rfc2217")

#: The RFC 2217 URL options accepted (pyserial's names): ``ign_set_control``
#: for device servers that answer SET_CONTROL wrongly, ``timeout=S`` for the
#: negotiation on a slow network (pyserial's default is 3 s).
RFC2217_OPTIONS: tuple[str, ...] = ("ign_set_control", "timeout")
#: Largest RFC 2217 negotiation timeout accepted, in seconds.
RFC2217_TIMEOUT_MAX = 60.0

_HOST_RE = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9.-]{0,251}[A-Za-z0-9])?")
_URL_FORMS = "socket://HOST:PORT or rfc2217://HOST:PORT"


@dataclass(frozen=True, slots=True)
class NetworkPort:
    """A device server's address, from a ``socket://`` or ``rfc2217://`` URL."""

    scheme: str
    host: str
    port: int
    #: RFC 2217 options, as given (``(name, value)``; value ``""`` for a flag).
    options: tuple[tuple[str, str], ...] = ()


def parse_port(port: str) -> NetworkPort | None:
    """``None`` for a local device path; the address for an accepted
    device-server URL. Raises ``ValueError`` saying what is expected for
    any other URL (anything with ``://``, which pyserial would take as one).
    """
    if "://" not in port:
        return None
    scheme = port.split("://", 1)[0].lower()
    if scheme not in NETWORK_SCHEMES:
        raise ValueError(
            f"{scheme}:// is not a way to reach a shoe; use a local serial device "
            f"(/dev/serial/by-id/...), or a device server as {_URL_FORMS}"
        )
    try:
        parts = urlsplit(port)
    except ValueError as exc:  # e.g. an invalid IPv6 literal
        raise ValueError(f"{port!r}: {exc}; expected {_URL_FORMS}") from None
    try:
        number = parts.port
    except ValueError:
        raise ValueError(f"{port!r}: the TCP port must be a number in 1..65535 ({_URL_FORMS})") from None
    host = parts.hostname or ""
    if parts.username is not None or parts.password is not None or "@" in parts.netloc:
        raise ValueError(f"{port!r}: no user name here; expected {_URL_FORMS}")
    if not host:
        raise ValueError(f"{port!r}: the device server's host is missing; expected {_URL_FORMS}")
    if ":" in host:
        try:
            socket.inet_pton(socket.AF_INET6, host)
        except OSError:
            raise ValueError(f"{port!r}: {host!r} is not an IPv6 address") from None
    elif not _HOST_RE.fullmatch(host):
        raise ValueError(f"{port!r}: {host!r} is not a host name or address")
    if number is None:
        raise ValueError(f"{port!r}: the TCP port is missing; expected {_URL_FORMS}")
    if not 1 <= number <= 65535:
        raise ValueError(f"{port!r}: the TCP port must be in 1..65535, not {number}")
    if parts.path not in ("", "/") or parts.fragment:
        raise ValueError(f"{port!r}: nothing may follow HOST:PORT but options; expected {_URL_FORMS}")
    options = tuple(parse_qsl(parts.query, keep_blank_values=True))
    if options and scheme == "socket":
        raise ValueError(
            f"{port!r}: socket:// takes no options (pyserial's ?logging= would bypass the "
            "daemon's log); expected socket://HOST:PORT"
        )
    seen: set[str] = set()
    for name, value in options:
        if name not in RFC2217_OPTIONS:
            raise ValueError(
                f"{port!r}: unknown or refused option {name!r} (accepted: ign_set_control, "
                f"timeout=SECONDS; ?logging= is refused, it would bypass the daemon's log)"
            )
        if name in seen:
            raise ValueError(f"{port!r}: option {name!r} given twice")
        seen.add(name)
        if name == "ign_set_control" and value:
            raise ValueError(f"{port!r}: ign_set_control is a flag and takes no value")
        if name == "timeout":
            try:
                seconds = float(value)
            except ValueError:
                seconds = float("nan")
            if not 0 < seconds <= RFC2217_TIMEOUT_MAX:  # false for nan
                raise ValueError(
                    f"{port!r}: timeout must be seconds in (0, {RFC2217_TIMEOUT_MAX:g}], not {value!r}"
                )
    return NetworkPort(scheme, host, number, options)
