"""The configuration file contract (docs/operations.md, Configuration): what is accepted, and
that every rejection names the key path and the problem."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from pydantic import ValidationError

from controller.cli import main
from controller.config import Config, FakeDevice, UsbDevice, default_config, load_config, parse_config
from controller.errors import ConfigError

REPO = Path(__file__).resolve().parent.parent
MINIMAL = "table: T01\ndevice: {driver: fake}\n"


def error_of(text: str) -> str:
    with pytest.raises(ConfigError) as info:
        parse_config(text, "cfg.yaml")
    return str(info.value)


def secret(tmp_path: Path, name: str, mode: int, text: str = "s3cret\n") -> str:
    path = tmp_path / name
    path.write_text(text)
    path.chmod(mode)
    return str(path)


def test_shipped_example_config_is_valid() -> None:
    cfg = load_config(REPO / "examples" / "config.yaml")
    assert cfg.table == "T01"
    assert cfg.device.driver == "serial"
    assert cfg.outputs.mqtt is not None and cfg.outputs.mqtt.topic_prefix == "baccarat"
    assert cfg.rules.overrides()["burn"] == "first_card"


def test_default_config_is_a_fake_punto_banco_shoe_printing_to_stdout() -> None:
    cfg = default_config()
    assert (cfg.table, cfg.profile, cfg.decks) == ("T01", "punto_banco", 8)
    assert isinstance(cfg.device, FakeDevice)
    assert cfg.outputs.stdout is True and cfg.outputs.mqtt is None
    assert cfg.journal == "./var/journal.sqlite3"


def test_minimal_config_takes_the_spec_defaults() -> None:
    cfg = parse_config(MINIMAL)
    assert cfg.decks == 8 and cfg.odds is True and cfg.journal_retention_days == 90
    assert cfg.rules.overrides() == {}


def test_unknown_top_level_key_is_an_error_with_a_suggestion() -> None:
    msg = error_of(MINIMAL + "devcie: {driver: fake}\n")
    assert "devcie: unknown key (did you mean 'device'?)" in msg


def test_unknown_key_inside_a_driver_section_names_the_plain_path() -> None:
    msg = error_of("table: T01\ndevice: {driver: serial, port: /dev/ttyUSB0, baudrat: 9600}\n")
    assert "device.baudrat: unknown key (did you mean 'baudrate'?)" in msg


def test_unknown_key_deep_in_outputs_is_an_error() -> None:
    msg = error_of(MINIMAL + "outputs: {mqtt: {host: h, tls: {ca: x}}}\n")
    assert "outputs.mqtt.tls.ca: unknown key" in msg


def test_wrong_type_names_the_key_path() -> None:
    msg = error_of(MINIMAL + "outputs: {mqtt: {host: h, port: abc}}\n")
    assert "outputs.mqtt.port: Input should be a valid integer" in msg


@pytest.mark.parametrize("value", ["true", '"8"', "8.5"])
def test_decks_must_be_a_real_integer_not_something_coercible(value: str) -> None:
    assert "decks:" in error_of(MINIMAL + f"decks: {value}\n")


@pytest.mark.parametrize("decks", [0, 13])
def test_decks_outside_1_to_12_are_rejected(decks: int) -> None:
    assert "decks:" in error_of(MINIMAL + f"decks: {decks}\n")


@pytest.mark.parametrize("table", ["T 01", "", "T01/x", "a" * 33, "T+"])
def test_table_must_be_a_safe_topic_level(table: str) -> None:
    assert "table:" in error_of(f"table: {table!r}\ndevice: {{driver: fake}}\n")


def test_table_is_required() -> None:
    assert "table: required key missing" in error_of("device: {driver: fake}\n")


def test_device_is_required_so_a_production_config_never_deals_fake_coups() -> None:
    assert "device: required key missing" in error_of("table: T01\n")


def test_yaml_syntax_error_reports_the_line() -> None:
    msg = error_of("table: T01\ndevice:\n  driver: fake\n   seed: [1\n")
    assert msg.startswith("cfg.yaml: YAML syntax error at line 4")


def test_duplicate_key_is_an_error() -> None:
    assert "duplicate key 'table'" in error_of(MINIMAL + "table: T02\n")


def test_unknown_driver_lists_the_drivers() -> None:
    assert "device.driver: must be one of serial, usb, fake, replay" in error_of(
        "table: T01\ndevice: {driver: bluetooth}\n"
    )


def test_serial_driver_requires_a_port() -> None:
    assert "device.port: required key missing" in error_of("table: T01\ndevice: {driver: serial}\n")


def test_usb_driver_requires_vendor_and_product_ids() -> None:
    msg = error_of("table: T01\ndevice: {driver: usb, vendor_id: 0x1234}\n")
    assert "device.product_id: required key missing" in msg


def test_usb_ids_accept_yaml_hex_ints_and_hex_strings() -> None:
    cfg = parse_config("table: T01\ndevice: {driver: usb, vendor_id: 0x1234, product_id: '0xAB'}\n")
    assert isinstance(cfg.device, UsbDevice)
    assert (cfg.device.vendor_id, cfg.device.product_id) == (0x1234, 0xAB)


def test_usb_id_out_of_range_is_rejected() -> None:
    assert "device.vendor_id: must be a 16-bit USB id" in error_of(
        "table: T01\ndevice: {driver: usb, vendor_id: 0x12345, product_id: 1}\n"
    )


def test_replay_driver_requires_an_existing_file(tmp_path: Path) -> None:
    assert "device.file: required key missing" in error_of("table: T01\ndevice: {driver: replay}\n")
    assert "no such file" in error_of(
        f"table: T01\ndevice: {{driver: replay, file: {tmp_path}/none.shoelog}}\n"
    )
    capture = tmp_path / "s.shoelog"
    capture.write_text("# protocol=shoe-ascii/1\n")
    assert (
        parse_config(f"table: T01\ndevice: {{driver: replay, file: {capture}}}\n").device.driver == "replay"
    )


def test_unknown_protocol_is_rejected() -> None:
    assert "device.protocol:" in error_of("table: T01\ndevice: {driver: fake, protocol: shoe-ascii/2}\n")


def test_fake_faults_must_be_known_names_with_probabilities() -> None:
    assert parse_config("table: T01\ndevice: {driver: fake, faults: 'gap:0.01,extra:0.5'}\n")
    assert "device.faults: 'teleport:0.1'" in error_of(
        "table: T01\ndevice: {driver: fake, faults: 'teleport:0.1'}\n"
    )
    assert "device.faults:" in error_of("table: T01\ndevice: {driver: fake, faults: 'gap:1.5'}\n")


def test_mqtt_protocol_defaults_to_5_and_accepts_3_1_1_with_a_warning() -> None:
    """MQTT 5 by default: only it shows a retained command's flag on live
    delivery; 3.1.1 stays selectable for old brokers."""
    cfg = parse_config(MINIMAL + "outputs: {mqtt: {host: h}}\n")
    assert cfg.outputs.mqtt is not None and cfg.outputs.mqtt.protocol == "5"
    assert cfg.outputs.mqtt.protocol_warning() is None
    cfg = parse_config(MINIMAL + "outputs: {mqtt: {host: h, protocol: 5}}\n")
    assert cfg.outputs.mqtt is not None and cfg.outputs.mqtt.protocol == "5"
    cfg = parse_config(MINIMAL + "outputs: {mqtt: {host: h, protocol: '3.1.1'}}\n")
    assert cfg.outputs.mqtt is not None and cfg.outputs.mqtt.protocol == "3.1.1"
    warning = cfg.outputs.mqtt.protocol_warning()
    assert warning is not None and warning.startswith('outputs.mqtt.protocol: "3.1.1"')
    assert "retained" in warning
    assert "outputs.mqtt.protocol:" in error_of(MINIMAL + "outputs: {mqtt: {host: h, protocol: 4}}\n")


@pytest.mark.parametrize("prefix", ["a/#", "+", "/a", "a/", ""])
def test_topic_prefix_must_not_hold_wildcards_or_empty_levels(prefix: str) -> None:
    assert "outputs.mqtt.topic_prefix:" in error_of(
        MINIMAL + f"outputs: {{mqtt: {{host: h, topic_prefix: '{prefix}'}}}}\n"
    )


def test_password_file_is_read_from_a_private_file(tmp_path: Path) -> None:
    path = secret(tmp_path, "mqtt.pass", 0o640)
    cfg = parse_config(MINIMAL + f"outputs: {{mqtt: {{host: h, username: u, password_file: {path}}}}}\n")
    assert cfg.outputs.mqtt is not None and cfg.outputs.mqtt.password() == "s3cret"


def test_world_readable_password_file_is_an_error_naming_the_key(tmp_path: Path) -> None:
    path = secret(tmp_path, "mqtt.pass", 0o644)
    msg = error_of(MINIMAL + f"outputs: {{mqtt: {{host: h, username: u, password_file: {path}}}}}\n")
    assert "outputs.mqtt.password_file:" in msg and "world-readable" in msg


def test_missing_password_file_is_an_error(tmp_path: Path) -> None:
    msg = error_of(MINIMAL + f"outputs: {{mqtt: {{host: h, username: u, password_file: {tmp_path}/nope}}}}\n")
    assert "outputs.mqtt.password_file:" in msg and "No such file" in msg


def test_password_without_username_is_an_error(tmp_path: Path) -> None:
    path = secret(tmp_path, "mqtt.pass", 0o600)
    assert "password_file needs a username" in error_of(
        MINIMAL + f"outputs: {{mqtt: {{host: h, password_file: {path}}}}}\n"
    )


def test_world_readable_tls_key_is_an_error_naming_the_key(tmp_path: Path) -> None:
    cert = secret(tmp_path, "client.crt", 0o644, "cert")
    key = secret(tmp_path, "client.key", 0o604, "key")
    msg = error_of(MINIMAL + f"outputs: {{mqtt: {{host: h, tls: {{cert_file: {cert}, key_file: {key}}}}}}}\n")
    assert "outputs.mqtt.tls.key_file:" in msg and "world-readable" in msg
    os.chmod(key, 0o600)
    assert parse_config(
        MINIMAL + f"outputs: {{mqtt: {{host: h, tls: {{cert_file: {cert}, key_file: {key}}}}}}}\n"
    )


def test_client_certificate_needs_its_key(tmp_path: Path) -> None:
    cert = secret(tmp_path, "client.crt", 0o644, "cert")
    assert "cert_file and key_file go together" in error_of(
        MINIMAL + f"outputs: {{mqtt: {{host: h, tls: {{cert_file: {cert}}}}}}}\n"
    )


@pytest.mark.parametrize("burn", ["first_card", "decks", "fixed:1", "fixed:8"])
def test_burn_rule_accepts_the_spec_forms(burn: str) -> None:
    assert parse_config(MINIMAL + f"rules: {{burn: '{burn}'}}\n").rules.overrides() == {"burn": burn}


@pytest.mark.parametrize("burn", ["fixed:0", "fixed:9", "fixed:", "first", "fixed:1x"])
def test_burn_rule_rejects_other_forms(burn: str) -> None:
    assert "rules.burn:" in error_of(MINIMAL + f"rules: {{burn: '{burn}'}}\n")


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("after_cut", "two_more"),
        ("coup_boundary", "timer"),
        ("demo_coups", "4"),
        ("extra_card", "keep"),
        ("correction_deadline_s", "0"),
    ],
)
def test_rule_overrides_are_checked(key: str, value: str) -> None:
    assert f"rules.{key}:" in error_of(MINIMAL + f"rules: {{{key}: {value}}}\n")


@pytest.mark.parametrize("metrics", ["127.0.0.1:10108", "[::1]:10108", "localhost:80"])
def test_metrics_takes_host_port(metrics: str) -> None:
    assert parse_config(MINIMAL + f"metrics: '{metrics}'\n").metrics_address() is not None


@pytest.mark.parametrize("metrics", ["10108", "host:", "host:99999", "a b:1"])
def test_metrics_rejects_anything_else(metrics: str) -> None:
    assert "metrics:" in error_of(MINIMAL + f"metrics: '{metrics}'\n")


def test_unknown_profile_is_rejected_but_a_profile_file_is_accepted(tmp_path: Path) -> None:
    assert "profile: 'macao_special' is neither a built-in profile" in error_of(
        MINIMAL + "profile: macao_special\n"
    )
    custom = tmp_path / "house.yaml"
    custom.write_text("name: house\n")
    assert parse_config(MINIMAL + f"profile: {custom}\n").profile == str(custom)


def test_several_problems_are_all_reported() -> None:
    msg = error_of("table: T01\ndevice: {driver: fake}\ndecks: 40\nodds: maybe\n")
    assert "2 problems" in msg and "decks:" in msg and "odds:" in msg


def test_unreadable_config_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(tmp_path / "missing.yaml")


def test_check_config_command_prints_ok_and_a_summary(capsys: pytest.CaptureFixture[str]) -> None:
    example = str(REPO / "examples" / "config.yaml")
    assert main(["check-config", example]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"ok: {example}\n")
    assert "table T01" in out


def test_check_config_warns_on_stderr_when_mqtt_3_1_1_is_chosen(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Valid (exit 0), but one warning line naming the key: 3.1.1 cannot
    show a command retained on the broker when it arrives live."""
    path = tmp_path / "c.yaml"
    path.write_text(MINIMAL + "outputs: {mqtt: {host: h, protocol: '3.1.1'}}\n")
    assert main(["check-config", str(path)]) == 0
    out, err = capsys.readouterr()
    assert "(MQTT 3.1.1)" in out
    (line,) = err.splitlines()
    assert line.startswith('warning: outputs.mqtt.protocol: "3.1.1" cannot show')
    path.write_text(MINIMAL + "outputs: {mqtt: {host: h}}\n")
    assert main(["check-config", str(path)]) == 0
    out, err = capsys.readouterr()
    assert "(MQTT 5)" in out and err == ""


