"""Grafana dashboards as code (grafanalib), generated to checked-in JSON by `python -m dashboards.generate`.

`queries` holds every PromQL expression; `panels` the shared panel, variable, link and layout
helpers; one module per dashboard defines a module-level `dashboard` (grafanalib's convention).
This package lives at the repository root and is not shipped in the adapter's wheel.
"""
