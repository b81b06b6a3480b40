"""A real install, as a user gets it.

The sdist and wheel are built the way a release is (``python -m build``:
the sdist from the tree, the wheel from the sdist), the wheel is installed
into a fresh virtualenv (not editable), and every command runs from there
with its working directory outside the source tree, so nothing can be
imported from the checkout. Then ``deploy/install.sh`` is run into a
temporary root (the ``staged_install`` fixture in conftest.py): files,
modes, paths fit for the final location, upgrade and uninstall.

Slow-ish (two builds and two virtualenvs, about a minute); deselect locally
with ``-m 'not install'``. ``make test`` and CI run it.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import shutil
import signal
import sqlite3
import stat
import subprocess
import sys
import tarfile
import threading
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import pytest
import yaml

from controller import __version__
from controller.cli import _build_parser
from tests.conftest import BrokerFactory, StagedInstall

pytestmark = pytest.mark.install

REPO = Path(__file__).resolve().parent.parent
PACKAGES = ("controller", "drivers", "firmware_protocols")
#: What the sdist carries besides the packages (MANIFEST.in): the deploy kit.
DEPLOY_KIT = ("deploy", "systemd", "examples")
#: the documentation the README links to, shipped in the release tarball
DOCS = ("docs",)
INSTALL_SH = REPO / "deploy" / "install.sh"


def tree_files(*tops: str) -> set[str]:
    """Every file under ``tops`` in the source tree, relative to it, without
    interpreter caches: what a build must carry."""
    out: set[str] = set()
    for top in tops:
        for path in (REPO / top).rglob("*"):
            if path.is_file() and "__pycache__" not in path.parts and path.suffix not in (".pyc", ".pyo"):
                out.add(path.relative_to(REPO).as_posix())
    return out


def clean_env(**extra: str) -> dict[str, str]:
    """The environment without anything that would point Python at the checkout."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    env.update(extra)
    return env


@dataclass
class Dist:
    wheel: Path
    sdist: Path


@dataclass
class Venv:
    path: Path
    cwd: Path  # outside the source tree

    @property
    def exe(self) -> str:
        return str(self.path / "bin" / "shoe-controller")

    def run(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [self.exe, *args], cwd=self.cwd, env=clean_env(), capture_output=True, text=True, timeout=timeout
        )


@pytest.fixture(scope="session")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Dist:
    out = tmp_path_factory.mktemp("dist")
    result = subprocess.run(
        [sys.executable, "-m", "build", "--outdir", str(out), str(REPO)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    (wheel,) = out.glob("*.whl")
    (sdist,) = out.glob("*.tar.gz")
    return Dist(wheel=wheel, sdist=sdist)


@pytest.fixture(scope="session")
def venv(dist: Dist, tmp_path_factory: pytest.TempPathFactory) -> Venv:
    base = tmp_path_factory.mktemp("wheel-venv")
    path = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True, timeout=120)
    # This project's pip installs into the new venv (pip --python): the wheel,
    # not editable, and its dependencies from the index (pip's cache applies),
    # with the archive extra (psycopg) so that every module imports.
    result = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(path / "bin" / "python"), "install",
         "--disable-pip-version-check", "-q", f"{dist.wheel}[archive]"],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    cwd = base / "elsewhere"
    cwd.mkdir()
    return Venv(path=path, cwd=cwd)


def ok(result: subprocess.CompletedProcess[str]) -> str:
    output = f"{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    assert result.returncode == 0, f"exit {result.returncode}\n{output}"
    assert "Traceback" not in result.stderr, result.stderr
    return result.stdout


def checkout(*args: str) -> str:
    """The same command from the source tree (the editable install)."""
    result = subprocess.run(
        [sys.executable, "-m", "controller.cli", *args], capture_output=True, text=True, timeout=120
    )
    return ok(result)


def subcommands() -> list[str]:
    parser = _build_parser()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return sorted(action.choices)
    raise AssertionError("the CLI has no subcommands")


# -- what the builds carry ---------------------------------------------------


