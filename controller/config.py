"""The daemon's configuration file (docs/operations.md, Configuration): its schema, loading and
every check that can be made before the daemon starts.

Owns: the pydantic models (unknown keys are errors everywhere, so a typo
never passes silently), YAML parsing (syntax errors and duplicate keys are
reported with their line), the translation of validation failures into one
``ConfigError`` whose message names each bad key path, the checks on secret
files (they must exist and must not be world-readable) and the embedded
default used by ``shoe-controller run`` without ``-c``.

Relative paths (journal, jsonl, secret files, profile files) are taken
relative to the daemon's working directory, as the embedded default's ``./var/``
defaults are; the systemd unit sets that to the state directory.
"""

from __future__ import annotations

import difflib
import ipaddress
import math
import os
import re
import secrets
import stat
import types
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal, TypeVar, Union, get_args, get_origin

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic_core import PydanticCustomError

from controller.errors import ConfigError
from controller.textsafe import visible

#: Profiles shipped in the package (docs/operations.md, Configuration); a profile may also be a
#: path to a profile YAML.
BUILTIN_PROFILES: tuple[str, ...] = ("punto_banco", "ez_baccarat", "baccarat_27")
PROTOCOLS: tuple[str, ...] = ("shoe-ascii/1", "shoe-bin/1", "angel-eye/2", "auto")
# The drivers own their settings (the fake's fault vocabulary and pace, the
# ports the serial driver opens) in pure modules; the config checks with them
# without loading a driver (pseudo-terminals, threads, pyserial).
from drivers.fake_settings import (  # noqa: E402
    FAULT_KINDS,  # noqa: F401 - re-exported: the kinds a config may name
    MAX_CARDS_PER_SECOND,
)
from drivers.fake_settings import parse_faults as _parse_fake_faults  # noqa: E402
from drivers.ports import parse_port  # noqa: E402 - the driver owns which ports it opens

Protocol = Literal["shoe-ascii/1", "shoe-bin/1", "angel-eye/2", "auto"]

_M = TypeVar("_M", bound=BaseModel)

_TABLE_RE = re.compile(r"[A-Za-z0-9_-]{1,32}")
_BURN_RE = re.compile(r"first_card|decks|fixed:([1-8])")


def _error(kind: str, message: str, **ctx: Any) -> PydanticCustomError:
    """A validation error whose message is shown as is (no "Value error, ").

    ``message`` is a ``str.format`` template over ``ctx`` (``{value!r}``
    works); the result is passed through as one opaque context value so a
    brace in a user's value cannot be mistaken for a placeholder."""
    return PydanticCustomError(kind, "{message}", {"message": message.format(**ctx)})


def _check_secret_file(path: str) -> str:
    """A secret must exist, be a regular file and not be world-readable."""
    try:
        st = os.stat(path)
    except OSError as exc:
        raise _error(
            "secret_file", "{path}: {problem}", path=path, problem=exc.strerror or str(exc)
        ) from None
    if not stat.S_ISREG(st.st_mode):
        raise _error("secret_file", "{path}: not a regular file", path=path)
    if st.st_mode & 0o004:
        raise _error(
            "secret_file",
            "{path} is world-readable (mode {mode}); a secret must not be: chmod o-rwx {path}",
            path=path,
            mode=f"{stat.S_IMODE(st.st_mode):04o}",
        )
    return path


def _check_readable_file(path: str) -> str:
    if not os.path.isfile(path):
        raise _error("file_missing", "{path}: no such file", path=path)
    return path


class _Model(BaseModel):
    # strict: YAML already types its scalars, so `decks: true` or
    # `port: "1883"` are mistakes, not values to coerce.
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


# --- device -----------------------------------------------------------------


