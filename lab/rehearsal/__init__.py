"""`vllm-autoscale rehearse`: the demo's loop on engine processes, beside the backtest's prediction.

Modules, one concept each (`runner` composes them; `cli` is the sub-command):

* `settings`: the engine command, the GPUs, the HPA under test, the time scale.
* `load`: recorded traffic (a trace, a Prometheus range, the demo's day), compressed, as requests.
* `replicas`: the Deployment of engine processes (`lab.engine`), watched after Ready, failed ones replaced.
* `coldstart`: each replica's life as measured: asked, started, healthy, first token, failed, stopped.
* `router`: least requests in flight over the Ready replicas (a failed one's requests retried once or
  failed); `clients`: the load sent through it.
* `observe`: the engines' gauges at each tick, as the demo's `Tick`.
* `prediction`: the backtest of what was sent, on the engine's profile, and the gap; the band of
  seeded backtests of the traffic asked for; `band_view`: the run against its band over time.
* `report`: the demo's files from the live run, the cold starts, the side-by-side.
"""
