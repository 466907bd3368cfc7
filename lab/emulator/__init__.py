"""An emulated vLLM: the engine's queueing and KV-cache behaviour and its exact `/metrics`, on a laptop.

Modules, one concept each:

* `params`: `EngineParams`, every knob with its docstring; defaults calibrated on a real vLLM 0.26.
* `engine`: `Engine`, continuous batching stepped in emulated time (`submit`, `run_until`, `step`).
* `decode_runs`: runs of identical decode steps applied at once, and when the engine next needs running.
* `kvcache`, `request`, `stats`: the block pool with prefix caching, one request, the counters.
* `families`: the families of vLLM's page as data (names, types, help, labels, how each is read).
* `metrics_page`: writes the `/metrics` page (`EngineCollector` + `make_registry`), vLLM 0.33 (or 0.10) names.
* `exposition`: `PageWriter`, the page's text as `prometheus_client` writes it, each series formatted once.
* `runner`: `EngineRunner` (drives an engine live on a `lab.clock.ScaledClock`).
* `routes`, `replica`: the HTTP server of one replica with its cold start; `fleet`: many replicas.
* `streaming`: `/v1/completions` with `"stream": true`, server-sent events in emulated time.
* `pd/`: a P/D pair (prefill and decode roles, the KV hand-over; `emulate --pd P:D`).

The `emulate` command (which can also serve a profile's twin) is `lab.emulate`, above this package.

Python API (all durations are emulated seconds; real ones are divided by `time_scale`)::

    fleet = EmulatedFleet(model="llama", base_port=0, load_delay=30, time_scale=10, seed=1)
    await fleet.start(2)                       # binds now; each listens after its load delay
    await fleet.replicas[0].wait_ready()
    fleet.metrics_urls                         # ["http://127.0.0.1:41234/metrics", ...]
    request = await fleet.complete(prompt_ids_or_length, max_tokens=128, ignore_eos=True)
    request.ttft, request.e2e, request.finish_reason
    replica = await fleet.add_replica()        # scale up (cold start); `replica.ready` later
    await fleet.remove_replica()               # scale down: a loading one, else the newest
    await fleet.scale_to(4); await fleet.stop()

`EmulatedReplica` alone has the same `start()`, `wait_ready()`, `ready`, `url`, `metrics_url`,
`complete()`, `inflight`, `stop(drain_timeout)`; its `engine` is the `Engine`. For simulated time
without servers, drive an `Engine` directly: `engine.submit(prompt, max_tokens, at=t)` then
`engine.run_until(t2)`; read `engine.stats`, `len(engine.running)`, `engine.kv.usage`.
"""

from __future__ import annotations

from lab.emulator.engine import AdmissionRejected, Engine
from lab.emulator.fleet import EmulatedFleet
from lab.emulator.metrics_page import CONTENT_TYPE, EngineCollector, make_registry
from lab.emulator.params import EngineParams
from lab.emulator.replica import EmulatedReplica, ReplicaNotReady
from lab.emulator.request import Request
from lab.emulator.runner import EngineRunner, EngineStopped
from lab.engine.readiness import NoReadyReplica

__all__ = [
    "CONTENT_TYPE",
    "AdmissionRejected",
    "EmulatedFleet",
    "EmulatedReplica",
    "Engine",
    "EngineCollector",
    "EngineParams",
    "EngineRunner",
    "EngineStopped",
    "NoReadyReplica",
    "ReplicaNotReady",
    "Request",
    "make_registry",
]
