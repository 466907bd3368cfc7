"""Reading Prometheus text expositions, but only the series a configured metric needs.

A vLLM `/metrics` page is about 60 KB and 679 lines; the built-in metrics need about 50 of them. The
`Parser` finds the wanted lines with `str.find` on `"\\n" + name` (a C-speed scan that never looks at
the other 600 lines) and parses just those with a small parser of the text format 0.0.4, which also
reads the sample lines of OpenMetrics 1.0. Label blocks repeat on every scrape of every pod, so each
distinct block is parsed once and its label tuple is shared from then on (less time, less memory).

What it does not do: it does not validate lines it skips, read HELP/TYPE lines, or honour exposition
timestamps (vLLM never writes them; the scrape time is the sample time, as Prometheus uses by default
when there are none).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from typing import Final

from adapter.errors import ExpositionError

#: a series' labels, sorted by name: hashable, comparable, and shared between snapshots
Labels = tuple[tuple[str, str], ...]
#: one parsed page: sample name (`vllm:x_bucket`) → labels → value
Page = dict[str, dict[Labels, float]]

_LABEL: Final = re.compile(r"[ \t]*([a-zA-Z_][a-zA-Z0-9_]*)[ \t]*=[ \t]*\"((?:[^\"\\]|\\.)*)\"[ \t]*(,|$)")
_ESCAPES: Final = {"\\\\": "\\", '\\"': '"', "\\n": "\n"}
_ESCAPE: Final = re.compile(r"\\[\\\"n]")
# A page repeats each label block per scrape and per pod; distinct blocks are few (series x models).
# Past this many the cache is cleared rather than grown, so churning labels cannot exhaust memory.
_LABEL_CACHE_LIMIT: Final = 50_000
# Error messages quote the start of a bad line; a garbage line can be megabytes long.
_EXCERPT: Final = 80


def histogram_samples(name: str) -> tuple[str, str, str]:
    """The sample names of a histogram family: `_bucket`, `_sum`, `_count` (never `_created`)."""
    return f"{name}_bucket", f"{name}_sum", f"{name}_count"


class Parser:
    """Parses the wanted sample names out of pages; one instance serves every pod of a source."""

    def __init__(self, names: Iterable[str] = ()) -> None:
        self._names: frozenset[str] = frozenset()
        self._prefixes: tuple[str, ...] = ()
        self._labels: dict[str, Labels] = {}
        self.want(names)

    @property
    def names(self) -> frozenset[str]:
        """The exact sample names a page is searched for."""
        return self._names

    def want(self, names: Iterable[str]) -> bool:
        """Add sample names to search for; return whether any was new."""
        merged = self._names | frozenset(names)
        if merged == self._names:
            return False
        self._names = merged
        # A name that starts with another wanted name is found by the shorter one's scan; scanning
        # for both would yield its lines twice.
        ordered = sorted(merged)
        self._prefixes = tuple(n for n in ordered if not any(n != p and n.startswith(p) for p in ordered))
        return True

    def parse(self, text: str) -> Page:
        """The wanted series of `text`; raises `ExpositionError` for a page that is not an exposition
        or a wanted line that does not parse (including the same series twice)."""
        head = text[:1024]
        if head.lstrip()[:1] == "<" or "\x00" in head:
            raise ExpositionError(f"page is not a Prometheus text exposition; it starts {text[:_EXCERPT]!r}")
        page: Page = {}
        names = self._names
        for offset, line in self._lines(text):
            # Split by hand: the last '}' closes the label block (a value or timestamp cannot hold
            # one), which is several times faster than one regex over the whole line.
            brace = line.find("{")
            if brace >= 0:
                close = line.rfind("}")
                name, block, rest = line[:brace], line[brace : close + 1], line[close + 1 :].split()
            else:
                name, *rest = line.split()
                block = ""
            if name not in names:
                continue  # a longer name that merely starts with a wanted one
            if (brace >= 0 and close < brace) or not 1 <= len(rest) <= 2:
                raise ExpositionError(f"{_where(text, offset)}: malformed sample {line[:_EXCERPT]!r}")
            labels = self._parse_labels(block, text, offset) if block else ()
            try:
                value = float(rest[0])
            except ValueError:
                raise ExpositionError(
                    f"{_where(text, offset)}: value {rest[0][:_EXCERPT]!r} of {name} must be a number"
                ) from None
            series = page.setdefault(name, {})
            if labels in series:
                raise ExpositionError(f"{_where(text, offset)}: duplicate series {name}{block or ''}")
            series[labels] = value
        return page

    def _lines(self, text: str) -> Iterator[tuple[int, str]]:
        """(offset, line) of every line starting with a wanted prefix, grouped by prefix."""
        for prefix in self._prefixes:
            if text.startswith(prefix):
                end = text.find("\n")
                yield 0, text[: end if end >= 0 else len(text)].rstrip("\r")
            needle = "\n" + prefix
            position = 0
            while (found := text.find(needle, position)) >= 0:
                end = text.find("\n", found + 1)
                if end < 0:
                    end = len(text)
                yield found + 1, text[found + 1 : end].rstrip("\r")
                position = end

    def _parse_labels(self, block: str, text: str, offset: int) -> Labels:
        cached = self._labels.get(block)
        if cached is not None:
            return cached
        inner = block[1:-1]
        pairs: dict[str, str] = {}
        position = 0
        while position < len(inner.rstrip(" \t")):
            match = _LABEL.match(inner, position)
            if match is None:
                raise ExpositionError(f"{_where(text, offset)}: malformed labels {block[:_EXCERPT]!r}")
            key, value = match.group(1), match.group(2)
            if key in pairs:
                raise ExpositionError(
                    f"{_where(text, offset)}: label {key!r} appears twice in {block[:_EXCERPT]!r}"
                )
            pairs[key] = _ESCAPE.sub(lambda m: _ESCAPES[m.group(0)], value) if "\\" in value else value
            position = match.end()
        labels = tuple(sorted(pairs.items()))
        if len(self._labels) >= _LABEL_CACHE_LIMIT:
            self._labels.clear()
        self._labels[block] = labels
        return labels


def _where(text: str, offset: int) -> str:
    """`line N` for an error; counted only then, since counting costs more than parsing."""
    return f"line {text.count(chr(10), 0, offset) + 1}"
