"""`vllm-autoscale backtest --disaggregated PROFILE`: recorded traffic through a P/D pair's two pools.

The pair's service model comes from the P/D section of a profile (`vllm-autoscale profile --pd`,
`lab.profile.pd.schema`); the traffic from the usual `--trace` or `--prometheus-url`, which must carry
prompt and output tokens per step (the two pools' loads are those tokens). The policies compared:

* `per-role`: each pool on its own HPA at the profile's targets (prefill `vllm_prefill_backlog_seconds`
  Value, decode `vllm_requests_running` AverageValue);
* `joint-P:D`: the pair scaled as one unit of the profile's P:D ratio on the same two signals, and
  at 1:1 where that ratio is another.

Each runs on `--seeds` seeded replays (0: one fluid replay); the table, the verdict (the policy that
holds the SLO on every seed for the fewest GPU-hours) and `pools.md`/`pools.json` go to `--out`.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import sys
from pathlib import Path

from lab import json_out
from lab.backtest.history import History, HistoryError
from lab.backtest.policy import PIPELINES
from lab.backtest.pools.model import PairModel
from lab.backtest.pools.policy import BACKLOG, PairPolicy, RoleScaling, RoleTarget
from lab.backtest.pools.report import compare, table, verdict
from lab.profile.pd.schema import PdProfile, load
from lab.profile.schema import ProfileError
from lab.slo import Slo

MARKDOWN_NAME = "pools.md"
JSON_NAME = "pools.json"


def pair_model(pd: PdProfile) -> PairModel:
    """The two pools' replicas as the profile measured them."""
    return PairModel.measured(
        prefill_throughput=pd.prefill.throughput_tokens_per_second,
        prefill_alone=pd.prefill.alone_seconds,
        prefill_slots=max(1.0, pd.prefill.slots),
        prompt_tokens=pd.prompt_tokens,
        tpot_base=pd.decode.tpot_base_seconds,
        tpot_per_request=pd.decode.tpot_per_request_seconds,
        decode_slots=max(1.0, pd.decode.slots),
        output_tokens=pd.output_tokens,
        handover=pd.handover_seconds,
        kv_per_request=pd.decode.kv_per_request,
    )


def pair_policies(
    pd: PdProfile, pair: PairModel, history: History, args: argparse.Namespace
) -> list[PairPolicy]:
    """Per role at the profile's targets, and the joint unit at the profile's ratio (and 1:1)."""
    peak = history.peak_rate()
    prompts = [v for v in history.prompt_tokens or () if not math.isnan(v)]
    outputs = [v for v in history.output_tokens or () if not math.isnan(v)]
    # Room for twice the peak in each pool at its heaviest tokens (the HPA overshoots).
    need = pair.need(peak, max(prompts), max(outputs))
    top = [args.max_replicas or max(2, math.ceil(2 * n)) for n in need]
    backlog = pd.prefill_targets[BACKLOG]
    running = pd.decode_targets["vllm_requests_running"]
    prefill = RoleScaling("prefill", (RoleTarget(BACKLOG, backlog.type, backlog.value),), 1, top[0])
    decode = RoleScaling(
        "decode", (RoleTarget("vllm_requests_running", running.type, running.value),), 1, top[1]
    )
    cold = args.cold_start if args.cold_start is not None else 60.0
    base = PairPolicy(
        "per-role",
        prefill,
        decode,
        cold_start=cold,
        pipeline=PIPELINES[args.pipeline],
        sync_period=args.sync_period,
    )
    ratios = list(dict.fromkeys([tuple(pd.ratio), (1, 1)]))
    joint = []
    for p, d in ratios:
        # The unit's bounds hold as many units as the larger of the pools' own maxima needs.
        units = max(math.ceil(top[0] / p), math.ceil(top[1] / d))
        joint.append(
            dataclasses.replace(
                base,
                name=f"joint-{p}:{d}",
                joint=(p, d),
                prefill=dataclasses.replace(prefill, max_replicas=units * p),
                decode=dataclasses.replace(decode, max_replicas=units * d),
            )
        )
    return [base, *joint]


def run(args: argparse.Namespace, history: History) -> int:
    """Compare the pair policies on `history`; print and write the table and the verdict."""
    try:
        if history.prompt_tokens is None or history.output_tokens is None:
            raise HistoryError(
                f"{history.source} records no prompt_tokens/output_tokens per step: a P/D backtest needs "
                "both (a trace's columns time,arrivals,prompt_tokens,output_tokens)"
            )
        pd = load(args.disaggregated)
        pair = pair_model(pd)
        policies = pair_policies(pd, pair, history, args)
    except (HistoryError, ProfileError, ValueError) as error:
        print(f"vllm-autoscale backtest: {error}", file=sys.stderr)
        return 2
    slo = Slo(args.slo_ttft, args.slo_tpot)
    seeds = list(range(args.seeds)) if args.seeds > 0 else [None]
    print(f"traffic: {history.source}: {history.requests:.0f} requests over {history.duration / 60:.1f} min")
    print(
        f"pair: {args.disaggregated}: prefill {pair.prefill_throughput:.0f} prompt tokens/s per pod, "
        f"decode {pair.decode.capacity:.3g} req/s per pod at "
        f"saturation, hand-over {pair.handover * 1000:.3g} ms"
    )
    bands = compare(
        policies,
        pair,
        history,
        slo,
        seeds=seeds,
        resolution=args.resolution,
        router=args.router,
        gpus_per_replica=args.gpus_per_replica,
    )
    text = table(bands, args.slo_attainment)
    best, why = verdict(bands, args.slo_attainment)
    print(text)
    for band in bands:
        print(f"{band.policy.name}: {band.policy.describe()}")
    print(f"recommended: {why}")
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    (out / MARKDOWN_NAME).write_text(
        f"# P/D backtest\n\n{history.source}, {len(seeds)} seed(s)\n\n{text}\n\n{why}\n", encoding="utf-8"
    )
    record = {
        "recommended": best.policy.name if best else None,
        "reason": why,
        "policies": [
            {
                "name": b.policy.name,
                "description": b.policy.describe(),
                "slo_attainment": dataclasses.asdict(b.band.slo),
                "gpu_hours": dataclasses.asdict(b.gpu_hours),
                "prefill_gpu_hours": dataclasses.asdict(b.prefill_gpu_hours),
                "decode_gpu_hours": dataclasses.asdict(b.decode_gpu_hours),
                "holds": b.holds(args.slo_attainment),
            }
            for b in bands
        ],
    }
    (out / JSON_NAME).write_text(json_out.text(record), encoding="utf-8")
    print(f"wrote {out / MARKDOWN_NAME}, {out / JSON_NAME}")
    return 0