class SerialDevice(_Model):
    driver: Literal["serial"]
    protocol: Protocol = "shoe-ascii/1"
    #: A local device path, or a serial device server: ``socket://HOST:PORT``
    #: (TCP-server mode) or ``rfc2217://HOST:PORT`` (drivers/serial.py).
    port: str = Field(min_length=1, max_length=4096)
    #: None: the protocol's usual speed (9600 for shoe-ascii/1, 4800 for angel-eye/2).
    #: Not sent over ``socket://`` (the device server's own setting applies).
    baudrate: int | None = Field(default=None, ge=300, le=4_000_000)

    @field_validator("port")
    @classmethod
    def _port(cls, value: str) -> str:
        try:
            parse_port(value)
        except ValueError as exc:
            raise _error("port", "{problem}", problem=str(exc)) from None
        return value


def _usb_id(value: Any) -> int:
    # YAML 1.1 already reads 0x1234 as an int; a quoted "0x1234" or a bare
    # lsusb-style "1234" string is read as hex, as lsusb prints it.
    if isinstance(value, bool):
        raise _error("usb_id", "must be a 16-bit USB id such as 0x1234")
    if isinstance(value, str):
        text = value.strip().lower().removeprefix("0x")
        if not re.fullmatch(r"[0-9a-f]{1,4}", text):
            raise _error("usb_id", "must be a 16-bit USB id such as 0x1234, not {value!r}", value=value)
        value = int(text, 16)
    if not isinstance(value, int) or not 0 <= value <= 0xFFFF:
        raise _error("usb_id", "must be a 16-bit USB id such as 0x1234")
    return value


class UsbDevice(_Model):
    driver: Literal["usb"]
    protocol: Protocol = "shoe-bin/1"
    vendor_id: int
    product_id: int
    serial_number: str | None = None

    @field_validator("vendor_id", "product_id", mode="before")
    @classmethod
    def _hex_id(cls, value: Any) -> int:
        return _usb_id(value)


class FakeDevice(_Model):
    driver: Literal["fake"]
    protocol: Protocol = "shoe-ascii/1"
    seed: int = 1
    cards_per_second: float = Field(default=2.0, ge=0.0, le=MAX_CARDS_PER_SECOND, allow_inf_nan=False)
    faults: str = ""

    @field_validator("faults")
    @classmethod
    def _faults(cls, value: str) -> str:
        parse_faults(value)
        return value


class ReplayDevice(_Model):
    driver: Literal["replay"]
    #: None: the capture's own ``# protocol=`` line (docs/devices.md, Captures).
    protocol: Protocol | None = None
    file: str = Field(min_length=1)
    realtime: bool = False

    @field_validator("file")
    @classmethod
    def _exists(cls, value: str) -> str:
        return _check_readable_file(value)


Device = Annotated[Union[SerialDevice, UsbDevice, FakeDevice, ReplayDevice], Field(discriminator="driver")]  # noqa: UP007


def parse_faults(spec: str) -> dict[str, float]:
    """``"gap:0.01,garbage:0.05"`` -> ``{"gap": 0.01, "garbage": 0.05}``;
    raises the validation error the config reports."""
    try:
        return _parse_fake_faults(spec)
    except ValueError as exc:
        raise _error("faults", "{spec!r}: {problem}", spec=spec, problem=str(exc)) from None


# --- outputs ----------------------------------------------------------------


class TlsConfig(_Model):
    #: None: the system's trusted CAs.
    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None

    @field_validator("ca_file", "cert_file")
    @classmethod
    def _exists(cls, value: str | None) -> str | None:
        return None if value is None else _check_readable_file(value)

    @field_validator("key_file")
    @classmethod
    def _secret(cls, value: str | None) -> str | None:
        return None if value is None else _check_secret_file(value)

    @model_validator(mode="after")
    def _pair(self) -> TlsConfig:
        if (self.cert_file is None) != (self.key_file is None):
            raise _error(
                "tls_pair", "cert_file and key_file go together (a client certificate needs its key)"
            )
        return self


#: A host name (RFC 1123 labels, and '_') or an IPv4 address; an IPv6
#: address is checked as one (``_is_host``): nothing a log line, a status
#: line or a socket call could take for anything else.
_HOST_RE = re.compile(
    r"(?=.{1,253}$)[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?"
    r"(?:\.[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?)*\.?"
)
#: The most brokers one ``brokers:`` list may name (a cluster's nodes, a
#: primary and standbys: a handful; each is one connection attempt in turn).
MAX_BROKERS = 16


