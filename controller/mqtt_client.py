"""The one MQTT client factory: every paho client of the project (the MQTT
output, ``replay --out mqtt`` through it, and ``ctl``) is built here, so
the protocol version, credentials, TLS and session rules are the same
everywhere.

:func:`make_client` gives a client speaking the configured protocol (MQTT 5
by default, 3.1.1 for brokers without it) with paho's version-2 callbacks,
the configured user name and password file, TLS (the system's CAs
unless ``tls.ca_file`` names one; a client certificate when given), and
the configured brokers (``host``/``port`` or ``brokers``), which its
reconnects go through in turn (:meth:`Client.set_endpoints`). The
client id is the caller's: the daemon's is stable (``shoe-<table>`` or
``client_id``), a ``ctl`` or replay connection takes a unique one so it
never takes over the daemon's session.

:func:`connect_options` is the session rule, for ``connect`` and
``connect_async``: every connection starts clean and the broker keeps
nothing after it (3.1.1 ``clean_session``, set by :func:`make_client`;
MQTT 5 ``clean_start`` with a session expiry of 0, the same thing).
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator
from typing import Any

import paho.mqtt.client as mqtt
from paho.mqtt.enums import CallbackAPIVersion, MQTTErrorCode
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties

from controller.config import MqttConfig

#: What one ``loop_read`` takes from the socket at most, with ``read_ahead``.
READ_AHEAD_BYTES = 64 * 1024


class Client(mqtt.Client):
    """paho's client, whose queued packets the thread that has just published
    them may also write to the socket itself (:meth:`write_now`), rather than
    hand them to the network thread of ``loop_start``.

    Why: a publish from another thread only wakes paho's network thread,
    which then needs the GIL to send the packet; on a 2-core box that costs
    0.15-0.3 ms per message at the median and more in the tail (and a coup's
    first card goes out behind four or five such messages). Writing from the
    publishing thread costs one ``send``.

    How it stays correct: paho's own I/O entry points (``loop_read``,
    ``loop_write``, ``loop_misc``, ``reconnect``: the public methods its
    network thread calls) are serialised by one lock here, and
    :meth:`write_now` takes the same lock, so packets leave in the order of
    paho's queue, one writer at a time, and a TLS socket is never read and
    written at once. ``write_now`` never waits long for the lock (a reconnect
    may hold it for seconds): if the lock is busy it leaves the packets to
    the network thread. Publishes made inside :meth:`direct` do not wake the
    network thread at all (the wake-up alone handed it the GIL: 0.1 ms a
    message); on the way out ``direct`` writes them, or wakes it if it
    cannot. Relies on paho 2.x's wake-up socket ``_sockpairW``, set by
    ``loop_start`` (``tests/test_mqtt_output.py`` fails if that changes).

    With ``read_ahead`` set (the archiver's, which receives thousands of
    messages a second), one ``loop_read`` takes up to ``READ_AHEAD_BYTES``
    from the socket in one ``recv`` and handles every packet in it (see
    :meth:`loop_read`); paho alone makes three or four ``recv`` calls and a
    ``select`` of its network loop per message."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._io_lock = threading.RLock()
        self._quiet = threading.local()
        #: the brokers to try, in order (:meth:`set_endpoints`), and which is tried
        self._endpoints: list[tuple[str, int]] = []
        self._endpoint = 0
        self._attempted = False
        self._was_up = False
        #: see the class docstring and ``loop_read``
        self.read_ahead = False
        self._ahead = b""
        self._ahead_pos = 0
        self._ahead_sock: Any = None
        self._recvs_left: int | None = None

    def loop_start(self) -> MQTTErrorCode:
        rc = super().loop_start()
        wake = getattr(self, "_sockpairW", None)  # absent in another paho: publishes wake as before
        if rc == MQTTErrorCode.MQTT_ERR_SUCCESS and isinstance(wake, socket.socket):
            # ``publish`` wakes the network thread through this socket; a
            # thread inside ``direct()`` writes its packets itself, so its
            # publishes skip the wake-up (see _QuietWake)
            self._sockpairW = _QuietWake(wake, self._quiet)  # type: ignore[assignment]
        return rc

    @contextlib.contextmanager
    def direct(self) -> Iterator[None]:
        """Publishes made inside are written to the socket by this thread on
        the way out (:meth:`write_now`), without waking the network thread;
        if the I/O lock is busy, the network thread is woken to write them."""
        self._quiet.on = True
        try:
            yield
        finally:
            self._quiet.on = False
            if not self.write_now():
                wake = getattr(self, "_sockpairW", None)
                if isinstance(wake, _QuietWake):
                    wake.wake()

    def loop_read(self, max_packets: int = 1) -> MQTTErrorCode:
        """paho's, under the I/O lock. With ``read_ahead``: one ``recv`` of
        up to ``READ_AHEAD_BYTES`` (``_sock_recv``), then paho's packet
        reader run over those bytes until none is left. A packet they end
        in the middle of stays in paho's own state (as when the socket has
        no more) and the next ``loop_read`` goes on with it: so nothing is
        left here between two calls that returned normally, and paho's
        ``select`` on the socket stays the whole truth about what is waiting
        to be read."""
        with self._io_lock:
            if not self.read_ahead:
                return super().loop_read(max_packets)
            self._recvs_left = 1
            try:
                while True:
                    rc = super().loop_read(max_packets)
                    if rc != MQTTErrorCode.MQTT_ERR_SUCCESS or self._ahead_pos >= len(self._ahead):
                        return rc
            finally:
                # bytes left only after an error (the connection is being
                # dropped: a new socket never gets them, ``_sock_recv``) or
                # an exception from a callback (kept: the stream goes on)
                self._recvs_left = None

    def _sock_recv(self, bufsize: int) -> bytes:
        if self._recvs_left is None:
            return super()._sock_recv(bufsize)
        if self._ahead_sock is not self._sock:  # a new connection: nothing of the old one
            self._ahead, self._ahead_pos, self._ahead_sock = b"", 0, self._sock
        if self._ahead_pos >= len(self._ahead):
            if self._recvs_left <= 0:
                raise BlockingIOError  # the rest on the next loop_read, after paho's select
            self._recvs_left -= 1
            data = super()._sock_recv(max(bufsize, READ_AHEAD_BYTES))
            if len(data) <= bufsize:
                return data  # all of it asked for, or b"" (the connection closed)
            self._ahead, self._ahead_pos = data, 0
        start = self._ahead_pos
        self._ahead_pos = min(start + bufsize, len(self._ahead))
        return self._ahead[start : self._ahead_pos]

    def loop_write(self) -> MQTTErrorCode:
        with self._io_lock:
            return super().loop_write()

    def loop_misc(self) -> MQTTErrorCode:
        with self._io_lock:
            return super().loop_misc()

    def set_endpoints(self, endpoints: list[tuple[str, int]]) -> None:
        """The brokers this client connects to, in order of preference: each
        (re)connection goes to the first of them after a connection that
        was up, and to the next after an attempt that failed (no CONNACK
        accepting it), round the list; paho's reconnect backoff runs between
        attempts. So a dead broker costs one failed attempt, the others are
        tried in turn while none answers, and the clients of a floor come
        back to the first broker once it answers again. "Up" is learnt in
        paho 2.x's ``_handle_connack`` (tests/test_archive_failover.py's
        order test fails if that changes)."""
        if not endpoints:
            raise ValueError("no broker to connect to")
        self._endpoints = list(endpoints)
        self._endpoint = 0
        self._attempted = False
        self._host, self._port = self._endpoints[0]

    @property
    def endpoint(self) -> str:
        """The broker this client connects (or last tried to connect) to, as host:port."""
        host = self.host
        return f"[{host}]:{self.port}" if ":" in host else f"{host}:{self.port}"

    def reconnect(self) -> MQTTErrorCode:
        with self._io_lock:
            if len(self._endpoints) > 1:
                if self._attempted:
                    self._endpoint = 0 if self._was_up else (self._endpoint + 1) % len(self._endpoints)
                self._attempted = True
                self._was_up = False
                # paho's own fields: its setters refuse while a dead
                # connection's socket is still open (``reconnect`` closes it)
                self._host, self._port = self._endpoints[self._endpoint]
            return super().reconnect()

    def connect_first(self, keepalive: int, **options: Any) -> None:
        """Connect now (no network thread yet: ``ctl``) to the first of the
        brokers that answers; raises ``OSError`` saying what each did."""
        problems = []
        for host, port in self._endpoints:
            try:
                self.connect(host, port, keepalive=keepalive, **options)
                return
            except OSError as exc:
                problems.append(f"{host}:{port}: {exc.strerror or exc}")
        raise OSError("; ".join(problems))

    def _handle_connack(self) -> MQTTErrorCode:
        # paho's CONNACK handler (run under the I/O lock, from loop_read):
        # a broker that accepted us counts as up (see ``set_endpoints``)
        rc = super()._handle_connack()
        if self.is_connected():
            self._was_up = True
        return rc

    def write_now(self, wait: float = 0.002) -> bool:
        """Write what ``publish`` has queued, from this thread, if the
        network thread is not in the middle of its own I/O for more than
        ``wait`` seconds; True if written here (or nothing was queued).
        A batch of publishes goes out in one ``send`` (:meth:`_merge_publishes`)."""
        if not self._io_lock.acquire(timeout=wait):
            return False
        try:
            if self.want_write():
                self._merge_publishes()
                super().loop_write()
            return True
        finally:
            self._io_lock.release()

    def _merge_publishes(self) -> None:
        """Each run of QoS 1 and 2 PUBLISH packets (and PUBACKs) in paho's
        queue, none of them begun, made one packet of their bytes in order,
        so that a batch (a coup's end, its roads and odds, the next card; an
        archived batch's acknowledgements) is one ``send``, one TCP segment
        and one wake-up of the broker, not one each (4-6 sends, behind which
        the last message waited; 1,000 for the archiver's batch).

        Why it is safe: paho does nothing when such a packet has been
        written but count the bytes (only a QoS 0 publish and a DISCONNECT
        act on being written, and they are never merged); acknowledgements
        are matched by message id, from paho's own record of the messages
        in flight, which is also what a reconnect resends from (it clears
        this queue). Under the I/O lock, so nothing else takes from the
        queue; other threads only append to it, after the packets taken
        here, which go back in front of theirs."""
        out = self._out_packet
        if len(out) < 2:
            return
        taken = [out.popleft() for _ in range(len(out))]
        runs: list[list[Any]] = []
        for packet in taken:
            if _mergeable(packet) and runs and _mergeable(runs[-1][-1]):
                runs[-1].append(packet)
            else:
                runs.append([packet])
        out.extendleft(reversed([run[0] if len(run) == 1 else _merged(run) for run in runs]))


