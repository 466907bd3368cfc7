"""`profile --pd`: a prefill-decode pair joined by a KV connector, measured through its entry point.

* `measure`: closed-loop levels through the pair, both engines' `/metrics` read.
* `recommend`: prefill throughput through the path, the decode knee, the hand-over, targets per role, P:D.
* `schema`: the P/D section of the profile file; `cli`: the command's part.
"""
