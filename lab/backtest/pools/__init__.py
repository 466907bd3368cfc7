"""`backtest --disaggregated`: prefill and decode pools apart, per-role scaling against the pair as one unit.

* `model`: each pool's service model from a P/D profile; `replay`: the two pools through their HPAs.
* `policy`: per-role and joint policies; `report`: the table and record; `cli`: the command's part.
"""
