"""The decision lab, part 1: profile one vLLM replica's capacity curve (`vllm-autoscale profile`).

Modules, one concept each:

* `schema`: the versioned profile file (`Profile`, `Step`, `Knee`, `Target`; `dump`/`load`).
* `settings`: what a run is asked to do, and what it measured; `cli`: the command.
* `server`: is it reachable, vLLM, serving the model; `launch`: `--launch` starts and times it.
* `workload`: token counts (fixed or pairs) and prompts; `client`: one streamed, timed completion.
* `load`: open-loop Poisson and closed-loop clients; `metrics_reader`: `/metrics` snapshots.
* `plan`: step lengths and rates within the budget; `steps`: one step summarized, its verdicts.
* `profiler`: the run (warm-up, prefill probe, concurrency sweep, rate steps, bisection, confirmation).
* `knee`: the knee and the curves; `recommend`: targets and the `vllm_saturation` parameters.
* `report`, `figure`, `view`: the files, the PNG, the live progress.
* `twin`: engine parameters that make `vllm-autoscale emulate --profile` the profiled server's twin.
"""
