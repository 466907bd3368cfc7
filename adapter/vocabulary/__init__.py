"""The server's vocabulary: what each external metric means and how it is named, selected and written.

Value types and names only (the catalogue, vLLM's and the exporters' series names, label selectors,
Kubernetes names and quantities) and everything PromQL: rendering the catalogue, reading user PromQL,
checking it. Nothing here imports a source, the cache, the provider or the HTTP layer.
"""
