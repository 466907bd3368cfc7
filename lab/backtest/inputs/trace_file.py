"""Traffic from a CSV file: a trace (`time,arrivals[,prompt_tokens,output_tokens]`) or a demo run's CSV.

* **Trace:** one row per step or per request. `time` is seconds (any origin) or an ISO 8601 time;
  `arrivals` the requests that arrived at that time; the token columns, when present, are the total
  prompt and output tokens of those requests. A row whose `arrivals` cell is empty is a stretch
  without data (until the next row), reported as a gap. When the rows are on a regular grid, a
  missing grid row is a gap too; in a per-request trace, time without rows is time without requests.
* **Demo CSV** (`vllm-autoscale demo --out`, `lab.records.Tick`): arrivals are `sent_rps` over
  each tick, and the fleet's own recording (completions, running, waiting, KV usage, Ready replicas)
  comes along, so capacity can be fitted from it.

* **Stage table** (`load-stages.csv` of a real capture, `shared/data/vllm-0.26.0/`): one row per
  load stage of one server, with the offered load the client sent (`client_sent_rps`) and the
  server's means; see `lab.backtest.inputs.stages`.

Errors are one line naming the file, the line and what is wrong.
"""

from __future__ import annotations

import csv
import itertools
import math
import statistics
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Final

from lab.backtest.history import History, HistoryError
from lab.backtest.inputs.profile_trace import is_profile, profile_history
from lab.backtest.inputs.stages import STAGE_COLUMNS, stage_history
from lab.records import CSV_COLUMNS, from_row

TRACE_COLUMNS: Final = ("time", "arrivals")
TOKEN_COLUMNS: Final = ("prompt_tokens", "output_tokens")
DEMO_COLUMNS: Final = (CSV_COLUMNS["t"], CSV_COLUMNS["sent_rps"])
_EXPECTED: Final = (
    "expected time,arrivals[,prompt_tokens,output_tokens], a demo CSV "
    "(t_seconds,sent_requests_per_second,...) or a stage table (t0,t1,client_sent_rps,...)"
)

# A grid is regular when nearly every row is one median step after the previous one; rows further
# apart than 1.5 steps then mark a gap (a scrape or export that missed rows).
_REGULAR_SHARE: Final = 0.75
_GAP_FACTOR: Final = 1.5


class TraceError(HistoryError):
    """A trace file that cannot be read; the message names the file, the line and the problem."""


def read_trace(path: Path, *, resolution: float | None = None) -> History:
    """The traffic recorded in `path` on a grid of `resolution` seconds (default: the file's own step,
    or 1 s for a per-request trace). A `.json` file is a profile's run (`profile_trace`). Raises
    `TraceError`."""
    if is_profile(path):
        try:
            return profile_history(path)
        except HistoryError as exc:
            raise TraceError(str(exc)) from exc
    try:
        with path.open(newline="", encoding="utf-8") as handle:
            rows = list(csv.reader(handle))
    except (OSError, UnicodeDecodeError) as exc:
        raise TraceError(f"unable to read trace {path}: {exc}") from exc
    rows = [row for row in rows if any(cell.strip() for cell in row)]
    if not rows:
        raise TraceError(f"trace {path} is empty; {_EXPECTED}")
    header = [cell.strip() for cell in rows[0]]
    body = rows[1:]
    if not body:
        raise TraceError(f"trace {path} has a header but no rows")
    if all(c in header for c in DEMO_COLUMNS):
        return _demo(path, header, body)
    if all(c in header for c in STAGE_COLUMNS):
        stage_rows = _cells(path, header, body)
        try:
            return stage_history([cells for _, cells in stage_rows], source=f"stage table {path}")
        except ValueError as exc:
            raise TraceError(f"trace {path}: {exc}") from exc
    missing = [c for c in TRACE_COLUMNS if c not in header]
    if missing:
        raise TraceError(
            f"trace {path} has no {missing[0]!r} column (columns: {', '.join(header)}); {_EXPECTED}"
        )
    return _trace(path, header, body, resolution)


def _number(path: Path, line: int, column: str, cell: str, *, allow_empty: bool = False) -> float:
    text = cell.strip()
    if text == "" and allow_empty:
        return math.nan
    try:
        value = float(text)
    except ValueError:
        raise TraceError(f"trace {path} line {line}: {column} {text!r} must be a number") from None
    if not math.isfinite(value) or value < 0:
        raise TraceError(f"trace {path} line {line}: {column} {text!r} must be a finite number >= 0")
    return value


def _time(path: Path, line: int, cell: str) -> float:
    text = cell.strip()
    try:
        return float(text)
    except ValueError:
        pass
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        raise TraceError(
            f"trace {path} line {line}: time {text!r} must be seconds or an ISO 8601 time"
        ) from None


