"""``shoe-controller check-config FILE``: validate a config (docs/operations.md, Configuration)
and print what it sets up; a bad config exits 2 with the message
``controller.config`` builds (the CLI wrapper prints it)."""

from __future__ import annotations

import argparse
import importlib
import sys

from controller.commands.record import DEFAULT_BAUD
from controller.config import ClientConfig, Config, SerialDevice, load_client_config, load_config
from controller.errors import ConfigError
from controller.textsafe import visible


def _check_profile(cfg: Config) -> str | None:
    """Load the profile with the config's rule overrides, when the rules
    module is present, so a bad override is caught here and not at start-up.
    Returns a note when the check could not be made."""
    try:
        rules = importlib.import_module("controller.rules")
    except ModuleNotFoundError as exc:
        if exc.name != "controller.rules":
            raise
        return "profile not loaded (controller.rules is not in this build)"
    rules.load_profile(cfg.profile, cfg.rules.overrides() or None)  # raises ConfigError
    return None


def _broker(cfg: Config) -> str:
    m = cfg.outputs.mqtt
    assert m is not None
    auth = f" as {m.username}" if m.username else ""
    return f"{m.where()}/{m.topic_prefix}/{cfg.table}{auth} (MQTT {m.protocol}){m.failover()}"


def client_summary(cfg: ClientConfig) -> list[str]:
    """A config without a device: what ``ctl`` and ``replay --out mqtt`` do with it."""
    m = cfg.outputs.mqtt
    assert m is not None
    lines = [
        f"table {cfg.table}",
        f"broker: {_broker(cfg)}",
        f"commands signed with {m.command_key_file}"
        if m.command_key_file
        else "commands unsigned (the controller's command_key_file, if it has one, would refuse them)",
        "no device: a config for ctl and replay --out mqtt; run refuses it",
    ]
    return lines


def _device_server_lines(cfg: Config) -> list[str]:
    """What a ``socket://`` or ``rfc2217://`` port means for the line settings."""
    dev = cfg.device
    if not isinstance(dev, SerialDevice):
        return []
    from drivers.ports import parse_port
    from drivers.serial import DEAD_PEER_S

    net = parse_port(dev.port)
    if net is None:
        return []
    alive = f"a device server that vanishes without closing is noticed within {DEAD_PEER_S} s (TCP keepalive)"
    baud = dev.baudrate or DEFAULT_BAUD.get(dev.protocol, 9600)
    if net.scheme == "rfc2217":
        return [f"device server {net.host}:{net.port} in RFC 2217 mode: {baud} baud 8N1 negotiated; {alive}"]
    lines = [f"device server {net.host}:{net.port} in TCP-server mode; {alive}"]
    given = "device.baudrate" if dev.baudrate is not None else f"the usual speed of {dev.protocol}"
    lines.append(
        f"note: socket:// sends no line settings: set the device server's serial port to "
        f"{baud} baud 8N1 ({given})"
    )
    return lines


def summary(cfg: Config) -> list[str]:
    """One line per thing the daemon will do with this config."""
    dev = cfg.device
    where = {
        "serial": lambda: f" on {getattr(dev, 'port', '')}",
        "usb": lambda: f" {getattr(dev, 'vendor_id', 0):04x}:{getattr(dev, 'product_id', 0):04x}",
        "replay": lambda: f" from {getattr(dev, 'file', '')}",
        "fake": lambda: f" seed {getattr(dev, 'seed', 1)}",
    }[dev.driver]()
    outputs = []
    if cfg.outputs.stdout:
        outputs.append("stdout")
    if cfg.outputs.jsonl:
        outputs.append(f"jsonl {cfg.outputs.jsonl}")
    if cfg.outputs.mqtt:
        outputs.append(f"mqtt {_broker(cfg)}")
    overrides = cfg.rules.overrides()
    lines = [
        f"table {cfg.table}, profile {cfg.profile}, {cfg.decks} decks",
        f"device {dev.driver} ({dev.protocol or 'protocol from the capture'}){where}",
        f"journal {cfg.journal} (retention {cfg.journal_retention_days} days)",
        f"outputs: {', '.join(outputs) or 'none'}",
        f"odds {'on' if cfg.odds else 'off'}, advantage threshold {cfg.advantage_threshold}",
    ]
    lines[2:2] = _device_server_lines(cfg)
    if cfg.metrics:
        lines.append(f"metrics on http://{cfg.metrics}/metrics")
    if overrides:
        lines.append("rule overrides: " + ", ".join(f"{k}={v}" for k, v in overrides.items()))
    return lines


def _board(path: str) -> list[str] | None:
    """A roadmap display's config (``tables:``, no ``table:``) is checked as
    one: its summary lines; None for any other config."""
    data = _top(path)  # {} when unreadable: reported by the table's config check below
    if "tables" not in data or "table" in data:
        return None
    from controller.board.config import load_board_config

    cfg = load_board_config(path)
    m = cfg.mqtt
    tables = ", ".join(t.table + (f" (history from {t.journal})" if t.journal else "") for t in cfg.tables)
    return [
        f"roadmap display (shoe-controller board) on http://{cfg.listen}/",
        f"tables: {tables}",
        f"broker: {m.where()}/{m.topic_prefix} (MQTT {m.protocol}), read-only{m.failover()}",
        f"odds panel {'on' if cfg.odds else 'off'}; at most {cfg.limits.max_clients} browsers",
    ]


