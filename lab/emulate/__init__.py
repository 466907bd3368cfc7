"""`vllm-autoscale emulate`: emulated vLLM servers on local ports, or a profiled server's twin.

It sits above the emulator (`lab.emulator`, the engine and its HTTP surface) and the profile
(`lab.profile.twin.params`: the engine parameters a profile implies), which know nothing of it.

* `cli`: the command, its flags (one per `EngineParams` field) and the fleet it serves.
* `in_process`: an `emulate` command run as an engine inside another command's event loop
  (`experiment --in-process`, on virtual time), with an engine process's surface.
"""
