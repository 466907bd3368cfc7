"""Engine processes: a serving engine started from a command template on a GPU and a port.

* `process`: one engine process (`vllm serve ...` on a GPU host, `vllm-autoscale emulate ...` anywhere):
  started in its own session, awaited until `/health` answers, stopped with its whole process group,
  its output kept in a log whose last lines say why it would not start.
* `placement`: which GPUs and ports the host lends, handed out one engine at a time.
* `ports`: a port held from its choice until the engine binds it, and retried on another when taken.
* `readiness`: `NoReadyReplica`, the one error of a fleet with no replica Ready (emulated or real).

The profile's `--launch`, the live experiments and the rehearsal all start engines through this package.
"""