def _is_host(value: str) -> bool:
    if ":" not in value:
        return _HOST_RE.fullmatch(value) is not None
    try:
        ipaddress.IPv6Address(value)  # no zone (%eth0), no brackets
    except ValueError:
        return False
    return True


def _check_host(value: str) -> str:
    if not _is_host(value):
        raise _error(
            "host",
            "must be a host name or an IP address (letters, digits, '-', '_', '.'; an IPv6 address "
            "without brackets), not {value!r}",
            value=visible(value),
        )
    return value


class BrokerAddress(_Model):
    """One broker of ``outputs.mqtt.brokers`` (or an archiver's ``broker.brokers``)."""

    host: str = Field(min_length=1, max_length=253)
    port: int = Field(default=1883, ge=1, le=65535)

    @field_validator("host")
    @classmethod
    def _host(cls, value: str) -> str:
        return _check_host(value)


class MqttConfig(_Model):
    #: One broker (``host``/``port``), or several (``brokers``): the client
    #: connects to the first that answers and tries the next when one
    #: fails (``endpoints``; controller/mqtt_client.py).
    #: With ``brokers``, ``host`` and ``port`` are the first broker's (set
    #: by ``_first_broker``), so a reader of the first broker needs no change.
    host: str = Field(default="", max_length=253)
    port: int = Field(default=1883, ge=1, le=65535)
    brokers: list[BrokerAddress] | None = Field(default=None, min_length=1, max_length=MAX_BROKERS)
    #: None: ``shoe-<table>``.
    client_id: str | None = Field(default=None, min_length=1, max_length=128)
    username: str | None = Field(default=None, min_length=1)
    password_file: str | None = None
    tls: TlsConfig | None = None
    topic_prefix: str = "baccarat"
    #: MQTT 5 by default: only it lets the controller see that a command is
    #: retained on the broker when it arrives live (retain-as-published);
    #: "3.1.1" is for brokers without MQTT 5 (see ``protocol_warning``).
    protocol: Literal["3.1.1", "5"] = "5"
    #: End-to-end acknowledgement: the table takes the floor
    #: archiver's retained ``<prefix>/<table>/archive/mark`` as what the
    #: archive holds, re-offers from its journal what lies above it, and the
    #: journal's retention keeps it (``journal_max_mb`` bounds that). False:
    #: the broker's PUBACK is delivery, as before (a table with no archiver).
    archive_ack: bool = True
    #: An event above the archive's mark is re-offered once it is this old
    #: (seconds, 1..3600); a round that moved nothing doubles the wait (to 16x).
    reoffer_after_s: float = Field(default=30.0, ge=1.0, le=3600.0)
    #: The daemon's own check of a command's origin (controller/command_auth.py):
    #: with it, commands must be signed (HMAC-SHA256) with this shared key.
    command_key_file: str | None = None
    #: Where this section sits in its config file, for the messages of the
    #: secret readers (the archive's config calls it ``broker``).
    KEY_PATH: ClassVar[str] = "outputs.mqtt"

    @field_validator("protocol", mode="before")
    @classmethod
    def _protocol(cls, value: Any) -> Any:
        # `protocol: 5` is an int in YAML; it means MQTT 5 all the same.
        return "5" if value == 5 and not isinstance(value, bool) else value

    @field_validator("password_file", "command_key_file")
    @classmethod
    def _secret(cls, value: str | None) -> str | None:
        return None if value is None else _check_secret_file(value)

    @field_validator("host")
    @classmethod
    def _host(cls, value: str) -> str:
        return _check_host(value)

    @model_validator(mode="before")
    @classmethod
    def _first_broker(cls, data: Any) -> Any:
        if not isinstance(data, dict) or data.get("brokers") is None:
            return data
        if "host" in data or "port" in data:
            raise _error(
                "mqtt_where",
                "host/port and brokers are exclusive: list every broker, each with its own port, "
                "under brokers",
            )
        brokers = data["brokers"]
        first = brokers[0] if isinstance(brokers, list) and brokers else None
        host = first.get("host") if isinstance(first, dict) else None
        if isinstance(first, dict) and isinstance(host, str) and _is_host(host):
            port = first.get("port", 1883)
            ok = isinstance(port, int) and not isinstance(port, bool) and 1 <= port <= 65535
            # a bad first entry is reported once, under brokers.0
            data = {**data, "host": host, **({"port": port} if ok else {})}
        return data

    @field_validator("brokers")
    @classmethod
    def _brokers(cls, value: list[BrokerAddress] | None) -> list[BrokerAddress] | None:
        seen: set[tuple[str, int]] = set()
        for b in value or ():
            key = (b.host.lower().rstrip("."), b.port)
            if key in seen:
                raise _error("brokers", "{host}:{port} is listed twice", host=b.host, port=b.port)
            seen.add(key)
        return value

    @field_validator("topic_prefix")
    @classmethod
    def _prefix(cls, value: str) -> str:
        if not value or value.startswith("/") or value.endswith("/") or "//" in value:
            raise _error("topic_prefix", "must be topic levels without leading or trailing '/'")
        if any(ch in value for ch in "+#\0"):
            raise _error("topic_prefix", "must not contain the MQTT wildcards '+' or '#'")
        return value

    @model_validator(mode="after")
    def _auth(self) -> MqttConfig:
        if self.password_file is not None and self.username is None:
            raise _error("mqtt_auth", "password_file needs a username (MQTT sends no password without one)")
        return self

    @model_validator(mode="after")
    def _where(self) -> MqttConfig:
        if self.brokers is None and not self.host:
            raise _error("mqtt_where", "needs host (one broker) or brokers (a list of {{host, port}})")
        return self

    def endpoints(self) -> list[tuple[str, int]]:
        """The brokers to try, in order: ``host``/``port``, or ``brokers``."""
        if self.brokers is not None:
            return [(b.host, b.port) for b in self.brokers]
        return [(self.host, self.port)]

    def where(self) -> str:
        """The first broker as a URL, ``mqtt://a:1883`` (``mqtts`` with TLS)."""
        scheme = "mqtts" if self.tls else "mqtt"
        return f"{scheme}://{_bracket(self.host)}:{self.port}"

    def failover(self) -> str:
        """The brokers after the first, for a status line ('' with one)."""
        rest = self.endpoints()[1:]
        if not rest:
            return ""
        listed = ", then ".join(f"{_bracket(h)}:{p}" for h, p in rest)
        return f"; when one fails, the next in turn: {listed}"

    def protocol_warning(self) -> str | None:
        """What the chosen protocol cannot guarantee, for ``check-config`` and
        the daemon's start-up log; None with MQTT 5. (The controller always
        takes commands on its MQTT connection.)"""
        if self.protocol == "5":
            return None
        # What the table takes from MQTT 5 (controller/outputs/mqtt.py), all
        # of it: retain-as-published on the command subscription, and the
        # PUBACK's reason code. (Its session expiry of 0 is 3.1.1's clean
        # session; it uses no message expiry, user property or receive maximum.)
        return (
            'outputs.mqtt.protocol: "3.1.1" cannot show the controller that a command is '
            "retained on the broker when it arrives while connected: such a command is "
            "applied once (later copies are refused); nor can the broker say it refused a "
            "publish (its ACL): it acknowledges and drops it, and the event counts as delivered "
            '(MQTT 5 keeps it in the journal and sends it again); use "5" unless the broker '
            "lacks MQTT 5"
        )

    def _read_secret(self, key: str, path: str) -> bytes:
        """A secret file's bytes, at most ``MAX_PASSWORD_FILE_BYTES``; any
        problem is a ``ConfigError`` naming ``outputs.mqtt.<key>``."""
        try:
            with open(path, "rb") as f:
                raw = f.read(MAX_PASSWORD_FILE_BYTES + 1)
        except OSError as exc:
            raise ConfigError(f"{self.KEY_PATH}.{key}: {path}: {exc.strerror}") from None
        if len(raw) > MAX_PASSWORD_FILE_BYTES:
            raise ConfigError(f"{self.KEY_PATH}.{key}: {path}: larger than {MAX_PASSWORD_FILE_BYTES} bytes")
        return raw

    def password(self) -> str | None:
        """The password from ``password_file`` (first line, no newline)."""
        if self.password_file is None:
            return None
        raw = self._read_secret("password_file", self.password_file)
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            where = f"{self.KEY_PATH}.password_file: {self.password_file}"
            raise ConfigError(f"{where}: not UTF-8 text") from None
        return text.splitlines()[0] if text else ""

    def command_key(self) -> bytes | None:
        """The shared key from ``command_key_file`` (surrounding whitespace
        stripped), or None without one; an empty key is a ``ConfigError``."""
        if self.command_key_file is None:
            return None
        key = self._read_secret("command_key_file", self.command_key_file).strip()
        if not key:
            raise ConfigError(f"{self.KEY_PATH}.command_key_file: {self.command_key_file} is empty")
        return key


