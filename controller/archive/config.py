"""The archiver's configuration file (``shoe-controller archive --config
archive.yaml``): unknown keys are errors and a bad value names its key, as
in the daemon's config (same loader, controller/config.py).

```yaml
broker:                       # the same keys as a table's outputs.mqtt
  host: broker.floor.lan
  port: 8883
  client_id: archive-1        # stable: the broker keeps this session
  username: archive
  password_file: /etc/shoe-controller/archive-mqtt.pass
  tls: {ca_file: /etc/shoe-controller/ca.crt}
  topic_prefix: baccarat
dsn: "host=db.floor.lan dbname=floor user=archive passfile=/etc/shoe-controller/pgpass"
share_group: archivers        # optional: $share/archivers/... (several archivers)
session_expiry_s: 604800      # the broker keeps the session (and queues) this long
batch_max_events: 500         # a batch is committed at this many events...
batch_max_latency_ms: 200     # ...or this long after its first one
max_payload_bytes: 262144     # a larger message is kept aside (rejects), not parsed
retention_months: 24          # partitions wholly older than this many months are dropped
partitions_ahead: 2           # months of partitions made ahead of time
metrics: 127.0.0.1:10109       # optional Prometheus endpoint
```

On a NATS JetStream cluster (docs/archive.md, Archive, "On a NATS JetStream
cluster") ``nats:`` takes the place of ``broker:`` (exactly one of the two):

```yaml
nats:
  servers: [nats://n1.floor.lan:4222, nats://n2.floor.lan:4222, nats://n3.floor.lan:4222]
  client_id: archive-1        # this archiver's name (counters, logs)
  durable: archivers          # the pull consumer every archiver shares (a work queue)
  replicas: 3                 # the least replicas of NATS's MQTT stream the archiver takes
  ack_wait_s: 60              # an unacknowledged event is offered again after this
  topic_prefix: baccarat      # the tables' outputs.mqtt.topic_prefix
  username: archive           # optional, with password_file
  password_file: /etc/shoe-controller/archive-nats.pass
```
"""

from __future__ import annotations

import os
import re
from typing import Any, ClassVar
from urllib.parse import urlsplit

from pydantic import Field, ValidationInfo, field_validator, model_validator

from controller.config import (
    MqttConfig,
    _check_secret_file,
    _error,
    _Model,
    load_model,
    parse_host_port,
)

_GROUP_RE = re.compile(r"[A-Za-z0-9_-]{1,64}")
#: A JetStream consumer name: no '.', '*', '>', spaces or path
#: separators (https://docs.nats.io/nats-concepts/jetstream/streams).
_NATS_NAME_RE = re.compile(r"[A-Za-z0-9_-]{1,64}")
#: NATS's own stream of the QoS 1 messages its MQTT clients publish, and its
#: subjects: ``$MQTT.msgs.`` and the topic as a subject. NATS stores a
#: message there (replicated, ``mqtt.stream_replicas``) before it sends the
#: PUBACK: the archiver reads it (controller/archive/jetstream.py says why).
MQTT_STREAM = "$MQTT_msgs"
MQTT_SUBJECT_PREFIX = "$MQTT.msgs."
#: The servers one archiver may list (a cluster's seed nodes; it learns the rest).
MAX_NATS_SERVERS = 16

#: MQTT 5 Session Expiry Interval is a 32-bit count of seconds.
MAX_SESSION_EXPIRY_S = 0xFFFF_FFFF
#: A share group's member: its session's default and greatest expiry. The
#: broker (mosquitto 2.0) keeps handing a member whose session lives its
#: share of the messages, queued, whether or not it is connected, and never
#: gives them to another member; when the session expires they are dropped,
#: and the tables re-offer from their journals what the archive's marks do
#: not cover (outputs.mqtt.archive_ack), which then reaches the members
#: alive. So this bounds how long a member that died for good holds back
#: its share (docs/archive.md, Archive, "Several archivers").
GROUP_SESSION_EXPIRY_S = 60
MAX_GROUP_SESSION_EXPIRY_S = 3600
#: A batch bigger than the broker may keep in flight to us could never fill.
MAX_BATCH_EVENTS = 10_000


class BrokerConfig(MqttConfig):
    KEY_PATH: ClassVar[str] = "broker"
    #: Required: the broker keeps the archiver's session (and its queue)
    #: under this id, so it must be stable, and unique per archiver.
    client_id: str = Field(min_length=1, max_length=128)

    @field_validator("protocol")
    @classmethod
    def _v5(cls, value: str) -> str:
        if value != "5":
            raise _error(
                "protocol",
                "the archiver needs MQTT 5 (session expiry, shared subscriptions, receive maximum)",
            )
        return value

    @field_validator("command_key_file")
    @classmethod
    def _no_key(cls, value: str | None) -> str | None:
        if value is not None:
            raise _error("command_key_file", "the archiver sends no commands: remove command_key_file")
        return value


