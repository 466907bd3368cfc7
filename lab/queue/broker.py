"""An SQS-like message queue in emulated time: at-least-once delivery, a visibility timeout and a redrive
policy that moves a message to its dead-letter queue after too many receives.

What it keeps from Amazon SQS (standard queue):

* `receive` hides a message for `visibility_timeout` seconds and returns it with a fresh receipt; only
  `delete` with that receipt removes it. A message whose consumer fails (or never answers) is not
  deleted, so it becomes visible again when the timeout passes and is received again: nothing is lost,
  and a message may be processed twice (at-least-once).
* The redrive policy: a message received `max_receive_count` times that comes back once more goes to
  the dead-letter queue instead, where it waits for a person (`dlq_depth` pages).
* Long polling: `receive_wait` waits up to a given time for a message instead of returning empty.

What it simplifies: messages come out oldest first (SQS makes no promise, but a lightly loaded standard
queue is close to FIFO), a stale receipt never deletes (SQS sometimes allows it), there are no message
groups, delays or size limits. Every id the queue was sent is accounted for in exactly one place
(`accounted`), which is how the demo proves that no message was lost.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Generic, Protocol, TypeVar

T = TypeVar("T")


class EmulatedClock(Protocol):
    """Emulated time: `now()` in emulated seconds, `real(s)`
    the event loop's seconds that many emulated ones take."""

    def now(self) -> float:
        """Emulated seconds since an arbitrary origin."""
        ...

    def real(self, emulated_seconds: float) -> float:
        """The event loop's seconds for `emulated_seconds` (wall or virtual)."""
        ...


@dataclass(eq=False)
class Message(Generic[T]):
    """One message and what the queue knows of it (times in emulated seconds)."""

    id: str
    body: T
    sent: float
    """When a producer sent it."""
    sequence: int
    """Order of sending: visible messages are received oldest first."""
    receive_count: int = 0
    """How many times it has been received (SQS `ApproximateReceiveCount`)."""
    first_received: float | None = None
    receipt: int | None = None
    """The receipt handle of the latest receive; `delete` needs it."""
    hidden_until: float = 0.0
    """While in flight: when it becomes visible again."""


@dataclass
class Counts:
    """Cumulative counters, as CloudWatch's `NumberOfMessages*` sums count them."""

    sent: int = 0
    received: int = 0
    deleted: int = 0
    dead_lettered: int = 0
    """Moved to the dead-letter queue by the redrive policy."""
    stale_deletes: int = 0
    """Deletes refused because the message had become visible again (it will be processed twice)."""


@dataclass
class _State(Generic[T]):
    visible: list[tuple[int, Message[T]]] = field(default_factory=list)
    """A heap on the send order."""
    in_flight: dict[str, Message[T]] = field(default_factory=dict)
    done: set[str] = field(default_factory=set)


