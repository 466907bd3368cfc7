"""Does the adapter read a P/D pair's signals exactly? Its answers against the pages it scraped.

Issue 41's check on a real pair: the adapter (the scrape source and the provider, as `serve` builds
them) reads a prefill and a decode engine as static targets carrying `llm-d.ai/role`, through one
recording proxy per engine that keeps every `/metrics` page it passes on. Every `--every` seconds
each signal is asked for; each answer is dated by the scrape round it came from, and the same
quantity is computed again from the pages of that round, parsed by `prometheus_client`'s own
exposition parser (not the adapter's), so a difference is the adapter's:

* `vllm_requests_running` and `vllm_kv_fetch_requests` on the decode pool: sums over its page;
  `vllm_kv_cache_usage`: the mean of its series; `vllm_requests_running` on the prefill pool too;
* `vllm_prefill_backlog_seconds`: (running + waiting for capacity) on the prefill page times the mean
  computed prompt, over `--prefill-throughput` and the pool's one pod. The mean is PromQL's
  `increase(_sum) / increase(_count)` of `vllm:request_prefill_kv_computed_tokens` over the window's
  pages, which is not Δsum / Δcount: Prometheus extrapolates each counter to the window's edges but
  not past where it would be zero, so on an engine that served one 3-token request before the
  window (the GPU run's first request) the count is stretched and the sum barely (the mean read
  0.9906 of Δsum / Δcount 4 s in, 0.9996 after 90 s). The adapter computes it as Prometheus would,
  so that both sources agree; the check computes it again, independently, at both ends of the time
  the adapter may have evaluated it (0-1.1 scrape intervals after its round), and an answer is
  exact when it lies between them.

The load is someone else's (a sweep through the pair's proxy); the check only reads. An answer that is
an error is counted with its message: a family the engine does not export is a finding, not a crash.

    python3 bench/pd_exactness.py --prefill http://127.0.0.1:8100 --decode http://127.0.0.1:8200 \\
        --model llama-8b-dummy --prefill-throughput 50000 --duration 240 --out exactness.json

Prints one line per signal (answers, exact, errors, largest difference from the pages' value);
exit status 0 when every answered value equals its pages' value, 1 otherwise, 2 for bad flags.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web
from prometheus_client.parser import text_string_to_metric_families

from adapter.app import started_provider
from adapter.config import load_file
from adapter.errors import AdapterError
from adapter.vocabulary.selectors import parse

NAMESPACE = "default"
ROLE = "llm-d.ai/role"
BACKLOG = "vllm_prefill_backlog_seconds"
WINDOW = 120.0  # the backlog's prompt window (adapter.vocabulary.catalogue.DEFAULT_WINDOW_SECONDS)
COMPUTED = "vllm:request_prefill_kv_computed_tokens"
#: relative difference read as equal: the adapter and the check add the same floats in other orders
EXACT = 1e-9

Series = dict[str, list[tuple[dict[str, str], float]]]


@dataclass
class Recorder:
    """A `/metrics` proxy for one engine that keeps every page it forwarded, with its wall time."""

    upstream: str
    interval: float
    pages: list[tuple[float, str]] = field(default_factory=list)
    parsed: dict[int, Series] = field(default_factory=dict)

    async def handle(self, request: web.Request) -> web.Response:
        session: aiohttp.ClientSession = request.app["session"]
        async with session.get(self.upstream + "/metrics") as response:
            text = await response.text()
            status = response.status
        if status == 200:
            self.pages.append((time.time(), text))
        return web.Response(text=text, status=status, content_type="text/plain")

    def at(self, when: float, model: str) -> Window:
        """The window of pages that ends with the round dated `when` (the first page fetched at or after
        `when`: a round is dated at its tick and fetched just after), its first and last parsed.

        Each page is parsed once, and only these two: the check shares its event loop with the adapter
        it checks, and parsing every page of the window for every answer starved the adapter's scrapes
        (on the GPU host: rounds 6 s apart, samples served stale)."""
        index = next((i for i, p in enumerate(self.pages) if p[0] >= when - 0.01), len(self.pages) - 1)
        end = self._dated(index)
        inside = [i for i in range(index + 1) if self._dated(i) > end - WINDOW]
        first = inside[0]
        return Window(
            (self._dated(first), self._parsed(first, model)), (end, self._parsed(index, model)), len(inside)
        )

    def _dated(self, index: int) -> float:
        """A page's time as the adapter dates its round: the scrape interval's tick it was fetched after."""
        return math.floor(self.pages[index][0] / self.interval) * self.interval

    def _parsed(self, index: int, model: str) -> Series:
        if index not in self.parsed:
            self.parsed[index] = series(self.pages[index][1], model)
        return self.parsed[index]


@dataclass(frozen=True)
class Window:
    """One engine's pages over a window: its first and last page (time, series) and how many pages."""

    first: tuple[float, Series]
    last: tuple[float, Series]
    samples: int


