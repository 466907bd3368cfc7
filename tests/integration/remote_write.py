"""Writing chosen samples into a real Prometheus through its remote-write receiver.

A scrape dates every sample at the moment of the scrape and needs seconds per round; a property test
needs a new fleet per example with sample times it chooses (stale pods, pods past the lookback).
Prometheus' `/api/v1/write` (with `--web.enable-remote-write-receiver`) takes a snappy-compressed
protobuf `WriteRequest` (https://prometheus.io/docs/concepts/remote_write_spec/). Neither codec is
a dependency of the project, and both are small at the size needed: the protobuf is hand-encoded
from its four messages, and the snappy block is written as literals only, which every snappy
decoder reads (https://github.com/google/snappy/blob/main/format_description.txt).
"""

from __future__ import annotations

import struct
import urllib.request
from collections.abc import Iterable, Mapping, Sequence
from typing import NamedTuple

# A snappy literal whose length-1 fits in two bytes (tag 61): chunks of at most 64 KiB.
_LITERAL_MAX = 1 << 16


class Series(NamedTuple):
    """One series: its labels (`__name__` included) and `(unix seconds, value)` samples, oldest first."""

    labels: Mapping[str, str]
    samples: Sequence[tuple[float, float]]


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited protobuf field (strings and embedded messages)."""
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _series(series: Series) -> bytes:
    # prompb.TimeSeries: labels = 1 (Label: name = 1, value = 2), samples = 2 (Sample: value = 1
    # as a double, timestamp = 2 as int64 milliseconds). Prometheus wants labels sorted by name.
    body = b"".join(
        _field(1, _field(1, name.encode()) + _field(2, value.encode()))
        for name, value in sorted(series.labels.items())
    )
    for at, value in series.samples:
        sample = b"\x09" + struct.pack("<d", value) + b"\x10" + _varint(round(at * 1000))
        body += _field(2, sample)
    return body


def write_request(series: Iterable[Series]) -> bytes:
    """A `prompb.WriteRequest` (timeseries = 1), uncompressed."""
    return b"".join(_field(1, _series(s)) for s in series)


def snappy_block(data: bytes) -> bytes:
    """`data` as a snappy block of literals (valid, uncompressed)."""
    out = bytearray(_varint(len(data)))
    for start in range(0, len(data), _LITERAL_MAX):
        chunk = data[start : start + _LITERAL_MAX]
        out += bytes([61 << 2]) + struct.pack("<H", len(chunk) - 1) + chunk
    return bytes(out)


def push(prometheus_url: str, series: Iterable[Series]) -> None:
    """Write `series` into Prometheus; raises on any answer but 2xx."""
    request = urllib.request.Request(
        f"{prometheus_url}/api/v1/write",
        data=snappy_block(write_request(series)),
        headers={
            "Content-Encoding": "snappy",
            "Content-Type": "application/x-protobuf",
            "X-Prometheus-Remote-Write-Version": "0.1.0",
        },
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        assert 200 <= response.status < 300, response.status
