"""End-to-end acknowledgement, piece by piece: the
archiver's marks and holes against the real PostgreSQL
(controller/archive/marks.py), the table's check of a mark (hostile ones
ignored and counted, through a real Mosquitto), its re-offer (in seq
order, byte for byte, rate-bounded) and the journal's retention (nothing
unconfirmed pruned, but the size bound wins, with an alert). The fault
runs with real daemons, broker kills and the archiver are in
tests/test_archive_ack_faults.py."""

from __future__ import annotations

import datetime as dt
import json
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import structlog

from controller.archive import db, marks, migrate
from controller.archive.store import Store
from controller.config import MqttConfig, load_config
from controller.daemon import Daemon
from controller.events import dumps, format_ts
from controller.journal import Journal
from controller.outputs import mqtt as mqtt_out
from controller.outputs.mqtt import ARCHIVE_OUTPUT, MAX_MARK_BYTES, MqttOutput, parse_mark
from tests.conftest import BrokerFactory, Subscriber, eventually
from tests.support.configs import write_config

TABLE = "T01"
SHOE = "20261122T065611Z"
NOW = dt.datetime.now(dt.UTC)
CAPTURE = Path(__file__).resolve().parent / "captures" / "profile_punto_banco.shoelog"


def event(seq: int, etype: str = "card", **payload: Any) -> dict[str, Any]:
    return {
        "v": 1,
        "type": etype,
        "event_id": f"{TABLE}/{SHOE}/{seq}",
        "table": TABLE,
        "shoe": SHOE,
        "seq": seq,
        "ts": format_ts(NOW.timestamp()),
        **(
            {"coup": 1, "position": "P1", "card": "QS", "value": 0, "face_up": False}
            if etype == "card"
            else {}
        ),
        **payload,
    }


def mark_payload(n: int, *, table: str = TABLE, shoe: str = SHOE, **over: Any) -> bytes:
    obj: dict[str, Any] = {
        "v": 1,
        "table": table,
        "first_seq": 1,
        "seq": n,
        "event_id": f"{table}/{shoe}/{n}",
    }
    obj.update(over)
    return json.dumps(obj).encode()


# --- the mark's form -------------------------------------------------------------


def test_a_mark_at_its_size_bound_is_read_and_one_byte_over_is_not() -> None:
    base = mark_payload(7)
    at = base[:-1] + b" " * (MAX_MARK_BYTES - len(base)) + b"}"
    assert len(at) == MAX_MARK_BYTES
    assert parse_mark(at, TABLE) == (7, f"{TABLE}/{SHOE}/7")
    with pytest.raises(ValueError, match="over 1024"):
        parse_mark(at[:-1] + b" }", TABLE)


@pytest.mark.parametrize(
    ("payload", "why"),
    [
        (b"\xff\xfe", "not UTF-8 JSON"),
        (b"not json", "not UTF-8 JSON"),
        (b"[1, 2]", "not a JSON object"),
        (b'{"v": 1, "table": "T01", "seq": NaN, "event_id": "T01/S/1"}', "NaN is not a number"),
        (b'{"v": 1, "table": "T01", "seq": Infinity, "event_id": "T01/S/1"}', "Infinity is not a number"),
        (b'{"v": 1, "table": "T01", "seq": 1e400, "event_id": "T01/S/1"}', "seq is not"),
        (b'{"v": 1, "table": "T01", "seq": 1, "event_id": "T01/\\ud800/1"}', "lone surrogate"),
        (mark_payload(5, v=2), "not version 1"),
        (mark_payload(5, v=True), "not version 1"),
        (mark_payload(5, table="T02"), "another table"),
        (mark_payload(5, seq=0), "seq is not"),
        (mark_payload(5, seq=-1), "seq is not"),
        (mark_payload(5, seq=True), "seq is not"),
        (mark_payload(5, seq=2**63), "seq is not"),
        (mark_payload(5, seq=5.0), "seq is not"),
        (mark_payload(5, event_id=f"{TABLE}/{SHOE}/6"), "event_id is not"),
        (mark_payload(5, event_id=f"T02/{SHOE}/5"), "event_id is not"),
        (mark_payload(5, event_id=f"{TABLE}//5"), "event_id is not"),
        (mark_payload(5, event_id=f"{TABLE}/a/b/5"), "event_id is not"),
        (mark_payload(5, event_id="x" * 257), "event_id is not a string"),
        (mark_payload(5, event_id=5), "event_id is not a string"),
        (b"[" * 100_000 + b"]" * 100_000, "over 1024"),
        (b"[" * 1000 + b"]" * 10, "not UTF-8 JSON"),
    ],
)
def test_a_hostile_mark_is_refused_in_one_line(payload: bytes, why: str) -> None:
    with pytest.raises(ValueError, match=why) as info:
        parse_mark(payload, TABLE)
    assert "\n" not in str(info.value)


