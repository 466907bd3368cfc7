"""A long-step open-loop sweep of a vLLM-compatible server, written apart from `vllm-autoscale profile`.

**What it measures.** For each rate of `--rates`, in order, it offers open-loop Poisson arrivals at
that rate for `--step` (30-60 s: long enough that a queue which grows shows it, where the profiler's
2.5-6 s steps can end before a burst of arrivals has drained) and reports, per step:

* the client's view: requests offered and completed, TTFT p50/p90/p99 (time to the first streamed
  chunk that carries a token), TPOT p50/p90 (`(e2e - TTFT) / (output tokens - 1)` per request), the
  throughput achieved inside the step, and how late the client sent its arrivals;
* the server's view, from its own `/metrics`: TTFT p50/p90 from the delta of the
  `vllm:time_to_first_token_seconds` histogram (interpolated within buckets as Prometheus's
  `histogram_quantile` does), the mean queue time and the mean TPOT/ITL from histogram sums and
  counts, preemptions, and the waiting/running/KV-usage gauges sampled every `--sample-interval`
  with the waiting queue's least-squares slope over the step's second half and over all of it;
* with `--slo-ttft`/`--slo-tpot`, whether the step held the SLO at `--slo-percentile` (client side).

Every request sent in a step counts: a request still queued when the step ends keeps its connection
until it finishes (up to `--drain-timeout`), so the long TTFTs of an overloaded step are measured
rather than dropped; one still unfinished then is an error, and one that never got a token counts
as an infinite TTFT in the percentiles (a percentile that lands on it is written as `null`). The
server's histograms are read when the step's requests are done and the server is idle again, so
their deltas cover exactly the step's requests, as the client's numbers do. The server must have no
other traffic during the sweep.

**Why it is independent of the profiler.** It checks the knee of `vllm-autoscale profile` against
the real engine, so it shares no code with it: it imports nothing from the repository (only the
standard library, aiohttp and numpy), has its own streaming client, SSE reader, Poisson arrivals,
exposition parser and histogram quantile, and times requests on the wall clock of several client
processes (`--processes`, each its own event loop and connection pool, each a Poisson stream at
`rate / processes`: their sum is a Poisson stream at `rate`) so that the client is never the
bottleneck. A bug in the profiler's client or its metric reader cannot bias both. What it shares
with the profiler on purpose is the workload (random prompt token ids, so no prefix-cache hits,
`ignore_eos`, greedy sampling, streaming), so that the two measure the same thing. The output has
the keys of `steps-30s-real.jsonl` (see `shared/data/vllm-0.26.0-h100/README.md`) and more, one JSON
object per step, appended to `--out`.

    python3 bench/sweep_steps.py --url http://127.0.0.1:8000 --model llama-1b-dummy \\
        --rates 30,34,38 --step 60s --gap 5s --prompt-tokens 256 --output-tokens 128 \\
        --processes 4 --slo-ttft 500ms --slo-tpot 50ms --seed 0 --out sweep.jsonl

Bad flags exit with status 2, an unreachable server (or one that does not serve `--model`) with 1.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import multiprocessing
import re
import sys
import time
import traceback
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any, Final, TextIO

import aiohttp
import numpy as np

# Random prompt token ids come from this range: clear of the special and byte tokens at the start of
# common vocabularies, inside every vocabulary of 20k tokens or more.
TOKEN_ID_LOW: Final = 1000
TOKEN_ID_HIGH: Final = 20000
# Seconds between the orders to the client processes and the step's start: every process has its
# arrivals and request bodies ready and waits for the same instant.
_LEAD_SECONDS: Final = 0.5
# Warm-up requests in flight at once.
_WARMUP_CONCURRENCY: Final = 4
# Bound on one scrape of /metrics: a sample that takes longer than this is lost, not waited for.
_SCRAPE_TIMEOUT_SECONDS: Final = 5.0
# Poll interval while waiting for the server to go idle between steps.
_IDLE_POLL_SECONDS: Final = 0.25
_ERROR_EXCERPT: Final = 200
_JSON_HEADERS: Final = {"Content-Type": "application/json"}

# Metric names as the exposition writes them; where vLLM renamed one, the newer name comes first and
# the older (vLLM <= 0.11) is read only when the newer is absent (`shared/vllm-metrics.md` §3).
WAITING: Final = ("vllm:num_requests_waiting",)
RUNNING: Final = ("vllm:num_requests_running",)
KV_USAGE: Final = ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc")
TTFT: Final = ("vllm:time_to_first_token_seconds",)
QUEUE: Final = ("vllm:request_queue_time_seconds",)
TPOT: Final = ("vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds")
PREEMPTIONS: Final = ("vllm:num_preemptions_total",)
FINISHED: Final = ("vllm:request_success_total",)
_GAUGES: Final = (*WAITING, *RUNNING, *KV_USAGE)
_COUNTERS: Final = (*PREEMPTIONS, *FINISHED)
_HISTOGRAMS: Final = (*TTFT, *QUEUE, *TPOT)
WANTED: Final = frozenset(
    [*_GAUGES, *_COUNTERS, *(h + suffix for h in _HISTOGRAMS for suffix in ("_bucket", "_sum", "_count"))]
)


# ---------------------------------------------------------------------------------------------------
# Flags


_DURATION = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*(ms|s|m)\s*$")
_UNITS: Final = {"ms": 0.001, "s": 1.0, "m": 60.0}


def duration(text: str) -> float:
    """Seconds in a duration written with a unit: `500ms`, `30s`, `1.5m`."""
    match = _DURATION.match(text)
    if match is None:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a duration: write a number and a unit, e.g. 500ms, 30s or 2m"
        )
    return float(match[1]) * _UNITS[match[2]]


def positive_duration(text: str) -> float:
    """A duration above zero."""
    seconds = duration(text)
    if seconds <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be longer than zero")
    return seconds


def rate_list(text: str) -> list[float]:
    """Comma-separated request rates (requests per second), each finite and above zero."""
    rates: list[float] = []
    for item in text.split(","):
        try:
            rate = float(item)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{item.strip()!r} in {text!r} is not a number: write rates as 30,34,38"
            ) from None
        if not (math.isfinite(rate) and rate > 0):
            raise argparse.ArgumentTypeError(f"rate {item.strip()!r} must be a finite number above zero")
        rates.append(rate)
    return rates


def _integer(minimum: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"{value} must be at least {minimum}")
        return value

    parse.__name__ = f"integer >= {minimum}"
    return parse


def fraction(text: str) -> float:
    """A number strictly between 0 and 1."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"{value:g} must lie strictly between 0 and 1")
    return value


