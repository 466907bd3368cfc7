"""The emulated replicas the profile, experiment and sweep tests measure: their capacity from their
parameters, and a profile of one run in this process on virtual time.

**Capacity.** A request of `P` prompt and `O` output tokens holds one of `N` batch slots for `O`
engine steps; a full batch's mean step lasts
`T = step_base + step_per_seq * N + step_per_prefill_token * (P - 1) * N / O`
(`EngineParams.step_seconds`), so a saturated replica completes `C = N / (O * T)` requests per
emulated second (derived in `test_profile_emulators`). The tests that check a measured knee,
saturation or boundary against it share this.

**A profile on virtual time** (`profile_in_process`). The emulator (`EmulatedFleet`, as `vllm-autoscale
emulate` runs it) and the profile (`Profiler`, as `vllm-autoscale profile` runs it) share one
`lab.virtual_time` loop and talk HTTP over loopback: time moves only while both wait, so neither
falls behind the other however busy the machine is, and a seed gives one profile. What the test
checks is then the profile's method against the emulator's arithmetic, not the CPU it was given.
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

from lab import virtual_time
from lab.emulator.fleet import EmulatedFleet
from lab.emulator.params import EngineParams
from lab.load.workload import Workload
from lab.profile.output.report import build, write
from lab.profile.output.view import ProgressView
from lab.profile.profiler import Profiler
from lab.profile.schema import PercentileSlo, Profile
from lab.profile.settings import Settings


def capacity(params: EngineParams, prompt: float, output: float) -> float:
    """C = N / (O * T) for requests of `prompt` and `output` tokens (their means, for a mix)."""
    n = params.max_num_seqs
    step = (
        params.step_base_seconds
        + params.step_per_seq_seconds * n
        + params.step_per_prefill_token_seconds * (prompt - 1) * n / output
    )
    return n / (output * step)


@contextlib.asynccontextmanager
async def emulated(params: EngineParams, *, time_scale: float, seed: int) -> AsyncIterator[str]:
    """An emulated replica of `params` on a free loopback port, on the running loop's clock (as
    `emulate --time-scale --seed` runs one, model "m"); yields its URL once it listens."""
    async with EmulatedFleet(
        model="m", params=params, time_scale=time_scale, seed=seed, monotonic=virtual_time.loop_time
    ) as fleet:
        await fleet.start(1)
        await fleet.replicas[0].wait_ready()
        yield fleet.replicas[0].url


@dataclass(frozen=True)
class Profiled:
    """A profile of an in-process emulator: what it found, where its files are, what it printed."""

    profile: Profile
    out: Path
    output: str


def profile_in_process(
    params: EngineParams,
    *,
    time_scale: float,
    workload: Workload,
    slo: PercentileSlo,
    budget: float,
    out: Path,
    seed: int = 0,
    engine_seed: int = 1,
) -> Profiled:
    """Profile an emulated replica of `params` (`emulate --time-scale T --seed engine_seed`) with the
    settings `profile --budget --seed --time-scale` would give, on a virtual-time loop; write the
    profile's files to `out` as the command does. `budget` is in the loop's (virtual) seconds."""

    async def main() -> tuple[Settings, Profiler, str]:
        async with emulated(params, time_scale=time_scale, seed=engine_seed) as url:
            settings = Settings(
                url=url,
                model="m",
                workload=workload,
                slo=slo,
                budget=budget,
                time_scale=time_scale,
                seed=seed,
            )
            stream = io.StringIO()
            view = ProgressView(
                stream, title=f"profile of {url}", budget=budget, percentile=slo.percentile, interactive=False
            )
            profiler = Profiler(settings, view)
            await profiler.run()
            return settings, profiler, stream.getvalue()

    settings, profiler, output = virtual_time.run(main())
    profile = build(settings, profiler.result)
    out.mkdir(parents=True, exist_ok=True)
    write(out, profile, title=f"profile at time scale {time_scale:g}")
    return Profiled(profile, out, output)
