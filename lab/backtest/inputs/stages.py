"""A real capture's stage table as a history: the offered load per stage, and the server's state.

`shared/data/vllm-0.26.0/load-stages.csv` has one row per load stage of one vLLM server: the
stage's span (`t0`, `t1`), the rate the client sent (`client_sent_rps`, the offered load), what the
server completed, and its means (running, KV usage, TTFT, TPOT, token rates). On a 1 s grid:

* arrivals and completions are the stage's rates;
* running is the stage's mean; waiting is not a mean but the queue the rates imply: it grows by
  (sent - completed) each second from where the previous stage left it, never below 0 (its
  maximum, 580, matches the recorded `waiting_max` of 575), and is 0 in a stage whose recorded
  `waiting_max` is 0 (there, sent - completed is requests in flight at the stage's edges, not a queue);
* token shapes are token rates over the completion rate.

A stage without completions (idle) has no TTFT, TPOT or token shape: NaN, not zero.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Final

from lab.backtest.history import History

STAGE_COLUMNS: Final = ("t0", "t1", "client_sent_rps", "completed_rps")


def _value(row: Mapping[str, str], name: str) -> float:
    text = row.get(name, "").strip()
    if text == "":
        return math.nan
    try:
        value = float(text)
    except ValueError:
        raise ValueError(
            f"stage {row.get('window', '?')!r} column {name} {text!r} must be a number"
        ) from None
    return value


def stage_history(rows: Sequence[Mapping[str, str]], *, source: str) -> History:
    """The stage table's rows (as read by `csv.DictReader`) on a 1 s grid."""
    arrivals: list[float] = []
    completions: list[float] = []
    running: list[float] = []
    waiting: list[float] = []
    kv: list[float] = []
    ttft: list[float] = []
    tpot: list[float] = []
    prompt: list[float] = []
    output: list[float] = []
    queue = 0.0
    start = _value(rows[0], "t0")
    for row in rows:
        t0, t1 = _value(row, "t0"), _value(row, "t1")
        if not t1 > t0 or round(t0 - start) != len(arrivals):
            raise ValueError(
                f"stage {row.get('window', '?')!r} span {t0:g}-{t1:g} does not follow the previous stage"
            )
        sent, done = _value(row, "client_sent_rps"), _value(row, "completed_rps")
        shape_known = done > 0
        queued = _value(row, "waiting_max") != 0
        for _ in range(round(t1 - t0)):
            queue = max(0.0, queue + sent - done) if queued else 0.0
            arrivals.append(sent)
            completions.append(done)
            running.append(_value(row, "running_mean"))
            waiting.append(queue)
            kv.append(_value(row, "kv_usage_mean"))
            ttft.append(_value(row, "ttft_mean_ms") / 1000 if shape_known else math.nan)
            tpot.append(_value(row, "tpot_mean_ms") / 1000 if shape_known else math.nan)
            prompt.append(_value(row, "prompt_tok_s") / done if shape_known else math.nan)
            output.append(_value(row, "gen_tok_s") / done if shape_known else math.nan)
    return History(
        step=1.0,
        arrivals=tuple(arrivals),
        start=start,
        source=source,
        completions=tuple(completions),
        running=tuple(running),
        waiting=tuple(waiting),
        replicas=tuple(1.0 for _ in arrivals),
        kv_usage=tuple(kv),
        ttft_mean=tuple(ttft),
        tpot_mean=tuple(tpot),
        prompt_tokens=tuple(prompt),
        output_tokens=tuple(output),
        notes=("one server; waiting is the queue implied by sent - completed per stage",),
    )