def http_url(text: str) -> str:
    """An http(s) base URL, without a trailing slash."""
    if not re.match(r"^https?://[^/\s]+", text):
        raise argparse.ArgumentTypeError(f"{text!r} is not an http:// or https:// URL")
    return text.rstrip("/")


def parser() -> argparse.ArgumentParser:
    """The command line (argparse exits with status 2 and names the flag on a bad value)."""
    p = argparse.ArgumentParser(
        prog="sweep_steps.py",
        description="Long-step open-loop rate sweep of a vLLM-compatible server, independent of `profile`.",
    )
    p.add_argument("--url", type=http_url, required=True, help="server base URL, e.g. http://127.0.0.1:8000")
    p.add_argument("--model", required=True, help="served model name (also the model_name label of /metrics)")
    p.add_argument("--rates", type=rate_list, required=True, help="request rates per second, e.g. 30,34,38")
    p.add_argument("--step", type=positive_duration, default=60.0, help="length of each step (default 60s)")
    p.add_argument("--gap", type=duration, default=5.0, help="idle time between steps (default 5s)")
    p.add_argument("--prompt-tokens", type=_integer(1), default=256, help="prompt length (default 256)")
    p.add_argument("--output-tokens", type=_integer(1), default=128, help="output length (default 128)")
    p.add_argument("--processes", type=_integer(1), default=4, help="client processes (default 4)")
    p.add_argument("--seed", type=_integer(0), default=0, help="seed of arrivals and prompts (default 0)")
    p.add_argument(
        "--warmup", type=_integer(0), default=16, help="warm-up requests, 4 at a time (default 16)"
    )
    p.add_argument("--slo-ttft", type=positive_duration, help="TTFT SLO, e.g. 500ms: adds slo_ttft_ok")
    p.add_argument("--slo-tpot", type=positive_duration, help="TPOT SLO, e.g. 50ms: adds slo_tpot_ok")
    p.add_argument(
        "--slo-percentile", type=fraction, default=0.9, help="percentile the SLOs hold at (default 0.9)"
    )
    p.add_argument(
        "--drain-timeout",
        type=positive_duration,
        default=120.0,
        help="how long after a step's end its requests may still finish (default 120s)",
    )
    p.add_argument(
        "--idle-timeout",
        type=positive_duration,
        default=120.0,
        help="how long to wait for the server to run and queue nothing between steps (default 120s)",
    )
    p.add_argument(
        "--sample-interval",
        type=positive_duration,
        default=0.5,
        help="interval of the gauge samples during a step (default 0.5s)",
    )
    p.add_argument("--out", type=Path, required=True, help="JSON lines file the steps are appended to")
    return p


def parse_flags(argv: Sequence[str] | None) -> argparse.Namespace:
    """Flags checked together as well as one by one; any problem exits with status 2."""
    p = parser()
    args = p.parse_args(argv)
    if args.sample_interval > args.step / 4:
        # The waiting slope of the step's second half needs a few samples there.
        p.error(
            f"argument --sample-interval: {args.sample_interval:g}s must be at most a quarter of "
            f"--step ({args.step:g}s), to give the waiting slope samples"
        )
    try:
        with args.out.open("a"):
            pass
    except OSError as error:
        p.error(f"argument --out: cannot append to {str(args.out)!r}: {error.strerror or error}")
    return args


# ---------------------------------------------------------------------------------------------------
# The server's /metrics: a small parser for the text format, and Prometheus's histogram_quantile


_SERIES = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)")
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"')
_UNESCAPE = re.compile(r"\\(.)")

Series = list[tuple[dict[str, str], float]]


