"""`vllm-autoscale backtest`: recorded traffic through the HPA model, for many policies, to a decision.

Modules, one concept each (`runner` composes them; `cli` is the sub-command):

* `history`: traffic on a time grid, gaps kept as gaps; `trace_file` (with `stages` and
  `profile_trace`) and `prometheus_history` read it.
* `calibration`: one replica's service model (capacity with its uncertainty) from a profile, a flag
  or a fit of the recorded data.
* `policy`, `policy_file`: the candidates (built-in sweep or YAML) and the baselines; `headroom`:
  the anticipating policy at lower targets, for days that need spare capacity (the demo's sweep).
* `fleet`: the fleet model (a Service's spread or least in flight); `simulate`: one policy through
  `lab.hpa` over a history, fluid or seeded; `sampling`: whole requests and the counts a scrape reads
  on a seeded replay; `reading`: a metric as the adapter serves it (smoothing windows included);
  `band`: a policy over many seeds, its median and range.
* `pool_model`, `pools`, `pool_policy`, `pool_report`, `pool_cli`: prefill and decode pools apart
  (`backtest --disaggregated`), per-role scaling against the pair as one unit.
* `plans`: the schedules that need no HPA (foresight and the reactive bound), every policy's bounds.
* `outcome`: a run's numbers; `decision`: supported / rejected / open; `manifests`: HPA and KEDA.
* `record` (Markdown and JSON), `pareto` (the PNG), `runner` (the files in `--out`).
"""
