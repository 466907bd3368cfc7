"""The adapter's configuration: one YAML file, loaded strictly, with flags for the common settings.

Every section is a frozen dataclass whose fields are documented in place. Loading rejects unknown
keys, wrong types and impossible values with a `ConfigError` that names the key path, the bad value
and what would be valid, e.g. ``config key 'source' value 'prom' must be one of ['prometheus', 'scrape']``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml

from adapter.config.metrics import MetricSettings, build_catalogue
from adapter.config.roles import RoleSettings, check_pod_labels
from adapter.config.typed import DURATION as _DURATION
from adapter.config.typed import load_dataclass, parse_duration, set_key
from adapter.errors import ConfigError
from adapter.vocabulary.catalogue import MetricDef, PromQLSpec

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


@dataclass(frozen=True)
class BasicAuth:
    """HTTP basic authentication towards Prometheus."""

    username: str
    """The user name sent with every query."""
    password_file: str
    """File holding the password; read at start-up and whenever it changes."""


@dataclass(frozen=True)
class PrometheusSettings:
    """How to reach a Prometheus-compatible HTTP API (Prometheus, Thanos, Mimir, VictoriaMetrics)."""

    url: str = "http://127.0.0.1:9090"
    """Base URL; `/api/v1/query` is appended."""
    timeout: float = field(default=5.0, metadata=_DURATION)
    """Per-query timeout (seconds). A query that takes longer is an error, never a value."""
    refresh_interval: float = field(default=5.0, metadata=_DURATION)
    """How often a requested key is re-queried in the background (seconds)."""
    max_age: float = field(default=90.0, metadata=_DURATION)
    """Default staleness limit (seconds): Prometheus scrapes every 15-30 s, so 90 s allows two misses."""
    bearer_token_file: str | None = None
    """File holding a bearer token; re-read when its modification time changes (projected tokens rotate)."""
    basic_auth: BasicAuth | None = None
    """HTTP basic authentication (`username`, `password_file`); use either this or `bearer_token_file`."""
    ca_file: str | None = None
    """CA bundle to verify Prometheus' TLS certificate."""
    cert_file: str | None = None
    """Client certificate for mutual TLS (with `key_file`)."""
    key_file: str | None = None
    """Private key of `cert_file`."""
    insecure_skip_verify: bool = False
    """Skip verification of Prometheus' certificate (never in production)."""
    headers: dict[str, str] = field(default_factory=dict)
    """Extra request headers, e.g. `X-Scope-OrgID` for Mimir or Cortex tenants."""
    max_body_bytes: int = 8 * 1024 * 1024
    """Largest answer read from Prometheus (bytes). The adapter's queries return a handful of series;
    a larger body is a misbehaving proxy or a runaway user query, answered 503 without buffering it."""


@dataclass(frozen=True)
class StaticTarget:
    """A static scrape target with the pod labels its series get (a P/D fleet's role, say)."""

    url: str
    """The target's URL (`http://host:port/metrics`)."""
    labels: dict[str, str] = field(default_factory=dict)
    """Kubernetes pod labels (`llm-d.ai/role: prefill`); selectors match them as Prometheus' label names."""


@dataclass(frozen=True)
class ScrapeSettings:
    """Direct scraping of vLLM pods' `/metrics` (the scrape source)."""

    targets: tuple[str | StaticTarget, ...] = ()
    """Static targets: URLs (`http://host:port/metrics`), or `{url, labels}` mappings whose pod labels
    the series get (`labels: {llm-d.ai/role: prefill}`); empty means discover from EndpointSlices."""
    namespace: str = "default"
    """The namespace static targets belong to."""
    interval: float = field(default=1.0, metadata=_DURATION)
    """Scrape interval (seconds)."""
    timeout: float = field(default=0.8, metadata=_DURATION)
    """Per-pod scrape timeout (seconds); a slow pod is a failed pod for that round."""
    max_age: float = field(default=5.0, metadata=_DURATION)
    """Default staleness limit (seconds)."""
    on_partial: Literal["error", "ignore-failed"] = "error"
    """What to do when some pods fail: answer 503, or compute over the pods that answered."""
    discovery_namespaces: tuple[str, ...] = ()
    """Namespaces to discover vLLM EndpointSlices in (empty: every namespace asked for)."""
    discovery_selector: str = "app.kubernetes.io/component=vllm"
    """Label selector for the EndpointSlices' Services."""
    port: str = "http"
    """Name or number of the EndpointSlice port that serves `/metrics`."""
    path: str = "/metrics"
    """Path scraped on discovered pods, and on static targets given without a path."""
    pod_labels: tuple[str, ...] = ()
    """Pod label keys copied onto discovered targets (e.g. `llm-d.ai/role` for P/D fleets), read by
    listing the pods of each namespace (RBAC: `list` on `pods`); a pod without the key lacks the label."""
    discovery_interval: float = field(default=5.0, metadata=_DURATION)
    """How often EndpointSlices are listed (seconds); a new replica is scraped at most this much later."""
    max_body_bytes: int = 4 * 1024 * 1024
    """Largest `/metrics` page read from one pod (bytes; a vLLM page is tens of KiB). A larger page
    fails that pod's scrape without being buffered."""