class MessageQueue(Generic[T]):
    """One queue; give it a `dead_letter` queue to turn on the redrive policy."""

    def __init__(
        self,
        name: str,
        clock: EmulatedClock,
        *,
        visibility_timeout: float = 60.0,
        max_receive_count: int = 3,
        dead_letter: MessageQueue[T] | None = None,
    ) -> None:
        if visibility_timeout <= 0:
            raise ValueError(f"queue {name!r} visibility_timeout {visibility_timeout!r} must be > 0 seconds")
        if max_receive_count < 1:
            raise ValueError(f"queue {name!r} max_receive_count {max_receive_count!r} must be >= 1")
        self.name = name
        self.clock = clock
        self.visibility_timeout = visibility_timeout
        self.max_receive_count = max_receive_count
        self.dead_letter = dead_letter
        self.on_dead_letter: Callable[[Message[T]], None] | None = None
        """Called for each message the redrive policy moves to the dead-letter queue."""
        self.counts = Counts()
        self._state: _State[T] = _State()
        self._ids = itertools.count(1)
        self._receipts = itertools.count(1)
        self._arrived = asyncio.Event()

    # --- producers ---------------------------------------------------------------------------------

    def send(self, body: T) -> Message[T]:
        """Enqueue a message (`SendMessage`); it is visible at once."""
        sequence = next(self._ids)
        message = Message(f"{self.name}-{sequence:06d}", body, self.clock.now(), sequence)
        self._enqueue(message)
        self.counts.sent += 1
        return message

    def _enqueue(self, message: Message[T]) -> None:
        heapq.heappush(self._state.visible, (message.sequence, message))
        self._arrived.set()

    # --- consumers ---------------------------------------------------------------------------------

    def receive(self, max_messages: int = 10) -> list[Message[T]]:
        """Up to `max_messages` visible messages, oldest first, each hidden
        for the visibility timeout (`ReceiveMessage` without waiting)."""
        self._expire()
        now = self.clock.now()
        taken: list[Message[T]] = []
        visible = self._state.visible
        while visible and len(taken) < max_messages:
            message = heapq.heappop(visible)[1]
            message.receive_count += 1
            message.receipt = next(self._receipts)
            message.hidden_until = now + self.visibility_timeout
            if message.first_received is None:
                message.first_received = now
            self._state.in_flight[message.id] = message
            taken.append(message)
        if not visible:
            self._arrived.clear()
        self.counts.received += len(taken)
        return taken

    async def receive_wait(self, max_messages: int, wait: float) -> list[Message[T]]:
        """`receive`, waiting up to `wait` emulated seconds for a message (long polling).

        Safe to cancel: a message is taken only in the synchronous `receive` after the wait, so a
        cancelled poll never holds one."""
        deadline = self.clock.now() + wait
        while True:
            taken = self.receive(max_messages)
            now = self.clock.now()
            if taken or now >= deadline:
                return taken
            # Wake for a send, a release, or the next in-flight message coming back.
            until = min([deadline, *(m.hidden_until for m in self._state.in_flight.values())])
            try:
                async with asyncio.timeout(max(self.clock.real(until - now), 0.0)):
                    await self._arrived.wait()
            except TimeoutError:
                pass

    def delete(self, message: Message[T]) -> bool:
        """Remove a received message (`DeleteMessage`); `False` when its receipt is stale, i.e. it became
        visible again (or was dead-lettered) since this receive and will be handled elsewhere."""
        self._expire()
        current = self._state.in_flight.get(message.id)
        if current is None or current.receipt != message.receipt:
            self.counts.stale_deletes += 1
            return False
        del self._state.in_flight[message.id]
        self._state.done.add(message.id)
        self.counts.deleted += 1
        return True

    def _expire(self) -> None:
        """Messages whose visibility timeout passed come back, or go to the dead-letter queue."""
        now = self.clock.now()
        expired = [m for m in self._state.in_flight.values() if m.hidden_until <= now]
        for message in sorted(expired, key=lambda m: m.sequence):
            del self._state.in_flight[message.id]
            message.receipt = None
            if self.dead_letter is not None and message.receive_count >= self.max_receive_count:
                self.counts.dead_lettered += 1
                self.dead_letter._arrive(message)
                if self.on_dead_letter is not None:
                    self.on_dead_letter(message)
            else:
                self._enqueue(message)

    def _arrive(self, message: Message[T]) -> None:
        """Take a message moved here by a redrive policy (it
        keeps its id, body, send time and receive count)."""
        self._enqueue(message)

    # --- what the exporter and the demo read ----------------------------------------------------

    @property
    def visible(self) -> int:
        """Messages available to receive (`ApproximateNumberOfMessagesVisible`)."""
        self._expire()
        return len(self._state.visible)

    @property
    def in_flight(self) -> int:
        """Messages received and not yet deleted (`ApproximateNumberOfMessagesNotVisible`)."""
        self._expire()
        return len(self._state.in_flight)

    def oldest_age(self) -> float | None:
        """Age of the oldest message still in the queue (`ApproximateAgeOfOldestMessage`), `None` if empty."""
        self._expire()
        sent = [m.sent for m in self._messages()]
        return self.clock.now() - min(sent) if sent else None

    def _messages(self) -> Iterator[Message[T]]:
        yield from (m for _, m in self._state.visible)
        yield from self._state.in_flight.values()

    def missing(self) -> list[str]:
        """Ids this queue was sent that are nowhere: not visible, in flight or deleted here, nor in the
        dead-letter queue. Empty unless a message was lost."""
        here = self.accounted()
        there = self.dead_letter.accounted() if self.dead_letter is not None else {}
        ids = (f"{self.name}-{sequence:06d}" for sequence in range(1, self.counts.sent + 1))
        return [i for i in ids if i not in here and i not in there]

    def accounted(self) -> dict[str, str]:
        """Where each message this queue holds or has finished is: `visible`, `in_flight` or `deleted`."""
        self._expire()
        places = {m.id: "visible" for _, m in self._state.visible}
        places.update({m: "in_flight" for m in self._state.in_flight})
        places.update({m: "deleted" for m in self._state.done})
        return places
