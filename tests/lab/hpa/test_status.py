"""The HPA's condition list (`lab.hpa.status`) keeps the controller's order."""

from __future__ import annotations

from lab.hpa import Condition
from lab.hpa.status import Conditions


def test_set_replaces_in_place_and_appends_new_types() -> None:
    """setConditionInList: a present type keeps its position."""
    conditions = Conditions([Condition("ScaledToZero", True, "ScaledToZero")])
    conditions.set("AbleToScale", True, "SucceededGetScale")
    conditions.set("ScaledToZero", False, "NotScaledToZero")
    assert conditions.snapshot() == (
        Condition("ScaledToZero", False, "NotScaledToZero"),
        Condition("AbleToScale", True, "SucceededGetScale"),
    )
    assert conditions.reason("ScalingActive") is None


def test_remove_keeps_the_others_in_order() -> None:
    """removeCondition drops one type only."""
    conditions = Conditions(
        [
            Condition("AbleToScale", True, "x"),
            Condition("ScaledToZero", True, "y"),
            Condition("ScalingActive", True, "z"),
        ]
    )
    conditions.remove("ScaledToZero")
    assert [c.type for c in conditions.snapshot()] == ["AbleToScale", "ScalingActive"]
    assert not conditions.is_true("ScaledToZero")