class Outputs(_Model):
    stdout: bool = True
    jsonl: str | None = Field(default=None, min_length=1)
    mqtt: MqttConfig | None = None


# --- rules ------------------------------------------------------------------


class RulesOverrides(_Model):
    """Overrides of the profile's shoe procedure; None = the profile's value."""

    burn: str | None = None
    cut_card_min: int | None = Field(default=None, ge=0, le=416)
    after_cut: Literal["one_more", "last"] | None = None
    coup_boundary: Literal["button", "auto"] | None = None
    demo_coups: int | None = Field(default=None, ge=0, le=3)
    correction_deadline_s: float | None = Field(default=None, gt=0, le=86400)
    extra_card: Literal["burn", "next_coup", "void"] | None = None

    @field_validator("burn")
    @classmethod
    def _burn(cls, value: str | None) -> str | None:
        if value is not None and not _BURN_RE.fullmatch(value):
            raise _error(
                "burn", "must be first_card, decks or fixed:N with N in 1..8, not {value!r}", value=value
            )
        return value

    def overrides(self) -> dict[str, Any]:
        """Only the settings the config file sets (for ``rules.load_profile``)."""
        return self.model_dump(exclude_none=True)


# --- the whole file ---------------------------------------------------------


class Config(_Model):
    table: str
    profile: str = "punto_banco"
    decks: int = Field(default=8, ge=1, le=12)
    # Required in a file: a production config that forgot its device section
    # must not quietly deal fake coups to the broker.
    device: Device
    journal: str = Field(default="./var/journal.sqlite3", min_length=1)
    journal_retention_days: int = Field(default=90, ge=1, le=36500)
    #: Every event journalled is signed (Ed25519) and chained;
    #: the key is ``signing_key`` (default: ``signing.key`` beside the
    #: journal), made on the first start if missing (or by ``keygen``).
    signing: bool = True
    signing_key: str | None = Field(default=None, min_length=1)
    odds: bool = True
    advantage_threshold: float = 0.0
    metrics: str | None = None
    outputs: Outputs = Outputs()
    #: The journal's size bound (MiB, 16..1,048,576): past it, retention prunes
    #: the oldest events and inputs even if undelivered or unconfirmed by the
    #: archive, with a ``security.alert`` ``JOURNAL_PRUNED`` and a log line.
    journal_max_mb: int = Field(default=4096, ge=16, le=1024 * 1024)
    rules: RulesOverrides = RulesOverrides()

    @field_validator("table")
    @classmethod
    def _table(cls, value: str) -> str:
        problem = table_problem(value)
        if problem is not None:
            raise _error("table", "{problem}", problem=problem)
        return value

    @field_validator("profile")
    @classmethod
    def _profile(cls, value: str) -> str:
        if value in builtin_profiles() or os.path.isfile(value):
            return value
        raise _error(
            "profile",
            "{value!r} is neither a built-in profile ({names}) nor an existing profile file",
            value=value,
            names=", ".join(builtin_profiles()),
        )

    @field_validator("metrics")
    @classmethod
    def _metrics(cls, value: str | None) -> str | None:
        if value is not None:
            parse_host_port(value)
        return value

    def metrics_address(self) -> tuple[str, int] | None:
        return None if self.metrics is None else parse_host_port(self.metrics)

    def signing_key_path(self) -> str:
        """The signing key's file: ``signing_key``, else beside the journal."""
        if self.signing_key is not None:
            return self.signing_key
        return os.path.join(os.path.dirname(self.journal) or ".", "signing.key")


