"""``shoe-controller replay FILE...``: captures to JSON lines on stdout, or
with ``--out mqtt -c config.yaml`` to the broker of the config's
``outputs.mqtt`` (``controller.replay_mqtt``): marked as replayed, one run
per file (``controller.replay.mark_replayed``), and refused for a table
whose retained status says its controller is online unless
``--force-live-table``. JSON lines on stdout are the events as the engine
makes them, unmarked: the same file always gives the same lines; on a
terminal (unless ``--json``) a line per coup instead, as ``run`` shows."""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from collections.abc import Iterable
from typing import Any

from controller.config import load_client_config
from controller.errors import UsageError
from controller.events import dumps
from controller.replay import (
    ReplayOptions,
    ReplayStats,
    mark_replayed,
    new_run,
    replay_events,
    replay_source,
    settings_for,
    summary,
)
from controller.shoelog import Record, open_capture
from controller.textsafe import visible

#: The longest --mqtt-timeout: a broker that acknowledges nothing for ten
#: minutes is not coming back within one replay.
MAX_MQTT_TIMEOUT_S = 600.0


def run(args: argparse.Namespace) -> int:
    publisher = _publisher(args)
    opts = ReplayOptions(
        profile=args.profile,
        decks=args.decks,
        table=args.table,
        protocol=args.protocol,
        odds=args.odds,
        roads=args.roads,
    )
    for path in args.files:
        open_capture(path).close()  # every file readable before the first event
    if publisher is not None and not args.force_live_table:
        _refuse_live_tables(publisher.cfg, [settings_for(path, opts)["table"] for path in args.files])
    show_progress = sys.stderr.isatty() and not args.no_progress
    # a person at a terminal reads a line per coup, as run shows it
    # (controller.outputs.text); a program (a pipe, a file) the JSON lines
    lines = None
    if publisher is None and not args.json and sys.stdout.isatty():
        from controller.outputs.text import Winners

        lines = Winners()
    for path in args.files:
        _replay_file(path, opts, publisher, lines, show_progress=show_progress, realtime=args.realtime)
    sys.stdout.flush()
    return 0


def _publisher(args: argparse.Namespace) -> Any:
    """The broker's publisher for ``--out mqtt`` (None for jsonl), its
    options checked: -c and --force-live-table only go with it."""
    if args.out == "mqtt":
        if not args.config:
            raise UsageError("--out mqtt needs -c config.yaml with the broker's outputs.mqtt")
        if not (math.isfinite(args.mqtt_timeout) and 0 < args.mqtt_timeout <= MAX_MQTT_TIMEOUT_S):
            raise UsageError(f"--mqtt-timeout must be above 0 and at most {MAX_MQTT_TIMEOUT_S:g} seconds")
        cfg = load_client_config(args.config)
        if cfg.outputs.mqtt is None:
            raise UsageError(f"{args.config}: --out mqtt needs outputs.mqtt (the broker)")
        from controller.replay_mqtt import MqttReplay

        return MqttReplay(cfg.outputs.mqtt, stall_timeout=args.mqtt_timeout)
    if args.config:
        raise UsageError("-c is only for --out mqtt (the broker's settings)")
    if args.force_live_table:
        raise UsageError("--force-live-table is only for --out mqtt")
    return None


def _replay_file(
    path: str, opts: ReplayOptions, publisher: Any, lines: Any, *, show_progress: bool, realtime: bool
) -> None:
    """One capture replayed to the broker, or as lines or JSON on stdout,
    with its summary on stderr."""
    stats = ReplayStats()
    bar = None
    pacer = None
    if show_progress:
        from tqdm import tqdm

        bar = tqdm(
            total=os.path.getsize(path),
            unit="B",
            unit_scale=True,
            desc=os.path.basename(path),
            file=sys.stderr,
        )
    if realtime:
        pacer = _Pacer()

    def on_record(rec: Record, bar=bar, pacer=pacer) -> None:  # type: ignore[no-untyped-def]
        if pacer is not None:
            pacer.wait_until(rec.t)
        if bar is not None:
            bar.update(len(rec.data) * 2 + 20)

    # without a bar or a pacer, no callback: replay_events then decodes
    # records in batches (faster), which a pacer per record cannot allow
    paced = bar is not None or pacer is not None
    events = replay_events(path, opts, stats=stats, on_record=on_record if paced else None)
    published = None
    if publisher is not None:
        run_id = new_run()
        marked = mark_replayed(events, run_id, replay_source(path))
        published = publisher.publish(marked, flush_each=pacer is not None, run=run_id)
    else:
        _write_events(events, lines, flush_each=pacer is not None)
    if bar is not None:
        bar.close()
    print(visible(summary(path, stats)), file=sys.stderr)
    if published is not None:
        print(published, file=sys.stderr)


def _write_events(events: Iterable[dict[str, Any]], lines: Any, *, flush_each: bool) -> None:
    """On stdout: a line per coup (``lines``, a ``Winners``) or, when None,
    the JSON lines; each flushed when paced."""
    out = sys.stdout
    write = out.write
    if lines is not None:
        for event in events:
            line = lines.render(event)
            if line is not None:
                write(line)
                write("\n")
                if flush_each:
                    out.flush()
    else:
        for event in events:
            write(dumps(event))
            write("\n")
            if flush_each:
                out.flush()


def _refuse_live_tables(cfg: Any, tables: list[str]) -> None:
    """One line, exit 2, when a table's retained status says its
    controller is online: a replay must not speak as a live table."""
    from controller.replay_mqtt import table_status

    for table in dict.fromkeys(tables):
        status = table_status(cfg, table)
        if status == "online":
            raise UsageError(
                f"table {table} has a controller online (retained {cfg.topic_prefix}/{table}/status"
                f" at {cfg.host}:{cfg.port}): a replay is not published onto a live table's topics;"
                " use --table (a table no controller runs) or another topic_prefix, or"
                " --force-live-table to publish there anyway (as replayed events, archived apart)"
            )
        if status is None:
            from controller.replay_mqtt import STATUS_WAIT_S

            said = f"no retained status within {STATUS_WAIT_S:g} s: no controller online there"
        else:
            said = f"its retained status is {status!r}: no controller online there"
        print(visible(f"replay: table {table}: {said}"), file=sys.stderr)


class _Pacer:
    """Sleeps so that records come out at the pace they were captured."""

    def __init__(self) -> None:
        self.t0: float | None = None
        self.wall0 = 0.0

    def wait_until(self, t: float) -> None:
        if self.t0 is None:
            self.t0, self.wall0 = t, time.monotonic()
            return
        delay = (t - self.t0) - (time.monotonic() - self.wall0)
        if delay > 0:
            time.sleep(delay)
