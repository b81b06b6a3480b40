"""``python -m benchmarks.trace_daemon run -c CONFIG``: the daemon, with the
card's path through it timed (``time.perf_counter_ns``, the same clock as
the benchmark's, CLOCK_MONOTONIC), for ``benchmarks.bench_latency --trace``.

Nothing in the project imports this: it wraps the daemon's, the journal's
and the MQTT output's methods from outside, records a timestamp per stage
for every input that produced a ``card`` event (keyed by the card event's
seq), and writes them as JSON to ``$SHOE_TRACE`` at exit. A wrapper costs
about a microsecond; the figures it gives are the stages' shares, not a
replacement for the benchmark's end-to-end numbers.
"""

from __future__ import annotations

import atexit
import gc
import json
import os
import re
import sys
import threading
from collections import defaultdict
from time import perf_counter_ns as now
from typing import Any

import controller.daemon as daemon_mod
import controller.heap as heap_mod
import controller.outputs.mqtt as mqtt_mod
from controller.journal import Journal

#: seq of a card event -> stage -> ns
MARKS: dict[int, dict[str, int]] = defaultdict(dict)
#: other per-input costs: name -> list of ns durations
COSTS: dict[str, list[int]] = defaultdict(list)
#: the collector's passes: (start ns, end ns, generation)
GC: list[tuple[int, int, int]] = []
#: objects the collector tracks (walks) and holds frozen, at exit
HEAP: dict[str, int] = {}
#: what the daemon's loop did, in order: (what, start ns, end ns); to see
#: what a card that waited to be read waited behind
LOOP: list[tuple[str, int, int]] = []
#: the journal's checkpoints ahead (its own thread): (start ns, end ns)
CHECKPOINTS: list[tuple[int, int]] = []
_local = threading.local()
_SEQ = re.compile(rb'"seq":(\d+)')


def _wrap(cls: Any, name: str, before: Any = None, after: Any = None, *, cost: bool = True) -> None:
    """Time each call of ``cls.name``: under ``COSTS`` (``cost``), and for
    ``after(self, args, kwargs, result, t0, t1)``."""
    orig = getattr(cls, name)

    def wrapper(self: Any, *a: Any, **kw: Any) -> Any:
        if before is not None:
            before(self, a, kw)
        t0 = now()
        try:
            result = orig(self, *a, **kw)
        finally:
            t1 = now()
            if cost:
                COSTS[f"{cls.__name__}.{name}"].append(t1 - t0)
        if after is not None:
            after(self, a, kw, result, t0, t1)
        return result

    setattr(cls, name, wrapper)


