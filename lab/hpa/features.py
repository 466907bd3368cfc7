"""What a cluster's Kubernetes version changes in the HPA: its feature gates and the controller's code.

* `HPAScaleToZero` (alpha since 1.16, off by default; beta and on by default from 1.37): lets the
  API server admit `minReplicas: 0`. From 1.36 the controller also reads the gate: it scales from 0
  only a workload it put there itself (the `ScaledToZero` condition).
* `HPAConfigurableTolerance` (alpha in 1.33 and 1.34, off by default; beta and on from 1.35; stable
  in 1.37): `behavior.scaleUp/scaleDown.tolerance`; with the gate off the controller ignores the field.

Before 1.36 the controller had no `ScaledToZero` condition: a workload at 0 replicas was paused when
`minReplicas` > 0 and scaled on its metrics when `minReplicas` is 0, whoever set it to 0
(`reconcileAutoscaler` up to 1.35). Gates are the kube-controller-manager's unless a function says it
models the kube-apiserver's; a cluster may set them differently, so both can be given.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

Version = tuple[int, int]

# autoscaling/v2 is served (GA) from 1.23; earlier clusters cannot hold the specs this model reads.
_OLDEST: Final[Version] = (1, 23)
_CONDITION_LOGIC: Final[Version] = (1, 36)

# gate: (first version it exists in, first version it is on by default)
_GATES: Final[dict[str, tuple[Version, Version]]] = {
    "HPAScaleToZero": ((1, 16), (1, 37)),
    "HPAConfigurableTolerance": ((1, 33), (1, 35)),
}

DEFAULT_VERSION: Final = "1.37"


def parse_version(text: str) -> Version:
    """`"1.37"` (or `"v1.37.2"`) as (1, 37); the patch level changes nothing the HPA does."""
    match = re.fullmatch(r"v?(\d+)\.(\d+)(?:\.\d+)?", text.strip())
    if match is None:
        raise ValueError(f"kubernetes version {text!r} must look like '1.37'")
    version = (int(match[1]), int(match[2]))
    if version < _OLDEST:
        raise ValueError(
            f"kubernetes version {text!r} is older than {_OLDEST[0]}.{_OLDEST[1]}, "
            "the first to serve autoscaling/v2"
        )
    return version


def _gate(name: str, version: Version, override: bool | None) -> bool:
    exists, on_by_default = _GATES[name]
    if override is None:
        return version >= on_by_default
    if override and version < exists:
        raise ValueError(
            f"feature gate {name} does not exist before Kubernetes {exists[0]}.{exists[1]} "
            f"(cluster is {version[0]}.{version[1]})"
        )
    return override


@dataclass(frozen=True)
class ClusterFeatures:
    """The HPA behaviour of one cluster: its version and the gates as resolved for it."""

    version: Version
    scale_to_zero: bool
    """`HPAScaleToZero` is on."""
    configurable_tolerance: bool
    """`HPAConfigurableTolerance` is on."""

    @property
    def scaled_to_zero_condition(self) -> bool:
        """The controller remembers with a `ScaledToZero` condition that it scaled to 0 (1.36+)."""
        return self.version >= _CONDITION_LOGIC

    @property
    def name(self) -> str:
        """The version as written, `1.37`."""
        return f"{self.version[0]}.{self.version[1]}"


def cluster_features(
    version: str = DEFAULT_VERSION,
    *,
    scale_to_zero: bool | None = None,
    configurable_tolerance: bool | None = None,
) -> ClusterFeatures:
    """The features of a cluster at `version`; a gate left `None` takes that version's default.

    Raises `ValueError` for an unreadable or too old version, or for turning on a gate the version
    does not have yet."""
    parsed = parse_version(version)
    return ClusterFeatures(
        parsed,
        _gate("HPAScaleToZero", parsed, scale_to_zero),
        _gate("HPAConfigurableTolerance", parsed, configurable_tolerance),
    )
