"""The profiled server's twin: an emulated engine made to behave as the profile measured it.

* `params`: the engine parameters `vllm-autoscale emulate --profile` runs (`saturation`: its speed
  scaled by the saturated levels where no open-loop step was run).
* `model`: the knee of a model of the server, where open-loop steps cannot decide one in the budget.
* `fidelity` (+ `fidelity_cli`): how closely a twin reproduces its server, swept side by side.
"""
