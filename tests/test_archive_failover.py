"""Several brokers and archivers failing over, all real (Mosquitto started by the suite, the
real PostgreSQL, table daemons journalling in SQLite):

- **broker failover**: a table and an archiver list two brokers; the first
  is ``kill -9``ed and never comes back; the table keeps dealing and
  journalling, both move to the second, and every event journalled is
  archived (0 missing, no backfill);
- **a share group's member dies for good**: two archivers in one
  ``share_group``, one ``kill -9``ed and never back; its queued share is
  dropped with its short session and the table re-offers it from its
  journal to the member alive: 0 missing, no backfill,
  within a stated bound;

and the configuration's bounds on broker lists and a group member's
session expiry. The counts are printed (pytest -s)."""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
import yaml

from controller.archive.config import GROUP_SESSION_EXPIRY_S, MAX_GROUP_SESSION_EXPIRY_S, ArchiveConfig
from controller.config import MAX_BROKERS, MqttConfig, parse_config, parse_model
from controller.errors import ConfigError
from controller.mqtt_client import connect_options, make_client
from tests.conftest import Broker, BrokerFactory, eventually, free_port
from tests.support.archiver import BROKER_CONFIG, ArchiverProcess, migrate
from tests.support.configs import write_config

MINIMAL = "table: T01\ndevice: {driver: fake}\n"

#: How long after the kill every event journalled must be in the archive.
#: Broker failover: a reconnect (1, then 2 s) and one re-offer round (1 s
#: here) for what the dead broker took and never passed on. A group member:
#: its session's expiry (10 s here, 60 by default) plus the table's re-offer
#: rounds, which back off to 16x ``reoffer_after_s`` (1 s here) while a
#: round moves nothing. Generous: the 2-core box is shared.
FAILOVER_BOUND_S = 60.0
GROUP_BOUND_S = 90.0


# --- configuration ----------------------------------------------------------


def _mqtt_error(mqtt: str) -> str:
    with pytest.raises(ConfigError) as info:
        parse_config(MINIMAL + f"outputs: {{mqtt: {mqtt}}}\n")
    (line,) = str(info.value).splitlines()  # one line
    return line


def _brokers(n: int) -> str:
    return "{brokers: [" + ", ".join(f"{{host: b{i}.floor.lan, port: {1883 + i}}}" for i in range(n)) + "]}"


def test_a_list_of_brokers_is_taken_up_to_its_bound_in_order() -> None:
    cfg = parse_config(MINIMAL + f"outputs: {{mqtt: {_brokers(MAX_BROKERS)}}}\n").outputs.mqtt
    assert cfg is not None and MAX_BROKERS == 16
    assert cfg.endpoints() == [(f"b{i}.floor.lan", 1883 + i) for i in range(16)]
    # host/port name the first (what a reader of one broker sees)
    assert (cfg.host, cfg.port) == ("b0.floor.lan", 1883)
    one = parse_config(MINIMAL + "outputs: {mqtt: {host: '::1', port: 8883}}\n").outputs.mqtt
    assert one is not None and one.endpoints() == [("::1", 8883)] and one.where() == "mqtt://[::1]:8883"
    default_port = parse_config(MINIMAL + "outputs: {mqtt: {brokers: [{host: a}, {host: b}]}}\n").outputs.mqtt
    assert default_port is not None and default_port.endpoints() == [("a", 1883), ("b", 1883)]
    assert default_port.failover() == "; when one fails, the next in turn: b:1883"


