"""The prefill probe: what a prompt token costs a step that prefills it.

* `plan`: the bursts' sizes and the fit; `probe`: the bursts sent at once from idle, measured.
"""
