"""`vllm-autoscale demo`: emulated fleet, adapter, load and HPA model in one process.

Modules, one concept each (`runner` composes them; durations are emulated seconds):

* `settings`, `cli`: what a run is asked to do; `capacity`: engine presets and one replica's throughput.
* `loadgen`: the named scenarios (`--profile`: stages of offered load), Poisson arrivals, request shapes.
* `timeline`: emulated time since the load started, and periodic loops on it.
* `cluster/`: the emulated cluster around the real adapter: the Deployment, the clients through a
  Service (`request_log`, here: what became of them), the upstream queue, the adapter and its
  stand-in Prometheus, the HPA model's loop.
* `demand`: `inflight_within_demand`, in-flight capped by the arrival rate (no overshoot while
  capacity loads), and the steady need it is measured against.
* `observe`: one `Tick` per tick; `view`: the live terminal panel.
* `summary`, `figure`, `report`: the run's summary (its data: `lab.records`), its picture and its files;
  `describe`: the banner and the HPA's text, targets in the cluster's units, shared by all of them.
* `decision/`: the run's day as the decision lab sees it: the default HPA it recommends, the run
  beside the day backtested, and the validation of the backtest on a demo run.
"""
