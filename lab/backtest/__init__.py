"""`vllm-autoscale backtest`: recorded traffic through the HPA model, for many policies, to a decision.

Modules, one concept each (`runner` composes them; `cli` is the sub-command):

* `history`: traffic on a time grid, gaps kept as gaps; `inputs/` read it (trace files, stage
  tables, profiles, Prometheus).
* `calibration`: one replica's service model (capacity with its uncertainty) from a profile, a flag
  or a fit of the recorded data.
* `policy`, `policy_file`: the candidates (built-in sweep or YAML) and the baselines; `headroom`:
  the anticipating policy at lower targets, for days that need spare capacity (the demo's sweep).
* `fleet`: the fleet model (a Service's spread or least in flight); `simulate`: one policy through
  `lab.hpa` over a history, fluid or seeded; `sampling`: whole requests and the counts a scrape reads
  on a seeded replay; `reading`: a metric as the adapter serves it (smoothing windows included);
  `band`: a policy over many seeds, its median and range.
* `pools/`: prefill and decode pools apart (`backtest --disaggregated`).
* `plans`: the schedules that need no HPA (foresight and the reactive bound), every policy's bounds.
* `outcome`: a run's numbers; `decision`: supported / rejected / open; `runner`: the files in `--out`
  (`output/`: the record, the PNG, the HPA and KEDA manifests).
"""
