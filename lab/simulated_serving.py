"""A stream of requests served by emulated engines on simulated time: the one loop the lab's models run.

The profile's model knee (`lab.profile.twin.model`) and its twin's open-loop TPOT
(`lab.profile.twin.params`), the demo's engine knee and steady need (`lab.demo.demand`) and the
demo's capacity (`lab.demo.capacity`) all ask the same thing of the emulator: send these requests at
these times to these engines, with no clock and no server, and hand back the requests with their
times. Each then reads its own criterion from them (a percentile of TTFT and TPOT, a mean TPOT, a
share of requests within the SLO, a throughput); the serving is here, once.

It sits between the emulator and the layers that model and decide with it: it drives
`lab.emulator.Engine` only through its public `submit` and `run_until`, so any engine the emulator
builds serves here as it does behind a live runner.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Final

from lab.emulator import Engine, Request

#: Emulated seconds each engine runs per call while it drains. Any length gives the same steps with
#: `step_jitter=0`; with jitter on, a decode run cut at a call's end draws its jitter again, so the
#: length is part of what a seed gives: kept at the 60 s the demo's numbers were computed with.
DRAIN_CHUNK: Final = 60.0


def serve(
    engines: Sequence[Engine], arrivals: Iterable[tuple[float, int, int]], *, until: float | None = None
) -> list[Request]:
    """Serve (arrival time, prompt tokens, max tokens) requests, in time order, on `engines` round-robin
    (as a Service spreads them), each ignoring EOS so it generates all of its max tokens; the requests
    in the order sent.

    Each engine runs up to a request's arrival before it is sent, so every engine sees the stream as a
    live front-end would, one request at a time. (Queued all at once with their times, an engine
    takes the same steps while step jitter is off; with it on, its decode runs are cut, and draw their
    jitter, at other points, and the demo's figures come from this order.) Afterwards the engines run to
    `until`, leaving what has not finished by then unfinished (a model of an unstable queue need not
    wait for its backlog), or, with `until` None, until every engine is idle."""
    sent: list[Request] = []
    for index, (at, prompt, max_tokens) in enumerate(arrivals):
        for engine in engines:
            engine.run_until(at)
        sent.append(engines[index % len(engines)].submit(prompt, max_tokens, ignore_eos=True, at=at))
    for engine in engines:
        if until is not None:
            engine.run_until(until)
            continue
        while not engine.idle:
            engine.run_until(engine.now + DRAIN_CHUNK)
    return sent


def tpot(request: Request) -> float | None:
    """Mean time per output token after the first (vLLM's TPOT) so far; `None` before a second token."""
    if request.num_output > 1 and request.first_token is not None and request.last_token is not None:
        return (request.last_token - request.first_token) / (request.num_output - 1)
    return None
