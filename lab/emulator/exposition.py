"""The `/metrics` text of a registry, byte for byte as `prometheus_client.generate_latest` writes it,
at a fraction of its cost.

An emulated engine is scraped many times a second (the adapter, the profile's reader, Prometheus),
and each page carries some 400 samples. `generate_latest` formats every sample from scratch: it
sorts and escapes the labels and the name on every call, which made the page the largest cost of
an emulated fleet (about a third of the demo's CPU). The series of a page never change between
scrapes (vLLM pre-creates its label children, and so does the emulator); only values do. `PageWriter`
keeps each series' formatted `name{labels} ` from the first scrape and writes only the value after
that. A collector that knows its series are fixed does better still: `EngineCollector` keeps a
`FamilyLayout` per family, which rewrites only the values that moved since the last scrape (most
histogram buckets do not) and hands the page its text whole (`PrewrittenMetric`). The structure
follows `generate_latest` (the 0.0.4 text format vLLM serves: `_total` on counters, `_created`
samples in a gauge family of their own after the family); tests hold the two equal on engines in
many states.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from math import copysign
from typing import Final, cast

from prometheus_client import utils
from prometheus_client.metrics_core import Metric
from prometheus_client.openmetrics import exposition as openmetrics
from prometheus_client.registry import Collector
from prometheus_client.samples import Sample

_format_value = cast(Callable[[float], str], utils.floatToGoString)
#: the integers `go_float` writes itself: from where `repr` turns to exponents to where Go does
_PLAIN_INTS: Final = (-(10**15), 10**6)
_SEPARATE_SUFFIXES: Final = ("_created", "_gsum", "_gcount")
_TYPE_RENAMES: Final = {
    "info": "gauge",
    "stateset": "gauge",
    "gaugehistogram": "histogram",
    "unknown": "untyped",
}
#: Series kept at most: a page's series are fixed, so this only bounds a collector that mints labels.
_MAX_SERIES: Final = 20_000


def _escaped_help(text: str) -> str:
    return text.replace("\\", r"\\").replace("\n", r"\n")


def _escape_value(value: str) -> str:
    """A label value escaped as the library escapes it (values may hold any UTF-8)."""
    return value.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")


def _series(name: str, labels: dict[str, str]) -> str:
    """`name{a="1",b="2"} ` as `generate_latest` writes it (labels sorted, names and values escaped)."""
    escaping = openmetrics.UNDERSCORES
    escaped_name = openmetrics.escape_metric_name(name, escaping)
    label_text = ",".join(
        f'{openmetrics.escape_label_name(k, escaping)}="{_escape_value(v)}"'
        for k, v in sorted(labels.items())
    )
    return f"{escaped_name}{{{label_text}}} " if label_text else f"{escaped_name} "


class PageWriter:
    """Writes a registry's page; remembers each series' formatted name and labels across calls."""

    def __init__(self, registry: Collector) -> None:
        self.registry = registry
        self._series: dict[tuple[str, tuple[tuple[str, str], ...]], str] = {}

    def _line(self, sample: Sample) -> str:
        key = (sample.name, tuple(sample.labels.items()))
        prefix = self._series.get(key)
        if prefix is None:
            if len(self._series) >= _MAX_SERIES:
                self._series.clear()
            prefix = self._series[key] = _series(sample.name, sample.labels)
        return _with_value(prefix, sample)

    def page(self) -> bytes:
        """The page now, UTF-8, as `generate_latest(registry)` would write it."""
        output: list[str] = []
        for metric in self.registry.collect():
            if isinstance(metric, PrewrittenMetric):
                output.append(metric.text)
            else:
                output.append("".join(_family_parts(metric, self._line)[0]))
        return "".join(output).encode("utf-8")


class FamilyLayout:
    """The page text of one family whose series are fixed, rewritten from its sample values alone.

    Built from the family as the library makes it (a `Metric` with its samples, written the ordinary
    way once), it keeps every line and reformats only the values that moved: a scrape of an engine
    whose histograms took one observation costs a few number formats, not a page of samples.
    """

    def __init__(self, metric: Metric, values: Sequence[float]) -> None:
        """`values`: the family's sample values in the order of `metric.samples`, the way its collector
        will give them from now on; checked here, so that a wrong order fails at once, not on a page."""
        samples = list(metric.samples)
        if len(values) != len(samples) or not all(map(_same, values, (s.value for s in samples))):
            raise ValueError(f"values {list(values)!r} are not the samples of {metric.name}, in order")
        if any(s.timestamp is not None or s.exemplar or s.native_histogram for s in samples):
            raise ValueError(f"{metric.name}: timestamps, exemplars and native histograms are not laid out")
        self.name, self.documentation, self.type, self.unit = (
            metric.name,
            metric.documentation,
            metric.type,
            metric.unit,
        )
        self._skeleton = samples
        self._prefixes = [_series(s.name, s.labels) for s in samples]
        self._parts, self._slots = _family_parts(metric, lambda s: _with_value(_series(s.name, s.labels), s))
        self._values = list(values)
        self.metric = PrewrittenMetric(self, tuple(values), "".join(self._parts))

    def written(self, values: Sequence[float]) -> PrewrittenMetric:
        """The family with these values; the same object as last time when none of them moved."""
        if len(values) != len(self._values):
            raise ValueError(f"{self.name} has {len(self._values)} samples, not {len(values)}")
        lasts, parts, slots, prefixes = self._values, self._parts, self._slots, self._prefixes
        changed = False
        for i, value in enumerate(values):
            last = lasts[i]
            # Equal numbers write the same text, but for the sign of a zero; NaN never equals itself.
            if value is last or (value == last and (value or copysign(1.0, value) == copysign(1.0, last))):
                continue
            parts[slots[i]] = f"{prefixes[i]}{go_float(value)}\n"
            lasts[i] = value
            changed = True
        if changed:
            self.metric = PrewrittenMetric(self, tuple(lasts), "".join(parts))
        return self.metric

    def samples(self, values: Sequence[float]) -> list[Sample]:
        """The library's samples with these values (each with its own labels, for readers that edit)."""
        return [
            s._replace(labels=dict(s.labels), value=v) for s, v in zip(self._skeleton, values, strict=True)
        ]


