"""The scrape source's arithmetic against the real PromQL engine, through promtool.

A seeded random fleet of three vLLM pods (one on the old metric names, one restarting halfway, two models) is
written as promtool input series; each built-in metric's own PromQL (`promql.catalogue.value_query`, what the
Prometheus source runs) is evaluated by promtool at several instants, and `snapshots.evaluate` computes the
same metric from the same samples as scrapes. The values must agree to 1e-9: the two sources mean the same
thing, including rate extrapolation, counter resets, alias preference and histogram_quantile interpolation.

promtool reports the value it got for an expectation that fails, so every case expects an
impossible value and the real one is read from the report.
"""

from __future__ import annotations

import math
import random
import re
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
import yaml

from adapter.errors import Unresolved
from adapter.sources.evaluation import Snapshot, evaluate
from adapter.sources.page_parser import Labels, Page, histogram_samples
from adapter.sources.snapshots import History
from adapter.vocabulary import catalogue, selectors, vllm
from adapter.vocabulary.catalogue import HistogramSpec, MetricDef, Statistic, checked_value
from adapter.vocabulary.promql.catalogue import value_query
from tests.integration.procs import require_binary

STEP = 15  # seconds between scrapes, promtool's input interval
STEPS = 14
IMPOSSIBLE = -12345.0
PODS = (("p0", "m1", False), ("p1", "m1", True), ("p2", "m2", False))  # (pod, model, old names)
RESTART = ("p0", 7)  # p0's counters start again from zero at step 7


def _le(bound: float) -> str:
    return repr(float(bound))


def generate(seed: int = 20261126) -> dict[str, list[Page]]:
    """Per pod, one page per step: random gauges and histograms with spread observations."""
    rng = random.Random(seed)
    # (family, bucket bounds, one observation)
    histograms: tuple[tuple[vllm.Family, tuple[float, ...], Callable[[], float]], ...] = (
        (vllm.TTFT, vllm.TTFT_BUCKETS, lambda: rng.lognormvariate(-2.5, 1.2)),
        (vllm.TPOT, vllm.INTER_TOKEN_LATENCY_BUCKETS, lambda: rng.uniform(0.004, 0.09)),
    )
    fleet: dict[str, list[Page]] = {}
    for pod, model, old in PODS:
        labels: Labels = (("engine", "0"), ("model_name", model))
        state: dict[str, tuple[list[float], float]] = {}
        pages: list[Page] = []
        for step in range(STEPS):
            if (pod, step) == RESTART:
                state.clear()
            page: Page = {
                vllm.NUM_REQUESTS_RUNNING[0]: {labels: float(rng.randint(0, 30))},
                vllm.NUM_REQUESTS_WAITING[0]: {labels: float(rng.randint(0, 10))},
                vllm.KV_CACHE_USAGE[1 if old else 0]: {labels: rng.random()},
            }
            for family, buckets, draw in histograms:
                name = family[1] if old and len(family) > 1 else family[0]
                counts, total = state.get(name, ([0.0] * (len(buckets) + 1), 0.0))
                for _ in range(rng.randint(0, 25)):
                    value = draw()
                    total += value
                    for i, bound in enumerate((*buckets, math.inf)):
                        if value <= bound:
                            counts[i] += 1
                            break
                state[name] = (counts, total)
                bucket, sum_name, count = histogram_samples(name)
                page[bucket] = {}
                cumulative = 0.0
                for bound, n in zip((*buckets, math.inf), counts, strict=True):
                    cumulative += n
                    le = "+Inf" if math.isinf(bound) else _le(bound)
                    page[bucket][tuple(sorted((*labels, ("le", le))))] = cumulative
                page[sum_name] = {labels: total}
                page[count] = {labels: cumulative}
            pages.append(page)
        fleet[pod] = pages
    return fleet


def _selector(name: str, labels: Labels) -> str:
    return name + "{" + ",".join(f'{k}="{v}"' for k, v in labels) + "}"


def input_series(fleet: dict[str, list[Page]]) -> list[dict[str, str]]:
    """promtool `input_series`: each series with the pod's target labels, `_` where absent."""
    rows: dict[str, list[str]] = {}
    for pod, pages in fleet.items():
        for step, page in enumerate(pages):
            for name, series in page.items():
                for labels, value in series.items():
                    full = tuple(sorted((*labels, ("namespace", "ml"), ("pod", pod))))
                    rows.setdefault(_selector(name, full), ["_"] * STEPS)[step] = repr(value)
    return [{"series": series, "values": " ".join(values)} for series, values in rows.items()]


