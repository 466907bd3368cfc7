"""`vllm-autoscale profile` against emulated replicas whose capacity is known exactly.

**The true capacity of an emulated replica, from its parameters** (`lab/emulator/params.py`,
`lab/emulator/engine.py`). A request of `P` prompt and `O` output tokens (`ignore_eos`, so exactly
`O`) holds one of the `max_num_seqs = N` batch slots for exactly `O` engine steps: one step prefills
its `P` tokens and samples its first token, then `O - 1` decode steps sample one token each; the
step after it finishes admits the next waiting request into its slot (`Engine.step`). With enough KV
blocks (no preemption) and a token budget above `N + P` (no chunked prefill), a saturated engine
therefore always runs `N` requests and completes `N / E[O]` of them per step. A step of `s`
requests and `t` tokens lasts `step_base + step_per_seq * s + step_per_prefill_token * (t - s)`
(`EngineParams.step_seconds`, jitter of mean 1); in a full step `s = N` and, on average, `N / E[O]`
of the requests prefill `P - 1` tokens beyond their one, so the mean step lasts
`T = step_base + step_per_seq * N + step_per_prefill_token * (E[P] - 1) * N / E[O]` and the capacity is

    C = N / (E[O] * T)   requests per (emulated) second.

No code of `lab.profile` is involved. (An engine driven directly on a backlog, without HTTP, agrees
with `C` within 1 % for the engines below.) Batch size raises TPOT, so `C` is the highest rate a
replica sustains; with an SLO loose enough not to bind, the knee is the highest rate with a stable
queue, and it must come within 10 % of `C`. The three engines' capacities differ by at least 1.5x in
turn, so no one answer passes for all three.

**On virtual time.** The profile and the emulator run in this process on one `lab.virtual_time` loop
and talk HTTP over loopback (`emulated_capacity.profile_in_process`): the profile measures the
emulator's arithmetic, not the CPU the machine had left for it, and a seed gives one profile on any
machine, loaded or not. The workload varies lengths (prompts of 64-192 tokens, outputs of 16-48) so
that requests do not finish in lockstep; each engine runs at the time scale that puts ~40 requests
per loop second on it, as the command-line runs below do on the wall clock.

**Repeatable, with no short deciding step:** the original the twin is compared with is profiled
with another seed (other arrivals and lengths in every step); its knee must come within 10 % of the
first seed's. Every open-loop step that decided a rate (`knee.rate_verdicts`) near the knee (from
90 % of it up) is at least as long as the window rule asks (`plan.deciding_step`, from the lifetime
its own step measured).

**The twin:** the profile of the second engine is the twin's (`twin_params`, as `emulate --profile`
reads it); the twin and the original are profiled with a second seed. The twin's knee must come
within 10 % of the original's, its TPOT against batch size and its mean TTFT at 40 % of the lower
knee within 15 %. The two profiles share a seed,
so each step sends both servers the same arrival pattern and request lengths (`lab.load.driver`),
and what differs is the servers.

**On the wall clock**, one smaller test (`test_profile_launch.py`) runs the command as a user does:
`profile --launch` starts an emulator process, records its cold start and stops it, and the two talk
HTTP between processes. There the machine's load is part of what is measured, and the knee's bound
comes from recorded runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from lab import virtual_time
from lab.emulator.params import EngineParams
from lab.load.workload import Workload, read_pairs
from lab.profile.knee import rate_verdicts
from lab.profile.plan import DECIDE_REQUESTS, PREFILL_ROUNDS, deciding_step
from lab.profile.prefill.plan import burst_sizes
from lab.profile.recommend import fitted
from lab.profile.schema import PercentileSlo, Profile, Step, load
from lab.profile.steps import STABLE_SHARE
from lab.profile.twin.fidelity import SweepSettings, compare, sweep
from lab.profile.twin.params import twin_params
from lab.stats import linear_fit
from tests.integration.emulated_capacity import Profiled, emulated, profile_in_process
from tests.integration.emulated_capacity import capacity as full_batch_capacity

# The virtual-time profiles are CPU only (~25 s each); on a loaded 2-core machine they get a share
# of a core, and pytest-timeout's default 300 s, a guard against hangs, is not a bound on them.
pytestmark = [pytest.mark.integration, pytest.mark.timeout(1800)]

PROMPTS = (64, 96, 128, 160, 192)
OUTPUTS = (16, 24, 32, 40, 48)
# Loose enough never to bind: the knee is where the queue stops being stable.
LOOSE_SLO = PercentileSlo(ttft_seconds=60.0, tpot_seconds=10.0, percentile=0.9)
# Loop seconds (virtual: what the profile measures in, at ~40 requests each): the deciding steps
# near the knee take most of it (400 requests or more each).
BUDGET = 110.0


@dataclass(frozen=True)
class Engine:
    """An emulated replica of known parameters, and the time scale it runs at."""

    name: str
    params: EngineParams
    time_scale: float

    def capacity(self) -> float:
        """C = N / (E[O] * T), with T the mean step of a full batch (see the module docstring)."""
        return full_batch_capacity(self.params, sum(PROMPTS) / len(PROMPTS), sum(OUTPUTS) / len(OUTPUTS))


def _engine(
    name: str, slots: int, base: float, per_seq: float, per_token: float, time_scale: float
) -> Engine:
    """An engine of `slots` slots and these step costs, with KV blocks enough never to preempt."""
    params = EngineParams(
        max_num_seqs=slots,
        num_gpu_blocks=2048,
        step_base_seconds=base,
        step_per_seq_seconds=per_seq,
        step_per_prefill_token_seconds=per_token,
    )
    return Engine(name, params, time_scale)


ENGINES = (
    _engine("three slots, slow steps", 3, 0.03, 0.002, 0.0001, time_scale=25.0),
    _engine("six slots, TPOT steep in the batch", 6, 0.008, 0.003, 0.00005, time_scale=6.0),
    _engine("four slots, fast steps", 4, 0.002, 0.00025, 0.000005, time_scale=1.0),
)


def workload_file(directory: Path) -> Path:
    """The workload's pairs as `profile --workload` reads them."""
    path = directory / "pairs.csv"
    path.write_text("prompt_tokens,output_tokens\n" + "".join(f"{p},{o}\n" for p in PROMPTS for o in OUTPUTS))
    return path


