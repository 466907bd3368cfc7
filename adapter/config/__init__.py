"""The adapter's configuration, in one place: one YAML file, validated strictly at start-up.

* `loader`: the settings dataclasses, `load`/`load_file` (file + flag overrides) and cross-key checks.
* `typed`: strict conversion of plain YAML data into frozen, typed dataclasses.
* `metrics`: the `metrics:` section, turned into the catalogue the adapter serves.
* `reference`: docs/configuration.md, generated from the dataclasses.
"""

from adapter.config.loader import (
    BasicAuth,
    CacheSettings,
    Config,
    LoggingSettings,
    MetricSettings,
    PrometheusSettings,
    RoleSettings,
    ScrapeSettings,
    SecuritySettings,
    ServerSettings,
    StaticTarget,
    load,
    load_file,
    parse_duration,
)

__all__ = [
    "BasicAuth",
    "CacheSettings",
    "Config",
    "LoggingSettings",
    "MetricSettings",
    "PrometheusSettings",
    "RoleSettings",
    "ScrapeSettings",
    "SecuritySettings",
    "ServerSettings",
    "StaticTarget",
    "load",
    "load_file",
    "parse_duration",
]