def increase(first: float, last: float, window: Window, to_end: float) -> float:
    """PromQL's `increase()` of a counter read `first` and `last` at the window's first and last page,
    `to_end` seconds before the end of the range, the range being `WINDOW` long (Prometheus 2.x's
    `extrapolatedRate`; the engines never restarted, so no counter reset). Prometheus extrapolates to
    the range's edges, but not past the time the counter would have been zero."""
    delta = last - first
    sampled = window.last[0] - window.first[0]
    average = sampled / (window.samples - 1)
    to_start = window.first[0] - (window.last[0] + to_end - WINDOW)
    if delta > 0 and first >= 0:
        to_start = min(to_start, sampled * first / delta)
    threshold = 1.1 * average
    covered = sampled + (to_start if to_start < threshold else average / 2)
    return delta * (covered + (to_end if to_end < threshold else average / 2)) / sampled


def series(text: str, model: str) -> Series:
    """Every sample of `model`, by sample name, with its labels: prometheus_client's parse."""
    out: Series = defaultdict(list)
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.labels.get("model_name") == model:
                out[sample.name].append((dict(sample.labels), float(sample.value)))
    return out


def total(page: Series, name: str, **fixed: str) -> float | None:
    found = [v for labels, v in page.get(name, []) if all(labels.get(k) == x for k, x in fixed.items())]
    return sum(found) if found else None


def queued(page: Series) -> float | None:
    """Running plus waiting for capacity (the plain waiting gauge where the breakdown is absent)."""
    running = total(page, "vllm:num_requests_running")
    waiting = total(page, "vllm:num_requests_waiting_by_reason", reason="capacity")
    if waiting is None:
        waiting = total(page, "vllm:num_requests_waiting")
    return None if running is None or waiting is None else running + waiting


def expected(metric: str, prefill: Window, decode: Window, throughput: float, interval: float) -> list[float]:
    """`metric` as the round's pages say it: one value, or for the backlog the two ends of the values
    PromQL would give while the adapter computes between 0 and 1.1 intervals after the round (empty
    where the pages hold no value)."""
    p, d = prefill.last[1], decode.last[1]
    if metric == "decode:vllm_requests_running":
        return _one(total(d, "vllm:num_requests_running"))
    if metric == "prefill:vllm_requests_running":
        return _one(total(p, "vllm:num_requests_running"))
    if metric == "vllm_kv_fetch_requests":
        return _one(total(d, "vllm:num_requests_kv_fetch_by_stage"))
    if metric == "vllm_kv_cache_usage":
        usage = [v for _, v in d.get("vllm:kv_cache_usage_perc", [])]
        return _one(sum(usage) / len(usage) if usage else None)
    held = queued(p)
    if held is None or held == 0:
        return _one(held)
    first = prefill.first[1]
    s0, s1, c0, c1 = (total(s, f"{COMPUTED}_{k}") for k in ("sum", "count") for s in (first, p))
    if s0 is None or s1 is None or c0 is None or c1 is None or c1 == c0 or prefill.samples < 2:
        return []
    ends = [(0.0, increase(s0, s1, prefill, e) / increase(c0, c1, prefill, e)) for e in (0.0, 1.1 * interval)]
    return [held * mean / throughput for _, mean in ends]


def _one(value: float | None) -> list[float]:
    return [] if value is None else [value]


@dataclass
class Tally:
    answers: int = 0
    exact: int = 0
    nonzero: int = 0
    largest: float = 0.0
    errors: Counter[str] = field(default_factory=Counter)


def close(a: float, b: float) -> bool:
    return abs(a - b) <= EXACT * max(1.0, abs(a), abs(b))


def inside(value: float, want: list[float]) -> bool:
    """`value` equals the pages' one value, or lies between the two ends of their values."""
    if not want:
        return False
    low, high = min(want), max(want)
    return close(value, low) or close(value, high) or low <= value <= high