@pytest.fixture(scope="module")
def workload(tmp_path_factory: pytest.TempPathFactory) -> Workload:
    return read_pairs(workload_file(tmp_path_factory.mktemp("workload")))


@pytest.fixture(scope="module")
def profiles(tmp_path_factory: pytest.TempPathFactory, workload: Workload) -> dict[str, Profiled]:
    """The three engines, each profiled on virtual time (one after the other: each is CPU only)."""
    root = tmp_path_factory.mktemp("profiles")
    return {
        e.name: profile_in_process(
            e.params,
            time_scale=e.time_scale,
            workload=workload,
            slo=LOOSE_SLO,
            budget=BUDGET,
            out=root / f"out-{i}",
        )
        for i, e in enumerate(ENGINES)
    }


@pytest.mark.parametrize("engine", ENGINES, ids=[e.name for e in ENGINES])
def test_knee_is_the_capacity_computed_from_the_parameters(
    engine: Engine, profiles: dict[str, Profiled]
) -> None:
    """Each knee lies within 10 % of C = N / (E[O] T); the files are written and every catalogue
    metric has a recommended target, the saturation metric with its parameters."""
    found, out = profiles[engine.name].profile, profiles[engine.name].out
    assert found.complete and found.knee is not None, found.error
    assert found.knee.rate == pytest.approx(engine.capacity(), rel=0.10)
    assert {p.name for p in out.iterdir()} >= {
        "profile.json",
        "profile.png",
        "summary.txt",
        "saturation.yaml",
    }
    assert (out / "profile.png").read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    assert set(found.targets) == {
        "vllm_requests_inflight",
        "vllm_requests_waiting",
        "vllm_kv_cache_usage",
        "vllm_saturation",
    }
    assert found.saturation["capacity"] == pytest.approx(found.knee.concurrency, abs=0.051)
    assert f"capacity: {found.saturation['capacity']:g}" in (out / "saturation.yaml").read_text()


