"""The experiment catalog: a YAML file read strictly, so a typo fails at start-up, not an hour in.

```yaml
engine:
  command: "vllm serve MODEL --port {port}"   # {port} required; {gpu} optional
  model: llama-8b-dummy                       # the served model name
  time_scale: 1          # the server's seconds per real second (an emulator's --time-scale)
  gpus: 1                # GPUs one engine holds: GPU-seconds per second of its wall time
  ready_within: 10m      # an engine not healthy by then is blocked
  unresponsive_after: 20s  # a measured engine whose /health stays silent this long has failed
baseline: baseline       # the variant the others are judged against (default: the first)
variants:
  - {name: baseline}
  - {name: seqs-16, flags: "--max-num-seqs 16"}
workload: {prompt_tokens: 1024, output_tokens: 128}   # or {file: pairs.csv}
slo: {ttft: 500ms, tpot: 50ms, percentile: 0.9}
seeds: [0, 1, 2]         # the repeats: at least three, run one after the other on one engine
measure: {step: 15s, settle: 3s, clients: 64, knee_steps: 4, knee_low: 0.5, tolerance: 0.03}
questions:
  capacity: true         # knee and saturated throughput (default); false: only the questions below
  cost: {rate: 10}       # useful-work cost at the knee and at this fixed rate
  boundary:              # the long-context boundary, asked of `variants` (default: the baseline)
    prompt: {rate: 8, output_tokens: 128, low: 256, high: 4096, steps: 4}
    rate: {prompt_tokens: 3072, output_tokens: 128, steps: 4}
```

Read by the project's one strict reader (`adapter.config.strict`): every error names the key path,
the value and what would be valid (`catalog key 'measure.step' value 'soon' must be a duration such
as '30s', '2m' or 15`); a duration is `500ms`, `15s`, `2m` or a plain number of seconds.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import yaml

from adapter.config.strict import Reader
from lab.engine.process import UNRESPONSIVE_AFTER_SECONDS, missing_port, time_scale_mismatch
from lab.load.workload import Workload, fixed, read_pairs
from lab.profile.schema import PercentileSlo

#: The fewest seeds a catalog may ask: the gates' false-finding rate is 2/C(2n, n) a count (`gates`),
#: 1 in 3 for two seeds, 1 in 10 for three.
MIN_SEEDS: Final = 3
_TOP: Final = ("engine", "baseline", "variants", "workload", "slo", "seeds", "measure", "questions")


class CatalogError(ValueError):
    """A catalog that cannot be run; the message names the file, the key path and what is valid."""


#: the catalog's reader: its errors read `catalog key '<path>' ...`
_READ: Final = Reader("catalog", CatalogError)


@dataclass(frozen=True)
class Engine:
    """How every variant's engine is started: the base command, then the variant's flags."""

    command: str
    """A template with `{port}` (and optionally `{gpu}`): `lab.engine.process.render`."""
    model: str
    time_scale: float = 1.0
    """The server's seconds per real second: an emulator's `--time-scale`; 1 for a real engine."""
    gpus: int = 1
    """GPUs one engine holds: its GPU-seconds per second of its wall time."""
    ready_within: float = 600.0
    """Real seconds an engine may take to become healthy before it is blocked."""
    unresponsive_after: float = UNRESPONSIVE_AFTER_SECONDS
    """Real seconds without an answer from `/health` after which a measured engine has failed."""


@dataclass(frozen=True)
class Variant:
    name: str
    flags: str = ""
    """Extra engine flags, appended to the base command (a later flag wins in vLLM's parser)."""


@dataclass(frozen=True)
class Measure:
    """How long each measurement is (real seconds), and how fine its searches."""

    step: float = 15.0
    """The measured window of each open-loop step."""
    settle: float = 3.0
    """Load before the window that is not measured: the queue finds its level."""
    clients: int = 64
    """Closed-loop clients of the saturation step: enough to keep a queue standing at the server."""
    knee_steps: int = 4
    """Bisection steps of the knee search (its band narrows by half with each)."""
    knee_low: float = 0.5
    """The knee search's range starts at this share of the saturated throughput."""
    tolerance: float = 0.03
    """A difference below this share of the baseline is never a finding, whatever the spread:
    two seeds can agree by luck more closely than the engine repeats."""


@dataclass(frozen=True)
class PromptBoundary:
    """The prompt length where the SLO starts to fail, at a fixed rate."""

    rate: float
    output_tokens: int
    low: int
    high: int
    steps: int = 4


@dataclass(frozen=True)
class RateBoundary:
    """The rate where the SLO starts to fail, at a fixed long prompt (the knee at that workload)."""

    prompt_tokens: int
    output_tokens: int
    steps: int = 4


@dataclass(frozen=True)
class Boundary:
    variants: tuple[str, ...]
    prompt: PromptBoundary | None
    rate: RateBoundary | None


@dataclass(frozen=True)
class Catalog:
    """Everything one experiment run is asked to do."""

    engine: Engine
    variants: tuple[Variant, ...]
    baseline: str
    workload: Workload
    slo: PercentileSlo
    seeds: tuple[int, ...]
    measure: Measure
    cost_rate: float | None
    boundary: Boundary | None
    capacity: bool = True
    """Whether the knee and saturated throughput are measured (and the cost at the knee with them)."""
    source: str = ""

    def variant(self, name: str) -> Variant:
        return next(v for v in self.variants if v.name == name)

    def command(self, variant: Variant) -> str:
        """The variant's engine command template: the base, then its flags."""
        return f"{self.engine.command} {variant.flags}".strip()


def _engine(data: Any) -> Engine:
    allowed = ("command", "model", "time_scale", "gpus", "ready_within", "unresponsive_after")
    d = _READ.mapping("engine", data, allowed, ("command", "model"))
    command = _READ.text("engine.command", d["command"])
    if missing_port(command) is not None:
        raise _READ.invalid("engine.command", command, "a command with {port}: where it listens")
    time_scale = float(_READ.number("engine.time_scale", d.get("time_scale", 1.0), above=0))
    # The rehearsal's own check: every rate and latency would be read off the wrong clock otherwise.
    mismatch = time_scale_mismatch(command, time_scale, "the catalog", "engine.time_scale")
    if mismatch is not None:
        raise _READ.fail("engine.time_scale", f"value {time_scale:g} disagrees: {mismatch}")
    return Engine(
        command=command,
        model=_READ.text("engine.model", d["model"]),
        time_scale=time_scale,
        gpus=_READ.number("engine.gpus", d.get("gpus", 1), integer=True, above=0),
        ready_within=_READ.duration("engine.ready_within", d.get("ready_within", "10m")),
        unresponsive_after=_READ.duration(
            "engine.unresponsive_after", d.get("unresponsive_after", UNRESPONSIVE_AFTER_SECONDS)
        ),
    )


def _variants(data: Any) -> tuple[Variant, ...]:
    items = _READ.items("variants", data, "a non-empty list of {name, flags}")
    variants = []
    for index, item in enumerate(items):
        where = f"variants[{index}]"
        d = _READ.mapping(where, item, ("name", "flags"), ("name",))
        name = _READ.text(f"{where}.name", d["name"])
        if any(c.isspace() or c == "/" for c in name):
            raise _READ.invalid(f"{where}.name", name, "a name with no blanks or '/', e.g. seqs-16")
        flags = d.get("flags", "")
        if not isinstance(flags, str):
            raise _READ.invalid(f"{where}.flags", flags, "a string of engine flags")
        variants.append(Variant(name, flags.strip()))
    names = [v.name for v in variants]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise _READ.fail("variants", f"names {twice} more than once: each name must be unique")
    return tuple(variants)


def _workload(data: Any, base: Path) -> Workload:
    d = _READ.mapping("workload", data, ("prompt_tokens", "output_tokens", "file"))
    if "file" in d:
        if set(d) != {"file"}:
            raise _READ.fail("workload", "must give either 'file' or 'prompt_tokens' and 'output_tokens'")
        try:
            return read_pairs(base / _READ.text("workload.file", d["file"]))
        except ValueError as error:
            raise _READ.fail("workload.file", f"cannot be read: {error}") from error
    _READ.mapping("workload", d, ("prompt_tokens", "output_tokens"), ("prompt_tokens", "output_tokens"))
    return fixed(
        _READ.number("workload.prompt_tokens", d["prompt_tokens"], integer=True, above=0),
        _READ.number("workload.output_tokens", d["output_tokens"], integer=True, above=0),
    )


def _slo(data: Any) -> PercentileSlo:
    d = _READ.mapping("slo", data, ("ttft", "tpot", "percentile"), ("ttft", "tpot"))
    percentile = _READ.number("slo.percentile", d.get("percentile", 0.9), above=0)
    if not percentile < 1:
        raise _READ.invalid("slo.percentile", percentile, "between 0 and 1, e.g. 0.9")
    ttft, tpot = _READ.duration("slo.ttft", d["ttft"]), _READ.duration("slo.tpot", d["tpot"])
    return PercentileSlo(ttft, tpot, float(percentile))


def _seeds(data: Any) -> tuple[int, ...]:
    if not isinstance(data, list) or len(data) < MIN_SEEDS or len(set(map(str, data))) != len(data):
        raise _READ.invalid(
            "seeds",
            data,
            f"a list of at least {MIN_SEEDS} different seeds, e.g. [0, 1, 2]: "
            "with two, two identical engines read as different one time in three (docs/experiments.md)",
        )
    return tuple(_READ.number(f"seeds[{i}]", s, integer=True, at_least=0) for i, s in enumerate(data))


def _measure(data: Any) -> Measure:
    d = _READ.mapping("measure", data, ("step", "settle", "clients", "knee_steps", "knee_low", "tolerance"))
    knee_low = float(_READ.number("measure.knee_low", d.get("knee_low", 0.5), above=0))
    if not knee_low < 0.95:
        raise _READ.invalid("measure.knee_low", knee_low, "below 0.95, e.g. 0.5")
    return Measure(
        step=_READ.duration("measure.step", d.get("step", "15s")),
        settle=_READ.duration("measure.settle", d.get("settle", "3s")),
        clients=_READ.number("measure.clients", d.get("clients", 64), integer=True, above=0),
        knee_steps=_READ.number("measure.knee_steps", d.get("knee_steps", 4), integer=True, above=0),
        knee_low=knee_low,
        tolerance=float(_READ.number("measure.tolerance", d.get("tolerance", 0.03), at_least=0)),
    )


def _count(where: str, data: Mapping[str, Any], key: str, default: int | None = None) -> int:
    """A positive integer at `where.key` (`default` when absent and there is one)."""
    value = data.get(key, default)
    return int(_READ.number(f"{where}.{key}", value, integer=True, above=0))


def _boundary(data: Any, names: tuple[str, ...], baseline: str) -> Boundary:
    d = _READ.mapping("questions.boundary", data, ("variants", "prompt", "rate"))
    asked = d.get("variants", [baseline])
    if not isinstance(asked, list) or not asked or any(a not in names for a in asked):
        raise _READ.invalid("questions.boundary.variants", asked, f"a list of variants of {list(names)}")
    prompt = rate = None
    if "prompt" in d:
        where = "questions.boundary.prompt"
        p = _READ.mapping(
            where,
            d["prompt"],
            ("rate", "output_tokens", "low", "high", "steps"),
            ("rate", "output_tokens", "low", "high"),
        )
        low, high = _count(where, p, "low"), _count(where, p, "high")
        if not high > low:
            raise _READ.invalid(f"{where}.high", high, f"above low ({low})")
        fixed_rate = float(_READ.number(f"{where}.rate", p["rate"], above=0))
        prompt = PromptBoundary(
            fixed_rate, _count(where, p, "output_tokens"), low, high, _count(where, p, "steps", 4)
        )
    if "rate" in d:
        where = "questions.boundary.rate"
        r = _READ.mapping(
            where, d["rate"], ("prompt_tokens", "output_tokens", "steps"), ("prompt_tokens", "output_tokens")
        )
        rate = RateBoundary(
            _count(where, r, "prompt_tokens"), _count(where, r, "output_tokens"), _count(where, r, "steps", 4)
        )
    if prompt is None and rate is None:
        raise _READ.fail("questions.boundary", "must ask 'prompt', 'rate' or both")
    return Boundary(tuple(asked), prompt, rate)


def parse(data: Any, base: Path = Path("."), source: str = "") -> Catalog:
    """A catalog from its parsed YAML; relative files are read from `base`."""
    d = _READ.mapping("", data, _TOP, ("engine", "variants", "workload", "slo", "seeds"))
    variants = _variants(d["variants"])
    names = tuple(v.name for v in variants)
    baseline = d.get("baseline", names[0])
    if baseline not in names:
        raise _READ.invalid("baseline", baseline, f"one of the variants {list(names)}")
    q = _READ.mapping("questions", d.get("questions"), ("capacity", "cost", "boundary"))
    capacity = _READ.flag("questions.capacity", q.get("capacity", True))
    cost_rate = None
    if q.get("cost") is not None:
        cost = _READ.mapping("questions.cost", q["cost"], ("rate",), ("rate",))
        cost_rate = float(_READ.number("questions.cost.rate", cost["rate"], above=0))
    return Catalog(
        engine=_engine(d["engine"]),
        variants=variants,
        baseline=baseline,
        workload=_workload(d["workload"], base),
        slo=_slo(d["slo"]),
        seeds=_seeds(d["seeds"]),
        measure=_measure(d.get("measure")),
        cost_rate=cost_rate,
        boundary=None if q.get("boundary") is None else _boundary(q["boundary"], names, baseline),
        capacity=capacity,
        source=source,
    )


def load(path: Path) -> Catalog:
    """Read and validate a catalog file; `CatalogError` naming the file and what is wrong."""
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as error:
        raise CatalogError(f"unable to read catalog {path}: {error}") from error
    try:
        return parse(data, path.parent, str(path))
    except CatalogError as error:
        raise CatalogError(f"{path}: {error}") from error
