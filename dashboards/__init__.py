"""Grafana dashboards as code (grafanalib), generated to checked-in JSON by `python -m dashboards.generate`.

`queries` holds every PromQL expression, one module per data source; `panels` the panel kinds,
units and threshold levels; `layout` the boards, rows, variables, links and the dashboard shell. One
module per dashboard describes it row by row (one function per row) and defines a module-level
`dashboard` (grafanalib's convention). This package lives at the repository root and is not shipped
in the adapter's wheel.
"""