def test_the_wheel_holds_every_file_of_every_package_and_nothing_else(dist: Dist) -> None:
    """Compared with the source tree, so a new subpackage or data file that
    pyproject.toml does not pick up fails here, not on a table box."""
    with zipfile.ZipFile(dist.wheel) as z:
        names = {n for n in z.namelist() if not n.split("/", 1)[0].endswith(".dist-info")}
        entry_points = z.read(f"shoe_controller-{__version__}.dist-info/entry_points.txt").decode()
    want = tree_files(*PACKAGES)
    assert names == want, f"missing: {sorted(want - names)}; extra: {sorted(names - want)}"
    assert {"controller/commands/odds.py", "controller/outputs/mqtt.py", "controller/py.typed"} <= names
    assert "shoe-controller = controller.cli:main" in entry_points


def test_the_sdist_is_the_release_tarball_sources_and_deploy_kit_without_tests(dist: Dist) -> None:
    top = f"shoe_controller-{__version__}/"
    with tarfile.open(dist.sdist) as t:
        names = {m.name.removeprefix(top) for m in t.getmembers() if m.isfile()}
        assert t.getmember(top + "deploy/install.sh").mode & 0o111, "install.sh must stay executable"
    top_files = {"README.md", "pyproject.toml", "MANIFEST.in", "mkdocs.yml"}
    want = tree_files(*PACKAGES, *DEPLOY_KIT, *DOCS) | top_files
    assert want <= names, f"missing from the sdist: {sorted(want - names)}"
    generated = {
        n for n in names - want if n in ("PKG-INFO", "setup.cfg") or n.startswith("shoe_controller.egg-info/")
    }
    assert names - want == generated, f"unexpected in the sdist: {sorted(names - want - generated)}"
    assert not any(n.startswith(("tests/", "benchmarks/", "fuzz/")) for n in names)


# -- the installed commands ---------------------------------------------------


def test_every_module_imports_from_the_venv_not_the_checkout(venv: Venv) -> None:
    code = (
        "import importlib, json, pkgutil\n"
        "out = {}\n"
        f"for top in {PACKAGES!r}:\n"
        "    pkg = importlib.import_module(top)\n"
        "    out[top] = pkg.__file__\n"
        "    for m in pkgutil.walk_packages(pkg.__path__, top + '.'):\n"
        "        out[m.name] = importlib.import_module(m.name).__file__\n"
        "print(json.dumps(out))\n"
    )
    python = str(venv.path / "bin" / "python")
    result = subprocess.run(
        [python, "-c", code], cwd=venv.cwd, env=clean_env(), capture_output=True, text=True
    )
    files = json.loads(ok(result))
    site = str(venv.path / "lib")
    assert all(f.startswith(site) for f in files.values()), files
    want = {p.removesuffix(".py").removesuffix("/__init__").replace("/", ".") for p in tree_files(*PACKAGES)
            if p.endswith(".py")}  # fmt: skip
    assert set(files) == want


@pytest.mark.parametrize("command", ["", *subcommands()])
def test_help_of_every_command(venv: Venv, command: str) -> None:
    out = ok(venv.run(*([command] if command else []), "--help"))
    assert out.startswith(f"usage: shoe-controller {command}".rstrip())


def test_version(venv: Venv) -> None:
    assert ok(venv.run("--version")).strip() == f"shoe-controller {__version__}"


def test_odds_agree_with_the_source_tree(venv: Venv) -> None:
    args = ("odds", "--decks", "8", "--profile", "ez_baccarat", "--remove", "7H,7S", "--json")
    out = ok(venv.run(*args))
    assert json.loads(out) == json.loads(checkout(*args))
    text = ok(venv.run("odds"))
    assert "banker" in text and "45.8597%" in text  # punto banco, 8 decks


@pytest.mark.parametrize("capture", ["burn_first_card", "profile_ez_baccarat", "angel_eye_coup"])
def test_replay_of_a_capture_gives_its_expected_events(venv: Venv, capture: str) -> None:
    path = REPO / "tests" / "captures" / f"{capture}.shoelog"
    out = ok(venv.run("replay", "--no-progress", str(path)))
    assert out == path.with_suffix(".expected.jsonl").read_text(encoding="utf-8")


def test_roads_json_and_svg_agree_with_the_source_tree(venv: Venv, tmp_path: Path) -> None:
    capture = str(REPO / "docs" / "sample-shoe.shoelog")
    roads = json.loads(ok(venv.run("roads", capture)))
    assert roads == json.loads(checkout("roads", capture))
    assert len(roads["bead_plate"]) > 10
    ok(venv.run("roads", capture, "--svg", str(tmp_path / "installed.svg")))
    checkout("roads", capture, "--svg", str(tmp_path / "checkout.svg"))
    svg = (tmp_path / "installed.svg").read_text()
    assert svg.startswith("<svg ") and svg.rstrip().endswith("</svg>")
    assert svg == (tmp_path / "checkout.svg").read_text()