def parse_page(text: str, model: str) -> dict[str, Series]:
    """The samples of the families in `WANTED` whose `model_name` is `model`, by name.

    Counters and histograms carry other labels too (`engine` under data parallelism, `finished_reason`,
    `le`): the readers below sum over all of them but `le`."""
    found: dict[str, Series] = {}
    for line in text.splitlines():
        if not line.startswith("vllm:"):
            continue  # comments, and families that are not the engine's
        match = _SERIES.match(line)
        if match is None or match[1] not in WANTED:
            continue
        labels = {
            key: _UNESCAPE.sub(lambda m: "\n" if m[1] == "n" else m[1], value)
            for key, value in _LABEL.findall(match[2] or "")
        }
        if labels.get("model_name") != model:
            continue
        try:
            value = float(match[3])
        except ValueError:
            continue
        found.setdefault(match[1], []).append((labels, value))
    return found


def model_names(text: str) -> set[str]:
    """Every `model_name` label value on a page: what to name when `--model` matches none."""
    return {value for key, value in _LABEL.findall(text) if key == "model_name"}


def _first(page: dict[str, Series], names: Sequence[str], suffix: str = "") -> Series | None:
    """The series of the first of `names` (newest first) the page has."""
    for name in names:
        if name + suffix in page:
            return page[name + suffix]
    return None


def gauge(
    page: dict[str, Series], names: Sequence[str], combine: Callable[[Iterable[float]], float]
) -> float | None:
    """A gauge combined over engines (sum for request counts, max for KV usage), or None if absent."""
    series = _first(page, names)
    return None if not series else combine(v for _labels, v in series)


def counter(page: dict[str, Series], names: Sequence[str]) -> float | None:
    """A counter summed over all its series, or None if absent."""
    series = _first(page, names)
    return None if series is None else sum(v for _labels, v in series)


@dataclass(frozen=True)
class Histogram:
    """Cumulative bucket counts by upper bound (`+Inf` included), with the sum and count."""

    buckets: dict[float, float]
    total: float
    count: float

    def minus(self, earlier: Histogram) -> Histogram | None:
        """The observations made since `earlier`; None if a counter went down (the server restarted)."""
        buckets = {le: c - earlier.buckets.get(le, 0.0) for le, c in self.buckets.items()}
        if any(c < 0 for c in buckets.values()) or self.count < earlier.count:
            return None
        return Histogram(buckets, self.total - earlier.total, self.count - earlier.count)

    def mean(self) -> float | None:
        return self.total / self.count if self.count > 0 else None

    def quantile(self, q: float) -> float | None:
        return histogram_quantile(q, list(self.buckets.items()))


def histogram(page: dict[str, Series], names: Sequence[str]) -> Histogram | None:
    """A histogram summed over engines (`sum by (le)`), or None if absent."""
    for name in names:
        if name + "_bucket" not in page:
            continue
        buckets: dict[float, float] = {}
        for labels, value in page[name + "_bucket"]:
            if "le" in labels:
                le = float(labels["le"])
                buckets[le] = buckets.get(le, 0.0) + value
        total = sum(v for _labels, v in page.get(name + "_sum", []))
        count = sum(v for _labels, v in page.get(name + "_count", []))
        return Histogram(buckets, total, count)
    return None


def histogram_quantile(q: float, buckets: Sequence[tuple[float, float]]) -> float | None:
    """The q-quantile of (upper bound, cumulative count) buckets, interpolated linearly within the
    bucket it falls in, as Prometheus's `histogram_quantile` computes it (`bucketQuantile` in
    promql/quantile.go): the lowest bucket starts at 0 (if its bound is positive); a quantile in the
    `+Inf` bucket is the highest finite bound. None where Prometheus answers NaN: no `+Inf` bucket,
    fewer than two buckets, or no observations."""
    ordered = sorted(buckets)
    if len(ordered) < 2 or not math.isinf(ordered[-1][0]) or math.isnan(q):
        return None
    # Prometheus repairs counts that go down with a rising bound (float noise, scrapes mid-update).
    bounds, counts, highest = [], [], 0.0
    for le, count in ordered:
        highest = max(highest, count)
        bounds.append(le)
        counts.append(highest)
    observations = counts[-1]
    if observations <= 0:
        return None
    if q < 0:
        return -math.inf
    if q > 1:
        return math.inf
    rank = q * observations
    index = next((i for i in range(len(counts) - 1) if counts[i] >= rank), len(counts) - 1)
    if index == len(counts) - 1:
        return bounds[-2]
    if index == 0 and bounds[0] <= 0:
        return bounds[0]
    start, end, in_bucket = 0.0, bounds[index], counts[index]
    if index > 0:
        start = bounds[index - 1]
        in_bucket -= counts[index - 1]
        rank -= counts[index - 1]
    return start + (end - start) * (rank / in_bucket) if in_bucket > 0 else start


@dataclass(frozen=True)
class Counters:
    """The cumulative histograms and counters read at a step's start and end."""

    ttft: Histogram | None
    queue: Histogram | None
    tpot: Histogram | None
    preemptions: float | None
    finished: float | None

    @classmethod
    def read(cls, page: dict[str, Series]) -> Counters:
        return cls(
            histogram(page, TTFT),
            histogram(page, QUEUE),
            histogram(page, TPOT),
            counter(page, PREEMPTIONS),
            counter(page, FINISHED),
        )


@dataclass(frozen=True)
class Sample:
    """One scrape during a step: seconds since the step's start, and the gauges."""

    t: float
    waiting: float
    running: float | None
    kv_usage: float | None