def _cells(path: Path, header: Sequence[str], body: list[list[str]]) -> list[tuple[int, dict[str, str]]]:
    out = []
    for index, row in enumerate(body):
        line = index + 2
        if len(row) != len(header):
            raise TraceError(f"trace {path} line {line}: {len(row)} cells, the header has {len(header)}")
        out.append((line, dict(zip(header, row, strict=True))))
    return out


def _trace(path: Path, header: Sequence[str], body: list[list[str]], resolution: float | None) -> History:
    tokens = [c for c in TOKEN_COLUMNS if c in header]
    times: list[float] = []
    counts: list[float] = []
    token_totals: dict[str, list[float]] = {c: [] for c in tokens}
    for line, cells in _cells(path, header, body):
        t = _time(path, line, cells["time"])
        if times and t < times[-1]:
            raise TraceError(
                f"trace {path} line {line}: time {cells['time'].strip()!r} is before the previous row's"
            )
        times.append(t)
        counts.append(_number(path, line, "arrivals", cells["arrivals"], allow_empty=True))
        for column in tokens:
            token_totals[column].append(_number(path, line, column, cells[column], allow_empty=True))
    deltas = [b - a for a, b in itertools.pairwise(times) if b > a]
    own_step = statistics.median(deltas) if deltas else 1.0
    regular = bool(deltas) and sum(
        1 for d in deltas if abs(d - own_step) <= 0.01 * own_step
    ) >= _REGULAR_SHARE * len(deltas)
    step = resolution or (own_step if regular else 1.0)
    start = times[0]
    # The last row covers one step of the grid (its own step when regular).
    n = int((times[-1] - start) / step + 1e-9) + 1
    end = start + n * step if not regular else times[-1] + own_step
    n = max(n, math.ceil((end - start) / step - 1e-9))
    arrivals = [0.0] * n
    totals = {c: [0.0] * n for c in tokens}
    unknown = [False] * n
    for index, (t, count) in enumerate(zip(times, counts, strict=True)):
        following = times[index + 1] if index + 1 < len(times) else end
        first = min(n - 1, int((t - start) / step))
        if math.isnan(count):
            _mark(unknown, start, step, t, following)
            continue
        if regular and following - t > _GAP_FACTOR * own_step:
            _mark(unknown, start, step, t + own_step, following)
        arrivals[first] += count
        for column in tokens:
            totals[column][first] += (
                token_totals[column][index] if not math.isnan(token_totals[column][index]) else math.nan
            )
    arrivals = [math.nan if u else a for a, u in zip(arrivals, unknown, strict=True)]
    per_request = {
        c: tuple(
            math.nan if u or a <= 0 else total / a
            for total, a, u in zip(totals[c], arrivals, unknown, strict=True)
        )
        for c in tokens
    }
    return History(
        step=step,
        arrivals=tuple(arrivals),
        start=start,
        source=f"trace {path}",
        prompt_tokens=per_request.get("prompt_tokens"),
        output_tokens=per_request.get("output_tokens"),
    )


def _mark(unknown: list[bool], start: float, step: float, begin: float, end: float) -> None:
    """Steps whose whole span lies in [begin, end) are unknown."""
    first = math.ceil((begin - start) / step - 1e-9)
    last = math.floor((end - start) / step + 1e-9)
    for index in range(max(0, first), min(len(unknown), last)):
        unknown[index] = True


def _demo(path: Path, header: Sequence[str], body: list[list[str]]) -> History:
    """A demo CSV, read as `lab.records` reads it: tick i covers (t[i-1], t[i]]."""
    ticks = []
    for line, cells in _cells(path, header, body):
        try:
            ticks.append(from_row(cells))
        except ValueError as exc:
            raise TraceError(f"trace {path} line {line}: {exc}") from None
    for line, (previous, tick) in enumerate(itertools.pairwise(ticks), start=3):
        if tick.t <= previous.t:
            raise TraceError(f"trace {path} line {line}: t {tick.t:g} is not after the previous row's")
    if len(ticks) < 2:
        raise TraceError(f"trace {path} has one tick; a demo CSV needs two to know a rate")
    spans = [b.t - a.t for a, b in itertools.pairwise(ticks)]
    rest = ticks[1:]

    def known(values: Sequence[float | None]) -> tuple[float, ...]:
        return tuple(math.nan if v is None else float(v) for v in values)

    return History(
        step=statistics.median(spans),
        arrivals=tuple(t.sent_rps * span for t, span in zip(rest, spans, strict=True)),
        start=ticks[0].t,
        source=f"demo CSV {path}",
        completions=tuple(t.completed_rps * span for t, span in zip(rest, spans, strict=True)),
        running=known([t.running for t in rest]),
        waiting=known([t.waiting for t in rest]),
        replicas=known([t.ready for t in rest]),
        kv_usage=known([t.kv_usage for t in rest]),
        notes=(f"demo ticks of {statistics.median(spans):g} s; arrivals are the requests the demo sent",),
    )