def scraped(fleet: dict[str, list[Page]], at: float) -> list[Snapshot]:
    """The pods as the scrape source holds them at time `at`."""
    pods = []
    names = sorted({s for fam in (vllm.TTFT, vllm.TPOT) for n in fam for s in histogram_samples(n)})
    for pod, pages in fleet.items():
        history = History(retention=3600.0)
        last = 0.0
        for step, page in enumerate(pages):
            if step * STEP <= at:
                history.add(float(step * STEP), page, names)
                last = step * STEP
        pods.append(Snapshot({"namespace": "ml", "pod": pod}, last, pages[int(last // STEP)], history))
    return pods


def variant(name: str, statistic: Statistic, quantile: float, window: float) -> MetricDef:
    metric = catalogue.builtin(name)
    assert isinstance(metric.spec, HistogramSpec)
    spec = HistogramSpec(metric.spec.family, statistic, window, quantile, metric.spec.buckets)
    return metric.with_overrides(name=f"{name}_{statistic.value}{quantile:g}_{window:g}", spec=spec)


METRICS = (
    *(m for m in catalogue.BUILTIN if not isinstance(m.spec, HistogramSpec)),
    variant("vllm_ttft_seconds", Statistic.QUANTILE, 0.9, 120.0),
    variant("vllm_ttft_seconds", Statistic.QUANTILE, 0.5, 60.0),
    variant("vllm_ttft_seconds", Statistic.MEAN, 0.9, 60.0),
    variant("vllm_tpot_seconds", Statistic.MEAN, 0.9, 120.0),
    variant("vllm_tpot_seconds", Statistic.QUANTILE, 0.95, 45.0),
    # The forecast: a rate, the rate one window earlier (an offset), clamp_min; 67 s has no earlier
    # 60 s window with two scrapes, so the trend's `or` fallback is compared too.
    catalogue.forecast(75.0, 60.0),
    catalogue.forecast(30.0, 45.0, name="forecast_short"),
)
# Off-grid instants, one exactly on a scrape (the window then starts on one: range ends inclusive),
# and instants around p0's restart.
EVAL_TIMES = (67.0, 120.0, 113.5, 157.0, 181.0)  # seconds; promtool takes milliseconds too
SELECTORS = ("", "model_name=m1", "pod!=p1")


def promtool_values(
    tmp_path: Path, series: list[dict[str, str]], cases: Sequence[tuple[str, float]]
) -> list[float | None]:
    """The value promtool's PromQL engine gives each (expr, eval time), in order."""
    (tmp_path / "rules.yaml").write_text("groups: []\n")
    tests = {
        "rule_files": ["rules.yaml"],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": f"{STEP}s",
                "input_series": series,
                "promql_expr_test": [
                    {
                        "expr": expr,
                        "eval_time": f"{round(at * 1000)}ms",
                        "exp_samples": [{"labels": '{x="y"}', "value": IMPOSSIBLE}],
                    }
                    for expr, at in cases
                ],
            }
        ],
    }
    (tmp_path / "tests.yaml").write_text(yaml.safe_dump(tests))
    result = subprocess.run(
        [require_binary("promtool"), "test", "rules", "tests.yaml"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    report = result.stdout + result.stderr
    got = re.findall(r"^ +got: (.*)$", report, re.MULTILINE)
    assert len(got) == len(cases), report
    values: list[float | None] = []
    for line in got:
        if line == "nil":
            values.append(None)
            continue
        assert line.count("} ") == 1, f"expected one series, got {line!r}"
        values.append(float(line.rsplit(" ", 1)[1]))  # NaN and ±Inf too: raw facts on both sides
    return values


def test_scrape_arithmetic_equals_promql(tmp_path: Path) -> None:
    """Every built-in metric and histogram variant, at every instant, for every selector, computed
    from scrapes equals what Prometheus' engine computes from the same samples with the Prometheus
    source's query (unresolved quantiles are unresolved on both sides)."""
    fleet = generate()
    cases: list[tuple[MetricDef, str, float]] = [
        (metric, selector, at) for metric in METRICS for selector in SELECTORS for at in EVAL_TIMES
    ]
    exprs = [
        (value_query(metric, ['namespace="ml"', *selectors.parse(selector).to_promql()]), at)
        for metric, selector, at in cases
    ]
    expected = promtool_values(tmp_path, input_series(fleet), exprs)
    for (metric, selector, at), prom in zip(cases, expected, strict=True):
        where = f"{metric.name} {{{selector}}} at {at:g}s"
        sample = evaluate(metric, scraped(fleet, at), selectors.parse(selector), at)
        assert sample is not None, where
        if prom is None or sample.value is None:
            assert sample.value == prom, where
        elif math.isnan(prom):
            assert math.isnan(sample.value), where
        else:
            assert sample.value == pytest.approx(prom, rel=1e-9), where
        # The provider's quantile rule then judges both alike (it does not run in the sources).
        assert _unresolved(metric, sample.value) == _unresolved(metric, prom), where
    # the comparison must not be vacuous: most cases carry a finite number
    assert sum(1 for p in expected if p is not None and math.isfinite(p)) >= 0.8 * len(cases)


def _unresolved(metric: MetricDef, value: float | None) -> bool:
    try:
        checked_value(metric, value)
    except Unresolved:
        return True
    return False