class NatsConfig(_Model):
    """The archiver's JetStream side (controller/archive/jetstream.py)."""

    servers: list[str] = Field(min_length=1, max_length=MAX_NATS_SERVERS)
    client_id: str = Field(min_length=1, max_length=128)
    durable: str = "archivers"
    #: The least replicas the archiver accepts of the stream it reads
    #: (NATS's ``mqtt.stream_replicas``; JetStream replicates on 1 to 5).
    replicas: int = Field(default=3, ge=1, le=5)
    ack_wait_s: int = Field(default=60, ge=5, le=3600)
    topic_prefix: str = "baccarat"
    username: str | None = Field(default=None, min_length=1, max_length=256)
    password_file: str | None = None

    @field_validator("servers")
    @classmethod
    def _servers(cls, value: list[str]) -> list[str]:
        for url in value:
            if len(url) > 512:
                raise _error("servers", "a server URL is at most 512 characters")
            try:
                parts = urlsplit(url)
                port = parts.port
            except ValueError:
                raise _error("servers", "{url!r}: not nats://host:port", url=url) from None
            if parts.scheme not in ("nats", "tls") or not parts.hostname or port is None:
                raise _error("servers", "{url!r}: not nats://host:port (or tls://host:port)", url=url)
            if parts.username or parts.password:
                raise _error(
                    "servers", "{url!r}: no credentials in a URL (use username and password_file)", url=url
                )
            if parts.path not in ("", "/") or parts.query or parts.fragment:
                raise _error("servers", "{url!r}: nothing after host:port", url=url)
        if len(set(value)) != len(value):
            raise _error("servers", "a server is listed twice")
        return value

    @field_validator("durable")
    @classmethod
    def _name(cls, value: str) -> str:
        if not _NATS_NAME_RE.fullmatch(value):
            raise _error("nats_name", "must match [A-Za-z0-9_-]{{1,64}}, not {value!r}", value=value)
        return value

    @field_validator("topic_prefix")
    @classmethod
    def _prefix(cls, value: str) -> str:
        # NATS maps the MQTT topic a/b/c to the subject a.b.c: a prefix's
        # levels must be subject tokens (docs.nats.io, MQTT, topic mapping).
        levels = value.split("/")
        if not all(_GROUP_RE.fullmatch(level) for level in levels):
            raise _error(
                "topic_prefix", "must be '/'-separated levels of [A-Za-z0-9_-], not {value!r}", value=value
            )
        return value

    @field_validator("password_file")
    @classmethod
    def _secret(cls, value: str | None) -> str | None:
        return None if value is None else _check_secret_file(value)

    @model_validator(mode="after")
    def _auth(self) -> NatsConfig:
        if self.password_file is not None and self.username is None:
            raise _error("nats_auth", "password_file needs a username")
        return self

    @property
    def subject_prefix(self) -> str:
        return self.topic_prefix.replace("/", ".")

    def subjects(self) -> str:
        """Every table's QoS 1 messages in NATS's MQTT stream (``MQTT_STREAM``)."""
        return f"{MQTT_SUBJECT_PREFIX}{self.subject_prefix}.>"

    def password(self) -> str | None:
        """The password from ``password_file`` (first line, no newline)."""
        if self.password_file is None:
            return None
        from controller.errors import ConfigError

        try:
            with open(self.password_file, "rb") as f:
                raw = f.read(4096 + 1)
        except OSError as exc:
            raise ConfigError(f"nats.password_file: {self.password_file}: {exc.strerror}") from None
        if len(raw) > 4096:
            raise ConfigError(f"nats.password_file: {self.password_file}: larger than 4096 bytes")
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise ConfigError(f"nats.password_file: {self.password_file}: not UTF-8 text") from None
        return text.splitlines()[0] if text else ""


class ArchiveSigning(_Model):
    """Which signing keys the archive trusts (docs/events.md, "Signed and
    chained events")."""

    #: A table's first announced key is trusted when seen (default: a new
    #: table needs no archive change; the first key is taken from the
    #: table's own retained announcement, made at its install). Off: keys
    #: come from the pins below only; an unpinned table's signed events are
    #: then refused (no key known).
    trust_on_first_use: bool = True
    #: Pinned public keys (base64url, as ``keygen --public`` prints) per
    #: table: such a table's keys come from here only, never the broker.
    keys: dict[str, list[str]] = Field(default_factory=dict, max_length=10_000)

    @field_validator("keys")
    @classmethod
    def _keys(cls, value: dict[str, list[str]]) -> dict[str, list[str]]:
        from controller.signing import unb64

        for table, keys in value.items():
            for key in keys:
                try:
                    ok = len(unb64(key)) == 32
                except ValueError:
                    ok = False
                if not ok:
                    raise _error(
                        "keys",
                        "{table}: {key!r:.60} is not a base64url Ed25519 public key",
                        table=table,
                        key=key,
                    )
        return value