class Metrics:
    """Scrapes the server's `/metrics`, keeping the series of one model."""

    def __init__(self, session: aiohttp.ClientSession, url: str, model: str) -> None:
        self.session = session
        self.endpoint = url + "/metrics"
        self.model = model
        self.timeout = aiohttp.ClientTimeout(total=_SCRAPE_TIMEOUT_SECONDS)

    async def text(self) -> str:
        async with self.session.get(self.endpoint, timeout=self.timeout) as response:
            if response.status != 200:
                raise RuntimeError(f"GET {self.endpoint} answered HTTP {response.status}")
            return await response.text()

    async def page(self) -> dict[str, Series]:
        return parse_page(await self.text(), self.model)

    async def idle(self) -> bool:
        """Whether the server runs and queues nothing for the model."""
        page = await self.page()
        waiting, running = gauge(page, WAITING, sum), gauge(page, RUNNING, sum)
        return (waiting or 0.0) == 0 and (running or 0.0) == 0


# ---------------------------------------------------------------------------------------------------
# The client: one streaming completion, timed


@dataclass(slots=True)
class Timing:
    """One request as its client process saw it, in seconds on the step's clock (0 = the step's
    start). `error` is a short kind (counted), `detail` the first words of what went wrong."""

    scheduled: float
    sent: float | None = None
    first: float | None = None
    done: float | None = None
    tokens: int = 0
    chunks: int = 0
    error: str | None = None
    detail: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None and self.done is not None

    def as_tuple(self) -> tuple[Any, ...]:
        return (
            self.scheduled,
            self.sent,
            self.first,
            self.done,
            self.tokens,
            self.chunks,
            self.error,
            self.detail,
        )


def request_body(model: str, prompt: list[int], output_tokens: int) -> bytes:
    """The `/v1/completions` body: exactly `output_tokens` tokens of greedy decoding, streamed, with
    the usage chunk that says how many tokens were generated."""
    return json.dumps(
        {
            "model": model,
            "prompt": prompt,
            "max_tokens": output_tokens,
            "ignore_eos": True,
            "temperature": 0.0,
            "stream": True,
            "stream_options": {"include_usage": True},
        },
        separators=(",", ":"),
    ).encode()


def _message(text: str) -> str:
    """The `error.message` of an OpenAI-style error body, else the start of the body."""
    try:
        error = json.loads(text)["error"]
        return str(error["message"] if isinstance(error, dict) else error)[:_ERROR_EXCERPT]
    except (ValueError, KeyError, TypeError):
        return text.strip()[:_ERROR_EXCERPT] or "(empty body)"


async def stream_completion(
    session: aiohttp.ClientSession, endpoint: str, body: bytes, timing: Timing, clock: Callable[[], float]
) -> None:
    """Send one streaming completion and fill `timing` as it goes, so that a request cancelled at the
    drain deadline still tells whether its first token had come. Never raises but on cancellation.

    The first token is the first `data:` chunk with a choice: vLLM sends a completions choice only
    when the engine produced tokens, and one whose text is empty (a special token, or bytes of a
    character not yet complete) still is a token; the usage chunk has no choices."""
    timing.sent = clock()
    usage_tokens = token_ids = 0
    done: float | None = None  # when `[DONE]` came: e2e ends there, not when the connection is released
    try:
        async with session.post(endpoint, data=body, headers=_JSON_HEADERS) as response:
            if response.status != 200:
                timing.error, timing.detail = f"HTTP {response.status}", _message(await response.text())
                return
            async for raw in response.content:
                line = raw.strip()
                if not line.startswith(b"data:"):
                    continue  # blank separators, comments, `event:` lines
                data = line[5:].strip()
                if data == b"[DONE]":
                    done = clock()
                    break
                chunk = json.loads(data)
                if not isinstance(chunk, dict):
                    continue
                if "error" in chunk:
                    timing.error, timing.detail = "error in stream", _message(json.dumps(chunk))
                    return
                choices = chunk.get("choices")
                if choices:
                    if timing.first is None:
                        timing.first = clock()
                    timing.chunks += 1
                    for choice in choices:
                        ids = choice.get("token_ids") if isinstance(choice, dict) else None
                        token_ids += len(ids) if isinstance(ids, list) else 0
                usage = chunk.get("usage")
                if isinstance(usage, dict) and isinstance(usage.get("completion_tokens"), int):
                    usage_tokens = usage["completion_tokens"]
    except (aiohttp.ClientError, OSError, TimeoutError, ValueError) as error:
        timing.error, timing.detail = type(error).__name__, str(error)[:_ERROR_EXCERPT]
        return
    if done is None:
        timing.error, timing.detail = "no [DONE]", "the stream ended before `data: [DONE]`"
    elif timing.first is None:
        timing.error, timing.detail = "no token", "the stream ended without any token"
    else:
        timing.done = done
        # The usage chunk counts tokens exactly; a server without it: token ids if it sends them,
        # else one chunk per token (what vLLM sends a client that keeps up).
        timing.tokens = usage_tokens or token_ids or timing.chunks


