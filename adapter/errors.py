"""The adapter's error tree and its mapping to Kubernetes `Status` objects.

Every failure is one of these classes. `str(error)` is the precise cause for the log line; the
outward `Status.message` is built only from the class and the metric name, so no URL, PromQL or
exception text ever reaches the client.
"""

from __future__ import annotations

from typing import Any, ClassVar, TypedDict


class StatusDetails(TypedDict, total=False):
    name: str
    group: str
    kind: str


class Status(TypedDict):
    """A `meta.k8s.io/v1` `Status` body, as the kube-apiserver returns it."""

    kind: str
    apiVersion: str
    metadata: dict[str, Any]
    status: str
    message: str
    reason: str
    details: StatusDetails
    code: int


class AdapterError(Exception):
    """Base of every error the API turns into a `Status`."""

    code: ClassVar[int] = 500
    reason: ClassVar[str] = "InternalError"
    #: what the client is told, formatted with the metric name; never the cause
    public: ClassVar[str] = "internal error while serving external metric {metric}"
    #: the label value of the `errors by reason` metrics
    label: ClassVar[str] = "internal"

    def status(self, metric: str = "") -> Status:
        """The `Status` body for this error; the message is generic on purpose."""
        details: StatusDetails = {"group": "external.metrics.k8s.io", "kind": metric or ""}
        if metric:
            details["name"] = metric
        return {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.public.format(metric=repr(metric) if metric else "").replace("  ", " ").strip(),
            "reason": self.reason,
            "details": details,
            "code": self.code,
        }


class InvalidSelector(AdapterError):
    """The label selector is malformed or uses an operator metrics cannot support."""

    code = 400
    reason = "BadRequest"
    label = "bad_selector"

    def status(self, metric: str = "") -> Status:
        # The parse error names only the caller's own input, so it is safe (and useful) to return.
        body = super().status(metric)
        body["message"] = f"invalid label selector: {self}"
        return body


class RoleConflict(InvalidSelector):
    """The selector excludes the role a metric is bound to (`llm-d.ai/role=decode` for a prefill metric)."""

    label = "role_conflict"


class BadRequest(AdapterError):
    """A request the API cannot interpret (other than its selector)."""

    code = 400
    reason = "BadRequest"
    label = "bad_request"
    public = "bad request for external metric {metric}"


class InvalidNamespace(BadRequest):
    """A namespace that is not a Kubernetes namespace name, so no namespace can match it.

    `str()` is the echoed name and the cause; the `Status` message is "invalid namespace " and that.
    """

    label = "bad_namespace"

    def status(self, metric: str = "") -> Status:
        # The message quotes only (a truncated copy of) the caller's own input, so it is safe to return.
        body = super().status(metric)
        body["message"] = f"invalid namespace {self}"
        return body


class InvalidMetadata(BadRequest):
    """A `scalerMetadata` key, its value, or the ScaledObject's namespace is not acceptable."""

    label = "bad_metadata"

    def status(self, metric: str = "") -> Status:
        # The message names only the caller's own input (truncated), so it is safe to return.
        body = super().status(metric)
        body["message"] = str(self)
        return body


class MetricNotFound(AdapterError):
    """The metric is not in the catalogue."""

    code = 404
    reason = "NotFound"
    label = "not_found"
    public = "external metric {metric} is not served by this adapter"


class PathNotFound(AdapterError):
    """No route serves the requested path."""

    code = 404
    reason = "NotFound"
    label = "not_found"
    public = "the server could not find the requested resource"


class Unauthorized(AdapterError):
    """No valid credentials were presented."""

    code = 401
    reason = "Unauthorized"
    label = "unauthorized"
    public = "Unauthorized"


class Forbidden(AdapterError):
    """The authenticated user may not perform the request."""

    code = 403
    reason = "Forbidden"
    label = "forbidden"
    public = "access to external metric {metric} is forbidden"


class TooManyKeys(AdapterError):
    """A new (metric, namespace, selector) key would exceed the cache's `max_keys`."""

    code = 429
    reason = "TooManyRequests"
    label = "too_many_keys"
    public = "unable to fetch external metric {metric}: too many distinct selectors are being served"


class Unavailable(AdapterError):
    """Base of every "the adapter does not know the value right now" answer (503)."""

    code = 503
    reason = "ServiceUnavailable"
    label = "unavailable"
    public = "unable to fetch external metric {metric}: the metrics source is unavailable"


class SourceUnavailable(Unavailable):
    """The source could not be reached, timed out, or answered with an error or garbage."""

    label = "source_unavailable"


class ReviewUnavailable(Unavailable):
    """The kube-apiserver did not answer a review or ConfigMap read in time, or answered with an error."""

    label = "review_unavailable"
    public = "unable to authenticate or authorize the request: please retry"


class StaleSample(Unavailable):
    """The newest sample is older than the metric's `max_age`."""

    label = "stale"
    public = "unable to fetch external metric {metric}: the newest sample is too old"


class FutureSample(Unavailable):
    """The sample is dated further in the future than the
    clock-skew allowance (or its time is not a number)."""

    label = "bad_timestamp"
    public = "unable to fetch external metric {metric}: the sample time is not trustworthy"


class GaugeGap(Unavailable):
    """A gauge family is absent on a present target, or reports NaN/Inf: a broken exporter, never zero."""

    label = "gauge_gap"
    public = "unable to fetch external metric {metric}: a target does not report a gauge the metric needs"


class NoTargets(Unavailable):
    """No target pod (or series) matches the namespace and selector, so no value can be computed."""

    label = "no_targets"
    public = "unable to fetch external metric {metric}: no matching targets"


class NoRoleTargets(NoTargets):
    """No pod of the role a metric is bound to matches: an unlabelled fleet, a pool of one role, or a typo."""

    label = "no_role_targets"

    def __init__(self, message: str, role: str = "the metric's role") -> None:
        super().__init__(message)
        self.role = role

    def status(self, metric: str = "") -> Status:
        # The role is configuration and the selector the caller's own: safe, and what the user must fix.
        body = super().status(metric)
        body["message"] = (
            f"unable to fetch external metric {metric!r}: no pod "
            f"labelled {self.role} matches the namespace and selector"
        )
        return body


class ConnectorNotReported(GaugeGap):
    """A pod of a KV-transfer metric does not export the connector's series (not a KV consumer)."""

    label = "connector_not_reported"
    public = (
        "unable to fetch external metric {metric}: a pod reports no KV transfer "
        "(its --kv-transfer-config does not make it a kv_consumer)"
    )


class EmptyResult(Unavailable):
    """The source is healthy but returned no value, and the metric's `on_empty` is `error`."""

    label = "empty"
    public = "unable to fetch external metric {metric}: no data"


class Unresolved(Unavailable):
    """A histogram quantile fell in the first or last bucket, where its value is an artefact."""

    label = "unresolved"
    public = "unable to fetch external metric {metric}: the quantile is not resolved by the histogram buckets"


class PartialFailure(Unavailable):
    """Some scraped pods failed and the metric's `on_partial` policy is `error`."""

    label = "partial"
    public = "unable to fetch external metric {metric}: some targets failed"


class ConfigError(Exception):
    """The configuration is invalid; the message names the key path, the bad value and what is valid."""


class KubeConfigError(Exception):
    """Neither the kubeconfig file nor the in-cluster configuration could be loaded."""


class CertificateError(Exception):
    """A certificate, key or CA bundle could not be read or loaded."""


class PromQLSyntaxError(ValueError):
    """The text is not PromQL; the message is the parser's."""


class ExpositionError(ValueError):
    """The page is not a Prometheus text exposition, or a wanted line is malformed."""
