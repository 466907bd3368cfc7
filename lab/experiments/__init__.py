"""Live experiments: engine configurations compared side by side, repeated, with evidence gates.

`vllm-autoscale experiment CATALOG` answers a serving team's questions of the engine itself (which
`--max-num-seqs`, whether an FP8 KV cache pays, where the long-context boundary lies, what a request
that met its SLO costs in GPU-seconds) on live engines, one per GPU. Modules, one concept each:

* `catalog`: the YAML catalog (engine command, variants, workload, SLO, seeds, questions), read by the
  project's one strict reader (`adapter.config.strict`): each error names the key path, the value and
  what is valid.
* `probe`: one engine measured a step at a time with the profile's load driver, client and verdict.
* `search`: a boundary found by bisection, as a band [held, failed).
* `measure`: the questions asked of one engine for one seed: capacity, cost, long-context boundary.
* `runner`: variants queued onto free placements, engines started, measured, stopped, or blocked.
* `gates`: each answer against the baseline's spread: supported, rejected, open, caveated, blocked.
* `record` (+ `figure`): the record in Markdown and JSON beside the policy decision record, its PNG.
* `cli`: the command.
"""
