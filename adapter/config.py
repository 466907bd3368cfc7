"""The adapter's configuration: one YAML file, loaded strictly, with flags for the common settings.

Every section is a frozen dataclass whose fields are documented in place. Loading rejects unknown
keys, wrong types and impossible values with a `ConfigError` that names the key path, the bad value
and what would be valid, e.g. ``config key 'source' value 'prom' must be one of ['prometheus', 'scrape']``.
"""

from __future__ import annotations

import dataclasses
import math
import re
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml

from adapter import catalogue
from adapter.catalogue import GaugeSpec, HistogramSpec, MetricDef, PromQLSpec, Statistic
from adapter.errors import ConfigError
from adapter.promql_check import raw_cumulative_series

_DURATION = {"duration": True}
_DURATION_RE = re.compile(r"^(\d+(?:\.\d+)?)(ms|s|m|h)$")
_DURATION_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
_METRIC_NAME = re.compile(r"^[a-z0-9]([-a-z0-9_]*[a-z0-9])?$")


@dataclass(frozen=True)
class BasicAuth:
    """HTTP basic authentication towards Prometheus."""

    username: str
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
    ca_file: str | None = None
    """CA bundle to verify Prometheus' TLS certificate."""
    cert_file: str | None = None
    """Client certificate for mutual TLS (with `key_file`)."""
    key_file: str | None = None
    insecure_skip_verify: bool = False
    """Skip verification of Prometheus' certificate (never in production)."""
    headers: dict[str, str] = field(default_factory=dict)
    """Extra request headers, e.g. `X-Scope-OrgID` for Mimir or Cortex tenants."""


@dataclass(frozen=True)
class ScrapeSettings:
    """Direct scraping of vLLM pods' `/metrics` (the scrape source)."""

    targets: tuple[str, ...] = ()
    """Static target URLs (`http://host:port/metrics`); empty means discover from EndpointSlices."""
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
    discovery_interval: float = field(default=5.0, metadata=_DURATION)
    """How often EndpointSlices are listed (seconds); a new replica is scraped at most this much later."""


@dataclass(frozen=True)
class CacheSettings:
    """Values are served from memory, refreshed in the background per requested key."""

    idle_timeout: float = field(default=300.0, metadata=_DURATION)
    """A key nobody asked for in this long (seconds) stops being refreshed and is dropped."""


@dataclass(frozen=True)
class ServerSettings:
    """Where the API listens."""

    address: str = "127.0.0.1"
    port: int = 6443
    insecure_serving: bool = False
    """Plain HTTP without authentication; only for loopback addresses."""


@dataclass(frozen=True)
class SecuritySettings:
    """TLS serving, delegated authentication and authorization (flags of the same names; docs/security.md)."""

    tls_cert_file: str | None = None
    """Serving certificate (PEM, leaf first); reloaded when it changes. Set with `tls_private_key_file`."""
    tls_private_key_file: str | None = None
    self_signed: bool = False
    """Serve a certificate generated in memory instead of files (APIService `insecureSkipTLSVerify` only)."""
    tls_reload_interval: float = field(default=10.0, metadata=_DURATION)
    """How often (seconds) certificate and CA files are checked for changes."""
    client_ca_file: str | None = None
    """CA bundle whose client certificates authenticate as CN (user) and O (groups); default: the cluster's."""
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
    """How to reach the kube-apiserver for reviews and the ConfigMap; unset: in-cluster configuration."""
    authorization_always_allow_paths: tuple[str, ...] = ("/healthz", "/livez", "/readyz")
    """Paths served without authentication or authorization; a trailing `*` matches a prefix."""
    authorize_metrics: bool = True
    """Whether `/metrics` needs authorization (verb `get` on the non-resource URL), as Kubernetes components do."""
    review_timeout: float = field(default=5.0, metadata=_DURATION)
    """Timeout (seconds) of each TokenReview, SubjectAccessReview and ConfigMap read."""
    token_cache_ttl: float = field(default=10.0, metadata=_DURATION)
    """How long (seconds) a TokenReview answer is reused."""
    authorized_cache_ttl: float = field(default=10.0, metadata=_DURATION)
    """How long (seconds) an allowed SubjectAccessReview answer is reused."""
    unauthorized_cache_ttl: float = field(default=10.0, metadata=_DURATION)
    """How long (seconds) a denied SubjectAccessReview answer is reused."""