class ArchiveConfig(_Model):
    #: MQTT 5 (``broker:``) or NATS JetStream (``nats:``): exactly one. The
    #: field is ``mqtt_broker``; the key and the property are ``broker``.
    mqtt_broker: BrokerConfig | None = Field(default=None, alias="broker")
    nats: NatsConfig | None = None
    dsn: str = Field(min_length=1, max_length=4096)
    share_group: str | None = None
    #: 7 days; in a share group ``GROUP_SESSION_EXPIRY_S`` (``_group_expiry``).
    session_expiry_s: int = Field(default=7 * 24 * 3600, ge=10, le=MAX_SESSION_EXPIRY_S)
    batch_max_events: int = Field(default=500, ge=1, le=MAX_BATCH_EVENTS)
    batch_max_latency_ms: int = Field(default=200, ge=1, le=60_000)
    max_payload_bytes: int = Field(default=256 * 1024, ge=1024, le=16 * 1024 * 1024)
    retention_months: int = Field(default=24, ge=1, le=1200)
    partitions_ahead: int = Field(default=2, ge=1, le=24)
    #: Optional Prometheus endpoint, host:port (controller/archive/metrics.py).
    metrics: str | None = None
    signing: ArchiveSigning = ArchiveSigning()

    @field_validator("metrics")
    @classmethod
    def _metrics(cls, value: str | None) -> str | None:
        if value is not None:
            parse_host_port(value)
        return value

    @field_validator("dsn")
    @classmethod
    def _dsn(cls, value: str) -> str:
        from psycopg import ProgrammingError
        from psycopg.conninfo import conninfo_to_dict

        try:
            params = conninfo_to_dict(value)
        except ProgrammingError as exc:
            # libpq's message ends in a newline: the error stays one line
            problem = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise _error("dsn", "not a PostgreSQL connection string: {problem}", problem=problem) from None
        if "password" in params:
            raise _error(
                "dsn",
                "must not hold a password (secrets live in files): use passfile=PATH "
                "or the PGPASSFILE environment variable",
            )
        return value

    @field_validator("share_group")
    @classmethod
    def _group(cls, value: str | None) -> str | None:
        if value is not None and not _GROUP_RE.fullmatch(value):
            raise _error("share_group", "must match [A-Za-z0-9_-]{{1,64}}, not {value!r}", value=value)
        return value

    @model_validator(mode="before")
    @classmethod
    def _group_expiry(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("share_group") is not None and "session_expiry_s" not in data:
            data = {**data, "session_expiry_s": GROUP_SESSION_EXPIRY_S}
        return data

    @field_validator("session_expiry_s")
    @classmethod
    def _group_bound(cls, value: int, info: ValidationInfo) -> int:
        if info.data.get("share_group") is not None and value > MAX_GROUP_SESSION_EXPIRY_S:
            raise _error(
                "session_expiry_s",
                "with share_group, at most {most} s (default {default}): a member that dies for good "
                "holds its share of the messages queued on the broker for this long before the "
                "tables re-offer them to the members alive, not {value}",
                most=MAX_GROUP_SESSION_EXPIRY_S,
                default=GROUP_SESSION_EXPIRY_S,
                value=value,
            )
        return value

    @model_validator(mode="after")
    def _one_source(self) -> ArchiveConfig:
        if (self.mqtt_broker is None) == (self.nats is None):
            raise _error("source", "exactly one of broker (MQTT 5) and nats (JetStream) is required")
        if self.nats is not None and self.share_group is not None:
            raise _error(
                "share_group",
                "share_group is for MQTT: with nats the archivers share the work through nats.durable",
            )
        return self

    @property
    def broker(self) -> BrokerConfig:
        """The MQTT broker's section (only for an archiver on MQTT)."""
        if self.mqtt_broker is None:
            raise AttributeError("broker: this archiver reads NATS JetStream (nats:)")
        return self.mqtt_broker

    @property
    def topic_prefix(self) -> str:
        return self.nats.topic_prefix if self.nats is not None else self.broker.topic_prefix

    @property
    def client_id(self) -> str:
        return self.nats.client_id if self.nats is not None else self.broker.client_id

    def topic_filter(self) -> str:
        """Every table's topics; the archiver keeps the events among them."""
        base = f"{self.broker.topic_prefix}/+/#"
        return f"$share/{self.share_group}/{base}" if self.share_group else base


def load_archive_config(path: str | os.PathLike[str]) -> ArchiveConfig:
    return load_model(path, ArchiveConfig)
