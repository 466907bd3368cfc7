"""Which pods the scrape source reads: static URLs, or ready endpoints of Kubernetes EndpointSlices.

Each target carries the labels Prometheus' Kubernetes service discovery (with the usual
ServiceMonitor relabelling) would give its series: `namespace`, `pod`, `service` and `instance`
(`host:port`); static targets have `namespace` and `instance`. Pod labels (where a P/D fleet's role lives)
come as Prometheus' pod-label relabeling would carry them (`llm-d.ai/role` → `llm_d_ai_role`): from a
static target's configured `labels`, or for discovered pods the `scrape.pod_labels` keys read by
listing the pods (an EndpointSlice names its pods but not their labels). Selectors on these labels therefore
mean the same on both sources.

EndpointSlices are listed periodically (not watched) through the adapter's one Kubernetes client
(`adapter.kube.KubeClient`, the same configuration and deadline as authentication), which the
server's assembly passes in. The EndpointSlice controller copies a Service's labels onto its
slices, so `discovery_selector` selects the Services of vLLM pods.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Protocol
from urllib.parse import urlsplit, urlunsplit

from adapter.config import ScrapeSettings, StaticTarget
from adapter.errors import ConfigError, SourceUnavailable
from adapter.vocabulary.label_keys import prometheus_label_name

log = logging.getLogger(__name__)

#: the label the EndpointSlice controller puts on every slice of a Service
SERVICE_NAME_LABEL: Final = "kubernetes.io/service-name"


@dataclass(frozen=True)
class Target:
    """One pod's `/metrics` endpoint and the labels its series get."""

    url: str
    namespace: str
    labels: tuple[tuple[str, str], ...]


class Discovery(Protocol):
    """Where targets come from; `refresh` is the only method that may do I/O."""

    interval: float
    """How often `refresh` is due (seconds)."""
    scope: str
    """What is discovered ("EndpointSlices matching ..."), for "no targets" errors."""

    def want(self, namespace: str | None) -> bool:
        """Ask for the targets of `namespace` (`None`: every namespace); return whether that is new."""
        ...

    async def refresh(self) -> None:
        """Update the targets; raise `SourceUnavailable` if that failed (previous targets are kept)."""

    def targets(self) -> tuple[Target, ...]:
        """The current targets of every wanted namespace."""
        ...


def static_target(url: str, namespace: str, path: str, labels: Mapping[str, str] | None = None) -> Target:
    """A target from a URL; one without a path (`http://10.0.0.5:8000`) gets `path` appended. `labels`
    are pod labels (Kubernetes keys, carried as Prometheus label names: `llm-d.ai/role` → `llm_d_ai_role`)."""
    parts = urlsplit(url)
    hostname = parts.hostname
    if parts.scheme not in ("http", "https") or not hostname:
        raise ConfigError(
            f"scrape target {url!r} must be an http:// or https:// URL with a host, e.g. http://10.0.0.5:8000/metrics"
        )
    if parts.path in ("", "/"):
        parts = parts._replace(path=path)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    host = f"[{hostname}]" if ":" in hostname else hostname
    pod = {prometheus_label_name(key): value for key, value in (labels or {}).items()}
    own = {**pod, "instance": f"{host}:{port}", "namespace": namespace}
    return Target(urlunsplit(parts), namespace, tuple(sorted(own.items())))


class StaticDiscovery:
    """Fixed URLs, all in one namespace."""

    interval = 3600.0  # the URLs never change; refreshing them is a no-op

    def __init__(self, urls: Iterable[str | StaticTarget], namespace: str, path: str = "/metrics") -> None:
        made = (
            static_target(url, namespace, path)
            if isinstance(url, str)
            else static_target(url.url, namespace, path, url.labels)
            for url in urls
        )
        unique = {t.url: t for t in made}
        self._targets = tuple(unique.values())
        self.scope = f"the {len(self._targets)} static targets of namespace {namespace!r}"

    def want(self, namespace: str | None) -> bool:
        return False

    async def refresh(self) -> None:
        return None

    def targets(self) -> tuple[Target, ...]:
        return self._targets


def _port_number(ports: Sequence[Any] | None, wanted: str) -> int | None:
    """The port named `wanted` (or `wanted` itself when numeric) among a slice's ports."""
    if wanted.isdigit():
        return int(wanted)
    for port in ports or ():
        if port.name == wanted and port.port is not None:
            return int(port.port)
    return None