def _session(timeout: aiohttp.ClientTimeout | None = None) -> aiohttp.ClientSession:
    # No connection limit: an open-loop client must never queue requests of its own (the default pool
    # of 100 would cap what it sends under overload, where hundreds wait in the server). Idle
    # connections close after 2 s, before uvicorn's 5 s keep-alive closes them under a request that
    # reuses one (aiohttp does not retry a POST on a connection the server has just dropped).
    return aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=0, keepalive_timeout=2.0), timeout=timeout
    )


# Connections: no total bound (the drain deadline bounds a request), but a server that accepts no
# connection within 10 s fails the request.
_REQUEST_TIMEOUT: Final = aiohttp.ClientTimeout(total=None, sock_connect=10.0)


# ---------------------------------------------------------------------------------------------------
# Client processes


@dataclass(frozen=True)
class Order:
    """What the parent tells a client process for one step (sent as a tuple: see `as_tuple`)."""

    rate: float
    step_seconds: float
    start_wall: float
    drain_seconds: float

    def as_tuple(self) -> tuple[float, float, float, float]:
        return (self.rate, self.step_seconds, self.start_wall, self.drain_seconds)


def arrivals(
    seed: int, rate: float, process: int, per_process_rate: float, step: float, prompt_tokens: int
) -> tuple[list[float], list[list[int]]]:
    """One process's Poisson arrivals in [0, step) and a fresh random prompt for each.

    Seeded from the seed, the step's rate and the process index, so a run repeats exactly and the
    processes' streams are independent (their sum is then a Poisson stream at the full rate)."""
    rng = np.random.default_rng([seed, round(rate * 1000), process])
    times: list[float] = []
    t = float(rng.exponential(1 / per_process_rate))
    while t < step:
        times.append(t)
        t += float(rng.exponential(1 / per_process_rate))
    prompts: list[list[int]] = rng.integers(
        TOKEN_ID_LOW, TOKEN_ID_HIGH, size=(len(times), prompt_tokens)
    ).tolist()
    return times, prompts


async def client_step(config: dict[str, Any], process: int, order: Order) -> list[Timing]:
    """Send this process's arrivals of one step at their times; wait for them up to the drain
    deadline, then cancel the rest (closing the connection: vLLM aborts the request)."""
    times, prompts = arrivals(
        config["seed"],
        order.rate,
        process,
        order.rate / config["processes"],
        order.step_seconds,
        config["prompt_tokens"],
    )
    endpoint = config["url"] + "/v1/completions"
    bodies = [request_body(config["model"], p, config["output_tokens"]) for p in prompts]
    del prompts
    # The step's clock: the wall-clock start the parent chose, on this process's monotonic clock
    # (time.time is shared by the processes but may be stepped; perf_counter is steady but private).
    origin = time.perf_counter() + (order.start_wall - time.time())

    def clock() -> float:
        return time.perf_counter() - origin

    timings = [Timing(t) for t in times]
    tasks: list[asyncio.Task[None]] = []
    async with _session(_REQUEST_TIMEOUT) as session:
        for timing, body in zip(timings, bodies, strict=True):
            delay = timing.scheduled - clock()
            if delay > 0:
                await asyncio.sleep(delay)
            tasks.append(asyncio.create_task(stream_completion(session, endpoint, body, timing, clock)))
        remaining = order.step_seconds + order.drain_seconds - clock()
        if tasks:
            _done, pending = await asyncio.wait(tasks, timeout=max(0.0, remaining))
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
    for timing in timings:
        if timing.done is None and timing.error is None:
            timing.error = "unfinished"
            timing.detail = f"still running {order.drain_seconds:g}s after the step's end (--drain-timeout)"
    return timings


def _raise_file_limit() -> None:
    """Lift the soft open-files limit to the hard one: one connection per request in flight, and an
    overloaded step keeps hundreds in flight per process."""
    try:
        import resource

        _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    except (ImportError, ValueError, OSError):
        pass  # not on this platform, or not allowed: the default may still do


def client_process(process: int, conn: Connection, config: dict[str, Any]) -> None:
    """A client process: one event loop and HTTP session per step, steps as the parent orders them,
    plain tuples back (spawned processes share no objects)."""
    _raise_file_limit()
    conn.send(("ready",))
    try:
        while True:
            message = conn.recv()
            if message is None:
                return
            order = Order(*message)
            try:
                timings = asyncio.run(client_step(config, process, order))
            except Exception:
                conn.send(("error", traceback.format_exc()))
                continue
            conn.send(("ok", [t.as_tuple() for t in timings]))
    except (KeyboardInterrupt, EOFError, BrokenPipeError):
        return  # the parent is gone or stopping the run