def table_problem(value: str) -> str | None:
    """Why ``value`` cannot be a table id, or None when it can. A table id
    is an MQTT topic level and the first part of every ``event_id``, so no
    ``/``, ``+`` or ``#``, and never empty (the config's rule, used for
    ``replay --table`` and a capture's ``# table=`` too)."""
    if _TABLE_RE.fullmatch(value):
        return None
    return (
        f"must be 1 to 32 of A-Z a-z 0-9 _ - (an MQTT topic level and part of every event_id), not {value!r}"
    )


class ClientConfig(Config):
    """A config for the commands that only talk to the broker (``ctl``,
    ``replay --out mqtt``): a supervisor's, with ``table`` and
    ``outputs.mqtt`` and no device. Every key is checked as in a daemon's
    config; ``device`` may be left out (``run`` never takes this model)."""

    device: Device | None = None  # type: ignore[assignment]


def builtin_profiles() -> tuple[str, ...]:
    """The built-in profiles plus any other profile YAML shipped in the package."""
    shipped = {p.stem for p in (Path(__file__).parent / "profiles").glob("*.yaml")}
    return BUILTIN_PROFILES + tuple(sorted(shipped - set(BUILTIN_PROFILES)))


def _bracket(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def parse_host_port(value: str) -> tuple[str, int]:
    """``127.0.0.1:10108`` or ``[::1]:10108`` -> (host, port)."""
    m = re.fullmatch(r"\[([0-9A-Fa-f:.]+)\]:(\d{1,5})|([^:\[\]\s]+):(\d{1,5})", value)
    if m is None:
        raise _error("host_port", "must be host:port (e.g. 127.0.0.1:10108), not {value!r}", value=value)
    host = m.group(1) or m.group(3)
    port = int(m.group(2) or m.group(4))
    if not 1 <= port <= 65535:
        raise _error("host_port", "port must be in 1..65535, not {port}", port=port)
    return host, port


#: The embedded default's dealer errs now and then (``make demo``): a RESULT
#: pressed early (a misdeal corrected when the due card comes), a card past a
#: complete tableau (an extra card, burned), a card from another shoe (the
#: coup void). None of them holds the dealing up for a supervisor, so a first
#: run shows what the product is for within a minute or two.
DEMO_FAULTS = "premature:0.05,extra:0.04,foreign:0.03"


def default_config(seed: int | None = None) -> Config:
    """What ``shoe-controller run`` uses without ``-c`` (docs/operations.md, Command line): a
    fake shoe, punto banco, 8 decks, JSON lines on stdout, journal in ./var/;
    the fake deals a new shoe each run (``seed`` None: a random one, logged
    at start) with a dealer who errs now and then (``DEMO_FAULTS``)."""
    chosen = secrets.randbelow(1_000_000) if seed is None else seed
    return Config(table="T01", device=FakeDevice(driver="fake", seed=chosen, faults=DEMO_FAULTS))


# --- loading and error messages ---------------------------------------------


class _UniqueKeyLoader(yaml.SafeLoader):
    """SafeLoader that rejects duplicate keys (PyYAML keeps the last one
    silently, which would hide a typo as surely as an unknown key)."""


def _construct_mapping(
    loader: _UniqueKeyLoader, node: yaml.MappingNode, deep: bool = False
) -> dict[Any, Any]:
    seen: set[Any] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise yaml.constructor.ConstructorError(
                "while constructing a mapping",
                node.start_mark,
                f"duplicate key {key!r}",
                key_node.start_mark,
            )
        seen.add(key)
    return loader.construct_mapping(node, deep=deep)


_UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


#: Largest config or profile file read (a real one is a few KiB).
MAX_CONFIG_BYTES = 1 << 20
#: Largest password file read (its first line is the password).
MAX_PASSWORD_FILE_BYTES = 4096


def load_config(path: str | os.PathLike[str]) -> Config:
    """Read and validate a config file; any problem raises ``ConfigError``
    whose message starts with the file and names every bad key path."""
    return parse_config(_read(path), visible(os.fspath(path)))


def load_client_config(path: str | os.PathLike[str]) -> ClientConfig:
    """A config for ``ctl`` or ``replay --out mqtt``: checked like any
    other, but a ``device:`` section is not needed (a supervisor's box has
    no shoe)."""
    cfg = parse_config(_read(path), visible(os.fspath(path)), model=ClientConfig)
    assert isinstance(cfg, ClientConfig)
    return cfg


def load_model(path: str | os.PathLike[str], model: type[_M]) -> _M:
    """Read and validate any of the project's config files against ``model``
    (the same bounds, YAML checks and messages as the daemon's config)."""
    return parse_model(_read(path), visible(os.fspath(path)), model)


def _read(path: str | os.PathLike[str]) -> str:
    name = visible(os.fspath(path))  # as shown: a path may hold any byte but NUL
    try:
        with open(path, "rb") as f:
            raw = f.read(MAX_CONFIG_BYTES + 1)
        if len(raw) > MAX_CONFIG_BYTES:
            raise ConfigError(f"{name}: larger than {MAX_CONFIG_BYTES} bytes: not a config file")
        text = raw.decode("utf-8")
    except OSError as exc:
        raise ConfigError(f"{name}: cannot read: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{name}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    return text


def parse_config(text: str, name: str = "<config>", *, model: type[Config] = Config) -> Config:
    """Validate config text (``name`` is used in messages)."""
    return parse_model(text, name, model)


def parse_model(text: str, name: str, model: type[_M]) -> _M:
    """Validate YAML text against ``model`` (any config file of the project:
    the daemon's, the archive's), every problem one ``ConfigError`` naming
    the bad key path."""
    try:
        data = yaml.load(text, Loader=_UniqueKeyLoader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = exc.problem or exc.context or "invalid YAML"
        raise ConfigError(f"{name}: YAML syntax error{where}: {visible(problem)}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{name}: YAML syntax error: {visible(exc)}") from None
    except RecursionError:
        raise ConfigError(f"{name}: YAML nested too deeply") from None
    except (ValueError, TypeError, IndexError, KeyError, AttributeError, OverflowError) as exc:
        # a value PyYAML resolves (or is tagged) as a date, number, bool...
        # but cannot construct, or a list/mapping used as a key
        raise ConfigError(f"{name}: a YAML value cannot be read: {visible(exc)}") from None
    if data is None:
        data = {}
    unstorable = yaml_value_problem(data)
    if unstorable is not None:
        raise ConfigError(f"{name}: {unstorable}")
    if not isinstance(data, dict):
        raise ConfigError(
            f"{name}: the config must be a mapping (table: ..., device: ...), not a {type(data).__name__}"
        )
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        problems = [_describe(err, model) for err in exc.errors(include_url=False)]
        if len(problems) == 1:
            raise ConfigError(f"{name}: {problems[0]}") from None
        raise ConfigError(f"{name}: {len(problems)} problems:\n  " + "\n  ".join(problems)) from None


def yaml_value_problem(data: Any) -> str | None:
    """What YAML gave that no config value can be, with its key path, or
    None: a string holding a lone surrogate (the escape ``"\\ud800"``: no
    file name, log line, event or UTF-8 text can carry it), or a number
    that is not finite (``.nan``, ``.inf``, ``1.0e+400``). Each mapping and
    list is looked at once, however many aliases name it (``*a``: a
    "billion laughs" document is a few hundred nodes)."""
    seen: set[int] = set()
    todo: list[tuple[tuple[str, ...], Any]] = [((), data)]
    while todo:
        path, value = todo.pop()
        if isinstance(value, dict | list):
            if id(value) in seen:
                continue
            seen.add(id(value))
            if isinstance(value, list):
                todo.extend(((*path, str(i)), v) for i, v in reversed(list(enumerate(value))))
                continue
            for key, v in reversed(list(value.items())):
                where = (*path, visible(key))
                todo.append((where, v))
                todo.append((where, key))
            continue
        shown = ".".join(path) or "(top level)"
        if isinstance(value, str) and _SURROGATE.search(value):
            return f"{shown}: holds a lone surrogate (not UTF-8 text)"
        if isinstance(value, float) and not math.isfinite(value):
            return f"{shown}: must be a finite number, not {value}"
    return None


_SURROGATE = re.compile("[\ud800-\udfff]")


def _model_classes(annotation: Any) -> list[type[BaseModel]]:
    """The model classes an annotation may hold (through Optional, Union, Annotated)."""
    origin = get_origin(annotation)
    if origin is Annotated:
        return _model_classes(get_args(annotation)[0])
    if origin is Union or origin is types.UnionType:
        return [cls for arg in get_args(annotation) for cls in _model_classes(arg)]
    if origin is list or origin is tuple:  # a list of models: the path goes on through an index
        return [cls for arg in get_args(annotation) for cls in _model_classes(arg)]
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return []


def _walk(
    loc: tuple[int | str, ...], root: type[BaseModel] = Config
) -> tuple[list[str], list[type[BaseModel]]]:
    """Follow an error location through the models: the key path to show
    (without pydantic's union tags such as ``serial``) and the models that
    may hold the last key."""
    shown: list[str] = []
    candidates: list[type[BaseModel]] = [root]
    i = 0
    while i < len(loc):
        part = loc[i]
        shown.append(visible(part))
        fields = [_keys(m)[str(part)] for m in candidates if str(part) in _keys(m)]
        if not fields:
            if isinstance(part, int):  # an item of a list of models
                i += 1
                continue
            return shown, []
        candidates = _model_classes(fields[0].annotation)
        i += 1
        # A discriminated union puts the tag in the location: skip it.
        if len(candidates) > 1 and i < len(loc):
            tagged = [m for m in candidates if _tag(m) == loc[i]]
            if tagged:
                candidates = tagged
                i += 1
    return shown, candidates


def _keys(model: type[BaseModel]) -> dict[str, Any]:
    """A model's fields by the key a config file names them with (a
    field's alias, else its name: the archive's ``broker`` is ``mqtt_broker``)."""
    return {f.alias or name: f for name, f in model.model_fields.items()}


def did_you_mean(key: str, allowed: Sequence[str]) -> str:
    """The hint after "unknown key": the closest allowed key when one is
    close, else the allowed keys (`` (did you mean 'table'?)``)."""
    guess = difflib.get_close_matches(key, allowed, n=1, cutoff=0.6)
    if guess:
        return f" (did you mean {guess[0]!r}?)"
    return f" (allowed: {', '.join(allowed)})" if allowed else ""


def _tag(model: type[BaseModel]) -> object:
    field = model.model_fields.get("driver")
    args = get_args(field.annotation) if field is not None else ()
    return args[0] if args else None


def _describe(err: Any, root: type[BaseModel] = Config) -> str:
    loc: tuple[int | str, ...] = tuple(err["loc"])
    kind: str = err["type"]
    if kind == "extra_forbidden":
        shown, parents = _walk(loc[:-1], root)
        key = str(loc[-1])
        allowed = sorted({f for m in parents for f in _keys(m)})
        path = ".".join([*shown, visible(key)])
        return f"{path}: unknown key{did_you_mean(key, allowed)}"
    shown, _ = _walk(loc, root)
    path = ".".join(shown) or "(top level)"
    if kind == "union_tag_invalid":
        ctx = err.get("ctx", {})
        return f"{path}.driver: must be one of serial, usb, fake, replay, not {ctx.get('tag')!r}"
    if kind == "union_tag_not_found":
        return f"{path}.driver: required (serial, usb, fake or replay)"
    if kind == "missing":
        if loc == ("device",):
            return (
                "device: required key missing (the daemon needs its shoe; only ctl and "
                "replay --out mqtt take a config without one)"
            )
        return f"{path}: required key missing"
    msg: str = err["msg"]
    if kind == "model_type":
        msg = "must be a mapping of keys"
    return f"{path}: {msg}"
