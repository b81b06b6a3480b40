"""The MQTT connection (docs/operations.md, MQTT): the one place that talks to the
broker, after zigbee2mqtt's ``lib/mqtt.ts``.

Owns the paho-mqtt client and everything about it: the Last Will
(``<prefix>/<table>/status`` = ``offline``, retained) and the retained
``online`` on every connect, reconnection with capped backoff (through the
configured brokers in turn: ``Client.set_endpoints``), TLS and
password authentication, the event topics, the retained ``shoe/state``,
``roads`` and ``odds`` topics, and the command topic with its replies.

Delivery is driven by the journal, not by the caller: a sender thread reads
the outbox after this output's mark and keeps at most ``window`` events in
flight (QoS 1, never retained). An event counts as delivered only on its
PUBACK; the mark advances over the contiguous acknowledged prefix, so after
a crash nothing unacknowledged is skipped (some acknowledged events may go
out twice: consumers de-duplicate on ``event_id``). While the broker is
away nothing blocks: events wait in the journal and go out in order when it
returns.

Ordering across a reconnect: paho re-sends its unacknowledged messages
after CONNACK, in their original order; new events are held back until
those are acknowledged, so nothing published after the reconnect can
overtake them.

Threads: paho's network thread runs the callbacks, which only record facts
(acks, connection state) and wake the sender. Events are published, and
the bookkeeping touched, under ``_send_lock`` only: by the sender thread
(backlog, acks, state, reconnects), or by the thread that has just
committed them (``deliver``: the daemon's loop), which publishes them at
once when nothing older is waiting, saving a thread wake-up and a read of
the journal on every card. An acknowledgement wakes the sender only when
it waits on one (a full window, a backlog, a resend, a drain:
``_need_acks``); in steady flow the acks are settled by the next
``deliver`` or the sender's next pass, and the mark is written on those
passes (every ``poll_interval`` at the latest), not once per event. paho
calls ``on_publish`` with its own message lock held, so a callback must
never wait on a lock a publisher holds while it calls ``publish``; the
callbacks take none.

Commands arriving on ``<prefix>/<table>/cmd`` first pass ``admit`` (the
owner's rate limit: a message it refuses is dropped unread), are refused if
retained, then parsed strictly (``controller.commands_schema``); a bad one
gets an error reply at once and changes nothing, a valid one goes to
``on_command`` with the bytes received (``Received``: its signature is
checked over them; called on the network thread: it should only enqueue),
whose owner later calls ``reply``. With MQTT 5 (the default) the
subscription asks for "retain as published", so a retained command shows its
flag even when it arrives live and is always refused; with MQTT 3.1.1 the
broker clears the flag on live delivery (only a delivery on (re)subscribing
shows it), so such a command is applied once, and what stops a later copy
from acting again is its ``ts`` and the once-only check
(``controller.command_auth``).

End-to-end acknowledgement (``archive_ack``): a PUBACK says
only that the broker took an event, and a broker that crashes before its
autosave forgets it. The floor archiver publishes, retained, how far it has
archived this table's events without a hole (``<prefix>/<table>/archive/mark``,
controller/archive/marks.py); the output subscribes to it, checks it
(``parse_mark``; then against the journal: not above the last seq stored,
and naming the journal's own event at its seq), and keeps it in the
journal as the mark of ``ARCHIVE_OUTPUT``, which retention honours. What
lies above it, was PUBACKed at least ``reoffer_after_s`` ago and journalled
as long ago, is re-offered in seq order, byte for byte (the archive
de-duplicates on ``event_id``), at most ``REOFFER_PER_S`` events a second
(a burst of ``REOFFER_BURST``), in rounds: a round whose re-offers did not
move the mark doubles the wait before the next (up to ``REOFFER_MAX_FACTOR``
times ``reoffer_after_s``), a mark that moves or is published again (an
archiver back) resets it. A mark that fails a check is ignored and counted
(``marks_ignored``), logged at most once a minute. No mark ever received
(no archiver on this floor): nothing is re-offered and retention is as before.

Sessions: every connection starts clean and the broker keeps nothing after
it (3.1.1 ``clean_session``; MQTT 5 ``clean_start`` with a session expiry of
0, the same thing). The journal, not the broker's session, is what makes
delivery durable: events wait there while the broker is away or restarting,
and a command sent while the controller was away is never delivered later
(the supervisor sees no reply and asks again).
"""

from __future__ import annotations

import collections
import json
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import paho.mqtt.client as mqtt
from paho.mqtt.enums import MQTTErrorCode
from paho.mqtt.properties import Properties
from paho.mqtt.reasoncodes import ReasonCode
from paho.mqtt.subscribeoptions import SubscribeOptions

