"""Every PromQL expression the dashboards plot, one module per data source (A3: queries apart from panels).

- `grafana`: what every query shares: the `Query` a panel target is made of, Grafana's variables as
  label matchers (`namespace=~"$namespace"`, so one expression serves every selection), legends.
- `vllm_engine`: vLLM's own series; the catalogue's metrics through
  `adapter.vocabulary.promql.catalogue.value_query`.
- `kube_state`: kube-state-metrics (HPAs, Deployments, pods).
- `dcgm`: the NVIDIA DCGM exporter.
- `adapter_metrics`: the adapter's own `vllm_autoscale_*` series.
- `recorded`: the alerts' recording rules (TPOT against its baseline, queue depths).
- `gateway`: the inference gateway's endpoint picker (flow-control queue, requests, pool saturation).

All of them build PromQL from `adapter.vocabulary.promql`'s vocabulary and take series names from
`adapter.vocabulary.vllm`, `adapter.vocabulary.exporters` and `adapter.telemetry`, so a renamed series is
renamed there once.
"""