def _mergeable(packet: Any) -> bool:
    """A QoS 1 or 2 PUBLISH, or a PUBACK (``ack``: the archiver's, a batch's
    worth at once), none of it written yet."""
    kind = packet["command"] & 0xF0
    return bool((kind == mqtt.PUBACK or (kind == mqtt.PUBLISH and packet["qos"])) and packet["pos"] == 0)


def _merged(run: list[Any]) -> Any:
    """One queued packet of the run's bytes (paho's fields: those of the
    last; nothing reads them once the bytes are written)."""
    data = bytearray().join(p["packet"] for p in run)
    return {**run[-1], "pos": 0, "to_process": len(data), "packet": data}


class _QuietWake:
    """Stands in for paho's wake-up socket (``_sockpairW``, written by every
    ``publish``): a publish from a thread inside ``Client.direct()`` does not
    wake the network thread, whose GIL hand-off is what the direct write
    saves; every other publish wakes it as before."""

    def __init__(self, sock: socket.socket, quiet: threading.local) -> None:
        self._sock = sock
        self._quiet = quiet

    def send(self, data: bytes) -> int:
        if getattr(self._quiet, "on", False):
            return len(data)
        return self._sock.send(data)

    def wake(self) -> None:
        with contextlib.suppress(BlockingIOError, OSError):
            self._sock.send(b"0")

    def close(self) -> None:
        self._sock.close()


