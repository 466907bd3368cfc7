"""vllm-autoscale: a Kubernetes external metrics adapter for vLLM fleets."""

__version__ = "0.1.0"