class Clients:
    """The client processes, started once (spawned: a fresh interpreter each, nothing inherited)."""

    def __init__(self, count: int, config: dict[str, Any]) -> None:
        context = multiprocessing.get_context("spawn")
        self.conns: list[Connection] = []
        self.processes: list[multiprocessing.process.BaseProcess] = []
        for index in range(count):
            parent_end, child_end = context.Pipe()
            process = context.Process(
                target=client_process,
                args=(index, child_end, config),
                name=f"sweep-client-{index}",
                daemon=True,
            )
            process.start()
            child_end.close()
            self.conns.append(parent_end)
            self.processes.append(process)

    def wait_ready(self, timeout: float = 120.0) -> None:
        """Block until every process has started (imports done), or fail the sweep."""
        deadline = time.monotonic() + timeout
        for conn in self.conns:
            if not conn.poll(max(0.0, deadline - time.monotonic())):
                raise SweepError(f"a client process did not start within {timeout:g}s")
            try:
                conn.recv()
            except EOFError:
                raise SweepError("a client process exited as it started (its error is above)") from None

    def order(self, order: Order) -> None:
        for conn in self.conns:
            conn.send(order.as_tuple())

    async def results(self) -> list[Timing]:
        """Every process's timings of the step (blocking receives, off the event loop)."""
        loop = asyncio.get_running_loop()
        try:
            replies = await asyncio.gather(*(loop.run_in_executor(None, conn.recv) for conn in self.conns))
        except (EOFError, OSError):
            raise SweepError("a client process exited in the middle of a step") from None
        timings: list[Timing] = []
        for reply in replies:
            if reply[0] != "ok":
                raise SweepError(f"a client process failed:\n{reply[1]}")
            timings.extend(Timing(*row) for row in reply[1])
        return timings

    def close(self) -> None:
        for conn in self.conns:
            with contextlib.suppress(OSError):  # that process has already gone
                conn.send(None)
        for process in self.processes:
            process.join(timeout=5)
            if process.is_alive():
                process.terminate()
                process.join(timeout=5)


# ---------------------------------------------------------------------------------------------------
# Summaries


def percentile(values: Sequence[float], q: float) -> float:
    """The q-quantile with linear interpolation between order statistics (numpy's default), where an
    infinite value (a request without a TTFT) makes any quantile that reaches it infinite."""
    ordered = sorted(values)
    if not ordered:
        return math.nan
    h = (len(ordered) - 1) * q
    lo, hi = math.floor(h), math.ceil(h)
    if math.isinf(ordered[hi]):
        return math.inf
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (h - lo)


def percentile_key(q: float) -> str:
    """`p90` for 0.9, `p99.9` for 0.999."""
    return f"p{round(q * 100, 6):g}"


def slope(samples: Sequence[Sample]) -> float | None:
    """Least-squares slope of the waiting gauge (requests per second), None with fewer than 2 samples."""
    if len(samples) < 2 or len({s.t for s in samples}) < 2:
        return None
    coefficients = np.polyfit([s.t for s in samples], [s.waiting for s in samples], 1)
    return float(coefficients[0])


