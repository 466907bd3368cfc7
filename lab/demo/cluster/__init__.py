"""The demo's cluster, emulated around the real adapter.

* `deployment`: `spec.replicas` over the fleet; replicas start cold and stop gracefully, down to 0.
* `traffic`: the clients, sending the profile through a `Service`; `gateway`: that Service, counting
  arrivals; `upstream`: the queue (`lab.queue`) in front of it for `--profile zero-idle`.
* `embedded`: the real adapter on the scrape source; `pages` (+ `promql_eval`): its stand-in for
  Prometheus for user PromQL metrics; `metrics_client`: the HPA's read of it.
* `hpa_loop`: the HPA model's sync every period, scaling the Deployment.
"""