QUERIES = {  # what is asked: the signal, the selector's role (None: the signal's own pool)
    BACKLOG: ("prefill",),
    "decode:vllm_requests_running": ("decode",),
    "prefill:vllm_requests_running": ("prefill",),
    "vllm_kv_cache_usage": ("decode",),
    "vllm_kv_fetch_requests": ("decode",),
}


async def check(args: argparse.Namespace) -> tuple[dict[str, Tally], list[dict[str, Any]]]:
    recorders = {
        role: Recorder(getattr(args, role).rstrip("/"), args.interval) for role in ("prefill", "decode")
    }
    app = web.Application()
    for role, recorder in recorders.items():
        app.router.add_get(f"/{role}/metrics", recorder.handle)
    async with aiohttp.ClientSession() as session:
        app["session"] = session
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        targets = [
            {"url": f"http://127.0.0.1:{port}/{role}/metrics", "labels": {ROLE: role}} for role in recorders
        ]
        config = load_file(
            None,
            {
                "source": "scrape",
                "scrape.interval": args.interval,
                "scrape.timeout": args.interval * 0.8,
                "scrape.targets": targets,
                "scrape.namespace": NAMESPACE,
                "metrics": {BACKLOG: {"prefill_throughput": args.prefill_throughput}},
            },
        )
        tallies: dict[str, Tally] = {name: Tally() for name in QUERIES}
        rows: list[dict[str, Any]] = []
        try:
            async with started_provider(config) as provider:
                end = time.monotonic() + args.duration
                while time.monotonic() < end:
                    await asyncio.sleep(args.every)
                    asked = [
                        _ask(provider, name, role, args, recorders, tallies[name])
                        for name, (role,) in QUERIES.items()
                    ]
                    rows += await asyncio.gather(*asked)
        finally:
            await runner.cleanup()
    return tallies, rows


async def _ask(
    provider: Any,
    name: str,
    role: str,
    args: argparse.Namespace,
    recorders: dict[str, Recorder],
    tally: Tally,
) -> dict[str, Any]:
    metric = name.partition(":")[2] or name
    selector = parse(f"model_name={args.model},{ROLE}={role}")
    try:
        value = await provider.get(metric, NAMESPACE, selector)
    except AdapterError as error:
        tally.errors[str(error)[:160]] += 1
        return {"signal": name, "error": str(error)}
    pages = {r: rec.at(value.timestamp, args.model) for r, rec in recorders.items()}
    want = expected(name, pages["prefill"], pages["decode"], args.prefill_throughput, args.interval)
    tally.answers += 1
    tally.nonzero += value.value != 0
    same = inside(value.value, want)
    tally.exact += same
    if want and not same:
        tally.largest = max(tally.largest, min(abs(value.value - w) for w in want))
    return {"signal": name, "adapter": value.value, "pages": want, "exact": same, "dated": value.timestamp}


def report(tallies: dict[str, Tally]) -> Iterable[str]:
    for name, t in tallies.items():
        errors = "; ".join(f"{n} x {m}" for m, n in t.errors.most_common(2))
        yield (
            f"{name}: {t.answers} answers ({t.nonzero} non-zero), {t.exact} exact, largest difference "
            f"{t.largest:.3g}" + (f"; errors: {errors}" if errors else "")
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--prefill", required=True, help="the prefill engine's base URL")
    parser.add_argument("--decode", required=True, help="the decode engine's base URL")
    parser.add_argument("--model", required=True, help="the served model name (model_name label)")
    parser.add_argument(
        "--prefill-throughput",
        type=float,
        required=True,
        help="prompt tokens per second of one prefill engine (the profile's)",
    )
    parser.add_argument("--duration", type=float, default=120.0, help="seconds to check for")
    parser.add_argument("--interval", type=float, default=1.0, help="the adapter's scrape interval, seconds")
    parser.add_argument("--every", type=float, default=2.0, help="seconds between rounds of questions")
    parser.add_argument("--out", type=Path, help="write every answer and its pages' value as JSON")
    args = parser.parse_args(argv)
    if not (args.prefill_throughput > 0 and args.duration > 0 and args.interval > 0 and args.every > 0):
        parser.error("--prefill-throughput, --duration, --interval and --every must be > 0")
    tallies, rows = asyncio.run(check(args))
    for line in report(tallies):
        print(line)
    if args.out:
        summary = {k: {**vars(t), "errors": dict(t.errors)} for k, t in tallies.items()}
        args.out.write_text(json.dumps({"summary": summary, "answers": rows}, indent=1))
    return 0 if all(t.exact == t.answers for t in tallies.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