from controller.commands_schema import CommandError, Received, error_reply, id_of, parse_command
from controller.config import MqttConfig
from controller.journal import Journal, JournalError, PendingEvent
from controller.mqtt_client import (
    Client,
    closed_before_connack_line,
    connect_options,
    make_client,
    refusal_line,
)

log = logging.getLogger(__name__)

#: the journal mark the archive's acknowledgement is kept under
ARCHIVE_OUTPUT = "archive"
#: a larger archive/mark payload is ignored unread
MAX_MARK_BYTES = 1024
#: re-offered events a second, and the burst allowed (per table: 1,000
#: tables re-offering at once add at most 20,000 messages a second)
REOFFER_PER_S = 20.0
REOFFER_BURST = 100
#: the longest wait between two re-offer rounds, in ``reoffer_after_s``
REOFFER_MAX_FACTOR = 16
#: ignored marks are logged at most this often
MARK_LOG_EVERY_S = 60.0
_MAX_SEQ = 2**63 - 1


def parse_mark(payload: bytes, table: str) -> tuple[int, str]:
    """The seq and event id of an ``archive/mark`` payload for ``table``, or
    ``ValueError`` saying in one line why it is not one (a hostile payload:
    oversize, not UTF-8 or JSON, NaN or Infinity, a lone surrogate, another
    table's, a seq out of range, an id that is not ``<table>/<shoe>/<seq>``)."""
    if len(payload) > MAX_MARK_BYTES:
        raise ValueError(f"{len(payload)} bytes, over {MAX_MARK_BYTES}")
    try:
        text = payload.decode("utf-8")
        obj = json.loads(text, parse_constant=_no_constant)
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise ValueError(f"not UTF-8 JSON: {str(exc).splitlines()[0][:80]}") from None
    if not isinstance(obj, dict):
        raise ValueError("not a JSON object")
    if obj.get("v") != 1 or isinstance(obj.get("v"), bool):
        raise ValueError("not version 1")
    if obj.get("table") != table:
        raise ValueError("another table's mark")
    seq = obj.get("seq")
    if not isinstance(seq, int) or isinstance(seq, bool) or not 0 < seq <= _MAX_SEQ:
        raise ValueError("seq is not an integer in 1..2^63-1")
    event_id = obj.get("event_id")
    if not isinstance(event_id, str) or len(event_id) > 256:
        raise ValueError("event_id is not a string of at most 256 characters")
    try:
        event_id.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("event_id holds a lone surrogate") from None
    shoe = event_id.removeprefix(f"{table}/").removesuffix(f"/{seq}")
    if f"{table}/{shoe}/{seq}" != event_id or not shoe or "/" in shoe:
        raise ValueError("event_id is not <table>/<shoe>/<seq> of this table and seq")
    return seq, event_id


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number")


CommandHandler = Callable[[Received], None]

#: Reconnect backoff (seconds): 1, then 2, 2, 2...; paho starts again from
#: the first after every successful CONNACK. A broker back after a short
#: outage gets its events within ~2 s, not after a backoff grown to 30 s; a
#: connection attempt every 2 s is nothing for a broker, even from a hall of tables.
RECONNECT_DELAY_S: tuple[float, float] = (1.0, 2.0)
#: A subscription the broker refused is asked for again after this, doubling
#: up to the cap, while connected (NATS refuses one while its MQTT
#: streams elect a leader after a node's death; the table subscribed again
#: only on its next reconnect, taking no commands and no marks until then).
RESUBSCRIBE_DELAY_S: tuple[float, float] = (2.0, 60.0)


def event_topic(prefix: str, table: str, event_type: str) -> str:
    """``coup.result`` -> ``baccarat/T01/coup/result``."""
    return f"{prefix}/{table}/{event_type.replace('.', '/')}"


