"""The decision lab, part 1: profile one vLLM replica's capacity curve (`vllm-autoscale profile`).

Modules, one concept each:

* `schema`: the versioned profile file (`Profile`, `Step`, `Knee`, `MetricTarget`; `dump`/`load`).
* `settings`: what a run is asked to do, and what it measured; `cli`: the command.
* `server`: is it reachable, vLLM, serving the model; `launch`: `--launch` starts and times it.
* `workload`: token counts (fixed or pairs) and prompts; `client`: one streamed, timed completion.
* `load`: open-loop Poisson and closed-loop clients; `metrics_reader`: `/metrics` snapshots.
* `plan`: step lengths (the window rule) within the budget; `steps`: one step summarized.
* `verdict`: held, failed or undecided from the window's statistics and their intervals.
* `profiler`: the run, phase by phase; `stepper`: one step, sized, loaded, measured longer while undecided.
* `sweep`: the closed-loop sweep and the lifetimes read off it; `probe`: the prefill probe's bursts.
* `search`: the knee's search (scan, bisection, the knee's repeat, one step past saturation).
* `knee`: the knee, its band and the fits; `recommend`: targets and the `vllm_saturation` parameters.
* `checks`: the profile's checks of itself; `report`, `figure`, `view`: the files, the PNG, the live view.
* `twin`: engine parameters that make `vllm-autoscale emulate --profile` the profiled server's twin
  (`twin_saturation`: its speed scaled by the saturated levels where no open-loop step was run);
  `fidelity` (+ `fidelity_cli`): how closely a twin reproduces its server, swept side by side.
* `pd_measure`, `pd_recommend`, `pd_schema`, `pd_cli`: `profile --pd`, a prefill-decode pair joined
  by a KV connector: prefill throughput through the path, the decode knee, the hand-over, targets.
"""