def test_check_config_command_exits_2_with_the_message_and_no_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(MINIMAL + "outputs: {mqtt: {host: h, port: abc}}\n")
    assert main(["check-config", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "outputs.mqtt.port: Input should be a valid integer" in err
    assert "Traceback" not in err


def test_config_is_immutable() -> None:
    cfg: Config = default_config()
    with pytest.raises(ValidationError, match="frozen"):
        cfg.table = "T02"


# --- check-config of the floor archiver's config (shoe-controller archive) ------------

ARCHIVE = "broker: {host: 127.0.0.1, client_id: archive-1}\ndsn: 'host=127.0.0.1 dbname=floor user=archive'\n"


def test_check_config_recognises_the_shipped_archive_example(capsys: pytest.CaptureFixture[str]) -> None:
    example = str(REPO / "examples" / "archive.yaml")
    assert main(["check-config", example]) == 0
    out, err = capsys.readouterr()
    assert out.startswith(f"ok: {example}\n") and err == ""
    assert "floor archive (shoe-controller archive), client id archive-1" in out
    assert "subscribes baccarat/+/# at QoS 1" in out
    assert "database: host=127.0.0.1 port=5432 dbname=floor user=archive" in out


def test_check_config_summarises_a_shared_archiver_with_a_passfile(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "archive.yaml"
    path.write_text(
        "broker: {host: broker.floor.lan, port: 8883, client_id: archive-2, tls: {}}\n"
        "dsn: 'host=db1 dbname=floor user=archive passfile=/etc/shoe-controller/archive.pgpass'\n"
        "share_group: archivers\nmetrics: 127.0.0.1:10109\n"
    )
    assert main(["check-config", str(path)]) == 0
    out = capsys.readouterr().out
    assert "mqtts://broker.floor.lan:8883" in out and "$share/archivers/baccarat/+/#" in out
    assert "password from /etc/shoe-controller/archive.pgpass" in out
    assert "metrics on http://127.0.0.1:10109/metrics" in out


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        (ARCHIVE + "batch_max_eventz: 10\n", "batch_max_eventz: unknown key (did you mean 'batch_max_events"),
        (ARCHIVE + "batch_max_events: 10001\n", "batch_max_events:"),
        (ARCHIVE + "batch_max_events: 0\n", "batch_max_events:"),
        (ARCHIVE + "share_group: 'a/b'\n", "share_group: must match"),
        (ARCHIVE + "retention_months: 0\n", "retention_months:"),
        (ARCHIVE + "metrics: nowhere\n", "metrics"),
        (ARCHIVE.replace("user=archive", "user=archive password=secret"), "dsn: must not hold a password"),
        (ARCHIVE.replace("dbname", "nosuchparam=1 dbname"), "dsn: not a PostgreSQL"),
        (ARCHIVE.replace(", client_id: archive-1", ""), "broker.client_id"),
        (ARCHIVE.replace("archive-1", "archive-1, protocol: '3.1.1'"), "broker.protocol"),
        ("broker: {host: h, client_id: a}\n", "dsn"),  # broker alone: still an archive config
        ("dsn: 'dbname=floor'\n", "broker"),  # dsn alone: idem
    ],
)
def test_check_config_names_the_bad_key_of_an_archive_config(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, needle: str
) -> None:
    path = tmp_path / "archive.yaml"
    path.write_text(text)
    assert main(["check-config", str(path)]) == 2
    out, err = capsys.readouterr()
    (line,) = err.splitlines()  # one line, no traceback
    assert line.startswith(f"shoe-controller check-config: {path}") and needle in line, line
    assert out == ""


def test_a_table_config_with_an_archive_key_is_still_a_table_config(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(MINIMAL + "dsn: 'dbname=floor'\n")
    assert main(["check-config", str(path)]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert "dsn: unknown key" in line


def test_check_config_warns_when_libpq_would_ignore_the_archives_password_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """libpq skips a passfile group or others may read, or that is missing,
    and the archiver then fails to log in: check-config says so (exit 0, one
    warning line), and is quiet about a good one (mode 600)."""
    pgpass = tmp_path / "archive.pgpass"
    pgpass.write_text("db1:5432:floor:archive:secret\n")
    path = tmp_path / "archive.yaml"
    path.write_text(ARCHIVE.replace("user=archive", f"user=archive passfile={pgpass}"))
    for mode, needle in ((0o640, "mode 0640): libpq ignores it"), (0o604, "mode 0604)"), (0o600, None)):
        pgpass.chmod(mode)
        assert main(["check-config", str(path)]) == 0
        out, err = capsys.readouterr()
        assert out.startswith("ok: ")
        if needle is None:
            assert err == ""
        else:
            (line,) = err.splitlines()
            assert line.startswith(f"warning: dsn: passfile {pgpass} is open") and needle in line
    pgpass.unlink()
    assert main(["check-config", str(path)]) == 0
    (line,) = capsys.readouterr().err.splitlines()
    assert "No such file or directory" in line and "libpq will send no password" in line