@pytest.mark.parametrize(
    ("mqtt", "needle"),
    [
        ("{brokers: []}", "outputs.mqtt.brokers: List should have at least 1 item"),
        (_brokers(MAX_BROKERS + 1), "outputs.mqtt.brokers: List should have at most 16 items"),
        (
            "{brokers: [{host: a, port: 0}]}",
            "outputs.mqtt.brokers.0.port: Input should be greater than or equal to 1",
        ),
        (
            "{brokers: [{host: a}, {host: b, port: 65536}]}",
            "outputs.mqtt.brokers.1.port: Input should be less",
        ),
        (
            "{brokers: [{host: a, port: '1883'}]}",
            "outputs.mqtt.brokers.0.port: Input should be a valid integer",
        ),
        ("{brokers: [{host: a}, {host: A., port: 1883}]}", "outputs.mqtt.brokers: A.:1883 is listed twice"),
        (
            "{brokers: [{host: a}, {host: b, prt: 1}]}",
            "outputs.mqtt.brokers.1.prt: unknown key (did you mean 'port'?)",
        ),
        ("{brokers: [{port: 1}]}", "outputs.mqtt.brokers.0.host: required key missing"),
        ("{host: a, brokers: [{host: b}]}", "outputs.mqtt: host/port and brokers are exclusive"),
        ("{port: 1884, brokers: [{host: b}]}", "outputs.mqtt: host/port and brokers are exclusive"),
        ("{}", "outputs.mqtt: needs host (one broker) or brokers"),
        ("{brokers: a}", "outputs.mqtt.brokers: Input should be a valid list"),
        ("{host: ''}", "outputs.mqtt.host: must be a host name or an IP address"),
        ("{host: 'a b'}", "outputs.mqtt.host: must be a host name or an IP address"),
        ("{host: '" + "a" * 254 + "'}", "outputs.mqtt.host: String should have at most 253 characters"),
        ("{brokers: [{host: '[::1]'}]}", "outputs.mqtt.brokers.0.host: must be a host name or an IP address"),
        (
            "{brokers: [{host: 'b:1883'}]}",
            "outputs.mqtt.brokers.0.host: must be a host name or an IP address",
        ),
    ],
)
def test_a_bad_broker_list_is_one_line_naming_its_key(mqtt: str, needle: str) -> None:
    line = _mqtt_error(mqtt)
    assert needle in line, line


@pytest.mark.parametrize(
    "host",
    ["evil\nlog line", "a\x1b[31mred", "a\x00b", "a\u202eb", "x;rm -rf /", "a/b", "\u00e9t\u00e9.lan", "-a"],
)
def test_hostile_text_in_a_host_is_refused_and_shown_escaped(host: str) -> None:
    quoted = yaml.safe_dump(host).strip().removesuffix("...").strip()
    for mqtt in (f"{{host: {quoted}}}", f"{{brokers: [{{host: {quoted}}}]}}"):
        line = _mqtt_error(mqtt)
        assert "must be a host name or an IP address" in line, line
        assert line.isprintable(), repr(line)


def _archive(text: str) -> ArchiveConfig:
    return parse_model(
        "broker: {brokers: [{host: a}, {host: b, port: 1884}], client_id: archive-1}\n"
        "dsn: 'host=127.0.0.1 dbname=floor'\n" + text,
        "archive.yaml",
        ArchiveConfig,
    )


def test_an_archivers_broker_list_and_a_group_members_session_bound() -> None:
    assert _archive("").broker.endpoints() == [("a", 1883), ("b", 1884)]
    assert _archive("").session_expiry_s == 7 * 24 * 3600  # alone: its queue is its durability
    assert _archive("share_group: g\n").session_expiry_s == GROUP_SESSION_EXPIRY_S == 60
    assert (
        _archive(f"share_group: g\nsession_expiry_s: {MAX_GROUP_SESSION_EXPIRY_S}\n").session_expiry_s == 3600
    )
    assert _archive("share_group: g\nsession_expiry_s: 10\n").session_expiry_s == 10
    with pytest.raises(
        ConfigError, match=r"archive.yaml: session_expiry_s: with share_group, at most 3600 s"
    ):
        _archive(f"share_group: g\nsession_expiry_s: {MAX_GROUP_SESSION_EXPIRY_S + 1}\n")
    with pytest.raises(ConfigError, match=r"session_expiry_s: Input should be greater than or equal to 10"):
        _archive("session_expiry_s: 9\n")


# --- all real -----------------------------------------------------------------


def _journal_ids(path: Path) -> set[str]:
    if not path.exists():
        return set()
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=10)
    try:
        return {str(i) for (i,) in db.execute("SELECT event_id FROM events")}
    except sqlite3.OperationalError:  # not created yet
        return set()
    finally:
        db.close()


def _archived(dsn: str) -> set[str]:
    with psycopg.connect(dsn) as c:
        return {str(i) for (i,) in c.execute("SELECT event_id FROM event_ids")}


def _received(dsn: str, archiver: str) -> int:
    with psycopg.connect(dsn) as c:
        row = c.execute(
            "SELECT coalesce(sum(value), 0) FROM archive_counters WHERE archiver = %s AND name = 'received'",
            (archiver,),
        ).fetchone()
    return int(row[0]) if row else 0


