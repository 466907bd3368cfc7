"""The demo's Deployment model (`lab.demo.deployment`): which replicas a scale-down removes, and scaling to
zero and back through a cold start."""

from __future__ import annotations

from lab.demo.deployment import Deployment
from lab.emulator import EmulatedFleet
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