@dataclass(frozen=True)
class CacheSettings:
    """Values are served from memory, refreshed in the background per requested key."""

    idle_timeout: float = field(default=300.0, metadata=_DURATION)
    """A key nobody asked for in this long (seconds) stops being refreshed and is dropped."""
    max_keys: int = 1000
    """Most keys refreshed at once, shared fairly: when full, a new key replaces one answering "no
    targets", else (while its namespace holds less than max_keys over the namespaces holding keys)
    the least recently read key of the namespace holding the most; otherwise it gets 429. Keys are
    refreshed together, one Prometheus query per metric and selector shape plus one per key no group
    can serve (docs/operations.md "At fleet size"), so a client cycling through selectors cannot
    multiply the load on Prometheus (or on the pods) without bound."""


@dataclass(frozen=True)
class ServerSettings:
    """Where the API listens."""

    address: str = "127.0.0.1"
    """Address to listen on; `0.0.0.0` in a pod, loopback for local use."""
    port: int = 6443
    """HTTPS port of the external metrics API (the APIService's Service targets it)."""
    insecure_serving: bool = False
    """Plain HTTP without authentication; only for loopback addresses."""


@dataclass(frozen=True)
class SecuritySettings:
    """TLS serving, delegated authentication and authorization (flags of the same names; docs/security.md)."""

    tls_cert_file: str | None = None
    """Serving certificate (PEM, leaf first); reloaded when it changes. Set with `tls_private_key_file`."""
    tls_private_key_file: str | None = None
    """Private key of `tls_cert_file`; reloaded with it."""
    self_signed: bool = False
    """Serve a certificate generated in memory instead of files (APIService `insecureSkipTLSVerify` only)."""
    tls_reload_interval: float = field(default=10.0, metadata=_DURATION)
    """How often (seconds) certificate and CA files are checked for changes."""
    client_ca_file: str | None = None
    """CA bundle whose client certificates authenticate as
    CN (user) and O (groups); default: the cluster's."""
    requestheader_client_ca_file: str | None = None
    """CA bundle of the front proxy (the aggregator); default: the cluster's ConfigMap."""
    requestheader_allowed_names: tuple[str, ...] | None = None
    """Front-proxy certificate CNs to accept; empty accepts any; unset: the ConfigMap's, else any."""
    requestheader_username_headers: tuple[str, ...] | None = None
    """Default: the ConfigMap's, else `X-Remote-User`."""
    requestheader_group_headers: tuple[str, ...] | None = None
    """Default: the ConfigMap's, else `X-Remote-Group`."""
    requestheader_extra_headers_prefix: tuple[str, ...] | None = None
    """Default: the ConfigMap's, else `X-Remote-Extra-`."""
    kubeconfig: str | None = None
    """How to reach the kube-apiserver for reviews, the ConfigMap
    and EndpointSlice discovery; unset: in-cluster configuration."""
    authorization_always_allow_paths: tuple[str, ...] = ("/healthz", "/livez", "/readyz")
    """Paths served without authentication or authorization; a trailing `*` matches a prefix."""
    authorize_metrics: bool = True
    """Whether `/metrics` needs authorization (verb `get` on
    the non-resource URL), as Kubernetes components do."""
    review_timeout: float = field(default=5.0, metadata=_DURATION)
    """Timeout (seconds) of each kube-apiserver call: TokenReview,
    SubjectAccessReview, ConfigMap read, EndpointSlice list page."""
    token_cache_ttl: float = field(default=10.0, metadata=_DURATION)
    """How long (seconds) a TokenReview answer is reused."""
    authorized_cache_ttl: float = field(default=10.0, metadata=_DURATION)
    """How long (seconds) an allowed SubjectAccessReview answer is reused."""
    unauthorized_cache_ttl: float = field(default=10.0, metadata=_DURATION)
    """How long (seconds) a denied SubjectAccessReview answer is reused."""


@dataclass(frozen=True)
class LoggingSettings:
    """What the adapter logs, and how."""

    level: Literal["debug", "info", "warning", "error"] = "info"
    """`debug` logs the metric, namespace, selector and source latency of every served request."""
    format: Literal["json", "text"] = "json"
    """`json` writes one object a line (production); `text` is for people."""


@dataclass(frozen=True)
class Config:
    """The whole configuration file."""

    source: Literal["prometheus", "scrape"] = "prometheus"
    """Where values come from: a Prometheus-compatible API, or the adapter scraping vLLM pods itself."""
    prometheus: PrometheusSettings = field(default_factory=PrometheusSettings)
    scrape: ScrapeSettings = field(default_factory=ScrapeSettings)
    cache: CacheSettings = field(default_factory=CacheSettings)
    server: ServerSettings = field(default_factory=ServerSettings)
    security: SecuritySettings = field(default_factory=SecuritySettings)
    logging: LoggingSettings = field(default_factory=LoggingSettings)
    roles: RoleSettings = field(default_factory=RoleSettings)
    metrics: dict[str, MetricSettings] = field(default_factory=dict)
    """Overrides of built-in metrics by name, and user metrics (`queue_depth`, `dlq_depth`, ...)."""

    @property
    def refresh_interval(self) -> float:
        """The active source's refresh interval (seconds)."""
        return self.prometheus.refresh_interval if self.source == "prometheus" else self.scrape.interval

    @property
    def default_max_age(self) -> float:
        return self.prometheus.max_age if self.source == "prometheus" else self.scrape.max_age

    def catalogue(self) -> tuple[MetricDef, ...]:
        """The metrics this configuration serves: built-ins with overrides, then user metrics."""
        return build_catalogue(self.metrics, self.refresh_interval, self.roles)