def targets_from_slices(slices: Iterable[Any], port: str, path: str) -> list[Target]:
    """Targets for the ready endpoints of `V1EndpointSlice` objects (the client's models).

    An endpoint whose `conditions.ready` is unset counts as ready, as the API documents; a slice
    without the named port is skipped with a warning; an endpoint in two slices is listed once.
    """
    found: dict[str, Target] = {}
    for piece in slices:
        meta = piece.metadata
        namespace = meta.namespace or "default"
        number = _port_number(piece.ports, port)
        if number is None:
            # Debug only: a Service of the same label without the port would log every listing.
            log.debug("EndpointSlice %s/%s has no port named %r; skipped", namespace, meta.name, port)
            continue
        if piece.address_type not in ("IPv4", "IPv6", "FQDN"):
            continue
        service = (meta.labels or {}).get(SERVICE_NAME_LABEL)
        for endpoint in piece.endpoints or ():
            conditions = endpoint.conditions
            if conditions is not None and conditions.ready is False:
                continue
            if not endpoint.addresses:
                continue
            # The API says addresses are fungible and consumers may use the first only.
            address = endpoint.addresses[0]
            host = f"[{address}]" if piece.address_type == "IPv6" else address
            instance = f"{host}:{number}"
            labels = {"instance": instance, "namespace": namespace}
            if service:
                labels["service"] = service
            ref = endpoint.target_ref
            if ref is not None and ref.kind == "Pod" and ref.name:
                labels["pod"] = ref.name
            url = f"http://{instance}{path}"
            found.setdefault(url, Target(url, namespace, tuple(sorted(labels.items()))))
    return list(found.values())


#: lists EndpointSlices: (namespace or None for all, label selector) → `V1EndpointSlice` objects, or
#: `SourceUnavailable` naming the namespace and the cause (`adapter.kube.KubeClient.list_endpoint_slices`)
SliceLister = Callable[[str | None, str], Awaitable[list[Any]]]


class EndpointSliceDiscovery:
    """Targets from the EndpointSlices of the wanted namespaces, listed every `interval` seconds."""

    def __init__(
        self, settings: ScrapeSettings, lister: SliceLister, pods: SliceLister | None = None
    ) -> None:
        self.interval = settings.discovery_interval
        self.scope = (
            f"EndpointSlices matching {settings.discovery_selector!r} with ready endpoints "
            f"and a port {settings.port!r}"
        )
        self._settings = settings
        self._lister = lister
        self._pods = pods
        self._fixed = frozenset(settings.discovery_namespaces)
        self._wanted: set[str | None] = set(self._fixed)
        self._found: dict[str | None, list[Target]] = {}

    def want(self, namespace: str | None) -> bool:
        if self._fixed and namespace is not None and namespace not in self._fixed:
            return False  # only the configured namespaces are discovered
        if namespace in self._wanted or (self._fixed and namespace is None):
            return False
        self._wanted.add(namespace)
        return True

    def _scopes(self) -> list[str | None]:
        # One cluster-wide list covers every namespace once a non-namespaced metric asked for it.
        if None in self._wanted:
            return [None]
        return sorted((n for n in self._wanted if n is not None), key=str)

    async def refresh(self) -> None:
        errors = []
        selector = self._settings.discovery_selector
        for scope in self._scopes():
            started = time.monotonic()
            try:
                slices = await self._lister(scope, selector)
            except SourceUnavailable as exc:
                errors.append(str(exc))
                continue
            found = targets_from_slices(slices, self._settings.port, self._settings.path)
            if self._settings.pod_labels:
                try:
                    found = await self._labelled(scope, found)
                except SourceUnavailable as exc:
                    errors.append(str(exc))  # the scope's earlier targets stay: labels never go missing
                    continue
            self._found[scope] = found
            log.debug(
                "listed EndpointSlices",
                extra={
                    "namespace": scope,
                    "targets": len(self._found[scope]),
                    "seconds": round(time.monotonic() - started, 3),
                },
            )
        if errors:
            raise SourceUnavailable("; ".join(errors))

    async def _labelled(self, scope: str | None, targets: list[Target]) -> list[Target]:
        """`targets` with the `pod_labels` their pods have (listed in `scope`: one call per refresh)."""
        keys = self._settings.pod_labels
        if self._pods is None:
            raise SourceUnavailable(
                "scrape.pod_labels needs the Kubernetes client to list pods; none was given"
            )
        # One key (a P/D fleet's role) lists only the pods that have it; several list them all.
        listed = await self._pods(scope, keys[0] if len(keys) == 1 else "")
        by_pod: dict[tuple[str | None, str | None], dict[str, str]] = {}
        for pod in listed:
            meta = pod.metadata
            have = meta.labels or {}
            by_pod[(meta.namespace, meta.name)] = {
                prometheus_label_name(key): have[key] for key in keys if key in have
            }
        labelled = []
        for target in targets:
            own = dict(target.labels)
            extra = by_pod.get((target.namespace, own.get("pod")), {})
            labels = tuple(sorted({**extra, **own}.items()))
            labelled.append(Target(target.url, target.namespace, labels))
        return labelled

    def targets(self) -> tuple[Target, ...]:
        scopes: Iterable[str | None] = self._scopes()
        if scopes == [None] and None not in self._found:
            # The cluster-wide list has not succeeded yet: until it does, the namespaces listed
            # before stay targets (dropping them would throw away every pod's rate history).
            scopes = list(self._found)
        unique: dict[str, Target] = {}
        for scope in scopes:
            for target in self._found.get(scope, ()):
                unique.setdefault(target.url, target)
        return tuple(unique.values())
