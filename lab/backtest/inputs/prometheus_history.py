"""Traffic from a Prometheus: range queries over vLLM's own series, with `prometheus-api-client`.

vLLM does not count arrivals; it counts what finished. What arrived in a step is what finished in it
plus what it added to the fleet's in-flight requests (running + waiting), plus what the server
refused (`vllm:admission_rejections_total`):

    arrivals[i] = Δfinished[i] + (inflight[i] - inflight[i-1]) + Δrejected[i]

Counters are read with `increase(...[step])`, so counter resets and extrapolation are Prometheus's
own; gauges with `last_over_time(...[step])`, so a scrape gap stays a gap instead of being bridged by
the five-minute lookback. A step where a series has no sample, or where no pod has its usual number
of samples (the edge of an outage), is NaN: reported as a gap, never zero.
Token shapes are Δtokens / Δfinished from the token counters.

The client is synchronous (`requests`): every query runs in a worker thread (`asyncio.to_thread`),
never on the event loop, and the queries of one read run concurrently.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

import requests
from prometheus_api_client.exceptions import PrometheusApiClientException
from prometheus_api_client.prometheus_connect import PrometheusConnect
from urllib3.util.retry import Retry

from adapter.errors import AdapterError
from adapter.vocabulary import selectors
from lab.backtest.history import History, HistoryError

# The series that prove a vLLM server reported in the range (vllm-metrics.md §2.1: created at start).
_PRESENCE: Final = "vllm:num_requests_running"


class PrometheusHistoryError(HistoryError):
    """The range cannot be read from this Prometheus; the message names the URL, range or selector."""


@dataclass(frozen=True)
class RangeRequest:
    """What to read: a Prometheus, a time range (Unix seconds), a step and a label selector."""

    url: str
    start: float
    end: float
    step: float = 30.0
    """Seconds per step; at least two scrape intervals, so each `increase` window holds two samples."""
    selector: str = ""
    """Kubernetes label selector text (`model_name=llama`), mapped to PromQL matchers as the adapter does."""
    timeout: float = 30.0

    def __post_init__(self) -> None:
        if not self.end > self.start:
            raise PrometheusHistoryError(
                f"time range {_iso(self.start)} .. {_iso(self.end)} "
                "is empty or inverted: --start must be before --end"
            )
        if not self.step > 0:
            raise PrometheusHistoryError(f"step {self.step!r} must be a positive number of seconds")
        if (self.end - self.start) / self.step < 2:
            raise PrometheusHistoryError(
                f"time range {_iso(self.start)} .. {_iso(self.end)} "
                f"holds fewer than 2 steps of {self.step:g} s"
            )


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).isoformat().replace("+00:00", "Z")


def queries(matchers: str, window: str) -> dict[str, str]:
    """The PromQL of each series, for `matchers` (`{...}` or empty) and a window (`30s`)."""

    def increase(name: str) -> str:
        return f"sum(increase({name}{matchers}[{window}]))"

    def ratio(name: str) -> str:
        return f"{increase(name + '_sum')} / {increase(name + '_count')}"

    finished = increase("vllm:request_success_total")
    return {
        "finished": finished,
        "rejected": increase("vllm:admission_rejections_total"),
        "running": f"sum(last_over_time(vllm:num_requests_running{matchers}[{window}]))",
        "waiting": f"sum(last_over_time(vllm:num_requests_waiting{matchers}[{window}]))",
        "replicas": f"count(group by (instance) (last_over_time({_PRESENCE}{matchers}[{window}])))",
        "samples": f"max(count_over_time({_PRESENCE}{matchers}[{window}]))",
        "kv_usage": (
            f"avg(last_over_time(vllm:kv_cache_usage_perc{matchers}[{window}]) "
            f"or last_over_time(vllm:gpu_cache_usage_perc{matchers}[{window}]))"
        ),
        "ttft_mean": ratio("vllm:time_to_first_token_seconds"),
        "tpot_mean": ratio("vllm:request_time_per_output_token_seconds"),
        "prompt_tokens": f"{increase('vllm:prompt_tokens_total')} / {finished}",
        "output_tokens": f"{increase('vllm:generation_tokens_total')} / {finished}",
    }


class PrometheusReader:
    """Reads one `RangeRequest` into a `History` (see the module docstring for the arithmetic)."""

    def __init__(self, request: RangeRequest) -> None:
        self.request = request
        try:
            parsed = selectors.parse(request.selector)
        except AdapterError as exc:
            raise PrometheusHistoryError(f"selector {request.selector!r} is invalid: {exc}") from exc
        self.selector = parsed
        matchers = parsed.to_promql()
        self.matchers = "{" + ",".join(matchers) + "}" if matchers else ""
        # One retry with a short backoff: the library's default (3 retries, 1 s backoff) spends
        # seconds before reporting a Prometheus that is simply not there.
        retry = Retry(total=1, backoff_factor=0.2, status_forcelist=(429, 502, 503, 504))
        self.client = PrometheusConnect(url=request.url, timeout=math.ceil(request.timeout), retry=retry)

    async def read(self) -> History:
        """Query every series concurrently (each in a thread) and assemble the history."""
        await self._check_presence()
        request = self.request
        # One point more than steps: the first one only gives the in-flight count the range starts with.
        steps = int((request.end - request.start) // request.step) + 1
        window = f"{request.step:g}s"
        named = queries(self.matchers, window)
        results = await asyncio.gather(*(self._range(q, steps) for q in named.values()))
        series = dict(zip(named, results, strict=True))
        return assemble(series, start=request.start, step=request.step, source=self.describe())

    def describe(self) -> str:
        """The source line of the record."""
        r = self.request
        where = f" selector {self.request.selector!r}" if r.selector else ""
        return f"prometheus {r.url} {_iso(r.start)} .. {_iso(r.end)} step {r.step:g}s{where}"

    async def _check_presence(self) -> None:
        """Fail in one line when the range has no vLLM series, or none the selector matches."""
        r = self.request
        span = f"{max(1, math.ceil(r.end - r.start))}s"
        ours = await self._instant(
            f"group by (model_name) (last_over_time({_PRESENCE}{self.matchers}[{span}]))"
        )
        if ours:
            return
        every = await self._instant(f"group by (model_name) (last_over_time({_PRESENCE}[{span}]))")
        where = f"between {_iso(r.start)} and {_iso(r.end)}"
        if not every:
            raise PrometheusHistoryError(f"prometheus {r.url} has no vLLM series ({_PRESENCE}) {where}")
        models = sorted({str(s.get("metric", {}).get("model_name", "?")) for s in every})
        raise PrometheusHistoryError(
            f"selector {r.selector!r} matches no vLLM series {where} (models present: {', '.join(models)})"
        )

    async def _instant(self, promql: str) -> list[dict[str, Any]]:
        def call() -> list[dict[str, Any]]:
            result: list[dict[str, Any]] = self.client.custom_query(promql, params={"time": self.request.end})
            return result

        return await self._guarded(call)

    async def _range(self, promql: str, steps: int) -> list[float]:
        r = self.request
        first = r.start

        def call() -> list[dict[str, Any]]:
            result: list[dict[str, Any]] = self.client.custom_query_range(
                promql,
                start_time=datetime.fromtimestamp(first, UTC),
                end_time=datetime.fromtimestamp(first + (steps - 1) * r.step, UTC),
                step=f"{r.step:g}",
            )
            return result

        matrix = await self._guarded(call)
        values = [math.nan] * steps
        for stream in matrix[:1]:  # every query aggregates to at most one series
            for timestamp, text in stream.get("values", []):
                index = round((float(timestamp) - first) / r.step)
                if 0 <= index < steps:
                    values[index] = float(text)
        return values

    async def _guarded(self, call: Any) -> list[dict[str, Any]]:
        try:
            result: list[dict[str, Any]] = await asyncio.to_thread(call)
        except (requests.RequestException, PrometheusApiClientException, ValueError) as exc:
            raise PrometheusHistoryError(f"unable to query prometheus {self.request.url}: {exc}") from exc
        return result


def _nan_to(value: float, default: float) -> float:
    return default if math.isnan(value) else value


def assemble(series: Mapping[str, Sequence[float]], *, start: float, step: float, source: str) -> History:
    """A `History` from the per-step query results (NaN where Prometheus had nothing)."""
    finished, running, waiting = series["finished"], series["running"], series["waiting"]
    # A step in which no pod has its usual number of samples was scraped only in part (the edge of
    # an outage): its increase() is extrapolated from too little, so it is a gap too.
    counts = sorted(v for v in series["samples"] if not math.isnan(v))
    usual = counts[len(counts) // 2] if counts else math.nan
    partial = [math.isnan(v) or v < usual for v in series["samples"]]
    rejected = series["rejected"]
    # Older servers have no rejection counter at all: then nothing was rejected (not unknown).
    rejections_known = any(not math.isnan(v) for v in rejected)
    arrivals: list[float] = []
    carry = 0.0
    previous: float | None = None
    negative = 0
    for index in range(len(finished)):
        inflight = running[index] + waiting[index]
        if previous is None or math.isnan(finished[index]) or math.isnan(inflight) or partial[index]:
            arrivals.append(math.nan)
            previous = None if math.isnan(inflight) else inflight
            carry = 0.0
            continue
        extra = _nan_to(rejected[index], 0.0) if rejections_known else 0.0
        raw = finished[index] + inflight - previous + extra + carry
        # Extrapolated counters and instant gauges disagree by a fraction of a request; a negative
        # count is carried into the next step so the total over the range is kept.
        if raw < 0:
            negative += 1
        arrivals.append(max(raw, 0.0))
        carry = min(raw, 0.0)
        previous = inflight
    notes = (
        [] if rejections_known else ["no vllm:admission_rejections_total in the range: rejections taken as 0"]
    )
    if negative:
        notes.append(f"{negative} steps recovered a negative arrival count (carried into the next step)")

    def tail(name: str) -> tuple[float, ...]:
        return tuple(series[name][1:])

    # Point i closes step i (its window ends there); point 0 only opens the range.
    return History(
        step=step,
        arrivals=tuple(arrivals[1:]),
        start=start,
        source=source,
        completions=tail("finished"),
        running=tail("running"),
        waiting=tail("waiting"),
        replicas=tail("replicas"),
        kv_usage=tail("kv_usage"),
        ttft_mean=tail("ttft_mean"),
        tpot_mean=tail("tpot_mean"),
        prompt_tokens=tail("prompt_tokens"),
        output_tokens=tail("output_tokens"),
        notes=tuple(notes),
    )


async def read_prometheus(request: RangeRequest) -> History:
    """The history of `request`; raises `PrometheusHistoryError` (a `HistoryError`) in one line."""
    return await PrometheusReader(request).read()
