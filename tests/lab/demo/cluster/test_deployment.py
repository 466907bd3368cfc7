"""The demo's Deployment model (`lab.demo.cluster.deployment`): which replicas a scale-down removes, and
scaling to zero and back through a cold start."""

from __future__ import annotations

from lab.demo.cluster.deployment import GRACE_SECONDS, Deployment
from lab.emulator import EmulatedFleet, EmulatedReplica
from lab.hpa import Scale


async def test_scale_down_removes_loading_replicas_first_then_the_newest() -> None:
    """A ReplicaSet scaling down deletes pods that are not Ready before Ready ones, and newer before older
    (pkg/controller/replicaset getPodsToDelete ranks unready pods first)."""
    fleet = EmulatedFleet()
    deployment = Deployment(fleet)
    try:
        oldest = await fleet.add_replica(load_delay=0.0)
        newest = await fleet.add_replica(load_delay=0.0)
        await oldest.wait_ready()
        await newest.wait_ready()
        await fleet.add_replica(load_delay=3600.0)
        deployment.desired = 3
        await deployment.scale_to(2)
        assert fleet.replicas == [oldest, newest]
        await deployment.scale_to(1)
        assert fleet.replicas == [oldest]
        assert deployment.desired == 1
    finally:
        await fleet.stop()


async def test_scale_to_zero_and_back_starts_cold() -> None:
    """At 0 replicas nothing exists; the next scale-up creates a replica that is not Ready until its cold
    start has passed, which is what the HPA's `/scale` read shows."""
    fleet = EmulatedFleet(load_delay=3600.0)
    deployment = Deployment(fleet)
    try:
        await deployment.start(2)
        assert deployment.scale() == Scale(2, 2, 2)
        await deployment.scale_to(0)
        await deployment.stopped()
        assert (fleet.replicas, deployment.scale()) == ([], Scale(0, 0, 0))
        await deployment.scale_to(1)
        assert deployment.scale() == Scale(1, 1, 0)
        assert not fleet.replicas[0].ready
    finally:
        await fleet.stop()


class Hooks:
    """Records the pod hooks' calls; `pre_stop` checks the replica is still serving when it runs."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, EmulatedReplica, bool]] = []

    def started(self, replica: EmulatedReplica) -> None:
        self.calls.append(("started", replica, replica.ready))

    async def pre_stop(self, replica: EmulatedReplica, grace: float | None = None) -> int:
        assert grace == GRACE_SECONDS
        self.calls.append(("pre_stop", replica, replica.ready))
        return 0


async def test_pod_hooks_run_when_a_replica_is_created_and_before_it_stops() -> None:
    """postStart for every replica, loaded at the start or scaled up; preStop while the replica still
    serves (it has left the Deployment's count already, as a terminating pod leaves status.replicas)."""
    fleet = EmulatedFleet(load_delay=3600.0)
    hooks = Hooks()
    deployment = Deployment(fleet, hooks)
    try:
        await deployment.start(1)
        [first] = fleet.replicas
        await deployment.scale_to(2)
        second = fleet.replicas[1]
        assert deployment.scale() == Scale(2, 2, 1)
        await deployment.scale_to(1)
        assert fleet.replicas == [first]
        await deployment.scale_to(0)
        assert deployment.scale() == Scale(0, 0, 0)
        await deployment.stopped()
        assert hooks.calls == [
            ("started", first, False),
            ("started", second, False),
            ("pre_stop", second, False),
            ("pre_stop", first, True),
        ]
        assert not first.ready
    finally:
        await fleet.stop()