@pytest.mark.parametrize("engine", ENGINES, ids=[e.name for e in ENGINES])
def test_no_step_that_decided_the_knee_is_shorter_than_the_window_rule(
    engine: Engine, profiles: dict[str, Profiled]
) -> None:
    """The knee's rate and the lowest rate that failed were each decided by a step at least as long
    as the window rule (`DECIDE_REQUESTS` requests at its rate or `DECIDE_LIFETIMES` of its own
    lifetimes), unless that rate lay above the stable share of the saturated throughput (failed by
    definition, not by measurement)."""
    found = profiles[engine.name].profile
    assert found.knee is not None and found.knee.failed_rate is not None and found.saturated_rate
    ends = [
        s for s in rate_verdicts(found.steps) if s.offered_rate in (found.knee.rate, found.knee.failed_rate)
    ]
    assert len(ends) == 2
    for step in ends:
        if step.offered_rate > STABLE_SHARE * found.saturated_rate:
            continue
        assert step.window_seconds is not None and step.verdict is not None
        rule = deciding_step(step.e2e_seconds["p50"], step.offered_rate).window
        # The rule's lifetime is the sweep's estimate before the step; the step's own median can
        # be a little longer under load, so allow the requests term, which does not depend on it.
        assert step.window_seconds >= min(rule, DECIDE_REQUESTS / step.offered_rate) * 0.98, step


def _tpot(found: Profile, batch: float) -> float:
    fit = linear_fit(found.tpot_vs_batch)
    assert fit is not None
    return fit[0] + fit[1] * batch


def test_the_twin_reproduces_the_profiled_server(
    tmp_path: Path, workload: Workload, profiles: dict[str, Profiled]
) -> None:
    """The twin of the six-slot engine's profile (`twin_params` of its profile.json, as `emulate
    --profile` builds it) and the original, both profiled with a second seed: the original's knee
    within 10 % of the first seed's; the twin's and the original's knees within 10 %, TPOT against
    batch size at one request and at a full batch, and mean TTFT at 40 % of the lower knee (each
    profile's fitted curve) within 15 %. On the wall clock the TPOT at one request and the TTFT were
    allowed 25 % after a loaded CI run read 17.5 % apart; on virtual time they read 1 % and 4 %."""
    engine = ENGINES[1]
    first = profiles[engine.name]
    twin_engine = twin_params(load(first.out / "profile.json"))
    original, twin = (
        profile_in_process(
            params,
            time_scale=engine.time_scale,
            workload=workload,
            slo=LOOSE_SLO,
            budget=BUDGET,
            out=tmp_path / name,
            seed=7,
            engine_seed=seed,
        ).profile
        for name, params, seed in (("original", engine.params, 1), ("twin", twin_engine, 1))
    )
    assert original.knee is not None and twin.knee is not None, (original.error, twin.error)
    assert first.profile.knee is not None
    assert original.knee.rate == pytest.approx(first.profile.knee.rate, rel=0.10), "two seeds disagree"
    assert twin.knee.rate == pytest.approx(original.knee.rate, rel=0.10)
    for batch in (1.0, float(engine.params.max_num_seqs)):
        assert _tpot(twin, batch) == pytest.approx(_tpot(original, batch), rel=0.15), batch
    # TTFT near the knee is mostly queueing, steep in the rate and swinging with the bursts a step
    # caught. At 40 % the mean TTFT is the front end, the prefill and a short queue, which is what
    # the twin calibrates (the queue near the knee is the fidelity check's, per rate, below).
    rate = 0.4 * min(twin.knee.rate, original.knee.rate)
    ttft = [
        fitted(p.steps, knee.rate, lambda s: s.ttft_seconds["mean"]).at(rate)
        for p, knee in ((twin, twin.knee), (original, original.knee))
    ]
    assert ttft[0] == pytest.approx(ttft[1], rel=0.15)