# --- the table's side, through a real broker ------------------------------------


@pytest.fixture
def journal(tmp_path: Path) -> Iterator[Journal]:
    j = Journal(tmp_path / "journal.sqlite3")
    yield j
    j.close()


@pytest.fixture
def output(journal: Journal) -> Iterator[Callable[..., MqttOutput]]:
    started: list[MqttOutput] = []

    def start(port: int, **cfg: Any) -> MqttOutput:
        config = MqttConfig.model_validate({"host": "127.0.0.1", "port": port, **cfg})
        out = MqttOutput(config, TABLE, journal, poll_interval=0.05)
        out.start()
        started.append(out)
        return out

    yield start
    for out in started:
        out.stop(timeout=2)


@pytest.mark.mqtt
def test_hostile_marks_are_ignored_and_counted_and_a_good_one_is_kept(
    mosquitto: BrokerFactory,
    subscriber: Callable[..., Subscriber],
    journal: Journal,
    output: Callable[..., MqttOutput],
) -> None:
    broker = mosquitto()
    journal.append_events([event(s) for s in range(1, 11)])
    out = output(broker.port, reoffer_after_s=3600)
    assert out.wait_idle(20)
    pub = subscriber(broker, ["nothing/#"])
    topic = out.topic_mark
    hostile = [
        b"\x00" * (MAX_MARK_BYTES + 1),
        b"not json",
        b'{"v": 1, "table": "T01", "seq": NaN, "event_id": "T01/S/1"}',
        b'{"v": 1, "table": "T01", "seq": 3, "event_id": "T01/\\udc80/3"}',
        mark_payload(3, table="T02"),
        mark_payload(11),  # from the future: the journal ends at 10
        mark_payload(6, shoe="20991231T000000Z"),  # another journal's event 6
    ]
    for n, payload in enumerate(hostile, 1):
        pub.publish(topic, payload, retain=n % 2 == 0)
        assert eventually(lambda n=n: out.marks_ignored == n), (n, out.marks_ignored)
    assert out.archive_mark == 0 and not out.archive_heard
    assert ARCHIVE_OUTPUT not in journal.outputs()

    pub.publish(topic, mark_payload(6), retain=True)
    assert eventually(lambda: out.archive_mark == 6)
    assert eventually(lambda: journal.outputs().get(ARCHIVE_OUTPUT) == 6)
    pub.publish(topic, mark_payload(4))  # behind: changes nothing, and is no offence
    pub.publish(topic, b"still not json")
    assert eventually(lambda: out.marks_ignored == len(hostile) + 1)
    assert out.archive_mark == 6


@pytest.mark.mqtt
def test_what_lies_above_the_mark_is_re_offered_in_order_and_byte_for_byte(
    mosquitto: BrokerFactory,
    subscriber: Callable[..., Subscriber],
    journal: Journal,
    output: Callable[..., MqttOutput],
) -> None:
    broker = mosquitto()
    sub = subscriber(broker, [f"baccarat/{TABLE}/card"])
    journal.append_events([event(s) for s in range(1, 31)])
    stored = {p.seq: p.json for p in journal.events_since(0)}
    out = output(broker.port, reoffer_after_s=1)
    assert out.wait_idle(20)
    assert sub.wait_for(lambda ms: len(ms) >= 30)
    # nothing is re-offered before an archive has said anything
    sub.publish(out.topic_mark, mark_payload(12), retain=True)
    assert eventually(lambda: out.archive_mark == 12)
    assert sub.wait_for(lambda ms: len(ms) >= 30 + 18, timeout=30)
    again = [m.payload.decode() for m in sub.messages[30:48]]
    assert [json.loads(p)["seq"] for p in again] == list(range(13, 31))
    assert again == [stored[s] for s in range(13, 31)]  # the very bytes journalled
    assert out.reoffered >= 18
    # the archive then holds them all: nothing more is re-offered
    sub.publish(out.topic_mark, mark_payload(30), retain=True)
    assert eventually(lambda: out.archive_mark == 30)
    seen = len(sub.messages)
    settled = out.reoffered
    assert not eventually(lambda: out.reoffered > settled, timeout=3)
    assert len(sub.messages) == seen


