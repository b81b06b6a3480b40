"""Logs in one format, whoever writes them: JSON lines on stderr for
journald and any program reading them, a short readable line on a
terminal. structlog loggers (the daemon, the archiver) and the standard
library's (the MQTT output, the board, paho) go through the same
renderer, so a process never mixes plain lines with JSON ones.

On a terminal a line reads ``[log] 22:10:43 warning  signing key made
(key_id=1a37b0c542d31bdd, path=./var/signing.key)``: the prefix sets it
apart from ``run``'s line per coup on the same screen, the time is local
and short, and nothing is coloured (``make demo`` interleaves both)."""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import MutableMapping
from typing import Any, TextIO

import structlog

from controller.textsafe import visible

#: The keys a terminal line shows in its head, not among the fields.
_HEAD = ("event", "level", "timestamp", "logger")


def _terminal_line(_logger: Any, _name: str, event: MutableMapping[str, Any]) -> str:
    """``[log] HH:MM:SS level  message (key=value, ...)``, one line."""
    message = str(event.get("event", ""))
    level = str(event.get("level", "info"))
    fields = [f"{k}={v}" for k, v in event.items() if k not in _HEAD and k != "exception"]
    tail = f" ({', '.join(fields)})" if fields else ""
    line = f"[log] {time.strftime('%H:%M:%S')} {level:<8} {message}{tail}"
    exc = event.get("exception")
    if exc:
        line += f" | {str(exc).strip().splitlines()[-1]}"  # the full traceback goes to journald
    return visible(line)


def _renderer(stream: TextIO) -> structlog.types.Processor:
    if stream.isatty():
        return _terminal_line
    return structlog.processors.JSONRenderer()


def setup(level: str = "info", stream: TextIO | None = None) -> None:
    """Configure structlog and the standard library's logging alike, to
    ``stream`` (stderr): JSON lines, or readable lines on a terminal."""
    out = stream if stream is not None else sys.stderr
    lvl = getattr(logging, level.upper(), logging.INFO)
    renderer = _renderer(out)
    shared: list[structlog.types.Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    structlog.configure(
        processors=[*shared, structlog.processors.format_exc_info, renderer],
        wrapper_class=structlog.make_filtering_bound_logger(lvl),
        logger_factory=structlog.PrintLoggerFactory(file=out),
        cache_logger_on_first_use=True,
    )
    # The standard library's records (``log.warning("mqtt: %s", ...)``):
    # rendered by the same renderer, with the logger's name as a field.
    handler = logging.StreamHandler(out)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=[*shared, structlog.stdlib.add_logger_name],
            processors=[
                structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                structlog.processors.format_exc_info,
                renderer,
            ],
        )
    )
    root = logging.getLogger()
    for old in list(root.handlers):
        if getattr(old, "_shoe_controller", False):
            root.removeHandler(old)
    handler._shoe_controller = True  # type: ignore[attr-defined]
    root.addHandler(handler)
    root.setLevel(lvl)
    # paho's own logger speaks only through on_log (unset): nothing to quiet