class MqttOutput:
    """Publishes the journal's events to an MQTT broker and takes supervisor
    commands from it. ``start()`` connects in the background and returns at
    once; the broker may come and go at any time."""

    def __init__(
        self,
        cfg: MqttConfig,
        table: str,
        journal: Journal,
        *,
        on_command: CommandHandler | None = None,
        admit: Callable[[], bool] | None = None,
        name: str = "mqtt",
        window: int = 20,
        poll_interval: float = 0.5,
        reconnect_delay: tuple[float, float] = RECONNECT_DELAY_S,
        retry_delay: float = 5.0,
        keepalive: int = 30,
        presence: bool = True,
    ) -> None:
        self.name = name
        #: False for a publisher that is not the table's controller (replay
        #: --out mqtt): no Last Will, no retained online/offline status and
        #: no command subscription, so it never speaks for the live table.
        self._presence = presence
        self.table = table
        self._cfg = cfg
        self._journal = journal
        self._on_command = on_command
        self._admit = admit
        self._window = window
        self._poll = poll_interval
        self._retry_delay = retry_delay
        prefix = cfg.topic_prefix
        self.topic_status = f"{prefix}/{table}/status"
        self.topic_state = f"{prefix}/{table}/shoe/state"
        self.topic_roads = f"{prefix}/{table}/roads"
        self.topic_odds = f"{prefix}/{table}/odds"
        self.topic_cmd = f"{prefix}/{table}/cmd"
        self.topic_reply = f"{prefix}/{table}/cmd/reply"
        self.topic_mark = f"{prefix}/{table}/archive/mark"
        self.topic_keys = f"{prefix}/{table}/keys"
        #: the table's signing keys, retained on ``keys`` at every connect
        self.keys_text: str | None = None

        # Written by callbacks (network thread), read by the sender.
        self._acks: collections.deque[tuple[int, bool, str]] = collections.deque()
        self._wake = threading.Event()
        self._connected = threading.Event()
        self._subscribed = threading.Event()  # the broker confirmed the cmd subscription
        self._reconnected = False
        self._stopping = False
        self._draining = False

        # Sender-thread bookkeeping.
        self._inflight: collections.OrderedDict[int, int] = collections.OrderedDict()  # seq -> mid
        self._mid_seq: dict[int, int] = {}
        self._acked: set[int] = set()
        self._refused: set[int] = set()
        self._sent_through = 0
        #: ``pending`` once returned less than asked: what is stored later
        #: shows in ``Journal.stored_top`` (until then, the backlog is unknown)
        self._read_to_end = False
        self._mark = journal.mark(name)
        self._hold_until = 0.0  # after a refused publish: pause, then resend from the mark
        self._state: dict[str, Any] | None = None
        self._state_dirty = False
        self._state_lock = threading.Lock()
        self._last_error = ""
        #: the last CONNACK refused us (its line is said; the disconnect that follows is not)
        self._connack_refused = False
        #: failed connection attempts since start (each one a backoff step)
        self.connect_failures = 0

        self._client = self._make_client(keepalive)
        self._client.reconnect_delay_set(
            min_delay=max(1, round(reconnect_delay[0])), max_delay=round(reconnect_delay[1])
        )
        self._sender: threading.Thread | None = None
        self._keepalive = keepalive
        #: held while publishing events or touching the bookkeeping above
        self._send_lock = threading.Lock()
        #: whether an acknowledgement should wake the sender (``_need_acks``):
        #: only when it waits on one (a full window, a backlog, a resend, a
        #: drain). In steady flow the acks wait in ``_acks`` and are settled
        #: by the next ``deliver`` or the sender's next pass, so a card's
        #: PUBACK wakes no thread but paho's own, and the journal sees no
        #: mark write per card (see ``_write_mark``)
        self._ack_wake = True
        #: the mark last written to the journal
        self._mark_written = self._mark
        #: retained copies of ``odds.update`` events published, still to go
        #: to the ``odds`` topic (``_send_retained``)
        self._retained_odds: list[str] = []

        # End-to-end acknowledgement (module docstring). The network thread
        # puts a well-formed mark in ``_mark_in``; the sender checks it
        # against the journal and takes it.
        self.archive_ack = cfg.archive_ack and presence
        self._reoffer_after = cfg.reoffer_after_s
        self._mark_in: tuple[int, str] | None = None
        self._mark_mid: int | None = None  # the mark subscription's SUBSCRIBE
        #: refused subscriptions (topic -> when to ask again, the wait after
        #: that), retried by the sender while connected (``_resubscribe_due``)
        self._resubscribe: dict[str, tuple[float, float]] = {}
        self._resubscribe_lock = threading.Lock()
        self._mark_in_lock = threading.Lock()
        self._archive_mark = journal.mark(ARCHIVE_OUTPUT)
        #: a mark was ever taken (then retention waits for the archive)
        self.archive_heard = ARCHIVE_OUTPUT in journal.outputs()
        #: marks ignored (malformed, another journal's, from the future)
        self.marks_ignored = 0
        self._ignored_logged = 0
        self._ignored_log_at = 0.0
        #: events re-offered since start
        self.reoffered = 0
        #: (PUBACK mark, monotonic time it was reached), oldest first: what
        #: was acknowledged ``reoffer_after_s`` ago
        self._acked_at: collections.deque[tuple[int, float]] = collections.deque([(self._mark, -1e18)])
        self._round_from: int | None = None  # the cursor of the round under way
        #: set on a (re)connect and on a mark published again: what this
        #: round re-offered may be lost with the broker, or the archiver's
        #: session, so the next pass starts a round from the mark
        self._round_restart = False
        self._round_start_mark = -1
        self._round_sent = 0
        self._round_at = 0.0
        self._round_wait = self._reoffer_after
        self._tokens = float(REOFFER_BURST)
        self._tokens_at = time.monotonic()

    # --- set-up ---------------------------------------------------------

    def _make_client(self, keepalive: int) -> Client:
        cfg = self._cfg
        client = make_client(cfg, cfg.client_id or f"shoe-{self.table}")
        if self._presence:
            client.will_set(self.topic_status, "offline", qos=1, retain=True)
        # The window on events is ours (``window``); paho's own limit would
        # also count status, state and replies and could hold an event back.
        client.max_inflight_messages_set(0)
        client.on_connect = self._on_connect
        client.on_disconnect = self._on_disconnect
        client.on_publish = self._on_publish
        client.on_message = self._on_message
        client.on_connect_fail = self._on_connect_fail
        client.on_subscribe = self._on_subscribe
        return client

    def start(self) -> None:
        """Connect in the background (retrying with backoff) and start the
        sender. Never blocks on the broker."""
        cfg = self._cfg
        host, port = cfg.endpoints()[0]  # then each in turn (``Client.set_endpoints``)
        self._client.connect_async(host, port, keepalive=self._keepalive, **connect_options(cfg))
        self._client.loop_start()
        self._sender = threading.Thread(target=self._send_loop, name=f"mqtt-sender-{self.table}", daemon=True)
        self._sender.start()

    def stop(self, timeout: float = 5.0) -> None:
        """Stop sending, give what is in flight up to ``timeout`` to be
        acknowledged (so the next start does not send it again), say
        ``offline`` (retained) and disconnect. Anything unacknowledged stays
        undelivered in the journal for the next start."""
        self._draining = True
        deadline = time.monotonic() + timeout
        while self._inflight and self._connected.is_set() and time.monotonic() < deadline:
            self._wake.set()
            time.sleep(0.02)
        self._stopping = True
        self._wake.set()
        if self._sender is not None:
            self._sender.join(timeout)
            self._settle_acks()  # the sender is gone: record the last acks here
            self._write_mark()
        if self._connected.is_set() and self._presence:
            info = self._client.publish(self.topic_status, "offline", qos=1, retain=True)
            try:
                info.wait_for_publish(timeout)
            except (RuntimeError, ValueError) as exc:
                log.warning("mqtt: could not say offline before stopping: %s", exc)
        self._client.disconnect()
        self._client.loop_stop()

    close = stop

    # --- what the daemon calls ------------------------------------------

    @property
    def connected(self) -> bool:
        return self._connected.is_set()

    @property
    def endpoint(self) -> str:
        """The broker connected to (or last tried), host:port."""
        return self._client.endpoint

    @property
    def ready(self) -> bool:
        """Connected, and the broker has confirmed the command subscription."""
        return self._connected.is_set() and self._subscribed.is_set()

    @property
    def last_error(self) -> str:
        """The latest connection problem, for status and metrics."""
        return self._last_error

    def notify(self) -> None:
        """New events are in the journal: send them now rather than at the
        next poll."""
        self._wake.set()

    def deliver(self, stored: list[PendingEvent]) -> None:
        """Events the caller has just committed to the journal (``stored``:
        ``Journal.last_stored``): published now from the calling thread when
        they are the next to go and the window has room; otherwise (broker
        away, a backlog or a resend pending, the sender busy) the sender
        thread takes them from the journal, as always."""
        # the sender holds the lock only briefly (it never waits on the
        # caller while holding it); the bound is a guard, not a wait
        if not stored or not self._connected.is_set() or not self._send_lock.acquire(timeout=0.05):
            self._wake.set()
            return
        try:
            self._settle_acks()  # the sender writes the mark (``_write_mark``), not this thread
            if (
                self._draining
                or self._hold_until
                or (self._reconnected and self._inflight)
                # the next to go: nothing older waits in the journal
                or stored[0].seq != max(self._sent_through, self._mark) + 1
                or len(self._inflight) + len(stored) > self._window
            ):
                self._wake.set()
                return
            # on the wire from this thread, not after a wake-up of paho's
            try:
                with self._client.direct():
                    for p in stored:
                        if not self._publish_event(p):
                            self._wake.set()
                            return
            finally:
                if self._retained_odds:
                    with self._client.direct():
                        self._send_retained()
        finally:
            self._ack_wake = self._need_acks()
            self._send_lock.release()

    def pump(self) -> int:
        """The sender thread delivers on its own; pumping only wakes it."""
        self._wake.set()
        return 0

    def backlog(self) -> int:
        return self._journal.backlog(self.name)

    def publish_state(self, snapshot: dict[str, Any]) -> None:
        """Set the retained ``shoe/state``; only the latest snapshot is sent,
        and it is sent again after every reconnect."""
        with self._state_lock:
            self._state = snapshot
            self._state_dirty = True
        self._wake.set()

    def reply(self, reply: dict[str, Any]) -> None:
        """Answer a command on ``cmd/reply`` (QoS 1). Replies are not
        journalled: a supervisor who gets none asks again."""
        self._client.publish(self.topic_reply, json.dumps(reply, separators=(",", ":")), qos=1)

    def wait_idle(self, timeout: float) -> bool:
        """Until every journalled event is acknowledged (for replay and
        tests); False on timeout."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._journal.backlog(self.name) == 0:
                return True
            self._wake.set()
            time.sleep(0.05)
        return False

    # --- paho callbacks (network thread: record and wake, nothing more) ---

    def _on_connect(
        self, client: mqtt.Client, userdata: Any, flags: Any, rc: ReasonCode, properties: Properties | None
    ) -> None:
        if rc.is_failure:
            # one line saying what to set when the broker lacks the protocol
            # the same refusal again is not logged again
            line = refusal_line(self._cfg, rc)
            self._connack_refused = True
            if line != self._last_error:
                log.error("mqtt %s: %s", self._client.endpoint, line)
            self._last_error = line
            return
        self._connack_refused = False
        self._last_error = ""
        log.info("mqtt: connected to %s", self._client.endpoint)
        with self._resubscribe_lock:
            self._resubscribe.clear()  # subscribed afresh below
        if self._presence:
            self._subscribe_cmd(client)
            if self.keys_text is not None:
                client.publish(self.topic_keys, self.keys_text, qos=1, retain=True)
            client.publish(self.topic_status, "online", qos=1, retain=True)
            if self.archive_ack:
                self._subscribe_mark(client)
                self._round_restart = True
        with self._state_lock:
            self._state_dirty = self._state is not None
        self._connected.set()
        self._wake.set()

    def _subscribe_cmd(self, client: mqtt.Client) -> None:
        if self._cfg.protocol == "5":
            # the broker keeps a retained command's flag on live delivery too
            client.subscribe(self.topic_cmd, options=SubscribeOptions(qos=1, retainAsPublished=True))
        else:
            client.subscribe(self.topic_cmd, qos=1)

    def _subscribe_mark(self, client: mqtt.Client) -> None:
        self._mark_mid = client.subscribe(self.topic_mark, qos=1)[1]

    def _refused_subscription(self, topic: str) -> bool:
        """Ask for ``topic`` again later; True the first time in a row (say it)."""
        first, top = RESUBSCRIBE_DELAY_S
        with self._resubscribe_lock:
            _, wait = self._resubscribe.get(topic, (0.0, 0.0))
            self._resubscribe[topic] = (time.monotonic() + (wait or first), min(2 * (wait or first), top))
            return wait == 0.0

    def _resubscribe_due(self) -> None:
        """The sender, while connected: subscribe again to what was refused
        and is due. Each try's refusal is logged only the first time."""
        now = time.monotonic()
        with self._resubscribe_lock:
            due = [t for t, (at, _) in self._resubscribe.items() if at <= now]
            for topic in due:
                self._resubscribe[topic] = (float("inf"), self._resubscribe[topic][1])  # until its SUBACK
        for topic in due:
            if topic == self.topic_mark:
                self._subscribe_mark(self._client)
            else:
                self._subscribe_cmd(self._client)

    def _on_connect_fail(self, client: mqtt.Client, userdata: Any) -> None:
        self.connect_failures += 1
        self._last_error = f"cannot connect to {self._client.endpoint}"
        log.warning("mqtt: %s; retrying with backoff", self._last_error)

    def _on_disconnect(
        self, client: mqtt.Client, userdata: Any, flags: Any, rc: ReasonCode, properties: Properties | None
    ) -> None:
        was_up = self._connected.is_set()
        self._connected.clear()
        self._subscribed.clear()
        self._reconnected = True
        if self._stopping:
            return
        if was_up:
            self._last_error = f"disconnected: {rc}"
            log.warning("mqtt: %s; events wait in the journal", self._last_error)
        elif not self._connack_refused:
            # closed before any CONNACK (paho: "Unspecified error")
            line = closed_before_connack_line(self._cfg, rc)
            if line != self._last_error:
                log.error("mqtt %s: %s", self._client.endpoint, line)
            self._last_error = line
        self._connack_refused = False

    def _on_subscribe(
        self,
        client: mqtt.Client,
        userdata: Any,
        mid: int,
        rcs: list[ReasonCode],
        properties: Properties | None,
    ) -> None:
        topic = self.topic_mark if mid == self._mark_mid else self.topic_cmd
        if any(rc.is_failure for rc in rcs):
            # asked again with backoff (``_resubscribe_due``); said once in a row
            first = self._refused_subscription(topic)
            if topic == self.topic_mark:
                # the archive's mark, not the commands: the table goes on as
                # with no archiver (the PUBACK is delivery) until it is taken
                if first:
                    log.error("mqtt: broker refused the subscription to %s: %s; asking again", topic, rcs[0])
                return
            self._last_error = f"broker refused the subscription to {self.topic_cmd}: {rcs[0]}"
            if first:
                log.error(
                    "mqtt: %s; no commands will arrive until it is taken (asking again)", self._last_error
                )
            return
        with self._resubscribe_lock:
            self._resubscribe.pop(topic, None)
        if topic == self.topic_cmd:
            if self._last_error.startswith("broker refused the subscription"):
                self._last_error = ""
            self._subscribed.set()

    def _on_publish(
        self, client: mqtt.Client, userdata: Any, mid: int, rc: ReasonCode, properties: Properties | None
    ) -> None:
        self._acks.append((mid, not rc.is_failure, str(rc)))
        if self._ack_wake or rc.is_failure:
            self._wake.set()

    def _on_message(self, client: mqtt.Client, userdata: Any, message: mqtt.MQTTMessage) -> None:
        if message.topic == self.topic_mark:
            self._on_mark(bytes(message.payload))
            return
        if message.topic != self.topic_cmd:
            return
        if self._admit is not None and not self._admit():
            return  # over the command rate: dropped unread (counted by the owner)
        payload = bytes(message.payload)
        if message.retain:
            # A retained command would be re-run on every reconnect.
            self.reply(
                {
                    "id": id_of(payload),
                    "ok": False,
                    "error": "retained commands are refused; publish without retain",
                }
            )
            return
        try:
            cmd = parse_command(payload)
        except CommandError as exc:
            log.warning("mqtt: refused command: %s", exc)
            self.reply(error_reply(exc, payload))
            return
        if self._on_command is None:
            self.reply({"id": cmd.id, "ok": False, "error": "this controller takes no commands"})
            return
        self._on_command(Received(cmd, payload))

    def _on_mark(self, payload: bytes) -> None:
        """The archive's mark (network thread): checked for form here, then
        against the journal by the sender (``_take_mark``)."""
        if not self.archive_ack:
            return
        try:
            mark = parse_mark(payload, self.table)
        except ValueError as exc:
            self._ignore_mark(str(exc))
            return
        with self._mark_in_lock:
            self._mark_in = mark
        self._wake.set()

    def _ignore_mark(self, why: str) -> None:
        self.marks_ignored += 1
        now = time.monotonic()
        if now >= self._ignored_log_at:
            log.warning("mqtt: archive mark ignored: %s (%d ignored since start)", why, self.marks_ignored)
            self._ignored_log_at = now + MARK_LOG_EVERY_S

    def _take_mark(self) -> None:
        """A mark received since the last pass, if it names this journal's
        own event and no seq beyond the last stored (sender thread)."""
        with self._mark_in_lock:
            got, self._mark_in = self._mark_in, None
        if got is None:
            return
        seq, event_id = got
        top = self._journal.last_seq()
        if seq > top:
            self._ignore_mark(f"seq {seq} is beyond the journal's last, {top}")
            return
        held = self._journal.event_id_at(seq)
        if held != event_id and not (held is None and seq <= self._journal.retired_seq()):
            self._ignore_mark(f"{event_id} is not this journal's event {seq} ({held or 'none stored'})")
            return
        # an archiver published it (moved, or again after a reconnect): the
        # next round soon, from the first wait; the same mark again is an
        # archiver back (or the broker restarted): what was re-offered to it
        # may be gone, so the round starts again from the mark
        self._round_wait = self._reoffer_after
        self._round_at = min(self._round_at, time.monotonic())
        if seq == self._archive_mark:
            self._round_restart = True
        if seq > self._archive_mark or not self.archive_heard:
            self._archive_mark = max(self._archive_mark, seq)
            self.archive_heard = True
            self._journal.mark_delivered(ARCHIVE_OUTPUT, self._archive_mark, durable=False)

    @property
    def archive_mark(self) -> int:
        """The seq up to which the archive confirmed this table's events."""
        return self._archive_mark

    def _reoffer(self) -> None:
        """Re-offer, in seq order and at a bounded rate, the events above the
        archive's mark that were acknowledged by the broker and journalled at
        least ``reoffer_after_s`` ago (under ``_send_lock``, connected)."""
        if not self.archive_ack or not self.archive_heard or self._draining:
            return
        now = time.monotonic()
        if self._round_restart:
            self._round_restart = False
            self._round_from = None
            self._round_sent = 0  # not a round that moved nothing
            self._round_at = now
        if self._round_from is None:
            if now < self._round_at:
                return
            if self._round_sent and self._archive_mark <= self._round_start_mark:
                # the last round moved nothing: the archiver is away, or behind
                self._round_wait = min(self._round_wait * 2, self._reoffer_after * REOFFER_MAX_FACTOR)
            self._round_from = self._round_start_mark = self._archive_mark
            self._round_sent = 0
        self._tokens = min(float(REOFFER_BURST), self._tokens + (now - self._tokens_at) * REOFFER_PER_S)
        self._tokens_at = now
        room = int(self._tokens)
        if room <= 0:
            return
        horizon = now - self._reoffer_after
        while len(self._acked_at) > 1 and self._acked_at[1][1] <= horizon:
            self._acked_at.popleft()
        through = self._acked_at[0][0] if self._acked_at[0][1] <= horizon else 0
        start = max(self._round_from, self._archive_mark)
        due = self._journal.unconfirmed(start, through, time.time() - self._reoffer_after, room)
        for p in due:
            topic = event_topic(self._cfg.topic_prefix, self.table, p.type)
            # never retained: an old `roads` must not replace the latest one
            info = self._client.publish(topic, p.json, qos=1, retain=False)
            if info.rc != MQTTErrorCode.MQTT_ERR_SUCCESS:
                return  # not connected after all: the round goes on next pass
            self._tokens -= 1
            self._round_from = p.seq
            self._round_sent += 1
            self.reoffered += 1
        if len(due) < room:
            if self._round_sent:
                log.warning(
                    "mqtt: re-offered %d event(s) above the archive's mark %d",
                    self._round_sent,
                    self._round_start_mark,
                )
            self._round_from = None
            # nothing (more) due: look again after a while
            self._round_at = now + (
                self._round_wait if self._round_sent else max(1.0, self._reoffer_after / 4)
            )

    # --- the sender thread ----------------------------------------------

    def _send_loop(self) -> None:
        while not self._stopping:
            self._wake.wait(self._poll)
            self._wake.clear()
            if self._stopping:
                break
            try:
                if self.archive_ack:
                    self._take_mark()
                with self._send_lock:
                    self._settle_acks()
                    if self._connected.is_set():
                        if self._resubscribe:
                            self._resubscribe_due()
                        self._send_state()
                        self._fill()
                        self._reoffer()
                    self._ack_wake = self._need_acks()
                # written after the lock is let go: the daemon's loop, which
                # publishes a card under it, never waits for this write
                self._write_mark()
            except JournalError as exc:
                log.error("mqtt: %s", exc)
                time.sleep(self._poll)
            except Exception:  # keep delivering whatever one bad event did
                log.exception("mqtt: sender error")
                time.sleep(self._poll)

    def _need_acks(self) -> bool:
        """Whether the sender has work that an acknowledgement unblocks (so
        each one should wake it): a drain, a resend after a refusal or a
        reconnect, a backlog in the journal, or a window half full. Under
        ``_send_lock``."""
        return bool(
            self._draining
            or self._hold_until
            or self._refused
            or (self._reconnected and self._inflight)
            or not self._read_to_end
            or len(self._inflight) * 2 >= self._window
        )

    def _write_mark(self) -> None:
        """Record in the journal that everything up to the settled mark is
        delivered, if it moved since last written. Only the sender thread
        writes marks (and ``stop`` once it is gone), so they are written in
        order; it does so on its passes (every ``poll_interval`` at the
        latest), not once per card: a mark written late only means that
        after a crash a few more acknowledged events go out again (at least
        once; consumers de-duplicate on ``event_id``)."""
        mark = self._mark
        if mark > self._mark_written:
            # no fsync of its own (the next event commit's covers it): a
            # mark lost to a power cut only sends its events again, and an
            # fsync here, under the journal's lock, held up the next card's
            self._journal.mark_delivered(self.name, mark, durable=False)
            self._mark_written = mark

    def _settle_acks(self) -> None:
        """Take in the acknowledgements received and move the mark over the
        contiguous acknowledged prefix (under ``_send_lock``; the sender
        writes it to the journal: ``_write_mark``)."""
        while self._acks:
            mid, ok, why = self._acks.popleft()
            seq = self._mid_seq.pop(mid, None)
            if seq is None:
                continue  # status, state, replies: not tracked
            if ok:
                self._acked.add(seq)
            else:
                # An MQTT 5 broker said no (not authorised, quota...). The
                # event stays undelivered: the mark cannot pass it.
                log.error("mqtt: broker refused event seq %s (%s); resending from the mark later", seq, why)
                self._refused.add(seq)
                self._hold_until = time.monotonic() + self._retry_delay
        mark = self._mark
        while self._inflight:
            seq = next(iter(self._inflight))
            if seq not in self._acked:
                break
            self._inflight.popitem(last=False)
            self._acked.discard(seq)
            mark = seq
        if mark > self._mark and self.archive_ack:
            at = time.monotonic()
            self._acked_at.append((mark, at))
            horizon = at - self._reoffer_after
            while len(self._acked_at) > 1 and self._acked_at[1][1] <= horizon:
                self._acked_at.popleft()  # the oldest kept is the one that says what is due
        self._mark = max(self._mark, mark)
        if self._refused and all(s in self._acked or s in self._refused for s in self._inflight):
            # Everything sent has an answer: forget it and, after the pause,
            # send again from the first undelivered event (those accepted
            # after the refused one go twice: at least once, in order).
            self._inflight.clear()
            self._acked.clear()
            self._refused.clear()
            self._sent_through = self._mark
        if not self._inflight:
            self._reconnected = False

    def _fill(self) -> None:
        if self._draining:
            return
        if self._hold_until:
            if time.monotonic() < self._hold_until or self._inflight:
                return
            self._hold_until = 0.0
        if self._reconnected and self._inflight:
            return  # paho is re-sending older events; let them land first
        room = self._window - len(self._inflight)
        if room <= 0:
            return
        if self._read_to_end and self._journal.stored_top() <= self._sent_through:
            return  # nothing stored since the journal was last read to its end
        pending = self._journal.pending(self.name, room, after=self._sent_through)
        self._read_to_end = len(pending) < room
        try:
            for p in pending:
                if not self._publish_event(p):
                    return
        finally:
            self._send_retained()

    def _publish_event(self, p: PendingEvent) -> bool:
        """Publish one event (under ``_send_lock``); False if paho did not
        queue it (it is sent again from ``_sent_through``)."""
        # `roads` has the same topic as its retained copy: one retained
        # publish serves as both, rather than every subscriber getting it twice.
        retain = p.type == "roads"
        topic = event_topic(self._cfg.topic_prefix, self.table, p.type)
        info = self._client.publish(topic, p.json, qos=1, retain=retain)
        if info.rc not in (MQTTErrorCode.MQTT_ERR_SUCCESS, MQTTErrorCode.MQTT_ERR_NO_CONN):
            log.warning(
                "mqtt: publish of seq %s not queued (%s); retrying", p.seq, mqtt.error_string(info.rc)
            )
            return False
        self._inflight[p.seq] = info.mid
        self._mid_seq[info.mid] = p.seq
        self._sent_through = p.seq
        if p.type == "odds.update":
            # its retained copy is not part of the ordered stream: sent once
            # the batch is out (``_send_retained``), so that a coup's first
            # card, stored behind the coup before's odds, does not wait for it
            self._retained_odds.append(p.json)
        return True

    def _send_retained(self) -> None:
        """The retained copies of the odds published since the last call, in
        order (under ``_send_lock``; the last one is what the broker keeps)."""
        copies, self._retained_odds = self._retained_odds, []
        for text in copies:
            self._client.publish(self.topic_odds, text, qos=1, retain=True)

    def _send_state(self) -> None:
        with self._state_lock:
            if not self._state_dirty or self._state is None:
                return
            state = self._state
            self._state_dirty = False
        self._client.publish(self.topic_state, json.dumps(state, separators=(",", ":")), qos=1, retain=True)
