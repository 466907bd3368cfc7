"""The SQS-like queue (`lab.queue.broker`): visibility, at-least-once delivery, redrive to the
dead-letter queue and the accounting that proves no message was lost. Time is a hand-stepped clock."""

from __future__ import annotations

import asyncio

import pytest

from lab.clock import ScaledClock
from lab.queue import Message, MessageQueue


class SteppedClock:
    """Emulated time that moves only when a test says so; `real` is what `ScaledClock` at 1000x gives."""

    def __init__(self) -> None:
        self.t = 0.0

    def now(self) -> float:
        return self.t

    def real(self, emulated_seconds: float) -> float:
        return emulated_seconds / 1000


def queues(clock: SteppedClock, **settings: float) -> tuple[MessageQueue[str], MessageQueue[str]]:
    dlq: MessageQueue[str] = MessageQueue("jobs-dlq", clock)
    main: MessageQueue[str] = MessageQueue(
        "jobs",
        clock,
        visibility_timeout=settings.get("visibility", 30.0),
        max_receive_count=int(settings.get("receives", 3)),
        dead_letter=dlq,
    )
    return main, dlq


def test_a_received_message_is_hidden_until_deleted() -> None:
    clock = SteppedClock()
    main, _ = queues(clock)
    sent = main.send("a")
    [got] = main.receive(10)
    assert got is sent and got.receive_count == 1 and got.first_received == 0.0
    assert (main.visible, main.in_flight) == (0, 1)
    assert main.receive(10) == []
    assert main.delete(got)
    assert (main.visible, main.in_flight) == (0, 0)
    assert main.accounted() == {"jobs-000001": "deleted"}
    assert (main.counts.sent, main.counts.received, main.counts.deleted) == (1, 1, 1)


def test_an_undeleted_message_comes_back_after_its_visibility_timeout_and_the_old_receipt_is_stale() -> None:
    """At-least-once: a consumer that never deletes (it failed, or died) does not lose the message; a
    consumer that deletes too late cannot remove the copy someone else now holds."""
    clock = SteppedClock()
    main, _ = queues(clock, visibility=30.0)
    main.send("a")
    [first] = main.receive(1)
    old_receipt = first.receipt
    clock.t = 29.9
    assert main.visible == 0
    clock.t = 30.0
    assert main.visible == 1
    [again] = main.receive(1)
    assert again.receive_count == 2 and again.receipt != old_receipt
    late = Message(first.id, first.body, first.sent, first.sequence, receipt=old_receipt)
    assert not main.delete(late)
    assert main.counts.stale_deletes == 1
    assert main.delete(again)


def test_messages_come_out_oldest_first_and_a_retried_one_keeps_its_place() -> None:
    clock = SteppedClock()
    main, _ = queues(clock, visibility=10.0)
    for body in "abc":
        main.send(body)
    [a] = main.receive(1)
    clock.t = 10.0
    assert [m.body for m in main.receive(3)] == ["a", "b", "c"]
    assert a.receive_count == 2


def test_the_redrive_policy_moves_a_message_to_the_dead_letter_queue_after_max_receives() -> None:
    """Received `max_receive_count` times without a delete, the message's next return goes to the DLQ,
    keeping its id, body and send time; the producer hears of it through `on_dead_letter`."""
    clock = SteppedClock()
    main, dlq = queues(clock, visibility=10.0, receives=3)
    dead: list[str] = []
    main.on_dead_letter = lambda m: dead.append(m.id)
    clock.t = 5.0
    sent = main.send("poison")
    for receive in range(1, 4):
        [got] = main.receive(1)
        assert got.receive_count == receive
        clock.t += 10.0
    assert (main.visible, main.in_flight, dlq.visible) == (0, 0, 1)
    assert dead == [sent.id]
    [parked] = dlq.receive(1)
    assert (parked.id, parked.body, parked.sent) == (sent.id, "poison", 5.0)
    assert main.counts.dead_lettered == 1
    assert main.missing() == []


def test_missing_names_a_message_that_is_nowhere() -> None:
    """The accounting can fail: a message dropped from the queue's books is reported by id."""
    clock = SteppedClock()
    main, _ = queues(clock)
    main.send("a")
    main.send("b")
    main._state.visible.pop()  # a bug that loses a message
    assert len(main.missing()) == 1
    assert main.missing()[0] in {"jobs-000001", "jobs-000002"}


def test_oldest_age_is_the_age_of_the_oldest_message_held() -> None:
    clock = SteppedClock()
    main, _ = queues(clock)
    assert main.oldest_age() is None
    main.send("a")
    clock.t = 7.0
    main.send("b")
    main.receive(1)
    clock.t = 12.0
    assert main.oldest_age() == 12.0


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"visibility_timeout": 0.0}, "visibility_timeout 0.0 must be > 0"),
        ({"max_receive_count": 0}, "must be >= 1"),
    ],
)
def test_impossible_settings_are_refused(settings: dict[str, float], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        MessageQueue("jobs", SteppedClock(), **settings)  # type: ignore[arg-type]


async def test_a_long_poll_returns_when_a_message_arrives_or_empty_at_its_deadline() -> None:
    clock = ScaledClock(1000.0)
    main: MessageQueue[str] = MessageQueue("jobs", clock)
    assert await main.receive_wait(1, wait=50.0) == []
    assert clock.now() >= 50.0
    poll = asyncio.create_task(main.receive_wait(1, wait=10_000.0))
    await asyncio.sleep(0)
    main.send("a")
    [got] = await asyncio.wait_for(poll, timeout=5.0)
    assert got.body == "a"


async def test_a_long_poll_wakes_for_a_message_coming_back_from_flight() -> None:
    clock = ScaledClock(1000.0)
    main: MessageQueue[str] = MessageQueue("jobs", clock, visibility_timeout=20.0)
    main.send("a")
    main.receive(1)
    [again] = await asyncio.wait_for(main.receive_wait(1, wait=10_000.0), timeout=5.0)
    assert again.receive_count == 2
