"""One vocabulary: a vLLM rename is a one-line change that reaches the adapter, every dashboard and
every rule, and no series name is spelt anywhere but in its own module.

The rename is made in a fresh interpreter (`tests.vocabulary_render`), on `adapter.vocabulary.vllm` itself
before anything reads it, and every artifact is regenerated in memory and compared with an unrenamed
render.
"""

from __future__ import annotations

import ast
import functools
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from adapter import telemetry
from adapter.errors import Unresolved
from adapter.telemetry import Telemetry
from adapter.vocabulary.catalogue import builtin, checked_value
from adapter.vocabulary.promql.catalogue import served_query

ROOT = Path(__file__).resolve().parent.parent


@functools.cache
def render(*rename: str) -> dict[str, str]:
    """Every artifact, rendered by a fresh interpreter with `rename` (family, index, new name) applied."""
    result = subprocess.run(
        [sys.executable, "-m", "tests.vocabulary_render", *rename],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    artifacts: dict[str, str] = json.loads(result.stdout)
    return artifacts


def mentions(text: str, name: str) -> bool:
    """Whether `text` reads the series `name` (a histogram's `_bucket`/`_sum`/`_count` included), never
    a longer name it prefixes (`num_requests_waiting` is not `num_requests_waiting_by_reason`)."""
    return re.search(re.escape(name) + r"(?:_bucket|_sum|_count)?(?![A-Za-z0-9_])", text) is not None


RENAMES = [
    pytest.param(
        "NUM_REQUESTS_WAITING",
        0,
        "vllm:num_requests_waiting",
        "vllm:num_requests_queued",
        {
            "adapter:vllm_requests_waiting",
            "adapter:vllm_requests_inflight",
            "rules",
            "helm-rules",
            "dashboard:vllm-serving-overview.json",
            "dashboard:vllm-autoscaling.json",
        },
        id="a gauge",
    ),
    pytest.param(
        "WAITING_BY_REASON",
        0,
        "vllm:num_requests_waiting_by_reason",
        "vllm:num_requests_waiting_split",
        {
            "adapter:vllm_requests_waiting",
            "adapter:vllm_requests_inflight",
            "rules",
            "helm-rules",
            "dashboard:vllm-serving-overview.json",
            "dashboard:vllm-autoscaling.json",
            "dashboard:vllm-kv-cache-latency.json",
        },
        id="a breakdown read in preference to its total",
    ),
    pytest.param(
        "KV_CACHE_USAGE",
        1,
        "vllm:gpu_cache_usage_perc",
        "vllm:gpu_cache_fraction_legacy",
        {
            "adapter:vllm_kv_cache_usage",
            "rules",
            "helm-rules",
            "dashboard:vllm-serving-overview.json",
            "dashboard:vllm-autoscaling.json",
            "dashboard:vllm-kv-cache-latency.json",
        },
        id="the older alias of a family",
    ),
    pytest.param(
        "TTFT",
        0,
        "vllm:time_to_first_token_seconds",
        "vllm:first_token_latency_seconds",
        {
            "adapter:vllm_ttft_seconds",
            "rules",
            "helm-rules",
            "dashboard:vllm-serving-overview.json",
            "dashboard:vllm-autoscaling.json",
            "dashboard:vllm-kv-cache-latency.json",
        },
        id="a histogram",
    ),
    pytest.param(
        "PROMPT_TOKENS_BY_SOURCE",
        0,
        "vllm:prompt_tokens_by_source_total",
        "vllm:prompt_tokens_by_origin_total",
        {"rules", "helm-rules"},
        id="a counter only the P/D alerts read",
    ),
    pytest.param(
        "KV_FETCH_BY_STAGE",
        0,
        "vllm:num_requests_kv_fetch_by_stage",
        "vllm:num_requests_kv_fetch_split",
        {"dashboard:vllm-prefill-decode.json"},
        id="a gauge only the P/D dashboard reads",
    ),
]


@pytest.mark.parametrize(("family", "index", "old", "new", "readers"), RENAMES)
def test_a_vllm_rename_flows_to_every_artifact(
    family: str, index: int, old: str, new: str, readers: set[str]
) -> None:
    """Renaming one name in `adapter.vocabulary.vllm` changes exactly the artifacts that read it, and changes
    nothing else in them: with the new name put back, each is byte for byte the unrenamed one. The old
    name is left nowhere, so no copy of it survives in a query, a rule or a panel."""
    before, after = render(), render(family, str(index), new)
    assert before.keys() == after.keys()
    assert not any(new in text for text in before.values()), "the new name must be new"
    changed = {name for name in before if after[name] != before[name]}
    assert changed == {name for name, text in before.items() if mentions(text, old)}
    assert readers <= changed, f"{sorted(readers - changed)} did not follow the rename"
    for name, text in after.items():
        assert not mentions(text, old), f"{name} still reads {old}"
        assert text.replace(new, old) == before[name], f"{name} changed beyond the rename"
        if name in changed:
            assert mentions(text, new)


def test_the_unrenamed_render_is_what_is_committed() -> None:
    """The subprocess renders the checked-in artifacts (so the comparison above is about them)."""
    artifacts = render()
    assert artifacts["rules"] == (ROOT / "alerts" / "vllm-autoscale.rules.yaml").read_text(encoding="utf-8")
    assert artifacts["helm-rules"] == (ROOT / "helm/files/prometheus-rules.tpl.yaml").read_text(
        encoding="utf-8"
    )
    for name, text in artifacts.items():
        if name.startswith("dashboard:"):
            assert text == (ROOT / "dashboards" / name.removeprefix("dashboard:")).read_text(encoding="utf-8")


#: series names that belong to `adapter.vocabulary.vllm`, `adapter.vocabulary.exporters`
#: or `adapter.telemetry` alone
SERIES_NAME = re.compile(r"vllm:[a-z]|\bkube_[a-z]|\bDCGM_FI_|\bvllm_autoscale_[a-z]|\baws_sqs_")
GENERATOR_SOURCES = sorted(
    path.relative_to(ROOT).as_posix()
    for directory in ("alerts", "dashboards")
    for path in (ROOT / directory).rglob("*.py")
)


@pytest.mark.parametrize("source", GENERATOR_SOURCES)
def test_no_series_name_is_spelt_in_the_generators(source: str) -> None:
    """The rules and dashboards take every series name from its module, never as a literal (docstrings
    and comments may name them)."""
    tree = ast.parse((ROOT / source).read_text(encoding="utf-8"))
    docstrings = {id(node.value) for node in ast.walk(tree) if isinstance(node, ast.Expr)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            assert not SERIES_NAME.search(node.value), f"{source} spells a series name: {node.value!r}"


def test_the_series_name_check_catches_a_literal() -> None:
    """The check above fails on the literals this refactor removed (so its silence means something)."""
    for literal in ("unless on (job, instance) vllm_autoscale_ready", "kube_horizontalpodautoscaler_info"):
        assert SERIES_NAME.search(literal)


def test_telemetry_exports_exactly_the_series_its_names_say() -> None:
    """Each name `adapter.telemetry` exports is a series the registry exposes, and each family the
    registry exposes has its name there: alerts and dashboards can import them and nothing else."""
    names = {value for key, value in vars(telemetry).items() if key.isupper() and isinstance(value, str)}
    names.discard(telemetry.STALE_REASON)
    families = list(Telemetry().registry.collect())
    exposed = {f"{f.name}_total" if f.type == "counter" else f.name for f in families}
    assert names == exposed
    assert telemetry.STALE_REASON == "stale"


def test_the_resolved_quantile_is_the_servers_rule() -> None:
    """`served_query` keeps a quantile exactly where `catalogue.checked_value` serves it: strictly above
    the first finite bound and strictly below the last."""
    ttft = builtin("vllm_ttft_seconds")
    match = re.fullmatch(r"\((.+) > ([0-9.e+-]+)\) < ([0-9.e+-]+)", served_query(ttft, []))
    assert match, served_query(ttft, [])
    first, last = float(match[2]), float(match[3])
    for edge in (first, last):
        with pytest.raises(Unresolved):
            checked_value(ttft, edge)
    assert checked_value(ttft, (first + last) / 2) == (first + last) / 2
    for name in ("vllm_tpot_seconds", "vllm_requests_waiting"):
        assert " > " not in served_query(builtin(name), [])
