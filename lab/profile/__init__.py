"""The decision lab, part 1: profile one vLLM replica's capacity curve (`vllm-autoscale profile`).

Modules, one concept each:

* `schema`: the versioned profile file (`Profile`, `Step`, `Knee`, `MetricTarget`; `dump`/`load`).
* `settings`: what a run is asked to do, and what it measured; `cli`: the command.
* `load/`: the load test (workload, client, open- and closed-loop drivers, `/metrics` reader, server).
* `launch`: `--launch` starts the server and times it.
* `plan`: step lengths (the window rule) within the budget; `steps`: one step summarized.
* `verdict`: held, failed or undecided from the window's statistics and their intervals.
* `profiler`: the run, phase by phase; `stepper`: one step, sized, loaded, measured longer while undecided.
* `sweep`: the closed-loop sweep and the lifetimes read off it; `prefill/`: the prefill probe.
* `search`: the knee's search (scan, bisection, the knee's repeat, one step past saturation).
* `knee`: the knee, its band and the fits; `recommend`: targets and the `vllm_saturation` parameters.
* `checks`: the profile's checks of itself; `output/`: the files, the PNG, the live view.
* `twin/`: the profiled server's twin (its engine parameters, the model knee, its fidelity).
* `pd/`: `profile --pd`, a prefill-decode pair joined by a KV connector.
"""