@dataclass(frozen=True)
class LoggingSettings:
    level: Literal["debug", "info", "warning", "error"] = "info"
    format: Literal["json", "text"] = "json"
    """`json` writes one object a line (production); `text` is for people."""


@dataclass(frozen=True)
class MetricSettings:
    """Overrides for a built-in metric, or the definition of a user metric (which needs `query`)."""

    query: str | None = None
    """PromQL template; `<<.LabelMatchers>>` is replaced by the selector's matchers."""
    presence: str | None = None
    """Series selector template whose series prove the targets exist (user metrics)."""
    help: str | None = None
    unit: str | None = None
    namespaced: bool | None = None
    on_empty: float | Literal["error"] | None = None
    """Value when targets exist but have no data, or `error` to answer 503."""
    max_age: float | None = field(default=None, metadata=_DURATION)
    statistic: Literal["mean", "quantile"] | None = None
    quantile: float | None = None
    window: float | None = field(default=None, metadata=_DURATION)


@dataclass(frozen=True)
class Config:
    """The whole configuration file."""

    source: Literal["prometheus", "scrape"] = "prometheus"
    prometheus: PrometheusSettings = field(default_factory=PrometheusSettings)
    scrape: ScrapeSettings = field(default_factory=ScrapeSettings)
    cache: CacheSettings = field(default_factory=CacheSettings)
    server: ServerSettings = field(default_factory=ServerSettings)
    security: SecuritySettings = field(default_factory=SecuritySettings)
    logging: LoggingSettings = field(default_factory=LoggingSettings)
    metrics: dict[str, MetricSettings] = field(default_factory=dict)

    @property
    def refresh_interval(self) -> float:
        """The active source's refresh interval (seconds)."""
        return self.prometheus.refresh_interval if self.source == "prometheus" else self.scrape.interval

    @property
    def default_max_age(self) -> float:
        return self.prometheus.max_age if self.source == "prometheus" else self.scrape.max_age

    def catalogue(self) -> tuple[MetricDef, ...]:
        """The metrics this configuration serves: built-ins with overrides, then user metrics."""
        return build_catalogue(self)


def parse_duration(value: object, path: str) -> float:
    """Seconds from `90`, `1.5`, `"250ms"`, `"30s"`, `"2m"` or `"1h"`."""
    if isinstance(value, bool):
        raise ConfigError(f"config key {path!r} value {value!r} must be a duration such as '30s', '2m' or 15")
    if isinstance(value, int | float):
        seconds = float(value)
    elif isinstance(value, str) and (match := _DURATION_RE.match(value.strip())):
        seconds = float(match.group(1)) * _DURATION_UNITS[match.group(2)]
    else:
        raise ConfigError(f"config key {path!r} value {value!r} must be a duration such as '30s', '2m' or 15")
    if not math.isfinite(seconds) or seconds <= 0:
        raise ConfigError(f"config key {path!r} value {value!r} must be a positive duration")
    return seconds


def _type_name(tp: Any) -> str:
    origin = typing.get_origin(tp)
    if origin is Literal:
        return f"one of {list(typing.get_args(tp))}"
    if dataclasses.is_dataclass(tp):
        return "a mapping"
    if origin in (dict, Mapping):
        return "a mapping"
    if origin is tuple:
        return "a list"
    return {str: "a string", int: "an integer", float: "a number", bool: "true or false"}.get(tp, str(tp))