def make_client(cfg: MqttConfig, client_id: str, *, manual_ack: bool = False) -> Client:
    """A paho client for ``cfg`` under ``client_id``, not yet connected.
    ``manual_ack``: received QoS 1 messages are acknowledged only by
    ``client.ack`` (the archiver acks after its COMMIT)."""
    v5 = cfg.protocol == "5"
    client = Client(
        callback_api_version=CallbackAPIVersion.VERSION2,
        client_id=client_id,
        protocol=mqtt.MQTTv5 if v5 else mqtt.MQTTv311,
        # A clean session: a command sent while a client was away must not
        # be acted on minutes later. (MQTT 5 has no clean_session: see
        # ``connect_options``.)
        clean_session=None if v5 else True,
        manual_ack=manual_ack,
    )
    if cfg.username is not None:
        client.username_pw_set(cfg.username, cfg.password())
    if cfg.tls is not None:
        client.tls_set(ca_certs=cfg.tls.ca_file, certfile=cfg.tls.cert_file, keyfile=cfg.tls.key_file)
    client.set_endpoints(cfg.endpoints())
    return client


def connect_options(cfg: MqttConfig) -> dict[str, Any]:
    """Keyword arguments for ``client.connect``/``connect_async`` beside
    host, port and keepalive: with MQTT 5, start clean on every (re)connect
    and let the broker drop the session when the connection ends."""
    if cfg.protocol != "5":
        return {}
    props = Properties(PacketTypes.CONNECT)  # type: ignore[no-untyped-call]
    props.SessionExpiryInterval = 0
    return {"clean_start": True, "properties": props}


