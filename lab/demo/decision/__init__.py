"""The demo's day as the decision lab sees it.

* `choice`: the default HPA, the backtest's recommendation for the run's day (`day`: its traffic and
  engine as the backtest sees them; `knee`: the engine's knee for the SLO; the backtest is kept on disk
  for the next demo of the same day by `lab.results_cache`).
* `comparison`: the run beside the same day backtested (foresight, utilisation HPA, fixed peak fleet).
* `validation`: a demo run's CSV replayed through the backtest with the run's own policy.
"""