def _convert(value: Any, tp: Any, path: str, duration: bool = False) -> Any:
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        options = typing.get_args(tp)
        if value is None and type(None) in options:
            return None
        candidates = [o for o in options if o is not type(None)]
        if len(candidates) == 1:
            # An optional field: the inner error (e.g. a nested missing key) is the precise one.
            return _convert(value, candidates[0], path, duration)
        errors = []
        for option in candidates:
            try:
                return _convert(value, option, path, duration)
            except ConfigError as exc:
                errors.append(exc)
        wanted = " or ".join(_type_name(o) for o in options if o is not type(None))
        raise ConfigError(f"config key {path!r} value {value!r} must be {wanted}")
    if duration and tp is float:
        return parse_duration(value, path)
    if origin is Literal:
        allowed = list(typing.get_args(tp))
        if value not in allowed:
            raise ConfigError(f"config key {path!r} value {value!r} must be one of {allowed}")
        return value
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        return _load_dataclass(tp, value, path)
    if origin is dict:
        key_type, value_type = typing.get_args(tp)
        if not isinstance(value, dict):
            raise ConfigError(f"config key {path!r} value {value!r} must be a mapping")
        return {
            _convert(k, key_type, f"{path}.{k}"): _convert(v, value_type, f"{path}.{k}")
            for k, v in value.items()
        }
    if origin is tuple:
        (item_type, _ellipsis) = typing.get_args(tp)
        if not isinstance(value, list):
            raise ConfigError(f"config key {path!r} value {value!r} must be a list")
        return tuple(_convert(v, item_type, f"{path}[{i}]") for i, v in enumerate(value))
    if tp is float and isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if tp is int and isinstance(value, int) and not isinstance(value, bool):
        return value
    if tp in (str, bool) and isinstance(value, tp):
        return value
    raise ConfigError(f"config key {path!r} value {value!r} must be {_type_name(tp)}")


def _load_dataclass(cls: type, data: Any, path: str) -> Any:
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"config key {path or '<root>'!r} value {data!r} must be a mapping")
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - set(fields))
    if unknown:
        where = f"{path}.{unknown[0]}" if path else unknown[0]
        raise ConfigError(f"config key {where!r} is unknown; valid keys here: {sorted(fields)}")
    values = {}
    for name, value in data.items():
        key_path = f"{path}.{name}" if path else name
        values[name] = _convert(value, hints[name], key_path, bool(fields[name].metadata.get("duration")))
    missing = [
        name
        for name, f in fields.items()
        if name not in values
        and f.default is dataclasses.MISSING
        and f.default_factory is dataclasses.MISSING
    ]
    if missing:
        where = f"{path}.{missing[0]}" if path else missing[0]
        raise ConfigError(f"config key {where!r} is required")
    return cls(**values)


def load(text: str | None = None, overrides: Mapping[str, Any] | None = None) -> Config:
    """Parse and validate a configuration from YAML text, then apply flag overrides.

    `overrides` maps dotted key paths (`prometheus.url`, `server.port`) to values that win over the
    file; they are validated the same way.
    """
    try:
        data = yaml.safe_load(text) if text else {}
    except yaml.YAMLError as exc:
        raise ConfigError(f"unable to parse configuration YAML: {exc}") from exc
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"configuration must be a mapping at the top level, found {type(data).__name__}")
    for dotted, value in (overrides or {}).items():
        if value is None:
            continue
        node = data
        *parents, leaf = dotted.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = value
    config: Config = _load_dataclass(Config, data, "")
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
    if not 1 <= config.server.port <= 65535:
        raise ConfigError(f"config key 'server.port' value {config.server.port} must be between 1 and 65535")
    build_catalogue(config)


def _validate_scrape(config: Config) -> None:
    """The scrape source reads vLLM series itself: no user PromQL, only URLs it can fetch."""
    for metric in build_catalogue(config):
        if isinstance(metric.spec, PromQLSpec):
            raise ConfigError(
                f"config key 'metrics.{metric.name}.query' cannot be served with source 'scrape', which "
                "evaluates only built-in metrics; use source 'prometheus' for user PromQL"
            )
    for i, url in enumerate(config.scrape.targets):
        if not re.match(r"^https?://[^/?#\s]+", url):
            raise ConfigError(
                f"config key 'scrape.targets[{i}]' value {url!r} must be an http:// or https:// URL, "
                "e.g. http://10.0.0.5:8000/metrics"
            )
    if not config.scrape.path.startswith("/"):
        raise ConfigError(f"config key 'scrape.path' value {config.scrape.path!r} must start with '/'")