def load(text: str | None = None, overrides: Mapping[str, Any] | None = None) -> Config:
    """Parse and validate a configuration from YAML text, then apply flag overrides.

    `overrides` maps dotted key paths (`prometheus.url`, `server.port`) to values that win over the
    file; they are validated the same way. A section left empty in the file (`prometheus:` with every
    key commented out) is its defaults, with or without a flag; a section given as a scalar or a list
    is a `ConfigError` naming it and its keys, with or without a flag.
    """
    try:
        data = yaml.safe_load(text) if text else {}
    except yaml.YAMLError as exc:
        # PyYAML's text spans several lines; a configuration error is one line.
        raise ConfigError(f"unable to parse configuration YAML: {' '.join(str(exc).split())}") from exc
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"configuration must be a mapping at the top level, found {type(data).__name__}")
    for dotted, value in (overrides or {}).items():
        if value is not None:
            set_key(data, Config, dotted, value)
    config: Config = load_dataclass(Config, data, "")
    _validate(config)
    return config


def load_file(path: str | Path | None, overrides: Mapping[str, Any] | None = None) -> Config:
    """`load` from a file path (or only defaults and overrides when `path` is `None`)."""
    if path is None:
        return load(None, overrides)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"unable to read configuration file {str(path)!r}: {exc.strerror}") from exc
    return load(text, overrides)


def _validate(config: Config) -> None:
    interval = config.refresh_interval
    for name, value in (("prometheus.max_age", config.prometheus.max_age),):
        if config.source == "prometheus" and value < interval:
            raise ConfigError(
                f"config key {name!r} value {value:g}s must be at least the refresh interval ({interval:g}s)"
            )
    if config.source == "scrape" and config.scrape.max_age < interval:
        raise ConfigError(
            f"config key 'scrape.max_age' value {config.scrape.max_age:g}s must be at least "
            f"the scrape interval ({interval:g}s)"
        )
    if config.scrape.timeout > config.scrape.interval:
        raise ConfigError(
            f"config key 'scrape.timeout' value {config.scrape.timeout:g}s must not exceed "
            f"'scrape.interval' ({config.scrape.interval:g}s)"
        )
    if config.source == "scrape":
        _validate_scrape(config)
    if not config.prometheus.url.startswith(("http://", "https://")):
        raise ConfigError(
            f"config key 'prometheus.url' value {config.prometheus.url!r} must start with http:// or https://"
        )
    if (config.prometheus.cert_file is None) != (config.prometheus.key_file is None):
        raise ConfigError("config keys 'prometheus.cert_file' and 'prometheus.key_file' must be set together")
    for section in ("prometheus", "scrape"):
        limit = getattr(config, section).max_body_bytes
        if limit < 4096:
            raise ConfigError(
                f"config key '{section}.max_body_bytes' value {limit} must be at least 4096 (bytes)"
            )
    if config.cache.max_keys < 1:
        raise ConfigError(f"config key 'cache.max_keys' value {config.cache.max_keys} must be at least 1")
    if not 1 <= config.server.port <= 65535:
        raise ConfigError(f"config key 'server.port' value {config.server.port} must be between 1 and 65535")
    config.roles.check()
    build_catalogue(config.metrics, config.refresh_interval, config.roles)


def _validate_scrape(config: Config) -> None:
    """The scrape source reads vLLM series itself: no user PromQL, only URLs it can fetch."""
    for metric in build_catalogue(config.metrics, config.refresh_interval):
        if isinstance(metric.spec, PromQLSpec):
            raise ConfigError(
                f"config key 'metrics.{metric.name}.query' cannot be served with source 'scrape', which "
                "evaluates only built-in metrics; use source 'prometheus' for user PromQL"
            )
    for i, target in enumerate(config.scrape.targets):
        url = target if isinstance(target, str) else target.url
        key = f"scrape.targets[{i}]" if isinstance(target, str) else f"scrape.targets[{i}].url"
        if not re.match(r"^https?://[^/?#\s]+", url):
            raise ConfigError(
                f"config key {key!r} value {url!r} must be an http:// or https:// URL, "
                "e.g. http://10.0.0.5:8000/metrics"
            )
        if not isinstance(target, str):
            check_pod_labels(target.labels, f"scrape.targets[{i}].labels")
    for i, key in enumerate(config.scrape.pod_labels):
        check_pod_labels({key: ""}, f"scrape.pod_labels[{i}]")
    if not config.scrape.path.startswith("/"):
        raise ConfigError(f"config key 'scrape.path' value {config.scrape.path!r} must start with '/'")