@pytest.mark.parametrize("example", sorted(p.name for p in (REPO / "examples").glob("*.yaml")))
def test_check_config_accepts_the_shipped_examples(venv: Venv, example: str) -> None:
    out = ok(venv.run("check-config", str(REPO / "examples" / example)))
    assert out.startswith("ok: ")


def test_check_config_names_a_bad_key(venv: Venv, tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    text = (REPO / "examples" / "config.yaml").read_text().replace("decks: 8 ", "deks: 8 ")
    bad.write_text(text)
    result = venv.run("check-config", str(bad))
    assert result.returncode == 2 and "deks" in result.stderr and "Traceback" not in result.stderr


def test_fake_deals_a_whole_shoe_and_stops_by_itself(venv: Venv, tmp_path: Path) -> None:
    log = tmp_path / "dealt.jsonl"
    result = subprocess.run(
        [venv.exe, "fake", "--shoes", "1", "--cards-per-second", "0", "--decks", "1", "--log", str(log)],
        cwd=venv.cwd, env=clean_env(), capture_output=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    frames = result.stdout.split(b"\r\n")
    assert frames[0].startswith(b"$SH,0,HELLO,")
    coups = [json.loads(line) for line in log.read_text().splitlines() if '"record": "coup"' in line]
    dealt = sum(len(c["player"]) + len(c["banker"]) for c in coups)
    assert len(coups) >= 5 and sum(b",CARD," in f for f in frames) >= dealt


def _fake_config(tmp_path: Path, **extra: Any) -> Path:
    cfg: dict[str, Any] = {
        "table": "T09",
        "device": {"driver": "fake", "seed": 5, "cards_per_second": 200},
        "journal": str(tmp_path / "state" / "journal.sqlite3"),
        "outputs": {"stdout": True},
        **extra,
    }
    path = tmp_path / "fake.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def test_record_from_the_fake_shoe_then_replay_it(venv: Venv, tmp_path: Path) -> None:
    capture = tmp_path / "session.shoelog"
    ok(venv.run("record", "-c", str(_fake_config(tmp_path)), "-o", str(capture), "--duration", "1.5"))
    header = capture.read_text().splitlines()[0]
    assert header.startswith("# protocol=shoe-ascii/1 table=T09 "), header
    events = [json.loads(line) for line in ok(venv.run("replay", "--no-progress", str(capture))).splitlines()]
    assert {e["table"] for e in events} == {"T09"}
    assert any(e["type"] == "shoe.started" for e in events)
    assert sum(e["type"] == "card" for e in events) >= 4


def _lines(stream: IO[str]) -> Iterator[str]:
    yield from iter(stream.readline, "")


@pytest.mark.mqtt
def test_run_the_daemon_on_the_fake_shoe_and_command_it_with_ctl(
    venv: Venv, tmp_path: Path, mosquitto: BrokerFactory
) -> None:
    """The installed daemon as the unit runs it: events on stdout, the
    journal in a temporary state directory, MQTT to a real broker, and a
    supervisor command from the installed ``ctl``; SIGTERM ends it with 0."""
    broker = mosquitto()
    mqtt = {"host": broker.host, "port": broker.port, "client_id": "shoe-T09"}
    cfg = _fake_config(tmp_path, outputs={"stdout": True, "mqtt": mqtt})
    proc = subprocess.Popen(
        [venv.exe, "run", "-c", str(cfg)], cwd=venv.cwd, env=clean_env(PYTHONUNBUFFERED="1"),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert proc.stdout is not None and proc.stderr is not None
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in _lines(proc.stdout)], daemon=True).start()

    def until(predicate: Any, what: str) -> dict[str, Any]:
        while True:
            try:
                event: dict[str, Any] = json.loads(lines.get(timeout=60))
            except queue.Empty:
                proc.kill()
                pytest.fail(f"no {what} from the installed daemon; stderr: {proc.stderr.read()[-3000:]}")
            if predicate(event):
                return event

    try:
        first = until(lambda e: e["type"] == "shoe.started", "shoe.started")
        until(lambda e: e["type"] == "coup.result", "coup.result")
        supervisor = tmp_path / "supervisor.yaml"
        sup_mqtt = {**mqtt, "client_id": "sup-1"}
        supervisor.write_text(
            yaml.safe_dump({"table": "T09", "device": {"driver": "fake"}, "outputs": {"mqtt": sup_mqtt}})
        )
        ok(venv.run("ctl", "new-shoe", "-c", str(supervisor), "--timeout", "30"))
        second = until(lambda e: e["type"] == "shoe.started", "a second shoe.started after ctl new-shoe")
        assert second["shoe"] != first["shoe"]
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            code = proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise
    assert code == 0, proc.stderr.read()[-3000:]
    assert (tmp_path / "state" / "journal.sqlite3").stat().st_size > 0


def test_keygen_then_the_daemon_signs_and_verify_checks_its_journal(venv: Venv, tmp_path: Path) -> None:
    """The installed ``keygen`` makes the table's key (mode 0600, never
    twice), the installed daemon signs its journal with it, and the
    installed ``verify`` passes the journal, then names its last event
    deleted: all from the fresh venv, none of it from the checkout."""
    cfg = _fake_config(tmp_path)
    key = tmp_path / "state" / "signing.key"
    made = ok(venv.run("keygen", "-c", str(cfg)))
    assert made.startswith(f"keygen: {key}: key_id ") and made.rstrip().endswith("(mode 0600)"), made
    assert mode(key) == "-rw-------"
    key_id, public = made.split("key_id ")[1].split()[0], made.split("public_key ")[1].split()[0]
    again = venv.run("keygen", "-c", str(cfg))
    assert again.returncode != 0 and "never overwritten" in again.stderr and again.stderr.count("\n") == 1
    assert ok(venv.run("keygen", "--public", "-c", str(cfg))).split() == [
        "key_id",
        key_id,
        "public_key",
        public,
    ]

    proc = subprocess.Popen(
        [venv.exe, "run", "-c", str(cfg)], cwd=venv.cwd, env=clean_env(PYTHONUNBUFFERED="1"),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert proc.stdout is not None and proc.stderr is not None
    try:
        results = 0
        for line in _lines(proc.stdout):
            event = json.loads(line)
            assert event["key_id"] == key_id and len(event["sig"]) == 86
            results += event["type"] == "coup.result"
            if results == 3:
                break
        assert results == 3, proc.stderr.read()[-3000:]
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            code = proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise
    assert code == 0, proc.stderr.read()[-3000:]

    journal = tmp_path / "state" / "journal.sqlite3"
    line = ok(venv.run("verify", "-c", str(cfg))).strip()
    assert line.startswith(f"verified journal {journal}: ") and f"(keys {key_id}), chain unbroken" in line
    assert "last against its high-water mark" in line, line
    line = ok(venv.run("verify", "--journal", str(journal), f"--key={public}")).strip()
    assert line.startswith("verified journal"), line
    with sqlite3.connect(journal) as db:
        last = db.execute("SELECT max(seq) FROM events").fetchone()[0]
        db.execute("DELETE FROM events WHERE seq = ?", (last,))
    broken = venv.run("verify", "--journal", str(journal))
    assert broken.returncode == 1 and broken.stdout.count("\n") == 1, broken.stdout + broken.stderr
    assert broken.stdout.startswith("BROKEN: journal") and f"seq {last} was deleted" in broken.stdout


# -- deploy/install.sh into a temporary root ------------------------------------


def mode(path: Path) -> str:
    return stat.filemode(path.lstat().st_mode)


def files_under(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*") if not p.is_dir() or p.is_symlink()}


def test_install_sh_lays_out_the_tree(staged_install: StagedInstall) -> None:
    root = staged_install.root
    unitdir = root / "usr/local/lib/systemd/system"
    expected = {  # installed file: its source, all mode 0644
        "usr/local/lib/systemd/system/shoe-controller.service": "systemd/shoe-controller.service",
        "usr/local/lib/systemd/system/shoe-controller@.service": "systemd/shoe-controller@.service",
        "usr/local/lib/systemd/system/shoe-controller-board.service": "systemd/shoe-controller-board.service",
        "usr/local/lib/systemd/system/shoe-controller-archive@.service": (
            "systemd/shoe-controller-archive@.service"
        ),
        "usr/local/lib/sysusers.d/shoe-controller.conf": "systemd/shoe-controller.sysusers",
        "etc/udev/rules.d/99-shoe-controller.rules": "systemd/99-shoe-controller.rules",
    }
    for rel, source in expected.items():
        assert mode(root / rel) == "-rw-r--r--", rel
        assert (root / rel).read_bytes() == (REPO / source).read_bytes(), rel
    for table in ("T01", "T02"):
        cfg = root / "etc/shoe-controller" / f"{table}.yaml"
        assert mode(cfg) == "-rw-r--r--"
        data = yaml.safe_load(cfg.read_text())
        assert data["table"] == table and data["outputs"]["mqtt"]["client_id"] == f"shoe-{table}"
        # absolute, in the unit's state directory: where the board's example
        # and history -c find the journal, from any directory
        assert data["journal"] == f"/var/lib/shoe-controller/{table}/journal.sqlite3"
        assert data["outputs"]["jsonl"] == f"/var/lib/shoe-controller/{table}/events.jsonl"
    board = yaml.safe_load((REPO / "examples/board.yaml").read_text().replace("# journal:", "journal:"))
    assert board["tables"][0] == {
        "table": "T01",
        "title": "Baccarat 1",
        "journal": yaml.safe_load((root / "etc/shoe-controller/T01.yaml").read_text())["journal"],
    }
    assert not (root / "etc/shoe-controller/config.yaml").exists()  # --table given: per-table configs only
    # --archive 1: the example, with the archiver's own client id, and psycopg in the venv
    archive = root / "etc/shoe-controller/archive-1.yaml"
    assert mode(archive) == "-rw-r--r--"
    assert archive.read_text() == (REPO / "examples/archive.yaml").read_text()  # its client id is archive-1
    assert yaml.safe_load(archive.read_text())["broker"]["client_id"] == "archive-1"
    assert list(staged_install.venv.glob("lib/python3*/site-packages/psycopg/__init__.py"))
    assert mode(root / "etc/shoe-controller") == "drwxr-xr-x"
    link = root / "usr/local/bin/shoe-controller"
    assert link.is_symlink() and os.readlink(link) == "/opt/shoe-controller/bin/shoe-controller"
    # Outside the venv, exactly these files and nothing else.
    others = {f for f in files_under(root) if not f.startswith("opt/shoe-controller/")}
    assert others == {*expected, "etc/shoe-controller/T01.yaml", "etc/shoe-controller/T02.yaml",
                      "etc/shoe-controller/archive-1.yaml", "usr/local/bin/shoe-controller",
                      *KEYS}  # fmt: skip
    assert sorted(p.name for p in (root / "opt").iterdir()) == ["shoe-controller"]  # no .new / .old left
    assert {p.name for p in unitdir.iterdir()} == {
        "shoe-controller.service",
        "shoe-controller@.service",
        "shoe-controller-board.service",
        "shoe-controller-archive@.service",
    }


#: each table's signing key, where its config (the journal's directory) puts it
KEYS = ("var/lib/shoe-controller/T01/signing.key", "var/lib/shoe-controller/T02/signing.key")


def test_install_sh_makes_each_tables_signing_key_readable_only_by_its_owner(
    staged_install: StagedInstall,
) -> None:
    """The key is made at install, not at the first start: mode 0600 in the
    table's 0700 state directory (a live install gives both to the service
    user), where the daemon looks for it; the output names its key id and
    nothing of the key; no unit or config holds it."""
    from controller import signing

    root = staged_install.root
    secrets = []
    for rel in KEYS:
        key = root / rel
        assert mode(key) == "-rw-------" and mode(key.parent) == "drwx------", rel
        signer = signing.Signer(signing.load_key(key))  # an Ed25519 key the daemon takes as it is
        assert f"made the signing key /{rel} (mode 0600): key_id {signer.key_id}" in staged_install.output
        secrets.append(key.read_text().splitlines()[1])  # the base64 of the private key
    cfg = yaml.safe_load((root / "etc/shoe-controller/T01.yaml").read_text())
    assert os.path.join(os.path.dirname(cfg["journal"]), "signing.key") == "/" + KEYS[0]
    texts = [staged_install.output] + [p.read_text() for p in (root / "etc").rglob("*") if p.is_file()]
    texts += [p.read_text() for p in (root / "usr/local/lib").rglob("*") if p.is_file()]
    assert not [t for t in texts for secret in secrets if secret in t]


def test_install_sh_never_overwrites_a_key_and_makes_a_missing_one(
    staged_install: StagedInstall, dist: Dist, tmp_path: Path
) -> None:
    """Idempotent: a second install keeps each key byte for byte; a table
    whose key is missing gets one; a table with signing off gets none."""
    root = _copy_root(staged_install, tmp_path / "root")
    t01 = root / KEYS[0]
    before = t01.read_bytes()
    (root / KEYS[1]).unlink()
    cfg3 = root / "etc/shoe-controller/T03.yaml"
    cfg3.write_text(
        (root / "etc/shoe-controller/T01.yaml")
        .read_text()
        .replace("table: T01 ", "table: T03 ")
        .replace("/T01/", "/T03/")
        .replace("client_id: shoe-T01 ", "client_id: shoe-T03 ")
        .replace("\nsigning: true ", "\nsigning: false ")
    )
    assert "\nsigning: false " in cfg3.read_text()
    result = _install("--root", str(root), "--wheel", str(dist.wheel), "--table", "T01", "--table", "T02",
                      "--table", "T03")  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert "kept /var/lib/shoe-controller/T01/signing.key" in result.stdout
    assert t01.read_bytes() == before
    assert "made the signing key /var/lib/shoe-controller/T02/signing.key (mode 0600)" in result.stdout
    assert mode(root / KEYS[1]) == "-rw-------"
    assert "/etc/shoe-controller/T03.yaml: signing is off: no key made" in result.stdout
    assert not (root / "var/lib/shoe-controller/T03").exists()


def test_the_staged_venv_is_correct_for_its_final_path(staged_install: StagedInstall) -> None:
    """Nothing in the staged tree names the staging directory: #! lines,
    activate scripts, pyvenv.cfg and the paths compiled into .pyc files all
    say /opt/shoe-controller."""
    root, venv = staged_install.root, staged_install.venv
    script = venv / "bin" / "shoe-controller"
    assert mode(script) == "-rwxr-xr-x"
    assert script.read_text().splitlines()[0] == "#!/opt/shoe-controller/bin/python"
    assert (venv / "bin" / "python").resolve().is_file()  # the base interpreter it links to
    assert "/opt/shoe-controller" in (venv / "pyvenv.cfg").read_text()
    needle = str(root).encode()
    naming = [p for p in root.rglob("*") if p.is_file() and not p.is_symlink() and needle in p.read_bytes()]
    assert naming == []
    pyc = next((venv / "lib").glob("python3*/site-packages/controller/__pycache__/cli.*.pyc"))
    code = subprocess.run(
        [sys.executable, "-c", "import marshal, sys; f = open(sys.argv[1], 'rb'); f.read(16); "
         "print(marshal.load(f).co_filename)", str(pyc)],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    assert code.startswith("/opt/shoe-controller/lib/python3") and code.endswith("/controller/cli.py")


def test_the_staged_program_runs_and_accepts_its_configs(
    staged_install: StagedInstall, tmp_path: Path
) -> None:
    venv = staged_install.venv
    # Its own interpreter, found from the staged path (the #! line names the final one).
    for table in ("T01", "T02"):
        result = subprocess.run(
            [str(venv / "bin/python"), str(venv / "bin/shoe-controller"), "check-config",
             str(staged_install.root / "etc/shoe-controller" / f"{table}.yaml")],
            cwd=tmp_path, env=clean_env(), capture_output=True, text=True,
        )  # fmt: skip
        assert ok(result).startswith("ok: ") and f"table {table}," in result.stdout
    archive = subprocess.run(
        [str(venv / "bin/python"), str(venv / "bin/shoe-controller"), "check-config",
         str(staged_install.root / "etc/shoe-controller/archive-1.yaml")],
        cwd=tmp_path, env=clean_env(), capture_output=True, text=True,
    )  # fmt: skip
    assert "floor archive (shoe-controller archive), client id archive-1" in ok(archive)
    files = subprocess.run(
        [str(venv / "bin/python"), "-c", "import controller.commands.odds as m; print(m.__file__)"],
        cwd=tmp_path, env=clean_env(), capture_output=True, text=True,
    )  # fmt: skip
    assert ok(files).startswith(str(venv / "lib"))


def _copy_root(staged: StagedInstall, dest: Path) -> Path:
    shutil.copytree(staged.root, dest, symlinks=True)
    return dest


def _install(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(INSTALL_SH), "--python", sys.executable, *args], capture_output=True, text=True, timeout=600
    )


def _enable(root: Path, table: str) -> None:
    """What ``systemctl enable shoe-controller@<table>`` leaves behind."""
    wants = root / "etc/systemd/system/multi-user.target.wants"
    wants.mkdir(parents=True, exist_ok=True)
    (wants / f"shoe-controller@{table}.service").symlink_to(
        "/usr/local/lib/systemd/system/shoe-controller@.service"
    )


def test_an_upgrade_is_refused_when_the_new_version_rejects_a_config_a_unit_loads(
    staged_install: StagedInstall, dist: Dist, tmp_path: Path
) -> None:
    root = _copy_root(staged_install, tmp_path / "root")
    marker = root / "opt/shoe-controller/from-the-old-version"
    marker.write_text("x")
    _enable(root, "T02")
    cfg = root / "etc/shoe-controller/T02.yaml"
    cfg.write_text(cfg.read_text().replace("decks: 8 ", "deks: 8 "))
    refused = _install("--root", str(root), "--wheel", str(dist.wheel))
    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert "refuses" in refused.stderr and "T02.yaml" in refused.stderr and "deks" in refused.stderr
    assert marker.exists()  # the old program untouched
    assert sorted(p.name for p in (root / "opt").iterdir()) == ["shoe-controller"]  # the new one removed
    assert not (root / "etc/shoe-controller/config.yaml").exists()


UPGRADE_IN_PLACE = r"""
set -euo pipefail
# The staged tree at its final location: each of /etc, /opt and /usr/local
# is the host's with the staged files over it (overlayfs, in this mount
# namespace only), and /run/systemd is hidden so the installer never touches
# the host's systemd.
for d in etc opt usr/local var/lib; do
  mkdir -p "$WORK/$d"
  mount -t overlay overlay -o "lowerdir=/$d,upperdir=$ROOT/$d,workdir=$WORK/$d" "/$d"
done
if [ -d /run/systemd ]; then mount -t tmpfs tmpfs /run/systemd; fi
cd /
echo "== before"
/usr/local/bin/shoe-controller --version
/opt/shoe-controller/bin/shoe-controller check-config /etc/shoe-controller/T01.yaml
echo "== upgrade"
env -u DESTDIR "$INSTALL_SH" --python "$PYTHON" --wheel "$WHEEL" --table T01 --table T03
echo "== after"
/usr/local/bin/shoe-controller --version
/usr/local/bin/shoe-controller check-config /etc/shoe-controller/T03.yaml
# the archive extra is kept (archive-1.yaml is there): the archiver's config still checks
/usr/local/bin/shoe-controller check-config /etc/shoe-controller/archive-1.yaml | head -n 1
"""


def test_the_staged_tree_runs_at_its_final_location_and_upgrades_in_place(
    staged_install: StagedInstall, dist: Dist, tmp_path: Path
) -> None:
    """The real-root path (no --root), on the staged tree put where it
    belongs: its #! lines resolve, and a second install replaces the venv in
    place while keeping the site's configs and udev rule."""
    if os.geteuid() != 0 or subprocess.run(["unshare", "-m", "true"], capture_output=True).returncode != 0:
        pytest.skip("needs root and mount namespaces (unshare -m) to put the tree at /")
    root = _copy_root(staged_install, tmp_path / "root")
    marker = root / "opt/shoe-controller/from-the-old-version"
    marker.write_text("x")
    cfg = root / "etc/shoe-controller/T01.yaml"
    edited = cfg.read_text() + "# edited by the site\n"
    cfg.write_text(edited)
    rule = root / "etc/udev/rules.d/99-shoe-controller.rules"
    rule.write_text("# our shoes\n")
    _enable(root, "T01")
    env = clean_env(
        ROOT=str(root), WORK=str(tmp_path / "work"), INSTALL_SH=str(INSTALL_SH),
        PYTHON=sys.executable, WHEEL=str(dist.wheel),
    )  # fmt: skip
    result = subprocess.run(
        ["unshare", "-m", "bash", "-c", UPGRADE_IN_PLACE],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    before, upgrade, after = (part.strip() for part in result.stdout.split("== ")[1:])
    assert before.splitlines()[1] == f"shoe-controller {__version__}"
    assert before.splitlines()[2] == "ok: /etc/shoe-controller/T01.yaml"
    assert "kept /etc/shoe-controller/T01.yaml" in upgrade and "kept /etc/udev/rules.d/" in upgrade
    assert f"installed shoe-controller {__version__} in /opt/shoe-controller" in upgrade
    assert after.splitlines()[1:3] == [f"shoe-controller {__version__}", "ok: /etc/shoe-controller/T03.yaml"]
    assert "ok: /etc/shoe-controller/archive-1.yaml" in after.splitlines()
    # What the upgrade wrote, seen in the overlays' upper layers.
    assert not marker.exists()  # a new venv, swapped in
    assert sorted(p.name for p in (root / "opt").iterdir()) == ["shoe-controller"]
    assert cfg.read_text() == edited and rule.read_text() == "# our shoes\n"
    assert yaml.safe_load((root / "etc/shoe-controller/T03.yaml").read_text())["table"] == "T03"
    # the keys: T01's kept, T03's made, in the state directory (var/lib overlaid)
    assert "kept /var/lib/shoe-controller/T01/signing.key" in upgrade
    assert "made the signing key /var/lib/shoe-controller/T03/signing.key (mode 0600)" in upgrade
    assert mode(root / "var/lib/shoe-controller/T03/signing.key") == "-rw-------"
    script = root / "opt/shoe-controller/bin/shoe-controller"
    assert script.read_text().startswith("#!/opt/shoe-controller/bin/python\n")


def test_an_upgrade_is_refused_when_the_new_version_rejects_an_enabled_archivers_config(
    staged_install: StagedInstall, dist: Dist, tmp_path: Path
) -> None:
    """An enabled shoe-controller-archive@1 loads archive-1.yaml: the new
    version must accept it (with the archive extra, kept because the config
    is there), or nothing is replaced."""
    root = _copy_root(staged_install, tmp_path / "root")
    marker = root / "opt/shoe-controller/from-the-old-version"
    marker.write_text("x")
    wants = root / "etc/systemd/system/multi-user.target.wants"
    wants.mkdir(parents=True, exist_ok=True)
    (wants / "shoe-controller-archive@1.service").symlink_to(
        "/usr/local/lib/systemd/system/shoe-controller-archive@.service"
    )
    cfg = root / "etc/shoe-controller/archive-1.yaml"
    cfg.write_text(cfg.read_text().replace("batch_max_events: ", "batch_max_eventz: "))
    refused = _install("--root", str(root), "--wheel", str(dist.wheel))
    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert "refuses" in refused.stderr and "archive-1.yaml" in refused.stderr
    assert "batch_max_eventz: unknown key" in refused.stderr
    assert marker.exists()  # the old program untouched
    assert sorted(p.name for p in (root / "opt").iterdir()) == ["shoe-controller"]


def test_uninstall_removes_the_program_and_keeps_configs_rules_and_state(
    staged_install: StagedInstall, tmp_path: Path
) -> None:
    root = _copy_root(staged_install, tmp_path / "root")
    result = _install("--root", str(root), "--uninstall")
    assert result.returncode == 0, result.stderr
    assert files_under(root) == {
        "etc/shoe-controller/T01.yaml",
        "etc/shoe-controller/T02.yaml",
        "etc/shoe-controller/archive-1.yaml",
        "etc/udev/rules.d/99-shoe-controller.rules",
        *KEYS,  # the state, keys included
    }
    assert "kept" in result.stdout and "/var/lib/shoe-controller" in result.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--table", "T/1"], "--table 'T/1': 1-32 of A-Z a-z 0-9 _ -"),
        (["--table", ""], "--table '': 1-32 of A-Z a-z 0-9 _ -"),
        (["--archive", "a b"], "--archive 'a b': 1-32 of A-Z a-z 0-9 _ -"),
        (["--archive"], "--archive needs an archiver name"),
        (["--prefix", "/"], "--prefix cannot be /"),
        (["--prefix", "opt/x"], "--prefix must be an absolute path"),
        (["--wheel", "/nonexistent/x.whl"], "--wheel /nonexistent/x.whl: no such file"),
        (["--frobnicate"], "unknown option '--frobnicate'"),
    ],
)
def test_install_sh_refuses_bad_options_in_one_line(tmp_path: Path, args: list[str], message: str) -> None:
    result = _install("--root", str(tmp_path / "root"), *args)
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and message in result.stderr, result.stderr
    assert not (tmp_path / "root").exists()
