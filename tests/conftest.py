"""Shared fixtures: a real mosquitto broker per test that needs one (on a
free loopback port, with its own config, nothing from the machine's own
broker), an MQTT subscriber that records what it receives, and throwaway
TLS certificates made with the ``openssl`` command.

Without the mosquitto binary the MQTT tests are skipped on a developer's
machine and fail in CI (``CI`` set), where a skipped broker test would hide
a broken outbox.
"""

from __future__ import annotations

import getpass
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import paho.mqtt.client as mqtt
import pytest
from paho.mqtt.enums import CallbackAPIVersion
from paho.mqtt.reasoncodes import ReasonCode


def need_tool(name: str, *extra_paths: str) -> str:
    """The path of a command-line tool the tests need; skip (or, in CI,
    fail) when it is missing."""
    for candidate in extra_paths:
        if os.access(candidate, os.X_OK):
            return candidate
    found = shutil.which(name)
    if found:
        return found
    message = f"{name} is not installed (make deps-system installs it)"
    if os.environ.get("CI"):
        pytest.fail(f"{message}; CI must run every test", pytrace=False)
    pytest.skip(message)


def eventually(predicate: Callable[[], bool], timeout: float = 15.0) -> bool:
    """Poll ``predicate`` until it holds (True) or ``timeout`` passes (False).
    Tests assert outcomes, never how long they took."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return predicate()


#: The loopback ports ``free_port`` draws from: below Linux's ephemeral range
#: (32768-60999, where the kernel picks a client's own port and a bind to 0),
#: a band of 1,000 for each xdist worker (none, the first band).
PORT_BANDS = range(20000, 32000, 1000)


def free_port(*, avoid: set[int] | frozenset[int] = frozenset()) -> int:
    """A loopback TCP port free now, for a server a test is about to start.
    Drawn at random from its xdist worker's own band: between this check and
    the server's bind, no other worker's server nor any client's outgoing
    connection takes it (a bind to port 0 hands out ports from the range
    every connection draws from, and may hand the same one to two workers)."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    index = int(worker[2:]) + 1 if worker[:2] == "gw" and worker[2:].isdigit() else 0
    low = PORT_BANDS[index % len(PORT_BANDS)]
    for _ in range(500):
        port = random.randrange(low, low + 1000)
        if port in avoid:
            continue
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:  # a band all taken: any port
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Broker:
    """A mosquitto process on 127.0.0.1:``port``; ``stop()`` and ``start()``
    take it away and bring it back on the same port (outage tests)."""

    binary: str
    directory: Path
    port: int
    config: Path
    host: str = "127.0.0.1"
    proc: subprocess.Popen[bytes] | None = None

    @property
    def log(self) -> str:
        path = self.directory / "mosquitto.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def start(self) -> None:
        assert self.proc is None, "broker already running"
        out = open(self.directory / "mosquitto.stdout", "ab")  # noqa: SIM115 - owned by the process
        self.proc = subprocess.Popen(
            [self.binary, "-c", str(self.config)], stdout=out, stderr=subprocess.STDOUT
        )
        out.close()
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                stdout = (self.directory / "mosquitto.stdout").read_text(errors="replace")
                self.proc = None
                raise RuntimeError(f"mosquitto exited at start:\n{stdout}\n{self.log}")
            try:
                with socket.create_connection((self.host, self.port), timeout=0.2):
                    return
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"mosquitto did not listen on {self.port}:\n{self.log}")

    def stop(self) -> None:
        """Graceful stop (SIGTERM): mosquitto saves its persistence file."""
        if self.proc is None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc = None

    def kill(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None


BrokerFactory = Callable[..., Broker]


@pytest.fixture(scope="session")
def mosquitto(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerFactory]:
    """Factory: ``mosquitto()`` starts a fresh broker and returns it.

    Keyword options: ``persistence`` (keep sessions and retained messages
    across ``stop()``/``start()``), ``config`` (a whole config text instead
    of the default anonymous listener; ``@PORT@`` and ``@DIR@`` are
    replaced). Every broker is killed at the end of the session.
    """
    binary = need_tool("mosquitto", "/usr/sbin/mosquitto", "/usr/local/sbin/mosquitto")
    brokers: list[Broker] = []

    def make(*, persistence: bool = False, config: str | None = None) -> Broker:
        directory = tmp_path_factory.mktemp("mosquitto")
        port = free_port()
        if config is None:
            config = "listener @PORT@ 127.0.0.1\nallow_anonymous true\n"
        lines = [
            config.replace("@PORT@", str(port)).replace("@DIR@", str(directory)),
            f"persistence {'true' if persistence else 'false'}",
            f"persistence_location {directory}/",
            f"log_dest file {directory}/mosquitto.log",
            "log_type all",
            # mosquitto started as root drops to the 'mosquitto' user unless
            # told otherwise, and that user cannot read pytest's temp dirs.
            f"user {getpass.getuser()}",
        ]
        path = directory / "mosquitto.conf"
        path.write_text("\n".join(lines) + "\n")
        broker = Broker(binary=binary, directory=directory, port=port, config=path)
        brokers.append(broker)
        broker.start()
        return broker

    yield make
    for broker in brokers:
        broker.kill()


@dataclass
class Received:
    topic: str
    payload: bytes
    qos: int
    retain: bool

    @property
    def text(self) -> str:
        return self.payload.decode()


@dataclass
class Subscriber:
    """An MQTT client that records every message on its subscriptions."""

    client: mqtt.Client
    messages: list[Received] = field(default_factory=list)
    lock: threading.RLock = field(default_factory=threading.RLock)

    def on(self, topic: str) -> list[Received]:
        with self.lock:
            return [m for m in self.messages if m.topic == topic]

    def wait_for(self, predicate: Callable[[list[Received]], bool], timeout: float = 15.0) -> bool:
        def check() -> bool:
            with self.lock:
                return predicate(list(self.messages))

        return eventually(check, timeout)

    def publish(self, topic: str, payload: str | bytes, qos: int = 1, retain: bool = False) -> None:
        self.client.publish(topic, payload, qos=qos, retain=retain).wait_for_publish(10)

    def stop(self) -> None:
        self.client.disconnect()
        self.client.loop_stop()


def mqtt_client(
    broker: Broker,
    *,
    client_id: str = "",
    clean: bool = True,
    username: str | None = None,
    password: str | None = None,
    ca_file: str | None = None,
    host: str | None = None,
    protocol: int = mqtt.MQTTv311,
) -> tuple[mqtt.Client, ReasonCode | None]:
    """A connected, looping paho client; returns it with the CONNACK reason
    (a refused client is returned not connected)."""
    client = mqtt.Client(
        callback_api_version=CallbackAPIVersion.VERSION2,
        client_id=client_id,
        clean_session=clean if protocol != mqtt.MQTTv5 else None,
        protocol=protocol,
    )
    if username is not None:
        client.username_pw_set(username, password)
    if ca_file is not None:
        client.tls_set(ca_certs=ca_file)
    connack: list[Any] = []
    done = threading.Event()

    def on_connect(c: mqtt.Client, u: Any, flags: Any, rc: ReasonCode, props: Any) -> None:
        connack.append(rc)
        done.set()

    client.on_connect = on_connect
    if protocol == mqtt.MQTTv5:
        client.connect(host or broker.host, broker.port, keepalive=30, clean_start=clean)
    else:
        client.connect(host or broker.host, broker.port, keepalive=30)
    client.loop_start()
    if not done.wait(10):
        client.loop_stop()
        raise RuntimeError("no CONNACK from the broker")
    if connack[0].is_failure:
        client.loop_stop()
        client.disconnect()
    return client, connack[0]


def subscribe(broker: Broker, topics: list[str], **options: Any) -> Subscriber:
    """A recording client on ``topics`` (QoS 1), returned once the broker has
    acknowledged the subscriptions; it subscribes again after a reconnect.
    ``options`` are ``mqtt_client``'s. The ``subscriber`` fixture's, and the
    soak campaign's outside pytest."""
    client, rc = mqtt_client(broker, **options)
    if rc is not None and rc.is_failure:
        raise RuntimeError(f"subscriber refused: {rc}")
    sub = Subscriber(client)
    subscribed = threading.Event()

    def on_message(c: mqtt.Client, u: Any, msg: mqtt.MQTTMessage) -> None:
        with sub.lock:
            sub.messages.append(Received(msg.topic, bytes(msg.payload), msg.qos, bool(msg.retain)))

    def on_subscribe(c: mqtt.Client, u: Any, mid: int, codes: Any, props: Any) -> None:
        subscribed.set()

    def on_connect(c: mqtt.Client, u: Any, flags: Any, rc: ReasonCode, props: Any) -> None:
        # After a broker restart: subscribe again (harmless with a kept session).
        c.subscribe([(t, 1) for t in topics])

    client.on_message = on_message
    client.on_subscribe = on_subscribe
    client.on_connect = on_connect
    client.reconnect_delay_set(1, 2)
    client.subscribe([(t, 1) for t in topics])
    if not subscribed.wait(10):
        raise RuntimeError("no SUBACK from the broker")
    return sub


@pytest.fixture
def subscriber() -> Iterator[Callable[..., Subscriber]]:
    """Factory: ``subscriber(broker, ["baccarat/T01/#"], **client_options)``
    returns once the broker has acknowledged the subscriptions (QoS 1)."""
    made: list[Subscriber] = []

    def make(broker: Broker, topics: list[str], **options: Any) -> Subscriber:
        sub = subscribe(broker, topics, **options)
        made.append(sub)
        return sub

    yield make
    for sub in made:
        sub.stop()


@dataclass
class Certs:
    """A throwaway CA, a server certificate for localhost/127.0.0.1 and a
    client certificate, all signed by the CA; keys are mode 0600."""

    directory: Path

    def path(self, name: str) -> str:
        return str(self.directory / name)


@pytest.fixture(scope="session")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    openssl = need_tool("openssl")
    d = tmp_path_factory.mktemp("certs")

    def run(*args: str) -> None:
        subprocess.run([openssl, *args], cwd=d, check=True, capture_output=True)

    key = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    run(
        "req",
        "-x509",
        *key,
        "-keyout",
        "ca.key",
        "-out",
        "ca.crt",
        "-days",
        "2",
        "-subj",
        "/CN=shoe-controller test CA",
    )
    (d / "server.ext").write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\n")
    for name, cn in (("server", "localhost"), ("client", "shoe-T01")):
        run("req", *key, "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", f"/CN={cn}")
        extra = ["-extfile", "server.ext"] if name == "server" else []
        run("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
            "-out", f"{name}.crt", "-days", "2", *extra)  # fmt: skip
    for k in ("ca.key", "server.key", "client.key"):
        (d / k).chmod(0o600)
    return Certs(d)


@dataclass
class StagedInstall:
    """``deploy/install.sh`` run into a temporary root (``root``), as
    ``make install DESTDIR=...`` would: the wheel built from this checkout,
    configs for tables T01 and T02, and the floor archiver 1 (archive-1.yaml,
    with the archive extra)."""

    root: Path
    output: str

    @property
    def venv(self) -> Path:
        return self.root / "opt/shoe-controller"


@pytest.fixture(scope="session")
def staged_install(tmp_path_factory: pytest.TempPathFactory) -> StagedInstall:
    root = tmp_path_factory.mktemp("root")
    script = Path(__file__).resolve().parent.parent / "deploy" / "install.sh"
    sites = ["--table", "T01", "--table", "T02", "--archive", "1"]
    result = subprocess.run(
        [str(script), "--root", str(root), "--python", sys.executable, *sites],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return StagedInstall(root=root, output=result.stdout)


@pytest.fixture
def pg_dsn() -> Iterator[str]:
    """A DSN for a database of this test's own on the real PostgreSQL
    (tests/support/postgres.py); fails with what to install or start when
    the server is not there."""
    from tests.support import postgres

    problem = postgres.unavailable()
    if problem is not None:
        pytest.fail(problem, pytrace=False)
    with postgres.temporary_database() as dsn:
        yield dsn


# --- running on several workers (pytest-xdist, ``make test``) ----------------------

#: Session fixtures of this file that are cheap to make again on each worker
#: (a factory, three openssl keys): they do not tie their tests to one worker.
CHEAP_SHARED_FIXTURES = frozenset({"mosquitto", "certs"})


def _shared_fixture_keys(item: pytest.Item) -> list[str]:
    """The dear fixtures wider than a test that ``item`` uses (a module's
    whole-shoe daemon run, the wheel built and installed, a campaign), one
    key each: the fixture's place and name, and its parameter if it has one."""
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return []
    params = getattr(getattr(item, "callspec", None), "params", {})
    keys = []
    for name in info.names_closure:
        defs = info.name2fixturedefs.get(name)
        if not defs:
            continue
        fixturedef = defs[-1]
        if fixturedef.scope == "function" or not fixturedef.baseid or name in CHEAP_SHARED_FIXTURES:
            continue  # per test, or pytest's own (tmp_path_factory), or cheap
        key = f"{fixturedef.baseid}::{name}"
        if name in params:
            key += f"[{params[name]}]"
        keys.append(key)
    return keys


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """On several workers (``-n 2 --dist loadgroup``): the tests that share a
    dear fixture wider than a test run on one worker (an ``xdist_group``), so
    it is made once, not once a worker; tests sharing any such fixture, in any
    chain, are one group. And the long tests (``slow``) come first, so that
    they do not land together on one worker at the end while the other idles."""
    parent: dict[str, str] = {}

    def find(key: str) -> str:
        while parent.setdefault(key, key) != key:
            key = parent[key]
        return key

    keyed = [(item, _shared_fixture_keys(item)) for item in items]
    for _, keys in keyed:
        for other in keys[1:]:
            a, b = find(keys[0]), find(other)
            if a != b:
                parent[max(a, b)] = min(a, b)
    grouping = bool(getattr(config.option, "loadgroup", False))  # an xdist worker under --dist loadgroup
    for item, keys in keyed:
        if keys:
            name = re.sub(r"[^\w.-]+", "_", find(keys[0]))  # no '@' nor ']': xdist splits the id there
            item.add_marker(pytest.mark.xdist_group(name))
            if grouping and hasattr(item, "_id"):
                _join_group(item, name)
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


def _join_group(item: pytest.Item, name: str) -> None:
    """What xdist's loadgroup does with an ``xdist_group`` mark: the group's
    name after an '@' in the test's id, the one thing the scheduler reads.
    pytest 9.2 keeps the id structured (``_id``), where xdist 3.8 still
    writes the old ``_nodeid``, which no longer counts: the groups would be
    silently ignored. Older pytest: xdist does it."""
    from _pytest.nodeid import NodeId

    item._id = NodeId.parse(f"{item.nodeid}@{name}")  # type: ignore[attr-defined]