#: The keys that make a config the floor archiver's (``shoe-controller
#: archive``): no table's or supervisor's config has either at its top.
ARCHIVE_KEYS = ("dsn", "broker", "nats")


def _archive(path: str) -> list[str] | None:
    """The floor archiver's config (``dsn:`` or ``broker:``, no ``table:``
    or ``tables:``) is checked as one, with the archiver's own loader
    (unknown keys and bad values name their key): its summary lines; None
    for any other config."""
    data = _top(path)
    if not any(k in data for k in ARCHIVE_KEYS) or "table" in data or "tables" in data:
        return None
    import importlib.util

    from controller.errors import UsageError

    if importlib.util.find_spec("psycopg") is None:  # the dsn is checked by libpq's own parser
        raise UsageError(
            f"{path}: an archive config (it has {', '.join(k for k in ARCHIVE_KEYS if k in data)}); "
            "checking it needs psycopg 3: pip install 'shoe-controller[archive]'"
        )
    from psycopg.conninfo import conninfo_to_dict

    from controller.archive.config import load_archive_config

    cfg = load_archive_config(path)
    params = conninfo_to_dict(cfg.dsn)
    where = " ".join(f"{k}={params[k]}" for k in ("host", "port", "dbname", "user") if params.get(k))
    secret = params.get("passfile") or "PGPASSFILE or ~/.pgpass, if any"
    lines = [f"floor archive (shoe-controller archive), client id {cfg.client_id}"]
    if cfg.nats is not None:
        n = cfg.nats
        auth = f" as {n.username}" if n.username else ""
        lines += [
            f"NATS JetStream: {', '.join(n.servers)}{auth}; reads {n.subjects()} of NATS's MQTT "
            f"stream (at least {n.replicas} replica(s)) through the durable pull consumer "
            f"{n.durable}, shared by the archivers naming it",
            f"a message not acknowledged within {n.ack_wait_s} s is offered again; acknowledged "
            "after its batch's COMMIT",
        ]
    else:
        m = cfg.broker
        auth = f" as {m.username}" if m.username else ""
        share = (
            f"shared with the archivers of group {cfg.share_group}"
            if cfg.share_group
            else "not shared (one archiver takes every message)"
        )
        lines += [
            f"broker: {m.where()}{auth} (MQTT 5), subscribes {cfg.topic_filter()} at QoS 1, "
            + share
            + m.failover(),
            f"session kept {cfg.session_expiry_s} s by the broker while the archiver is away"
            + (
                "; if it dies for good, its share queued there is dropped then and the tables "
                "re-offer it (outputs.mqtt.archive_ack) to the members alive"
                if cfg.share_group
                else ""
            ),
        ]
    lines += [
        f"database: {where or 'libpq defaults'} (password from {secret})",
        f"batches of at most {cfg.batch_max_events} events or {cfg.batch_max_latency_ms} ms; "
        f"payloads over {cfg.max_payload_bytes} bytes kept aside",
        f"partitions {cfg.partitions_ahead} months ahead, retention {cfg.retention_months} months",
    ]
    if cfg.metrics:
        lines.append(f"metrics on http://{cfg.metrics}/metrics")
    passfile = params.get("passfile")
    warning = _passfile_warning(None if passfile is None else str(passfile))
    if warning:
        # valid, but the database will not get its password: one line, still exit 0
        print(f"warning: dsn: {visible(warning)}", file=sys.stderr)
    return lines


def _passfile_warning(path: str | None) -> str | None:
    """libpq silently ignores a password file that group or others may
    read (and one it cannot find): say so before the archiver fails to log in."""
    import os
    import stat

    if not path:
        return None
    try:
        st = os.stat(path)
    except OSError as exc:
        return f"passfile {path}: {exc.strerror or exc} (libpq will send no password)"
    if st.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
        return (
            f"passfile {path} is open to group or others (mode {stat.S_IMODE(st.st_mode):04o}): libpq "
            "ignores it; chmod 600 it, owned by the archiver's user"
        )
    return None


def _top(path: str) -> dict[str, object]:
    """The config's top-level mapping, or {} when it has none (the
    table's config check then reports the problem)."""
    import yaml

    from controller.config import _read

    try:
        data = yaml.safe_load(_read(path))
    except (yaml.YAMLError, ConfigError, ValueError, RecursionError):
        return {}
    return data if isinstance(data, dict) else {}


def run(args: argparse.Namespace) -> int:
    special = _board(args.file) or _archive(args.file)
    if special is not None:
        print(f"ok: {visible(args.file)}")
        for line in special:
            print(f"  {visible(line)}")
        return 0
    client = load_client_config(args.file)
    if client.device is None:
        if client.outputs.mqtt is None:
            raise ConfigError(
                f"{args.file}: neither a device (a daemon's config) nor outputs.mqtt "
                "(a supervisor's config for ctl)"
            )
        print(f"ok: {visible(args.file)}")
        for line in client_summary(client):
            print(f"  {visible(line)}")
        return 0
    cfg = load_config(args.file)
    note = _check_profile(cfg)
    print(f"ok: {visible(args.file)}")
    for line in summary(cfg):
        print(f"  {visible(line)}")
    if note:
        print(f"  note: {visible(note)}")
    warning = cfg.outputs.mqtt.protocol_warning() if cfg.outputs.mqtt is not None else None
    if warning:
        # valid, but weaker than the default: one line on stderr, still exit 0
        print(f"warning: {visible(warning)}", file=sys.stderr)
    return 0
