"""Optional Prometheus endpoint (``metrics: host:port``): cards, frames
dropped by reason, coups, settled coups corrected by a supervisor, misdeals
by code, journal backlog, broker link."""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge

from controller.errors import RuntimeFailure
from controller.metrics_http import MetricsServer, build_info


class Metrics:
    def __init__(self, addr: tuple[str, int]) -> None:
        self.registry = reg = CollectorRegistry()
        build_info(reg, "table")
        self.cards = Counter("shoe_controller_cards_total", "Cards read from the shoe", registry=reg)
        self.coups = Counter(
            "shoe_controller_coups_total", "Coups finished, by outcome", ["outcome"], registry=reg
        )
        self.corrections = Counter(
            "shoe_controller_coups_corrected_total",
            "Corrections of settled coups by a supervisor (coup.corrected)",
            registry=reg,
        )
        self.misdeals = Counter(
            "shoe_controller_misdeals_total", "Dealing errors detected, by code", ["code"], registry=reg
        )
        self.dropped = Gauge(
            "shoe_controller_frames_dropped",
            "Bytes or frames dropped by the decoder, by reason",
            ["reason"],
            registry=reg,
        )
        self.backlog = Gauge(
            "shoe_controller_journal_backlog",
            "Journalled events not yet delivered, by output",
            ["output"],
            registry=reg,
        )
        self.broker = Gauge(
            "shoe_controller_broker_connected", "1 when the MQTT broker connection is up", registry=reg
        )
        self.archive_mark = Gauge(
            "shoe_controller_archive_mark",
            "The seq up to which the floor archive confirmed this table's events",
            registry=reg,
        )
        self.marks_ignored = Gauge(
            "shoe_controller_archive_marks_ignored",
            "Archive marks ignored since start (malformed, another journal's, from the future)",
            registry=reg,
        )
        self.reoffered = Gauge(
            "shoe_controller_reoffered_events",
            "Events re-offered above the archive's mark since start",
            registry=reg,
        )
        self.output_up = Gauge(
            "shoe_controller_output_up",
            "1 while an output delivers, 0 while it fails (and is retried)",
            ["output"],
            registry=reg,
        )
        self.output_errors = Counter(
            "shoe_controller_output_errors",
            "Failed attempts of an output (open, reopen, write)",
            ["output"],
            registry=reg,
        )
        self._output_errors: dict[str, int] = {}
        try:
            self.server = MetricsServer(addr, reg)
        except OSError as exc:  # in use, not an address of this host, a privileged port
            raise RuntimeFailure(
                f"metrics: cannot listen on {addr[0]}:{addr[1]}: {exc.strerror or exc}"
            ) from None

    def close(self) -> None:
        self.server.close()

    def observe(self, events: list[dict[str, Any]], decoder: Any, daemon: Any) -> None:
        for e in events:
            t = e["type"]
            if t == "card":
                self.cards.inc()
            elif t == "coup.result":
                self.coups.labels("settled").inc()
            elif t == "coup.void":
                self.coups.labels("void").inc()
            elif t == "coup.corrected":
                # one per correction (a coup corrected twice counts twice);
                # shoe_controller_coups_total counted the coup once, when it settled
                self.corrections.inc()
            elif t == "misdeal" and e["action"] != "corrected":
                self.misdeals.labels(e["code"]).inc()
        self.decoder_stats(decoder)

    def decoder_stats(self, decoder: Any) -> None:
        """Bytes and frames the decoder dropped, by reason: called after
        every read whether or not it made events."""
        for reason, n in getattr(decoder, "stats", {}).items():
            if reason != "frames":
                self.dropped.labels(reason).set(n)

    def output(self, name: str, up: bool, errors: int) -> None:
        self.output_up.labels(name).set(1 if up else 0)
        seen = self._output_errors.get(name, 0)
        if errors > seen:
            self.output_errors.labels(name).inc(errors - seen)
        self._output_errors[name] = errors

    def journal_backlog(self, journal: Any, mqtt: Any) -> None:
        for name in journal.outputs():
            self.backlog.labels(name).set(journal.backlog(name))
        if mqtt is not None:
            self.broker.set(1 if mqtt.connected else 0)
            self.archive_mark.set(mqtt.archive_mark)
            self.marks_ignored.set(mqtt.marks_ignored)
            self.reoffered.set(mqtt.reoffered)