def _mean(values: Iterable[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return sum(present) / len(present) if present else None


def finite(value: float | None) -> float | None:
    """None for NaN and infinities: JSON has no such numbers."""
    return value if value is not None and math.isfinite(value) else None


def summarise(
    args: argparse.Namespace,
    rate: float,
    timings: Sequence[Timing],
    samples: Sequence[Sample],
    failed_samples: int,
    before: Counters | None,
    after: Counters | None,
) -> dict[str, Any]:
    """The step's JSON object."""
    step = args.step
    ok = [t for t in timings if t.ok]
    ttfts = [t.first - t.sent if t.first is not None and t.sent is not None else math.inf for t in timings]
    tpots = [
        ((t.done or 0.0) - (t.first or 0.0)) / (t.tokens - 1) for t in ok if t.tokens > 1
    ]  # (e2e - TTFT) / (tokens - 1): the send times cancel out
    lags = [t.sent - t.scheduled for t in timings if t.sent is not None]
    completed = sum(1 for t in ok if t.done is not None and t.done <= step)
    second_half = [s for s in samples if s.t >= step / 2]
    kinds = Counter(t.error for t in timings if t.error is not None)
    q = args.slo_percentile
    quantiles = sorted({0.5, 0.9, 0.99, q})

    record: dict[str, Any] = {
        "rate": rate,
        "step_seconds": step,
        "offered": len(timings),
        "ok": len(ok),
        "errors": len(timings) - len(ok),
        "error_kinds": dict(kinds),
        "completed_in_step": completed,
        "achieved_rate": completed / step,
    }
    for quantile in quantiles:
        record[f"client_ttft_{percentile_key(quantile)}"] = finite(percentile(ttfts, quantile))
    for quantile in sorted({0.5, 0.9, q}):
        record[f"client_tpot_{percentile_key(quantile)}"] = finite(percentile(tpots, quantile))
    record["client_e2e_mean"] = _mean([(t.done or 0.0) - (t.sent or 0.0) for t in ok])
    record["client_send_lag_max"] = max(lags) if lags else None

    delta: dict[str, Histogram | None] = {"ttft": None, "queue": None, "tpot": None}
    if before is not None and after is not None:
        for name in delta:
            earlier, later = getattr(before, name), getattr(after, name)
            delta[name] = later.minus(earlier) if earlier is not None and later is not None else None
    ttft_hist, queue_hist, tpot_hist = delta["ttft"], delta["queue"], delta["tpot"]
    record["server_ttft_p50"] = ttft_hist.quantile(0.5) if ttft_hist else None
    record["server_ttft_p90"] = ttft_hist.quantile(0.9) if ttft_hist else None
    record["server_ttft_mean"] = ttft_hist.mean() if ttft_hist else None
    record["server_queue_mean"] = queue_hist.mean() if queue_hist else None
    record["server_tpot_mean"] = tpot_hist.mean() if tpot_hist else None

    def counter_delta(name: str) -> float | None:
        earlier = getattr(before, name) if before is not None else None
        later = getattr(after, name) if after is not None else None
        return later - earlier if earlier is not None and later is not None and later >= earlier else None

    record["preemptions"] = counter_delta("preemptions")
    record["server_finished"] = counter_delta("finished")

    waiting = [s.waiting for s in samples]
    record["samples"] = len(samples)
    record["failed_samples"] = failed_samples
    record["waiting_mean"] = _mean(waiting)
    record["waiting_max"] = max(waiting) if waiting else None
    record["waiting_slope_per_s"] = slope(second_half)
    record["waiting_slope_whole_per_s"] = slope(samples)
    record["running_mean"] = _mean([s.running for s in samples])
    record["kv_usage_mean"] = _mean([s.kv_usage for s in samples])

    key = percentile_key(q)
    if args.slo_ttft is not None:
        value = record[f"client_ttft_{key}"]
        record["slo_ttft_ok"] = value is not None and value <= args.slo_ttft
    if args.slo_tpot is not None:
        value = record[f"client_tpot_{key}"]
        record["slo_tpot_ok"] = value is not None and value <= args.slo_tpot
    record.update(
        model=args.model,
        prompt_tokens=args.prompt_tokens,
        output_tokens=args.output_tokens,
        processes=args.processes,
        seed=args.seed,
    )
    return {k: finite(v) if isinstance(v, float) else v for k, v in record.items()}


def _ms(value: float | None) -> str:
    """Seconds for a person: 2.1ms, 240ms, 3.4s."""
    if value is None:
        return "-"
    return (
        f"{value * 1000:.1f}ms" if value < 0.1 else f"{value * 1000:.0f}ms" if value < 10 else f"{value:.1f}s"
    )


def _num(value: float | None, spec: str = ".1f") -> str:
    return "-" if value is None else format(value, spec)


def describe(record: dict[str, Any], q: float) -> str:
    """One human-readable line for a finished step."""
    key = percentile_key(q)
    slo = [
        f"{name} {'ok' if record[f'slo_{name}_ok'] else 'MISSED'}"
        for name in ("ttft", "tpot")
        if f"slo_{name}_ok" in record
    ]
    return (
        f"rate {record['rate']:g}/s: offered {record['offered']} ok {record['ok']} errors {record['errors']}"
        f" | achieved {_num(record['achieved_rate'])}/s"
        f" | TTFT p50 {_ms(record['client_ttft_p50'])} {key} {_ms(record[f'client_ttft_{key}'])}"
        f" p99 {_ms(record['client_ttft_p99'])} (server p90 {_ms(record['server_ttft_p90'])})"
        f" | TPOT p50 {_ms(record['client_tpot_p50'])} {key} {_ms(record[f'client_tpot_{key}'])}"
        f" (server mean {_ms(record['server_tpot_mean'])})"
        f" | waiting mean {_num(record['waiting_mean'])} max {_num(record['waiting_max'], '.0f')}"
        f" slope {_num(record['waiting_slope_per_s'], '+.2f')}/s"
        f" | running {_num(record['running_mean'])} kv {_num(record['kv_usage_mean'], '.2f')}"
        f" preemptions {_num(record['preemptions'], '.0f')}" + (f" | SLO {', '.join(slo)}" if slo else "")
    )


# ---------------------------------------------------------------------------------------------------
# The sweep


class SweepError(Exception):
    """The sweep cannot start or go on (the server is unreachable, does not serve the model, or a
    client process failed): exit status 1 with the message."""


async def sample_gauges(
    metrics: Metrics, origin: float, step: float, interval: float
) -> tuple[list[Sample], int]:
    """Scrape every `interval` from the step's start to its end; a slow scrape skips the ticks it
    overran. Each sample is dated at the middle of its scrape. Returns the samples and the failures."""
    samples: list[Sample] = []
    failures = 0
    tick = 0
    while True:
        target = origin + tick * interval
        if target - origin > step:
            break
        delay = target - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        before = time.perf_counter()
        try:
            page = await metrics.page()
        except (aiohttp.ClientError, OSError, TimeoutError, RuntimeError):
            failures += 1
        else:
            t = (before + time.perf_counter()) / 2 - origin
            waiting = gauge(page, WAITING, sum)
            if waiting is not None and 0 <= t <= step:
                samples.append(Sample(t, waiting, gauge(page, RUNNING, sum), gauge(page, KV_USAGE, max)))
        tick = max(tick + 1, math.ceil((time.perf_counter() - origin) / interval))
    return samples, failures


async def wait_idle(metrics: Metrics, within: float) -> bool:
    """Wait until the server runs and queues nothing, for at most `within` seconds; whether it did."""
    deadline = time.monotonic() + within
    while True:
        try:
            if await metrics.idle():
                return True
        except (aiohttp.ClientError, OSError, TimeoutError, RuntimeError):
            pass  # a lost scrape: try again until the deadline
        if time.monotonic() >= deadline:
            return False
        await asyncio.sleep(_IDLE_POLL_SECONDS)


async def counters(metrics: Metrics) -> Counters | None:
    try:
        return Counters.read(await metrics.page())
    except (aiohttp.ClientError, OSError, TimeoutError, RuntimeError):
        return None


async def check_server(metrics: Metrics) -> None:
    """The server answers `/metrics` and exposes the engine's gauges for `--model`."""
    try:
        text = await metrics.text()
    except (aiohttp.ClientError, OSError, TimeoutError, RuntimeError) as error:
        raise SweepError(f"cannot reach {metrics.endpoint}: {str(error) or type(error).__name__}") from None
    if gauge(parse_page(text, metrics.model), WAITING, sum) is None:
        names = sorted(model_names(text))
        raise SweepError(
            f"{metrics.endpoint} has no vllm:num_requests_waiting with model_name={metrics.model!r}"
            + (
                f"; it serves model_name {', '.join(map(repr, names))}"
                if names
                else " (no vllm: metrics at all)"
            )
        )


async def warm_up(args: argparse.Namespace) -> None:
    """`--warmup` requests of the step's shape, a few at a time: the first requests of a fresh server
    pay one-off costs that no step should measure. All of them failing means the sweep cannot work."""
    if args.warmup == 0:
        return
    rng = np.random.default_rng([args.seed, 2**32 - 1])  # a stream no step uses
    prompts: list[list[int]] = rng.integers(
        TOKEN_ID_LOW, TOKEN_ID_HIGH, size=(args.warmup, args.prompt_tokens)
    ).tolist()
    gate = asyncio.Semaphore(_WARMUP_CONCURRENCY)
    timings = [Timing(0.0) for _ in prompts]
    endpoint = args.url + "/v1/completions"

    async with _session(_REQUEST_TIMEOUT) as session:

        async def one(prompt: list[int], timing: Timing) -> None:
            async with gate:
                await stream_completion(
                    session,
                    endpoint,
                    request_body(args.model, prompt, args.output_tokens),
                    timing,
                    time.perf_counter,
                )

        try:
            await asyncio.wait_for(
                asyncio.gather(*(one(p, t) for p, t in zip(prompts, timings, strict=True))),
                args.drain_timeout,
            )
        except TimeoutError:
            raise SweepError(f"the warm-up did not finish within {args.drain_timeout:g}s") from None
    failed = [t for t in timings if not t.ok]
    if len(failed) == len(timings):
        raise SweepError(f"every warm-up request failed: {failed[0].error}: {failed[0].detail}")
    print(f"warm-up: {len(timings) - len(failed)} of {len(timings)} requests ok", flush=True)


def append_line(path: Path, record: dict[str, Any]) -> None:
    with path.open("a") as out:
        out.write(json.dumps(record, allow_nan=False) + "\n")


async def sweep(args: argparse.Namespace, clients: Clients, metrics: Metrics, log: TextIO) -> None:
    """Every step in order: idle server, counters, arrivals and samples, drain, idle, counters."""
    for index, rate in enumerate(args.rates):
        if not await wait_idle(metrics, args.idle_timeout):
            print(f"warning: the server still runs or queues requests after {args.idle_timeout:g}s", file=log)
        before = await counters(metrics)
        if before is None:
            raise SweepError(f"{metrics.endpoint} stopped answering before the {rate:g}/s step")
        start_wall = time.time() + _LEAD_SECONDS
        origin = time.perf_counter() + _LEAD_SECONDS
        clients.order(Order(rate, args.step, start_wall, args.drain_timeout))
        results = asyncio.ensure_future(clients.results())
        samples, failed = await sample_gauges(metrics, origin, args.step, args.sample_interval)
        timings = await results
        # The server records a request's histograms as its last output leaves; idle means every one
        # of the step's requests (aborted ones included) is in the end counters.
        if not await wait_idle(metrics, args.idle_timeout):
            print(f"warning: the server was not idle {args.idle_timeout:g}s after the step", file=log)
        after = await counters(metrics)
        record = summarise(args, rate, timings, samples, failed, before, after)
        record["started_at"] = round(start_wall, 3)
        print(describe(record, args.slo_percentile), flush=True)
        for timing in timings:
            if timing.error is not None:
                print(f"  first error: {timing.error}: {timing.detail}", file=log, flush=True)
                break
        append_line(args.out, record)
        if index + 1 < len(args.rates):
            await asyncio.sleep(args.gap)


async def run(args: argparse.Namespace) -> None:
    async with _session() as session:
        metrics = Metrics(session, args.url, args.model)
        await check_server(metrics)
        config = {
            "url": args.url,
            "model": args.model,
            "prompt_tokens": args.prompt_tokens,
            "output_tokens": args.output_tokens,
            "processes": args.processes,
            "seed": args.seed,
        }
        clients = Clients(args.processes, config)
        try:
            await warm_up(args)
            await asyncio.get_running_loop().run_in_executor(None, clients.wait_ready)
            await sweep(args, clients, metrics, sys.stderr)
        finally:
            clients.close()


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_flags(argv)
    print(
        f"sweep of {args.url} ({args.model}): rates {', '.join(f'{r:g}' for r in args.rates)}/s, "
        f"{args.step:g}s steps, {args.prompt_tokens}+{args.output_tokens} tokens, "
        f"{args.processes} client processes -> {args.out}",
        flush=True,
    )
    try:
        asyncio.run(run(args))
    except SweepError as error:
        print(f"sweep_steps.py: error: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("sweep_steps.py: interrupted", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
