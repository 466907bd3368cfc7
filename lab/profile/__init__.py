"""The decision lab, part 1: profile one vLLM replica's capacity curve (`vllm-autoscale profile`)."""