def build_catalogue(config: Config) -> tuple[MetricDef, ...]:
    """Built-in metrics with their overrides, then user metrics; validates each definition."""
    metrics: dict[str, MetricDef] = {m.name: m for m in catalogue.BUILTIN}
    for name, settings in config.metrics.items():
        path = f"metrics.{name}"
        if not _METRIC_NAME.match(name):
            raise ConfigError(
                f"config key {path!r} is not a valid metric name; use lowercase letters, digits, '_' and '-'"
            )
        base = metrics.get(name)
        metrics[name] = _apply(base, name, settings, path, config)
    return tuple(metrics.values())


def _apply(base: MetricDef | None, name: str, s: MetricSettings, path: str, config: Config) -> MetricDef:
    if base is None:
        if s.query is None:
            hint = (
                " (queue_depth and dlq_depth read your queue's exporter)"
                if name in catalogue.USER_DEFINED_NAMES
                else ""
            )
            raise ConfigError(f"config key '{path}.query' is required for user metric {name!r}{hint}")
        for forbidden in ("statistic", "quantile", "window"):
            if getattr(s, forbidden) is not None:
                raise ConfigError(
                    f"config key '{path}.{forbidden}' applies only to built-in histogram metrics; "
                    "write the statistic into 'query'"
                )
        raw = raw_cumulative_series(s.query)
        if raw:
            raise ConfigError(
                f"config key '{path}.query' value {s.query!r} reads cumulative series {raw} without "
                "rate(), increase() or histogram_quantile(rate(...)); wrap them, e.g. rate(x_total[2m])"
            )
        base = MetricDef(
            name=name,
            help=s.help or f"User-defined metric {name}.",
            unit=s.unit or "",
            spec=PromQLSpec(s.query, s.presence),
            # Without proof that targets exist, an empty answer is indistinguishable from a broken
            # exporter: fail closed unless the user says otherwise.
            on_empty=None,
        )
    elif s.query is not None or s.presence is not None:
        raise ConfigError(
            f"config key '{path}.query' cannot replace built-in metric {name!r}; define a metric with a new name"
        )
    changes: dict[str, Any] = {}
    if s.help is not None:
        changes["help"] = s.help
    if s.unit is not None:
        changes["unit"] = s.unit
    if s.namespaced is not None:
        changes["namespaced"] = s.namespaced
    if s.on_empty is not None:
        changes["on_empty"] = None if s.on_empty == "error" else s.on_empty
    if s.max_age is not None:
        if s.max_age < config.refresh_interval:
            raise ConfigError(
                f"config key '{path}.max_age' value {s.max_age:g}s must be at least the refresh "
                f"interval ({config.refresh_interval:g}s)"
            )
        changes["max_age_seconds"] = s.max_age
    spec = base.spec
    if any(v is not None for v in (s.statistic, s.quantile, s.window)):
        if not isinstance(spec, HistogramSpec):
            raise ConfigError(
                f"config key {path!r} sets statistic/quantile/window, which apply only to histogram "
                "metrics (vllm_tpot_seconds, vllm_ttft_seconds)"
            )
        if s.quantile is not None and not 0 < s.quantile < 1:
            raise ConfigError(
                f"config key '{path}.quantile' value {s.quantile!r} must be between 0 and 1 (exclusive)"
            )
        spec = dataclasses.replace(
            spec,
            statistic=Statistic(s.statistic) if s.statistic else spec.statistic,
            quantile=s.quantile if s.quantile is not None else spec.quantile,
            window_seconds=s.window if s.window is not None else spec.window_seconds,
        )
        if spec.window_seconds < 2 * config.refresh_interval:
            raise ConfigError(
                f"config key '{path}.window' value {spec.window_seconds:g}s must be at least twice the "
                f"refresh interval ({config.refresh_interval:g}s) for a rate to have two samples"
            )
        changes["spec"] = spec
    assert isinstance(spec, GaugeSpec | HistogramSpec | PromQLSpec)
    return base.with_overrides(**changes)
