"""The `vllm-autoscale demo` package: emulated fleet, adapter, load and HPA model in one process."""