def _archive_config(directory: Path, client_id: str, brokers: list[Broker], dsn: str, **extra: Any) -> Path:
    cfg = {
        "broker": {"brokers": [{"host": b.host, "port": b.port} for b in brokers], "client_id": client_id},
        "dsn": dsn,
        "batch_max_events": 50,
        "batch_max_latency_ms": 50,
        **extra,
    }
    path = directory / f"{client_id}.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


class _Table:
    """A table daemon dealing a fake shoe (``cards_per_second``), its MQTT
    output listing ``brokers``, the archive's acknowledgement on with a
    1 s re-offer."""

    def __init__(
        self, directory: Path, table: str, brokers: list[Broker], seed: int, cards_per_second: float = 20.0
    ) -> None:
        directory.mkdir()
        mqtt = {
            "brokers": [{"host": b.host, "port": b.port} for b in brokers],
            "client_id": f"shoe-{table}",
            "reoffer_after_s": 1.0,
        }
        cfg = write_config(
            directory,
            {"driver": "fake", "seed": seed, "cards_per_second": cards_per_second},
            table=table,
            odds=True,
            outputs={"stdout": False, "mqtt": mqtt},
        )
        self.journal = directory / "journal.sqlite3"
        self.log = directory / "daemon.log"
        with open(self.log, "wb") as err:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "controller.cli", "run", "-c", str(cfg)],
                stdout=subprocess.DEVNULL,
                stderr=err,
            )

    def ids(self) -> set[str]:
        return _journal_ids(self.journal)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@pytest.fixture
def tables() -> Iterator[list[_Table]]:
    started: list[_Table] = []
    yield started
    for t in started:
        t.stop()


