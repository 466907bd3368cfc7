"""`vllm-autoscale demo`: emulated fleet, adapter, load and HPA model in one process.

Modules, one concept each (`runner` composes them; durations are emulated seconds):

* `settings`, `cli`: what a run is asked to do; `capacity`: engine presets and one replica's throughput.
* `loadgen`: the named scenarios (`--profile`: stages of offered load), Poisson arrivals, request shapes.
* `timeline`: emulated time since the load started, and periodic loops on it.
* `deployment`: `spec.replicas` over the fleet; replicas start cold and stop gracefully (pod hooks),
  down to 0.
* `traffic`: the clients, sending the profile through a `Service`; `request_log`: what became of them.
* `gateway`: the Service in front of the fleet, counting arrivals; `upstream`: the queue (`lab.queue`)
  in front of it for `--profile zero-idle`, with a consumer per Ready replica.
* `embedded`: the real adapter on the scrape source; `pages` (+ `promql_eval`): its stand-in for
  Prometheus for user PromQL metrics; `metrics_client`: the HPA's read of it.
* `demand`: `inflight_within_demand`, in-flight capped by the arrival rate (no overshoot while
  capacity loads), and the steady need it is measured against.
* `hpa_loop`: the HPA model's sync every period, scaling the Deployment.
* `observe`: one `Tick` per tick; `view`: the live terminal panel.
* `summary`, `figure`, `report`: the run's summary (its data: `lab.records`), its picture and its files;
  `describe`: the banner and the HPA's text, targets in the cluster's units, shared by all of them.
* `choice`: the default HPA, the decision lab's recommendation for the run's day (`day`: its traffic
  and engine as the backtest sees them; `knee`: the engine's knee for the SLO; `day_cache`: that
  backtest kept on disk for the next demo of the same day); `comparison`: the run beside the same day
  backtested (foresight, utilisation HPA, fixed peak fleet); `validation`: a demo run's CSV replayed
  through the backtest with the run's own policy (how the backtest is held to the demo).
"""
