"""A disaggregated P/D pair: prefill and decode roles with the exact metrics of vLLM's disaggregated
engines and the KV hand-over between them (`emulate --pd P:D`).

* `engine`: an engine of one role; `fleet`: the pair's servers, the hand-over and the proxy in front.
"""
