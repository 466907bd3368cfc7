"""What became of the requests the demo sent: every outcome
for the report, and the recent ones for the ticks."""

from __future__ import annotations

from collections import deque
from typing import Final

from lab.demo.summary import quantile_of
from lab.records import RequestRecord

# Window of finished requests behind the live TPOT/TTFT p90 (emulated seconds).
LATENCY_WINDOW: Final = 30.0


class RequestLog:
    """Outcomes as they happen; counts since the last `take_counts` and a window of recent latencies."""

    def __init__(self, window: float = LATENCY_WINDOW) -> None:
        self.window = window
        self.records: list[RequestRecord] = []
        self._sent = 0
        self._completed = 0
        # (finished at, TTFT, TPOT) of recent completed requests; either latency may be unknown.
        self._recent: deque[tuple[float, float | None, float | None]] = deque()

    def sent(self) -> None:
        """One request left for the Service."""
        self._sent += 1

    def record(self, record: RequestRecord, *, at: float) -> None:
        """A request's fate, known at emulated time `at`."""
        self.records.append(record)
        if record.outcome == "ok":
            self._completed += 1
            self._recent.append((at, record.ttft, record.tpot))

    def take_counts(self) -> tuple[int, int]:
        """Requests sent and completed since the previous call."""
        counts = self._sent, self._completed
        self._sent = self._completed = 0
        return counts

    def recent_p90(self, now: float) -> tuple[float | None, float | None]:
        """TTFT and TPOT p90 over requests that finished in the window before `now`; `None` without any."""
        self._forget(now)
        return (
            quantile_of([ttft for _, ttft, _ in self._recent if ttft is not None], 0.9),
            quantile_of([tpot for _, _, tpot in self._recent if tpot is not None], 0.9),
        )

    def recent_tpot_mean(self, now: float) -> float | None:
        """Mean per-request TPOT over requests that finished in the window before `now`, the statistic the
        adapter's `vllm_tpot_seconds` serves (`rate(_sum) / rate(_count)`); `None` without any."""
        self._forget(now)
        tpots = [tpot for _, _, tpot in self._recent if tpot is not None]
        return sum(tpots) / len(tpots) if tpots else None

    def _forget(self, now: float) -> None:
        while self._recent and self._recent[0][0] < now - self.window:
            self._recent.popleft()
