"""The alerts and recording rules of vllm-autoscale, generated from one source: `alerts.rules`, with
every threshold, duration and selector a field of `alerts.params.Params`.

`python -m alerts.generate` (`make generate`) writes `alerts/vllm-autoscale.rules.yaml` and the Helm
chart's template copy `helm/files/prometheus-rules.tpl.yaml`; `alerts/runbook.md` explains every alert.
"""
