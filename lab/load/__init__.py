"""The load test a profile runs, also used by the experiments, the rehearsal and the twin's fidelity.

* `workload`: token counts (fixed or pairs) and prompts; `client`: one streamed, timed completion.
* `driver`: open-loop Poisson arrivals and closed-loop clients; `metrics_reader`: `/metrics` snapshots.
* `server`: is it reachable, vLLM, serving the model; its version and KV cache.
"""
