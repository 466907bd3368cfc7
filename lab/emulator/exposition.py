"""The `/metrics` text of a registry, byte for byte as `prometheus_client.generate_latest` writes it,
at a fraction of its cost.

An emulated engine is scraped many times a second (the adapter, the profile's reader, Prometheus),
and each page carries some 400 samples. `generate_latest` formats every sample from scratch: it
sorts and escapes the labels and the name on every call, which made the page the largest cost of
an emulated fleet (about a third of the demo's CPU). The series of a page never change between
scrapes (vLLM pre-creates its label children, and so does the emulator); only values do. `PageWriter`
keeps each series' formatted `name{labels} ` from the first scrape and writes only the value after
that. The structure follows `generate_latest` (the 0.0.4 text format vLLM serves: `_total` on
counters, `_created` samples in a gauge family of their own after the family); a test holds the two
equal on engines in many states.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final, cast

from prometheus_client import utils
from prometheus_client.openmetrics import exposition as openmetrics
from prometheus_client.registry import Collector
from prometheus_client.samples import Sample

_format_value = cast(Callable[[float], str], utils.floatToGoString)
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
        if sample.timestamp is not None:
            return f"{prefix}{_format_value(sample.value)} {int(float(sample.timestamp) * 1000):d}\n"
        return f"{prefix}{_format_value(sample.value)}\n"

    def page(self) -> bytes:
        """The page now, UTF-8, as `generate_latest(registry)` would write it."""
        output: list[str] = []
        for metric in self.registry.collect():
            name, kind = metric.name, metric.type
            if kind == "counter":
                name += "_total"
            elif kind == "info":
                name += "_info"
            kind = _TYPE_RENAMES.get(kind, kind)
            help_text = _escaped_help(metric.documentation)
            escaped = openmetrics.escape_metric_name(name, openmetrics.UNDERSCORES)
            output.append(f"# HELP {escaped} {help_text}\n# TYPE {escaped} {kind}\n")
            separate: dict[str, list[str]] = {}
            for sample in metric.samples:
                suffix = _separate_suffix(metric.name, sample.name)
                if suffix is None:
                    output.append(self._line(sample))
                else:
                    separate.setdefault(suffix, []).append(self._line(sample))
            for suffix, lines in sorted(separate.items()):
                escaped = openmetrics.escape_metric_name(metric.name + suffix, openmetrics.UNDERSCORES)
                output.append(f"# HELP {escaped} {help_text}\n# TYPE {escaped} gauge\n")
                output.extend(lines)
        return "".join(output).encode("utf-8")


def _separate_suffix(family: str, sample: str) -> str | None:
    """The OpenMetrics-only suffix (`_created`, ...) that moves `sample` into a gauge family of its own."""
    if not sample.startswith(family):
        return None
    rest = sample[len(family) :]
    return rest if rest in _SEPARATE_SUFFIXES else None