class _Published:
    rc = mqtt_out.MQTTErrorCode.MQTT_ERR_SUCCESS


class _Recorder:
    def __init__(self) -> None:
        self.sent: list[tuple[str, str, bool]] = []

    def publish(self, topic: str, payload: str, qos: int = 0, retain: bool = False) -> _Published:
        self.sent.append((topic, payload, retain))
        return _Published()


def test_a_long_backlog_is_re_offered_at_the_bounded_rate_and_backs_off_when_nothing_moves(
    journal: Journal, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = [1000.0]
    monkeypatch.setattr(mqtt_out.time, "monotonic", lambda: clock[0])
    journal.append_events([event(s) for s in range(1, 1001)], now=0.0)  # journalled long ago
    journal.mark_delivered("mqtt", 1000)
    journal.mark_delivered(ARCHIVE_OUTPUT, 100)
    cfg = MqttConfig.model_validate({"host": "127.0.0.1", "port": 1, "reoffer_after_s": 2})
    out = MqttOutput(cfg, TABLE, journal)
    rec = _Recorder()
    out._client = rec  # type: ignore[assignment]
    assert out.archive_heard and out.archive_mark == 100
    out._reoffer()
    assert len(rec.sent) == mqtt_out.REOFFER_BURST  # the burst, and no more at this instant
    out._reoffer()
    assert len(rec.sent) == mqtt_out.REOFFER_BURST
    clock[0] += 1.0
    out._reoffer()
    assert len(rec.sent) == mqtt_out.REOFFER_BURST + mqtt_out.REOFFER_PER_S
    seqs = [json.loads(p)["seq"] for _, p, _ in rec.sent]
    assert seqs == list(range(101, 101 + len(seqs)))  # in seq order
    assert not any(retain for _, _, retain in rec.sent)
    # finish the round: 900 events, then a wait; the mark never moved, so
    # the next round's wait doubles
    while out._round_from is not None:
        clock[0] += 1.0
        out._reoffer()
    assert len(rec.sent) == 900
    first_wait = out._round_at - clock[0]
    assert first_wait == pytest.approx(2.0)
    clock[0] = out._round_at
    out._reoffer()  # the second round starts: nothing moved in the first
    assert out._round_wait == pytest.approx(4.0)
    # a mark that moves resets the wait and the next round starts above it
    out._on_mark(mark_payload(950))
    out._take_mark()
    assert out.archive_mark == 950 and out._round_wait == pytest.approx(2.0)
    while out._round_from is not None:
        clock[0] += 1.0
        out._reoffer()
    clock[0] = out._round_at
    rec.sent.clear()
    out._reoffer()
    assert [json.loads(p)["seq"] for _, p, _ in rec.sent][:1] == [951]


# --- retention ----------------------------------------------------------------------


def test_retention_keeps_what_the_archive_has_not_confirmed_until_the_size_bound(journal: Journal) -> None:
    pad = "x" * 2000
    journal.append_events([event(s, note=pad) for s in range(1, 2001)], now=0.0)  # old
    journal.mark_delivered("mqtt", 2000)
    journal.mark_delivered(ARCHIVE_OUTPUT, 500)
    kept = journal.retention(1, now=10 * 86400.0, outputs=["mqtt", ARCHIVE_OUTPUT])
    assert kept.events_deleted == 500 and kept.undelivered_deleted == 0
    assert journal.event_id_at(501) is not None  # old, PUBACKed, not archived: kept
    # the size bound: the oldest go whatever their marks, and are counted
    size = journal.size_bytes()
    bound = size // 2
    pruned = journal.retention(1, now=10 * 86400.0, outputs=["mqtt", ARCHIVE_OUTPUT], max_bytes=bound)
    assert pruned.undelivered_deleted == pruned.events_deleted > 0
    assert journal.size_bytes() <= bound
    assert journal.retired_seq() >= 501 + pruned.events_deleted - 1
    assert journal.event_id_at(2000) is not None  # the newest stay


def test_a_journal_over_its_size_bound_is_pruned_at_start_with_an_alert(tmp_path: Path) -> None:
    path = tmp_path / "journal.sqlite3"
    unreachable = {"host": "127.0.0.1", "port": 9}  # discard: never a broker, so nothing is PUBACKed
    first = write_config(
        tmp_path, {"driver": "replay", "file": str(CAPTURE)}, outputs={"stdout": False, "mqtt": unreachable}
    )
    assert Daemon(load_config(first), stop_at_eof=True).run() == 0
    dealt = _events(path)
    assert dealt and not any(e["type"] == "security.alert" for e in dealt)
    with Journal(path) as j:
        j.set_meta("test_padding", "p" * (17 * 1024 * 1024))  # no retention can take it
    over = write_config(
        tmp_path,
        {"driver": "replay", "file": str(CAPTURE)},
        outputs={"stdout": False, "mqtt": unreachable},
        journal_max_mb=16,
    )
    with structlog.testing.capture_logs() as logs:
        assert Daemon(load_config(over), stop_at_eof=True).run() == 0
    alerts = [e for e in _events(path) if e["type"] == "security.alert" and e["code"] == "JOURNAL_PRUNED"]
    assert len(alerts) >= 1
    assert (
        "over journal_max_mb (16 MiB)" in alerts[0]["detail"] and "not yet delivered" in alerts[0]["detail"]
    )
    assert any(line["event"] == "JOURNAL PRUNED past its size bound" for line in logs)
    ids = {e["event_id"] for e in _events(path)}
    assert not {e["event_id"] for e in dealt[:10]} & ids  # the oldest went


def _events(path: Path) -> list[dict[str, Any]]:
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return [json.loads(j) for (j,) in con.execute("SELECT json FROM events ORDER BY seq")]
    finally:
        con.close()


# --- the archiver's marks and holes, against PostgreSQL ---------------------------


@pytest.fixture
def conn(pg_dsn: str) -> Iterator[Any]:
    with db.connect(pg_dsn, autocommit=True) as c:
        migrate.apply(c)
    c = db.connect(pg_dsn)
    yield c
    c.close()


def _archive(conn: Any, events: list[dict[str, Any]]) -> None:
    store = Store(
        archiver="t", prefix="baccarat", max_payload_bytes=65536, retention_months=24, partitions_ahead=2
    )
    msgs = [(f"baccarat/{e['table']}/{e['type'].replace('.', '/')}", dumps(e).encode()) for e in events]
    store.write(conn, msgs)


def test_the_mark_stops_at_a_hole_which_is_reported_once_and_closed(conn: Any) -> None:
    clock = [0.0]
    published: list[tuple[str, dict[str, Any]]] = []
    holes: list[tuple[int, int]] = []
    keeper = marks.MarkKeeper(
        "baccarat",
        lambda t, p: published.append((t, json.loads(p))),
        on_hole=lambda o, n: holes.append((o, n)),
        clock=lambda: clock[0],
    )
    _archive(conn, [event(s) for s in (*range(1, 6), *range(8, 11))])
    keeper.touched(["baccarat/T01/card", "baccarat/T01/status", "baccarat/T01/archive/mark"])
    with structlog.testing.capture_logs() as logs:
        keeper.step(conn)
        assert published == [("baccarat/T01/archive/mark", json.loads(mark_payload(5)))]
        assert "T01" in keeper.open and not keeper.open["T01"].reported
        clock[0] = marks.HOLE_GRACE_S
        keeper.step(conn)
        keeper.step(conn)
        opened = [x for x in logs if x["event"] == "archive.hole_opened"]
        assert len(opened) == 1
        assert (
            opened[0]["first_missing"] == 6 and opened[0]["last_missing"] == 7 and opened[0]["missing"] == 2
        )
        assert holes[-1] == (1, 1)
        # the re-offer fills it: the mark moves to the end, the hole closes
        _archive(conn, [event(6), event(7)])
        keeper.touched(["baccarat/T01/card"])
        clock[0] += marks.MARK_EVERY_S
        keeper.step(conn)
    assert published[-1][1]["seq"] == 10 and published[-1][1]["event_id"] == f"T01/{SHOE}/10"
    assert [x["event"] for x in logs if x["event"].startswith("archive.hole")] == [
        "archive.hole_opened",
        "archive.hole_closed",
    ]
    assert holes[-1] == (0, 1) and not keeper.open
    # a reconnect publishes every table's mark again, from the database
    keeper.reconnected()
    n = len(published)
    keeper.step(conn)
    assert published[n:] == [("baccarat/T01/archive/mark", json.loads(mark_payload(10)))]


def test_a_hole_below_a_journal_lost_alert_is_stepped_over_only_after_its_wait(conn: Any) -> None:
    clock = [0.0]
    published: list[dict[str, Any]] = []
    keeper = marks.MarkKeeper(
        "baccarat", lambda t, p: published.append(json.loads(p)), clock=lambda: clock[0]
    )
    lost = event(10_006, "security.alert", coup=None, code="JOURNAL_LOST", detail="lost", supervisor=False)
    _archive(conn, [event(1), event(2), event(3), lost, event(10_007)])
    keeper.touched(["baccarat/T01/card"])
    keeper.step(conn)
    assert published[-1]["seq"] == 3 and keeper.open["T01"].hole.epoch
    clock[0] = marks.EPOCH_HOLE_WAIT_S - 1
    keeper.step(conn)
    assert published[-1]["seq"] == 3
    clock[0] = marks.EPOCH_HOLE_WAIT_S
    keeper.step(conn)
    assert published[-1]["seq"] == 10_007 and not keeper.open


def test_marks_never_move_back_and_another_archivers_higher_mark_stands(conn: Any) -> None:
    _archive(conn, [event(s) for s in range(1, 4)])
    mark, hole = marks.advance(conn, TABLE)
    assert mark is not None and mark.seq == 3 and hole is None
    with conn.transaction():
        conn.execute("UPDATE archive_table_marks SET seq = 9, event_id = 'T01/x/9'")
    again, _ = marks.advance(conn, TABLE)
    assert again is not None and again.seq == 9
    assert [m.seq for m in marks.load_all(conn)] == [9]
    assert marks.advance(conn, "T99") == (None, None)


def test_the_archivers_mark_is_valid_by_the_shipped_schema_and_read_by_the_table() -> None:
    import jsonschema

    from controller import contract_gen

    schema = json.loads(contract_gen.generated()["archive.mark.json"])
    payload = marks.TableMark(TABLE, 1, 42, f"{TABLE}/{SHOE}/42").payload()
    jsonschema.validate(json.loads(payload), schema)
    assert parse_mark(payload, TABLE) == (42, f"{TABLE}/{SHOE}/42")
    for bad in (
        mark_payload(0),
        mark_payload(3, v=2),
        mark_payload(3, extra=1),
        mark_payload(3, table="T/1"),
    ):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(json.loads(bad), schema)


def test_a_round_starts_again_from_the_mark_when_the_archiver_or_the_broker_comes_back(
    journal: Journal, monkeypatch: pytest.MonkeyPatch
) -> None:
    # What a round re-offered before a broker crash (or to the session of
    # an archiver that never came back) is gone: the round must not go on
    # from where it was, above a hole it will never fill again.
    clock = [1000.0]
    monkeypatch.setattr(mqtt_out.time, "monotonic", lambda: clock[0])
    journal.append_events([event(s) for s in range(1, 401)], now=0.0)
    journal.mark_delivered("mqtt", 400)
    journal.mark_delivered(ARCHIVE_OUTPUT, 100)
    cfg = MqttConfig.model_validate({"host": "127.0.0.1", "port": 1, "reoffer_after_s": 2})
    out = MqttOutput(cfg, TABLE, journal)
    rec = _Recorder()
    out._client = rec  # type: ignore[assignment]
    out._reoffer()
    assert out._round_from == 100 + mqtt_out.REOFFER_BURST
    # the archiver publishes the same mark again (it reconnected)
    out._on_mark(mark_payload(100))
    out._take_mark()
    clock[0] += 1.0
    rec.sent.clear()
    out._reoffer()
    assert [json.loads(p)["seq"] for _, p, _ in rec.sent][:3] == [101, 102, 103]
    # the table's own reconnect does the same
    clock[0] += 1.0
    out._round_restart = True  # what _on_connect sets
    rec.sent.clear()
    out._reoffer()
    assert [json.loads(p)["seq"] for _, p, _ in rec.sent][:1] == [101]


@pytest.mark.mqtt
def test_the_shipped_acl_lets_the_archiver_publish_marks_and_no_table_another_tables(
    mosquitto: BrokerFactory, certs: Any, subscriber: Callable[..., Subscriber], tmp_path: Path
) -> None:
    from tests.conftest import mqtt_client
    from tests.test_mqtt_output import shipped_broker

    broker = shipped_broker(mosquitto, certs, tmp_path)
    ca = certs.path("ca.crt")
    watch = subscriber(
        broker, ["baccarat/+/archive/mark"], username="supervisor", password="pw-supervisor", ca_file=ca
    )
    for user, table, seq in (("archive", "T01", 7), ("shoe-T02", "T01", 8), ("archive", "T02", 9)):
        client, rc = mqtt_client(broker, username=user, password=f"pw-{user}", ca_file=ca)
        assert rc is not None and not rc.is_failure
        client.publish(
            marks.mark_topic("baccarat", table), mark_payload(seq, table=table), qos=1
        ).wait_for_publish(10)
        client.disconnect()
        client.loop_stop()
    assert watch.wait_for(lambda ms: len(ms) >= 2)
    assert not eventually(lambda: len(watch.messages) > 2, timeout=2)
    assert sorted(json.loads(m.payload)["seq"] for m in watch.messages) == [7, 9]  # T02 may not write T01's


def test_a_seq_two_journals_share_stops_the_mark_below_it(conn: Any) -> None:
    # A table id reused by a second journal (a misconfiguration, or two
    # tables named alike on one broker): the mark must not step over the
    # one journal's hole on the other's events.
    other = event(6)
    other["shoe"] = "20000101T000000Z"  # a shoe id is its first frame's time: an older journal's
    other["event_id"] = f"{TABLE}/20000101T000000Z/6"
    _archive(conn, [*(event(s) for s in range(1, 6)), other, event(7), event(8)])
    with structlog.testing.capture_logs() as logs:
        mark, hole = marks.advance(conn, TABLE)
    assert mark is not None and mark.seq == 5 and hole is None  # not over the other's 6
    _archive(conn, [event(6)])  # the journal's own 6 comes: two events share seq 6
    with structlog.testing.capture_logs() as logs:
        mark, hole = marks.advance(conn, TABLE)
    assert mark is not None and mark.seq == 5
    assert [x["seq"] for x in logs if x["event"] == "archive.seq_clash"] == [6]
    # a journal's shoes follow one another without a clash
    later = [event(s) for s in range(1, 4)] + [
        {**event(s), "shoe": "20991231T000000Z", "event_id": f"T02/20991231T000000Z/{s}"} for s in (4, 5)
    ]
    _archive(conn, [{**e, "table": "T02", "event_id": e["event_id"].replace("T01/", "T02/")} for e in later])
    mark, hole = marks.advance(conn, "T02")
    assert mark is not None and mark.seq == 5


def test_the_daemons_retention_waits_for_the_archive_only_once_one_has_answered(journal: Journal) -> None:
    from types import SimpleNamespace

    journal.append_events([event(s) for s in range(1, 101)], now=0.0)  # 100 events, long ago
    journal.mark_delivered("mqtt", 100)
    journal.mark_delivered(ARCHIVE_OUTPUT, 40)
    alerts: list[Any] = []
    cfg = SimpleNamespace(journal_retention_days=1, journal_max_mb=4096, journal="j")

    def daemon(heard: bool, ack: bool = True) -> Any:
        return SimpleNamespace(
            cfg=cfg,
            outputs=[],
            mqtt=SimpleNamespace(archive_ack=ack, archive_heard=heard),
            _checkpoint_input=0,
            _input_command=lambda cmd, t: alerts.append(cmd),
            _now=lambda: 0.0,
        )

    Daemon._retention(daemon(heard=True), journal)  # type: ignore[arg-type]
    assert journal.retired_seq() == 40 and journal.event_id_at(41) is not None
    Daemon._retention(daemon(heard=True, ack=False), journal)  # type: ignore[arg-type]
    assert journal.retired_seq() == 100  # archive_ack false: the PUBACK is delivery
    assert alerts == []