def test_the_fidelity_check_holds_between_an_emulator_and_its_twin(profiles: dict[str, Profiled]) -> None:
    """`vllm-autoscale fidelity`'s sweeps and criteria (`lab.profile.twin.fidelity`) against the six-slot
    engine and the twin of its profile: at five rates from 0.45 to 1.2 times the knee the running
    requests within 15 %, the waiting trend of the same kind and both on the same side of the TTFT
    SLO; the knees (as the sweep reads them) within 10 %. Steps of 48 emulated seconds: with 4 the
    running gauge of a step at 0.7 of the knee read 16 % apart while both sides' TPOT agreed within
    3 %, too few lifetimes for its mean; at 0.3 of the knee (one request running on average) even
    48 s read 14 % apart with equal TPOT."""
    engine = ENGINES[1]
    found = load(profiles[engine.name].out / "profile.json")
    assert found.knee is not None
    rates = [round(f * found.knee.rate, 3) for f in (0.45, 0.6, 0.9, 1.0, 1.2)]
    said: list[str] = []

    async def sweep_of(params: EngineParams, seed: int) -> list[Step]:
        async with emulated(params, time_scale=engine.time_scale, seed=seed) as url:
            settings = SweepSettings(
                url=url,
                model="m",
                workload=found.workload,
                slo=found.slo,
                step_seconds=48.0,
                settle_seconds=6.0,
                time_scale=engine.time_scale,
            )
            return await sweep(settings, rates, say=said.append)

    # The server as `emulate --seed 1` runs it, the twin as `fidelity` starts it (`--seed 0`).
    server = virtual_time.run(sweep_of(engine.params, 1))
    twin = virtual_time.run(sweep_of(twin_params(found), 0))
    result = compare(server, twin, found.slo)
    output = "\n".join(said)
    assert result.ok and len(server) == len(twin) == 5, output
    for row in result.rows:
        assert row.twin.running == pytest.approx(row.server.running, rel=0.15), output
    assert result.twin_knee == pytest.approx(result.server_knee, rel=0.10)
    assert any(s.verdict == "failed" for s in server), "the sweep must reach past the knee"


@pytest.mark.parametrize("engine", ENGINES, ids=[e.name for e in ENGINES])
def test_the_prefill_probe_reads_the_engines_cost_per_prompt_token(
    engine: Engine, profiles: dict[str, Profiled]
) -> None:
    """A burst of k requests of P prompt tokens that lands in one step reaches its first tokens after
    `k * (step_per_seq + step_per_prefill_token * (P - 1))` beyond the base and the front end: per
    prompt token of the burst, `ideal`. On virtual time a burst's requests arrive at one instant and
    are prefilled in one step, as on a real engine whose prefill steps are tens of milliseconds
    (burst.txt); what is left is the steps' jitter (±10 %), which the probe's 95 % interval must
    cover. The summary says what it sent."""
    found, out = profiles[engine.name].profile, profiles[engine.name].out
    p, prompt = engine.params, sum(PROMPTS) / len(PROMPTS)
    ideal = (p.step_per_seq_seconds + p.step_per_prefill_token_seconds * (prompt - 1)) / prompt
    assert found.prefill_interval is not None and found.prefill_seconds_per_token is not None, (
        found.prefill_probe
    )
    low, high = found.prefill_interval
    assert low <= ideal <= high, (ideal, found.prefill_interval, found.prefill_probe)
    sizes = burst_sizes(p.max_num_seqs, round(prompt), p.num_gpu_blocks * p.block_size)
    assert len(found.prefill_probe) == len(sizes) * (1 + PREFILL_ROUNDS)
    assert "prefill: " in (out / "summary.txt").read_text()