class PrewrittenMetric(Metric):
    """A family whose page text is already written (`text`); its samples are made only when something
    reads them (`generate_latest`, a test), never for `PageWriter`."""

    def __init__(self, layout: FamilyLayout, values: tuple[float, ...], text: str) -> None:
        super().__init__(layout.name, layout.documentation, layout.type, layout.unit)
        self.text = text
        self._layout = layout
        self._values = values
        self._samples: list[Sample] | None = None

    @property
    def samples(self) -> list[Sample]:
        if self._samples is None:
            self._samples = self._layout.samples(self._values)
        return self._samples

    @samples.setter
    def samples(self, samples: list[Sample]) -> None:
        self._samples = samples


def go_float(value: float) -> str:
    """`floatToGoString(value)`, without its float round trip for the integers most values are
    (bucket counts): below 1e6 Go keeps the plain form, and `repr` of an integral float below 1e16 is
    the integer and `.0`."""
    if type(value) is int and _PLAIN_INTS[0] <= value < _PLAIN_INTS[1]:
        return f"{value}.0"
    return _format_value(value)


def _same(a: float, b: float) -> bool:
    """Whether two values write the same text (NaN does; 0.0 and -0.0 do not)."""
    return (a == b and bool(a or copysign(1.0, a) == copysign(1.0, b))) or (a != a and b != b)


def _with_value(prefix: str, sample: Sample) -> str:
    if sample.timestamp is not None:
        return f"{prefix}{go_float(sample.value)} {int(float(sample.timestamp) * 1000):d}\n"
    return f"{prefix}{go_float(sample.value)}\n"


def _family_parts(metric: Metric, line: Callable[[Sample], str]) -> tuple[list[str], list[int]]:
    """One family's text in pieces (its HELP and TYPE, its samples, then its `_created`-like gauge
    families) and the piece that holds each sample's line."""
    name, kind = metric.name, metric.type
    if kind == "counter":
        name += "_total"
    elif kind == "info":
        name += "_info"
    kind = _TYPE_RENAMES.get(kind, kind)
    help_text = _escaped_help(metric.documentation)
    escaped = openmetrics.escape_metric_name(name, openmetrics.UNDERSCORES)
    parts = [f"# HELP {escaped} {help_text}\n# TYPE {escaped} {kind}\n"]
    samples = metric.samples
    slots = [0] * len(samples)
    separate: dict[str, list[int]] = {}
    for i, sample in enumerate(samples):
        suffix = _separate_suffix(metric.name, sample.name)
        if suffix is None:
            slots[i] = len(parts)
            parts.append(line(sample))
        else:
            separate.setdefault(suffix, []).append(i)
    for suffix, indices in sorted(separate.items()):
        escaped = openmetrics.escape_metric_name(metric.name + suffix, openmetrics.UNDERSCORES)
        parts.append(f"# HELP {escaped} {help_text}\n# TYPE {escaped} gauge\n")
        for i in indices:
            slots[i] = len(parts)
            parts.append(line(samples[i]))
    return parts, slots


def _separate_suffix(family: str, sample: str) -> str | None:
    """The OpenMetrics-only suffix (`_created`, ...) that moves `sample` into a gauge family of its own."""
    if not sample.startswith(family):
        return None
    rest = sample[len(family) :]
    return rest if rest in _SEPARATE_SUFFIXES else None
