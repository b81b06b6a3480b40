"""Bounds on supervisor commands between the broker and the engine, so that
no burst of commands can delay reading the device or fill the journal.

* **rate**: a token bucket over every message on ``<prefix>/<table>/cmd``
  (well-formed or not): ``BURST`` at once, then ``RATE_PER_S`` per second.
  A message over the rate is dropped unread, without a reply (a reply per
  dropped message would let a flood make the controller flood back).
* **queue**: at most ``QUEUE_MAX`` parsed commands wait for the main loop;
  one that finds it full is dropped the same way.
* **batch**: the main loop reads the device first and then handles at most
  ``BATCH`` commands before its next read.
* **alerts**: within ``ALERT_WINDOW_S`` the first refused command gets its
  own ``security.alert`` (COMMAND_REJECTED); later refusals and every drop
  are counted and reported in one alert when the window closes.

Thread-safe: ``admit`` and ``offer`` run on the MQTT network thread,
``take`` and ``pop_dropped`` on the main loop.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from controller.commands_schema import Received

BURST = 20
RATE_PER_S = 2.0
QUEUE_MAX = 32
BATCH = 4
ALERT_WINDOW_S = 10.0


class TokenBucket:
    def __init__(self, capacity: float, rate: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.capacity = capacity
        self.rate = rate
        self._clock = clock
        self._tokens = capacity
        self._at = clock()

    def take(self) -> bool:
        now = self._clock()
        self._tokens = min(self.capacity, self._tokens + (now - self._at) * self.rate)
        self._at = now
        if self._tokens >= 1.0:
            self._tokens -= 1.0
            return True
        return False


class CommandInbox:
    """The bounded, rate-limited way from the network thread to the loop."""

    def __init__(
        self,
        *,
        burst: int = BURST,
        rate_per_s: float = RATE_PER_S,
        queue_max: int = QUEUE_MAX,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.queue_max = queue_max
        self._bucket = TokenBucket(burst, rate_per_s, clock)
        self._queue: deque[Received] = deque()
        self._lock = threading.Lock()
        self._dropped = 0  # since the last pop_dropped
        self.admitted = 0  # totals, for metrics and tests
        self.dropped_rate = 0
        self.dropped_full = 0
        self.high_water = 0  # the most commands ever waiting at once

    def admit(self) -> bool:
        """One message arrived on the command topic: may it be read?"""
        with self._lock:
            if self._bucket.take():
                self.admitted += 1
                return True
            self.dropped_rate += 1
            self._dropped += 1
            return False

    def offer(self, cmd: Received) -> None:
        """A parsed command for the main loop (dropped when the queue is full)."""
        with self._lock:
            if len(self._queue) >= self.queue_max:
                self.dropped_full += 1
                self._dropped += 1
                return
            self._queue.append(cmd)
            self.high_water = max(self.high_water, len(self._queue))

    def take(self, n: int) -> list[Received]:
        with self._lock:
            return [self._queue.popleft() for _ in range(min(n, len(self._queue)))]

    def pending(self) -> int:
        with self._lock:
            return len(self._queue)

    def pop_dropped(self) -> int:
        with self._lock:
            n, self._dropped = self._dropped, 0
            return n


@dataclass
class RefusalAlerts:
    """Coalesces refusal alerts: ``refused(now)`` says whether this refusal
    gets an alert of its own (the first in its window); ``due(now)`` returns
    the (refused, dropped) counts to report once the window has closed."""

    window_s: float = ALERT_WINDOW_S
    _start: float | None = None
    _refused: int = 0
    _dropped: int = 0

    def refused(self, now: float) -> bool:
        if self._start is None:
            self._start = now
            return True
        self._refused += 1
        return False

    def dropped(self, now: float, n: int) -> None:
        if n <= 0:
            return
        if self._start is None:
            self._start = now
        self._dropped += n

    def due(self, now: float) -> tuple[int, int] | None:
        if self._start is None or now - self._start < self.window_s:
            return None
        counts = (self._refused, self._dropped)
        self._start, self._refused, self._dropped = None, 0, 0
        return counts if any(counts) else None
