"""A 3-node NATS cluster for a test or a soak: each node a ``nats-server``
process on free loopback ports (client, cluster route, MQTT, monitoring),
with JetStream in its own store directory, a distinct ``server_name`` and
routes to the other two. ``kill9(i)`` and ``start(i)`` take a node away
and bring it back on the same ports and store (its JetStream state comes
back from disk and catches up from the others).

NATS's MQTT listener needs JetStream and a ``server_name``
(https://docs.nats.io/running-a-nats-service/configuration/mqtt); its own
streams (sessions, QoS 1 messages, retained messages) are made R3 here:
``mqtt.stream_replicas`` and ``consumer_replicas``.
"""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

CLUSTER_NAME = "floor"


def _free_ports(n: int) -> list[int]:
    """``n`` distinct free loopback ports (``tests.conftest.free_port``)."""
    from tests.conftest import free_port

    ports: set[int] = set()
    while len(ports) < n:
        ports.add(free_port(avoid=ports))
    return sorted(ports)


@dataclass
class NatsNode:
    binary: str
    name: str
    directory: Path
    client_port: int
    route_port: int
    mqtt_port: int
    http_port: int
    proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.client_port}"

    @property
    def config(self) -> Path:
        return self.directory / "nats.conf"

    @property
    def log(self) -> str:
        path = self.directory / "nats.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def write_config(self, routes: list[int]) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        route_urls = ", ".join(f'"nats-route://127.0.0.1:{p}"' for p in routes)
        self.config.write_text(
            f"server_name: {self.name}\n"
            f"listen: 127.0.0.1:{self.client_port}\n"
            f"http: 127.0.0.1:{self.http_port}\n"
            f'jetstream {{ store_dir: "{self.directory / "js"}" }}\n'
            f"cluster {{ name: {CLUSTER_NAME}, listen: 127.0.0.1:{self.route_port}, "
            f"routes: [{route_urls}] }}\n"
            # NATS keeps MQTT sessions, QoS 1 messages and retained messages
            # in streams of its own; left to itself, 2.9 may make them R2,
            # which stall (no quorum) when either replica dies
            f"mqtt {{ listen: 127.0.0.1:{self.mqtt_port}, stream_replicas: 3, consumer_replicas: 3 }}\n"
        )

    def start(self) -> None:
        assert self.proc is None, f"{self.name} already running"
        with open(self.directory / "nats.log", "ab") as out:
            self.proc = subprocess.Popen([self.binary, "-c", str(self.config)], stdout=out, stderr=out)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                self.proc = None
                raise RuntimeError(f"nats-server {self.name} exited at start:\n{self.log[-3000:]}")
            try:
                with socket.create_connection(("127.0.0.1", self.mqtt_port), timeout=0.2):
                    return
            except OSError:
                time.sleep(0.05)
        self.kill9()
        raise RuntimeError(f"nats-server {self.name} did not listen:\n{self.log[-3000:]}")

    def kill9(self) -> None:
        if self.proc is not None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()
            self.proc = None

    def stop(self) -> None:
        if self.proc is None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc = None

    def jsz(self) -> dict[str, object]:
        """The node's JetStream monitoring page (``/jsz``)."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.http_port}/jsz", timeout=5) as r:
            data: dict[str, object] = json.loads(r.read())
            return data


@dataclass
class NatsCluster:
    nodes: list[NatsNode] = field(default_factory=list)

    @classmethod
    def make(cls, binary: str, directory: Path, size: int = 3) -> NatsCluster:
        ports = _free_ports(4 * size)
        nodes = [
            NatsNode(binary, f"n{i + 1}", directory / f"n{i + 1}", *ports[4 * i : 4 * i + 4])
            for i in range(size)
        ]
        for node in nodes:
            node.write_config([n.route_port for n in nodes if n is not node])
        return cls(nodes)

    @property
    def urls(self) -> list[str]:
        return [n.url for n in self.nodes]

    def start(self) -> None:
        for node in self.nodes:
            node.start()

    def ready(self) -> bool:
        """Every running node sees a JetStream meta leader and its peers."""
        try:
            for node in self.nodes:
                if node.proc is None:
                    continue
                meta = node.jsz().get("meta_cluster")
                if not isinstance(meta, dict) or not meta.get("leader"):
                    return False
        except OSError:
            return False
        return True

    def stop(self) -> None:
        for node in self.nodes:
            node.kill9()
