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
metrics: 127.0.0.1:9109       # optional Prometheus endpoint
```
"""

from __future__ import annotations

import os
import re
from typing import ClassVar

from pydantic import Field, field_validator

from controller.config import MqttConfig, _error, _Model, load_model, parse_host_port

_GROUP_RE = re.compile(r"[A-Za-z0-9_-]{1,64}")

#: MQTT 5 Session Expiry Interval is a 32-bit count of seconds.
MAX_SESSION_EXPIRY_S = 0xFFFF_FFFF
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


class ArchiveConfig(_Model):
    broker: BrokerConfig
    dsn: str = Field(min_length=1, max_length=4096)
    share_group: str | None = None
    session_expiry_s: int = Field(default=7 * 24 * 3600, ge=60, le=MAX_SESSION_EXPIRY_S)
    batch_max_events: int = Field(default=500, ge=1, le=MAX_BATCH_EVENTS)
    batch_max_latency_ms: int = Field(default=200, ge=1, le=60_000)
    max_payload_bytes: int = Field(default=256 * 1024, ge=1024, le=16 * 1024 * 1024)
    retention_months: int = Field(default=24, ge=1, le=1200)
    partitions_ahead: int = Field(default=2, ge=1, le=24)
    #: Optional Prometheus endpoint, host:port (controller/archive/metrics.py).
    metrics: str | None = None

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

    @property
    def client_id(self) -> str:
        return self.broker.client_id

    def topic_filter(self) -> str:
        """Every table's topics; the archiver keeps the events among them."""
        base = f"{self.broker.topic_prefix}/+/#"
        return f"$share/{self.share_group}/{base}" if self.share_group else base


def load_archive_config(path: str | os.PathLike[str]) -> ArchiveConfig:
    return load_model(path, ArchiveConfig)
