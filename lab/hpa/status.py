"""The HPA's `status.conditions`, kept as the controller keeps them (`setConditionInList`).

A condition is set in place when its type is present and appended otherwise, so the list keeps the
order in which types first appeared; `kubectl describe hpa` and the controller's own tests read it so.
Conditions outlive a sync: a sync that does not touch a type leaves it as it was.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

ConditionType = Literal["AbleToScale", "ScalingActive", "ScalingLimited", "ScaledToZero"]


@dataclass(frozen=True)
class Condition:
    """One `HorizontalPodAutoscalerCondition` without its message and transition time."""

    type: ConditionType
    status: bool
    reason: str


class Conditions:
    """An HPA's ordered condition list."""

    def __init__(self, initial: Iterable[Condition] = ()) -> None:
        self._items: list[Condition] = []
        for condition in initial:
            self.set(condition.type, condition.status, condition.reason)

    def set(self, type_: ConditionType, status: bool, reason: str) -> None:
        """`setCondition`: replace the condition of that type in place, or append it."""
        new = Condition(type_, status, reason)
        for index, condition in enumerate(self._items):
            if condition.type == type_:
                self._items[index] = new
                return
        self._items.append(new)

    def remove(self, type_: ConditionType) -> None:
        """`removeCondition`: drop the condition of that type, keeping the others' order."""
        self._items = [c for c in self._items if c.type != type_]

    def get(self, type_: ConditionType) -> Condition | None:
        """The condition of that type, if present."""
        return next((c for c in self._items if c.type == type_), None)

    def reason(self, type_: ConditionType) -> str | None:
        """The reason of that type's condition, `None` when absent."""
        condition = self.get(type_)
        return condition.reason if condition else None

    def is_true(self, type_: ConditionType) -> bool:
        """The condition is present with status True (`getScaledToZeroConditionStatus`)."""
        condition = self.get(type_)
        return condition is not None and condition.status

    def snapshot(self) -> tuple[Condition, ...]:
        """The list as it stands."""
        return tuple(self._items)
