"""Where a backtest's history comes from.

* `trace_file`: a CSV trace, a demo's CSV or a stage table (`stages`: the queue a stage table implies).
* `profile_trace`: a profile's steps as traffic; `prometheus_history`: a range read from Prometheus.
"""