#: CONNACK reason codes that mean "not this protocol version": MQTT 5's
#: 0x84 Unsupported Protocol Version, and 3.1.1's return code 1
#: (unacceptable protocol version), which a broker without MQTT 5 may send
#: in reply to an MQTT 5 CONNECT (NATS 2.9 does; paho reads either as 0x84).
#: The longest retained ``<prefix>/<table>/status`` read (the daemon
#: writes ``online`` or ``offline``); more is cut, never read whole.
MAX_STATUS_BYTES = 64


def status_text(payload: bytes | bytearray) -> str:
    """A table's retained status as text: its first ``MAX_STATUS_BYTES``
    bytes, undecodable bytes replaced (``ctl`` and ``replay --out mqtt``
    read it alike)."""
    return bytes(payload[:MAX_STATUS_BYTES]).decode("utf-8", "replace")


_UNSUPPORTED_VERSION = (0x84, 0x01)


def refusal_line(cfg: MqttConfig, rc: Any, *, key: str = "outputs.mqtt.protocol") -> str:
    """One line for a CONNACK that refused the connection: for a broker
    that does not speak the protocol asked for, exactly that and what to
    set; otherwise the broker's reason."""
    code = getattr(rc, "value", rc)
    if code in _UNSUPPORTED_VERSION:
        if cfg.protocol == "5":
            return (
                "the broker does not speak MQTT 5 (CONNACK: unsupported protocol version; "
                f'NATS 2.9 and RabbitMQ 3.x speak 3.1.1 only): set {key}: "3.1.1"'
            )
        return f'the broker refused MQTT 3.1.1 (CONNACK: unsupported protocol version): set {key}: "5"'
    return f"broker refused the connection: {rc}"


def closed_before_connack_line(cfg: MqttConfig, rc: Any, *, key: str = "outputs.mqtt.protocol") -> str:
    """One line for a connection the broker closed before accepting it
    (no CONNACK, or paho's "Unspecified error"): with MQTT 5, what a broker
    without it does (RabbitMQ 3.x closes the socket), so say what to set."""
    if cfg.protocol == "5":
        return (
            f"the broker closed the connection before accepting it ({rc}): a broker without "
            f'MQTT 5 (NATS 2.9, RabbitMQ 3.x) does this: if so, set {key}: "3.1.1"'
        )
    return f"the broker closed the connection before accepting it ({rc})"