def _ctl_void(directory: Path, brokers: list[Broker], table: str) -> dict[str, Any]:
    """``ctl void --coup 999 --json`` with a supervisor's config listing
    ``brokers``: the table's raw reply (a refusal is a reply too)."""
    cfg = directory / "supervisor.yaml"
    brokers_cfg = [{"host": b.host, "port": b.port} for b in brokers]
    cfg.write_text(yaml.safe_dump({"table": table, "outputs": {"mqtt": {"brokers": brokers_cfg}}}))
    argv = ["ctl", "void", "--coup", "999", "--json", "-c", str(cfg), "--timeout", "20"]
    out = subprocess.run(
        [sys.executable, "-m", "controller.cli", *argv],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode in (0, 1) and out.stdout.strip(), out.stderr
    result: dict[str, Any] = json.loads(out.stdout)
    return result


def test_ctl_says_what_each_broker_did_when_none_answers(tmp_path: Path) -> None:
    ports = [free_port(), free_port()]  # nothing listens there
    cfg = tmp_path / "supervisor.yaml"
    brokers = [{"host": "127.0.0.1", "port": p} for p in ports]
    cfg.write_text(yaml.safe_dump({"table": "T01", "outputs": {"mqtt": {"brokers": brokers}}}))
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "controller.cli",
            "ctl",
            "void",
            "--coup",
            "1",
            "-c",
            str(cfg),
            "--timeout",
            "2",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    (line,) = out.stderr.splitlines()  # one line, no traceback
    assert out.returncode == 1, out
    assert line.startswith("shoe-controller ctl: cannot reach any of the brokers 127.0.0.1:"), line
    assert all(f"127.0.0.1:{p}: " in line for p in ports), line


def test_check_config_names_every_broker(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from controller.cli import main

    path = tmp_path / "t.yaml"
    path.write_text(MINIMAL + "outputs: {mqtt: {brokers: [{host: mqtt1.lan, port: 8883}, {host: '::1'}]}}\n")
    assert main(["check-config", str(path)]) == 0
    out = capsys.readouterr().out
    assert (
        "mqtt mqtt://mqtt1.lan:8883/baccarat/T01 (MQTT 5); when one fails, the next in turn: [::1]:1883"
        in out
    )


def _connected(broker: Broker, client_id: str) -> bool:
    """The broker's log says the client connected to it (mosquitto: log_type all)."""
    return f" as {client_id} " in broker.log


def _grows(count: Any, more: int, timeout: float = 60.0) -> bool:
    start = count()
    return eventually(lambda: count() >= start + more, timeout)


def _all_archived(tables: list[_Table], dsn: str, bound: float) -> tuple[set[str], set[str], float]:
    """Every event journalled by now, and how long until the archive held
    them all (or the bound): (journalled, still missing, seconds)."""
    journalled = set().union(*(t.ids() for t in tables))
    start = time.monotonic()
    missing = journalled
    while time.monotonic() - start < bound:
        missing = journalled - _archived(dsn)
        if not missing:
            break
        time.sleep(0.5)
    return journalled, missing, time.monotonic() - start


@pytest.mark.mqtt
def test_a_dead_broker_stalls_nothing_and_the_second_carries_every_event(
    tmp_path: Path, mosquitto: BrokerFactory, pg_dsn: str, tables: list[_Table]
) -> None:
    first = mosquitto(config=BROKER_CONFIG)
    second = mosquitto(config=BROKER_CONFIG)
    acfg = _archive_config(tmp_path, "archive-1", [first, second], pg_dsn)
    migrate(acfg)
    archiver = ArchiverProcess(acfg, tmp_path / "archive-1.log")
    archiver.start()
    try:
        tables.extend(
            _Table(tmp_path / t, t, [first, second], seed) for seed, t in enumerate(("T01", "T02"), 1)
        )
        assert _grows(lambda: len(_archived(pg_dsn)), 100), "nothing archived through the first broker"
        assert all(_connected(first, f"shoe-{t}") for t in ("T01", "T02")) and _connected(first, "archive-1")
        assert not _connected(second, "archive-1")

        first.kill()  # kill -9, never back
        killed = time.monotonic()
        # the tables keep dealing and journalling (the engine never waits on
        # the broker) while they and the archiver move to the second broker
        journalled = lambda: sum(len(t.ids()) for t in tables)  # noqa: E731
        assert _grows(journalled, 40, 10.0), "a table stalled when its broker died"
        assert _grows(lambda: len(_archived(pg_dsn)), 100), "nothing archived through the second broker"
        assert all(t.alive() for t in tables)
        assert all(_connected(second, f"shoe-{t}") for t in ("T01", "T02")) and _connected(
            second, "archive-1"
        )

        # commands come in through the second broker; ctl, given the same
        # list, passes over the dead first one
        reply = _ctl_void(tmp_path, [first, second], "T01")
        assert reply.get("id") and "ok" in reply, reply
        assert " as ctl-" in second.log  # ctl reached the second broker

        everything, missing, took = _all_archived(tables, pg_dsn, FAILOVER_BOUND_S)
        since_kill = time.monotonic() - killed
    finally:
        for t in tables:
            t.stop()
        archiver.stop()
    print(
        f"\nbroker failover: journalled {len(everything)} events of {len(tables)} tables; missing "
        f"{len(missing)}; all archived {since_kill:.0f} s after the first broker's kill -9 (the check "
        f"began {since_kill - took:.0f} s after it)"
    )
    assert not missing, (
        f"{len(missing)} of {len(everything)} journalled events not archived in {FAILOVER_BOUND_S} s"
    )


@pytest.mark.mqtt
def test_a_share_group_member_dead_for_good_loses_nothing(
    tmp_path: Path, mosquitto: BrokerFactory, pg_dsn: str, tables: list[_Table]
) -> None:
    broker = mosquitto(persistence=True, config=BROKER_CONFIG)
    group = {"share_group": "floor", "session_expiry_s": 10}
    cfgs = [_archive_config(tmp_path, f"archive-{i}", [broker], pg_dsn, **group) for i in (1, 2)]
    migrate(cfgs[0])
    members = [ArchiverProcess(c, tmp_path / f"{c.stem}.log") for c in cfgs]
    for m in members:
        m.start()
    try:
        # 2 cards a second, about 3.5 events a second a table (7x a fast
        # dealer's peak): the table re-offers in rounds from the archive's
        # mark at REOFFER_PER_S (20 a second), and a round must end before
        # the event at the mark, lost again, is re-offered again
        tables.extend(
            _Table(tmp_path / t, t, [broker], seed, cards_per_second=2.0)
            for seed, t in enumerate(("T01", "T02"), 1)
        )
        # both members take a share
        assert eventually(lambda: all(_received(pg_dsn, f"archive-{i}") >= 30 for i in (1, 2)), 60)

        members[1].kill9()  # never back
        killed = time.monotonic()
        journalled = lambda: sum(len(t.ids()) for t in tables)  # noqa: E731
        # the floor carries on: more dealt while the dead member's session
        # (and its share, queued) lives, and after the broker drops it
        assert _grows(journalled, 100, 60.0)
        assert all(t.alive() for t in tables)
        everything, missing, took = _all_archived(tables, pg_dsn, GROUP_BOUND_S)
        since_kill = time.monotonic() - killed
        dead_received = _received(pg_dsn, "archive-2")
        # the broker dropped the dead member's session (and the share queued
        # for it) after its expiry; from then on the member alive takes all
        assert "Expiring client archive-2" in broker.log
    finally:
        for t in tables:
            t.stop()
        for m in members:
            m.stop()
    print(
        f"\nshare group, a member kill -9ed for good: journalled {len(everything)} events of {len(tables)} "
        f"tables; the dead member had received {dead_received}; missing {len(missing)}; all archived "
        f"{since_kill:.0f} s after the kill (check began {since_kill - took:.0f} s after it)"
    )
    assert not missing, (
        f"{len(missing)} of {len(everything)} journalled events not archived in {GROUP_BOUND_S} s"
    )


@pytest.mark.mqtt
def test_a_client_tries_the_next_broker_after_a_failure_and_the_first_after_a_connection(
    mosquitto: BrokerFactory,
) -> None:
    """The order of ``Client.set_endpoints``: the first broker dead -> the
    second; the second dies while the first is back -> the first again
    (after a connection that was up, the list starts over), not the third,
    which is up too (a plain round would take it)."""
    first = mosquitto()
    second = mosquitto()
    third = mosquitto()
    cfg = MqttConfig.model_validate(
        {
            "brokers": [
                {"host": "127.0.0.1", "port": first.port},
                {"host": "127.0.0.1", "port": second.port},
                {"host": "127.0.0.1", "port": third.port},
            ]
        }
    )
    client = make_client(cfg, "failover-order")
    client.reconnect_delay_set(1, 1)
    seen: list[int] = []
    client.on_connect = lambda c, u, f, rc, p: seen.append(c.port) if not rc.is_failure else None
    first.kill()
    client.connect_async(*cfg.endpoints()[0], keepalive=5, **connect_options(cfg))
    client.loop_start()
    try:
        assert eventually(lambda: seen == [second.port], 20), seen
        first.start()
        second.kill()
        assert eventually(lambda: len(seen) >= 2, 20), seen
        assert seen[:2] == [second.port, first.port], seen
    finally:
        client.disconnect()
        client.loop_stop()


@pytest.mark.mqtt
def test_the_archivers_reconnect_backoff_is_capped_as_a_tables(
    tmp_path: Path, mosquitto: BrokerFactory, pg_dsn: str
) -> None:
    # Counted in failed attempts, as the table's test does: with the old
    # backoff (1, 2, 4, 8, 16, then 30 s) five failures took 31 s and the
    # broker, once back, waited up to 30 s for the next attempt (the issue
    # measured the archiver back 31 s after a crash); capped (1, then 2 s)
    # they take 9 s and the next is at most 2 s away. The timeouts only
    # stop a hung test.
    broker = mosquitto(persistence=True, config=BROKER_CONFIG)
    acfg = _archive_config(tmp_path, "archive-1", [broker], pg_dsn)
    migrate(acfg)
    archiver = ArchiverProcess(acfg, tmp_path / "archive-1.log")
    archiver.start()
    try:
        broker.kill()
        assert eventually(lambda: archiver.log_text().count("archive.broker_unreachable") >= 5, 25)
        before = archiver.log_text().count("archive.broker_connected")
        broker.start()
        assert eventually(lambda: archiver.log_text().count("archive.broker_connected") > before, 8), (
            "the archiver did not reconnect within its capped backoff"
        )
    finally:
        archiver.stop()


@pytest.mark.mqtt
def test_replay_to_mqtt_passes_over_a_dead_broker_of_its_list(
    tmp_path: Path, mosquitto: BrokerFactory
) -> None:
    from tests.test_cli_errors import cli

    capture = Path(__file__).parent / "captures" / "x_sequence_gap.shoelog"
    live = mosquitto()
    dead = free_port()  # nothing listens there
    cfg = tmp_path / "supervisor.yaml"
    brokers = [{"host": "127.0.0.1", "port": dead}, {"host": live.host, "port": live.port}]
    cfg.write_text(yaml.safe_dump({"table": "T01", "outputs": {"mqtt": {"brokers": brokers}}}))
    r = cli("replay", str(capture), "--table", "T07", "--out", "mqtt", "-c", str(cfg))
    assert r.returncode == 0, r.stderr
    last = r.stderr.splitlines()[-1]
    assert (
        last.startswith("replay: ") and f"published to mqtt://{live.host}:{live.port}/baccarat/T07 " in last
    ), last
    assert "every one acknowledged" in last and " as replay-" in live.log
