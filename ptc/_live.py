"""Live output: a run's printed lines as ``tool/ptc-log`` events, bounded on the host.

The worker's log frames reach the host as the program prints (``Runtime.run``'s
``on_log``); each line becomes an event at once, so an agent's user (or an MCP
client, through the server's notifications) sees a long run progress. A
program can print far faster than anyone reads, and every event costs the
sink a call: so each event's text is capped, and a token bucket per run lets a
burst of lines through and then a steady rate. Lines over the rate are only
counted; one last event says how many. The run's result is untouched: it
keeps every line, whatever was shown live.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from time import monotonic

from ._bridge import Publish
from ._events import log_dropped_event, log_event

__all__ = ["LiveLog", "LiveLogs"]


@dataclass(frozen=True, slots=True, kw_only=True)
class LiveLogs:
    """How many of a run's printed lines become ``tool/ptc-log`` events, and how big.

    Attributes:
        burst: lines a run may send at once (the token bucket's size).
        rate: lines per second after that (the bucket's refill); ``0`` sends
            only the first ``burst`` lines.
        max_chars: characters of a line an event carries; a longer one is cut
            to this many, ending in ``…`` (and the event says ``truncated``).
    """

    burst: int = 50
    rate: float = 20.0
    max_chars: int = 2000

    def problem(self) -> str | None:
        """What is wrong with these settings, or ``None``."""
        if isinstance(self.burst, bool) or not isinstance(self.burst, int) or self.burst < 1:
            return f"LiveLogs.burst must be a positive integer, got {self.burst!r}"
        if (
            isinstance(self.rate, bool)
            or not isinstance(self.rate, int | float)
            or not math.isfinite(self.rate)
            or self.rate < 0
        ):
            return (
                f"LiveLogs.rate must be a non-negative number (lines a second), got {self.rate!r}"
            )
        if (
            isinstance(self.max_chars, bool)
            or not isinstance(self.max_chars, int)
            or self.max_chars < 2
        ):
            return f"LiveLogs.max_chars must be an integer of at least 2, got {self.max_chars!r}"
        return None


class LiveLog:
    """One run's ``on_log``: publishes each line it lets through, counts the rest.

    Called on the event loop, synchronously, by the runtime; :meth:`close`
    (when the run ended) publishes the count of lines dropped, if any, and
    ignores any line after it.
    """

    __slots__ = (
        "_burst",
        "_call_id",
        "_closed",
        "_last",
        "_max_chars",
        "_publish",
        "_rate",
        "_tokens",
        "dropped",
    )

    def __init__(self, publish: Publish, call_id: str, settings: LiveLogs) -> None:
        self._publish = publish
        self._call_id = call_id
        self._burst = float(settings.burst)
        self._rate = float(settings.rate)
        self._max_chars = settings.max_chars
        self._tokens = self._burst
        self._last = monotonic()
        self._closed = False
        self.dropped = 0

    def __call__(self, line: str) -> None:
        if self._closed:
            return
        now = monotonic()
        tokens = min(self._burst, self._tokens + (now - self._last) * self._rate)
        self._last = now
        if tokens < 1.0:
            self._tokens = tokens
            self.dropped += 1
            return
        self._tokens = tokens - 1.0
        self._publish(log_event(self._call_id, line, self._max_chars))

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self.dropped:
            self._publish(log_dropped_event(self._call_id, self.dropped))
