"""Ports for engines: held from the choice until the engine has bound one, and retried when it could not.

A port picked as free (`placement.free_port`) is free only at that moment: the engine binds it
seconds later (vLLM after its imports), and whatever binds first in between wins. Two defences:

* **held**: a port handed to an engine is reserved in this process until the engine has bound it (it
  answers `/health`) or has failed, so two engines of one run (a scale-up while another engine is
  loading, two variants starting at once) never get the same port; once bound, the engine holds it
  and the OS hands it to nobody else;
* **retried**: an engine that exits saying its address is in use (someone else's process took it in
  between) is started again on another port, `BIND_ATTEMPTS` times in all, instead of being recorded
  as an engine that would not start.

A port cannot be held *for* a child process by keeping it bound here: the engine would then fail to
bind it itself (vLLM and the emulator bind their own socket). The reservation is this process's side
of the hold; the retry covers the rest of the host.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Awaitable, Callable
from typing import Final, TypeVar

from lab.engine.placement import free_port
from lab.engine.process import EngineFailure

#: Starts of one engine on fresh ports before a port taken counts as the engine's failure.
BIND_ATTEMPTS: Final = 3
# What a server says when its port is taken: Python's OSError (vLLM, uvicorn, the emulator) and Go's.
_IN_USE: Final = re.compile(r"address already in use|errno 98|eaddrinuse", re.IGNORECASE)
# Free ports asked of the OS before giving up on finding one that is not reserved.
_TRIES: Final = 64

T = TypeVar("T")


class Ports:
    """The ports this process has handed to engines and not taken back."""

    def __init__(self) -> None:
        self._held: set[int] = set()
        self._lock = threading.Lock()  # a test may start engines from threads of its own

    def take(self, preferred: int | None = None) -> int:
        """A port nobody here holds: `preferred` if it is not held (the caller asked for it; whether
        the host has it free the engine finds out), else one the OS says is free now."""
        with self._lock:
            if preferred is not None and preferred not in self._held:
                self._held.add(preferred)
                return preferred
            for _ in range(_TRIES):
                port = free_port()
                if port not in self._held:
                    self._held.add(port)
                    return port
        raise EngineFailure(f"no free port that is not already held by one of {len(self._held)} engines")

    def release(self, port: int) -> None:
        """Take `port` back (nothing happens for a port not held)."""
        with self._lock:
            self._held.discard(port)

    def held(self, port: int) -> bool:
        with self._lock:
            return port in self._held


PORTS: Final = Ports()
"""The process's one set of held ports: every engine of a run takes its port here."""


def port_taken(failure: EngineFailure) -> bool:
    """Whether the engine failed because its port was in use (its log says so)."""
    return bool(_IN_USE.search(failure.log_tail) or _IN_USE.search(failure.reason))


async def on_a_free_port(
    attempt: Callable[[int], Awaitable[T]],
    *,
    preferred: int | None = None,
    retried: Callable[[int, EngineFailure], None] = lambda port, failure: None,
    ports: Ports = PORTS,
) -> T:
    """`attempt(port)` on a held port; while it fails because the port was taken, again on another
    (`BIND_ATTEMPTS` in all, `retried(port, failure)` told each time). `attempt` returns once its
    engine is healthy (it has bound the port) or gone: the hold ends then."""
    port = ports.take(preferred)
    for attempt_number in range(1, BIND_ATTEMPTS + 1):
        try:
            return await attempt(port)
        except EngineFailure as failure:
            if not port_taken(failure) or attempt_number == BIND_ATTEMPTS:
                raise
            retried(port, failure)
        finally:
            ports.release(port)
        port = ports.take()
    raise AssertionError("unreachable: the last attempt returns or raises")
