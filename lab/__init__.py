"""The lab: what runs on a laptop or in CI, never in the cluster's serving path.

* `emulator`: emulated vLLM replicas with vLLM's exact `/metrics` (`vllm-autoscale emulate`).
* `hpa`: a faithful model of the Kubernetes HPA controller.
* `engine`: engine processes (`vllm serve` or the emulator) on a GPU and a port, for experiments
  and rehearsals.
* `experiments`: engine configurations compared side by side on live engines, repeated, with evidence gates
  (`vllm-autoscale experiment`).
* `demo`: the adapter against an emulated fleet driven by the HPA model (`vllm-autoscale demo`).
* `rehearsal`: the demo's loop on engine processes, beside the backtest's prediction
  (`vllm-autoscale rehearse`).

The lab uses the server's public pieces (`adapter`); the server never imports the lab.
"""
