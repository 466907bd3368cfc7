"""What a Kubernetes version turns on (`lab.hpa.features`)."""

from __future__ import annotations

import pytest

from lab.hpa import DEFAULT_VERSION, cluster_features


@pytest.mark.parametrize(
    ("version", "scale_to_zero", "tolerance", "condition"),
    [
        pytest.param("1.30", False, False, False, id="1.30: neither gate, no ScaledToZero condition"),
        pytest.param("1.33", False, False, False, id="1.33: configurable tolerance alpha, off"),
        pytest.param("1.34", False, False, False, id="1.34: configurable tolerance alpha, off"),
        pytest.param("1.35", False, True, False, id="1.35: configurable tolerance beta, on"),
        pytest.param("1.36", False, True, True, id="1.36: ScaledToZero condition, scale to zero still alpha"),
        pytest.param("1.37", True, True, True, id="1.37: scale to zero beta, on"),
        pytest.param("v1.38.2", True, True, True, id="later versions keep both on"),
    ],
)
def test_gate_defaults_by_version(
    version: str, scale_to_zero: bool, tolerance: bool, condition: bool
) -> None:
    """HPAScaleToZero: alpha from 1.16, on by default from 1.37; HPAConfigurableTolerance: alpha 1.33-1.34,
    on from 1.35; the controller keeps a ScaledToZero condition from 1.36."""
    features = cluster_features(version)
    assert (features.scale_to_zero, features.configurable_tolerance, features.scaled_to_zero_condition) == (
        scale_to_zero,
        tolerance,
        condition,
    )


def test_default_version_is_1_37() -> None:
    """The model's cluster is 1.37 unless told otherwise."""
    assert DEFAULT_VERSION == "1.37"
    assert cluster_features().name == "1.37"


def test_gates_can_be_set_where_they_exist() -> None:
    """An alpha gate can be turned on, a default-on gate off."""
    assert cluster_features("1.33", configurable_tolerance=True).configurable_tolerance
    assert cluster_features("1.24", scale_to_zero=True).scale_to_zero
    assert not cluster_features("1.37", scale_to_zero=False).scale_to_zero


@pytest.mark.parametrize(
    ("version", "kwargs", "message"),
    [
        pytest.param(
            "1.32",
            {"configurable_tolerance": True},
            "does not exist before Kubernetes 1.33",
            id="gate too new",
        ),
        pytest.param("1.22", {}, "first to serve autoscaling/v2", id="version too old"),
        pytest.param("latest", {}, "must look like '1.37'", id="not a version"),
    ],
)
def test_invalid_clusters_are_refused(version: str, kwargs: dict[str, bool], message: str) -> None:
    """A version the model cannot describe, or a gate it does not have, is an error naming why."""
    with pytest.raises(ValueError, match=message):
        cluster_features(version, **kwargs)