def install() -> None:
    D = daemon_mod.Daemon

    orig_input = D._input

    def _input(self: Any, t: float, kind: str, data: bytes, parsed: Any = None) -> None:
        _local.card = None
        _local.t_in = now()
        orig_input(self, t, kind, data, parsed)
        seq = getattr(_local, "card", None)
        if seq is not None:
            MARKS[seq]["input_done"] = now()
        _local.card = None

    D._input = _input  # type: ignore[method-assign]

    orig_apply = D._apply_input

    def _apply(self: Any, t: float, kind: str, data: bytes, parsed: Any = None) -> Any:
        t0 = now()
        events = orig_apply(self, t, kind, data, parsed)
        t1 = now()
        for e in events:
            if e["type"] == "card" and self._live:
                _local.card = e["seq"]
                m = MARKS[e["seq"]]
                m["read"] = getattr(_local, "t_read", t0)
                m["input"] = getattr(_local, "t_in", t0)
                m["applied"] = t1
        return events

    D._apply_input = _apply  # type: ignore[method-assign]

    def mark(stage: str) -> Any:
        def after(self: Any, a: Any, kw: Any, result: Any, t0: int, t1: int) -> None:
            seq = getattr(_local, "card", None)
            if seq is not None and stage not in MARKS[seq]:
                MARKS[seq][stage] = t1

        return after

    class TimedLock:
        """A lock (the journal's RLock, the MQTT output's send lock) that
        times how long each acquire waits, under ``COSTS[f"{what} wait
        (thread)"]``."""

        def __init__(self, lock: Any, what: str) -> None:
            self._lock = lock
            self._what = what

        def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
            t0 = now()
            got: bool = self._lock.acquire(blocking, timeout)
            COSTS[f"{self._what} wait ({threading.current_thread().name})"].append(now() - t0)
            return got

        def release(self) -> None:
            self._lock.release()

        def __enter__(self) -> None:
            self.acquire()

        def __exit__(self, *exc: object) -> None:
            self.release()

    orig_init = Journal.__init__

    def init(self: Any, *a: Any, **kw: Any) -> None:
        orig_init(self, *a, **kw)
        self._lock = TimedLock(threading.RLock(), "journal lock")

    Journal.__init__ = init  # type: ignore[method-assign]

    orig_tx = Journal._transaction

    import contextlib

    @contextlib.contextmanager
    def tx(self: Any, *, durable: bool = True) -> Any:
        t0 = now()
        with orig_tx(self, durable=durable) as db:
            t1 = now()
            yield db
            t2 = now()
        t3 = now()
        kind = "durable" if durable else "relaxed"
        COSTS[f"tx {kind}: begin"].append(t1 - t0)
        COSTS[f"tx {kind}: body"].append(t2 - t1)
        COSTS[f"tx {kind}: commit"].append(t3 - t2)

    Journal._transaction = tx  # type: ignore[method-assign]
    _wrap(Journal, "_reserve")
    _wrap(Journal, "_committed")
    _wrap(Journal, "append_input", after=mark("committed"))
    _wrap(D, "_delivered", after=mark("handed"))
    _wrap(D, "_commit")
    _wrap(D, "_between_commits")
    _wrap(Journal, "append_events")
    _wrap(Journal, "set_meta")
    _wrap(Journal, "mark_delivered")
    _wrap(Journal, "pending")
    _wrap(D, "_checkpoint")
    _wrap(D, "_pump")

    def on_loop(cls: Any, name: str, what: Any = None) -> None:
        """Record each call of ``cls.name`` made by the main thread in LOOP."""

        def record(self: Any, a: Any, kw: Any, result: Any, t0: int, t1: int) -> None:
            if threading.current_thread() is threading.main_thread():
                LOOP.append((what(result) if what else name, t0, t1))

        _wrap(cls, name, after=record, cost=False)

    on_loop(D, "_publish_durable")
    on_loop(D, "_store_unstored")
    on_loop(D, "_idle_step", lambda did: "_idle_step" if did else "_idle_step (nothing)")
    on_loop(D, "_input")
    on_loop(D, "_apply_input")
    on_loop(D, "_drain_analytics")
    on_loop(Journal, "append_input")
    on_loop(daemon_mod.Syncer, "wait", lambda done: "Syncer.wait (done)" if done else "Syncer.wait")

    import controller.journal as journal_mod

    class TimedConnection:
        """The checkpoint thread's connection, each statement timed."""

        def __init__(self, db: Any) -> None:
            self._db = db

        def execute(self, sql: str, *a: Any) -> Any:
            t0 = now()
            try:
                return self._db.execute(sql, *a)
            finally:
                if "wal_checkpoint" in sql:
                    CHECKPOINTS.append((t0, now()))

        def close(self) -> None:
            self._db.close()

    orig_ckpt_init = journal_mod._Checkpointer.__init__

    def ckpt_init(self: Any, path: str) -> None:
        orig_ckpt_init(self, path)
        self._db = TimedConnection(self._db)

    journal_mod._Checkpointer.__init__ = ckpt_init  # type: ignore[method-assign]

    from controller.engine import Engine

    _wrap(Engine, "drain_analytics")
    _wrap(Engine, "snapshot")

    from drivers.serial import SerialDriver

    orig_read = SerialDriver.read

    def read(self: Any, timeout: float) -> Any:
        t0 = now()
        item = orig_read(self, timeout)
        _local.t_read = now()
        LOOP.append(
            ("read" if item is not None else f"read {timeout * 1e3:.1f} ms: nothing", t0, _local.t_read)
        )
        return item

    SerialDriver.read = read  # type: ignore[method-assign]

    M = mqtt_mod.MqttOutput
    orig_fill = M._fill

    def _fill(self: Any) -> None:
        _local.fill = now()
        orig_fill(self)

    M._fill = _fill  # type: ignore[method-assign]

    def start(self: Any) -> None:
        self._send_lock = TimedLock(threading.Lock(), "mqtt send lock")
        orig_start(self)
        client = self._client
        orig_publish = client.publish

        def publish(topic: str, payload: Any = None, qos: int = 0, retain: bool = False, **kw: Any) -> Any:
            t0 = now()
            info = orig_publish(topic, payload, qos, retain, **kw)
            if topic.endswith("/card") and isinstance(payload, str):
                m = _SEQ.search(payload.encode())
                if m:
                    marks = MARKS[int(m.group(1))]
                    marks["sender_fill"] = getattr(_local, "fill", t0)
                    marks["publish_call"] = t0
                    marks["publish_ret"] = now()
            return info

        client.publish = publish
        orig_send = client._sock_send

        def sock_send(buf: bytes) -> int:
            t0 = now()
            n: int = orig_send(buf)
            b = bytes(buf)
            if b'"type":"card"' in b:
                m = _SEQ.search(b)
                if m:
                    MARKS[int(m.group(1))].setdefault("sock_send", t0)
            return n

        client._sock_send = sock_send

    orig_start = M.start
    M.start = start  # type: ignore[method-assign]

    # The collector's pauses, per generation and thread: a collection runs
    # in whichever thread allocates past the threshold, the loop's included.
    gc_start: dict[int, int] = {}

    def gc_timer(phase: str, info: dict[str, Any]) -> None:
        ident = threading.get_ident()
        if phase == "start":
            gc_start[ident] = now()
        elif ident in gc_start:
            t0, t1 = gc_start.pop(ident), now()
            COSTS[f"gc gen {info['generation']} ({threading.current_thread().name})"].append(t1 - t0)
            GC.append((t0, t1, info["generation"]))

    gc.callbacks.append(gc_timer)
    orig_release = heap_mod.release

    def release() -> None:
        # the daemon is done dealing: what a full collection costs by now,
        # and how many objects it walks and leaves frozen (controller.heap)
        HEAP["tracked"] = len(gc.get_objects())
        HEAP["frozen"] = gc.get_freeze_count()
        t0 = now()
        gc.collect()
        COSTS["gc: one full collection at the stop"].append(now() - t0)
        orig_release()

    heap_mod.release = release

    def dump() -> None:
        path = os.environ.get("SHOE_TRACE")
        if path:
            with open(path, "w") as f:
                json.dump(
                    {
                        "marks": MARKS,
                        "costs": COSTS,
                        "gc": GC,
                        "heap": HEAP,
                        "loop": LOOP,
                        "checkpoints": CHECKPOINTS,
                    },
                    f,
                )

    atexit.register(dump)


if __name__ == "__main__":
    install()
    from controller.cli import main

    sys.exit(main(sys.argv[1:]))
