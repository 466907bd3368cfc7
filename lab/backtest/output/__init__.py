"""What a backtest writes: `record` (Markdown and JSON), `pareto` (the PNG), `manifests` (HPA and KEDA)."""
