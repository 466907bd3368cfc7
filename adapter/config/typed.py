"""Strict loading of plain YAML data into frozen, typed dataclasses (after KEDA's typed_config).

Field types drive the conversion: str, int, float, bool, `Literal[...]`, optional and union types,
`tuple[T, ...]` from lists, `dict[str, T]` and nested dataclasses. A field whose metadata is
`DURATION` accepts `"250ms"`, `"30s"`, `"2m"`, `"1h"` or plain seconds (`DURATION_OR_OFF`: also
`0s`, meaning off). A section or mapping left empty (YAML `null`, e.g. `prometheus:` with every key
commented out) means its defaults, exactly as if it were absent. Every failure is a one-line
`ConfigError` naming the key path, the bad value (cut when long) and what would be valid, in the
words of the project's one strict reader (`adapter.config.strict`), which the lab's files use too.
"""

from __future__ import annotations

import dataclasses
import difflib
import types
import typing
from collections.abc import Mapping
from dataclasses import MISSING
from typing import Any, Final, Literal

from adapter.config.strict import Reader, child
from adapter.errors import ConfigError

#: field metadata marking a duration in seconds
DURATION: Final = {"duration": True}
#: field metadata marking a duration in seconds where `0s` (or 0) is valid and means "off"
DURATION_OR_OFF: Final = {"duration": True, "zero": True}
#: the configuration's reader: its errors read `config key '<path>' ...`
CONFIG: Final = Reader("config", ConfigError)


def not_a_mapping(value: object, tp: Any, path: str) -> Exception:
    """The error for a section (dataclass or mapping field) at `path` given as a scalar or a list."""
    inner = _optional_inner(tp)
    if dataclasses.is_dataclass(inner):
        fields = dataclasses.fields(inner)
        keys = sorted(f.name for f in fields)
        all_default = all(f.default is not MISSING or f.default_factory is not MISSING for f in fields)
        empty = " (or empty for the defaults)" if all_default else ""
        return CONFIG.invalid(path, value, f"a mapping with keys from {keys}{empty}")
    return CONFIG.invalid(path, value, "a mapping")


def set_key(data: dict[str, Any], cls: type, dotted: str, value: Any) -> None:
    """Set the dotted key path `dotted` in plain data bound for dataclass `cls` (flag overrides).

    An absent or empty section on the way (`prometheus:` with every key commented out) becomes a
    mapping, so the flag applies over the defaults; a section given as a scalar or a list is the same
    `ConfigError` loading would raise, never a `TypeError`.
    """
    node, tp, path = data, cls, ""
    *parents, leaf = dotted.split(".")
    for part in parents:
        path = f"{path}.{part}" if path else part
        tp = _child_type(tp, part)
        child = node.get(part)
        if child is None:
            child = node[part] = {}
        elif not isinstance(child, dict):
            raise not_a_mapping(child, tp, path)
        node = child
    node[leaf] = value


def _optional_inner(tp: Any) -> Any:
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        options = [o for o in typing.get_args(tp) if o is not type(None)]
        if len(options) == 1:
            return options[0]
    return tp


def _child_type(tp: Any, key: str) -> Any:
    """The declared type of `key` inside a section of type `tp` (`Any` if unknown: loading names it)."""
    tp = _optional_inner(tp)
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        return typing.get_type_hints(tp).get(key, Any)
    if typing.get_origin(tp) is dict:
        return typing.get_args(tp)[1]
    return Any


def parse_duration(value: object, path: str, *, zero: bool = False) -> float:
    """Seconds from `90`, `1.5`, `"250ms"`, `"30s"`, `"2m"` or `"1h"`; also `0`/`"0s"` when `zero`."""
    return CONFIG.duration(path, value, zero=zero)


def _type_name(tp: Any) -> str:
    origin = typing.get_origin(tp)
    if origin is Literal:
        return f"one of {list(typing.get_args(tp))}"
    if dataclasses.is_dataclass(tp):
        return "a mapping"
    if origin in (dict, Mapping):
        return "a mapping"
    if origin is tuple:
        return "a list"
    return {str: "a string", int: "an integer", float: "a number", bool: "true or false"}.get(tp, str(tp))


def _convert(value: Any, tp: Any, path: str, duration: bool = False, zero: bool = False) -> Any:
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        options = typing.get_args(tp)
        if value is None and type(None) in options:
            return None
        candidates = [o for o in options if o is not type(None)]
        if len(candidates) == 1:
            # An optional field: the inner error (e.g. a nested missing key) is the precise one.
            return _convert(value, candidates[0], path, duration, zero)
        errors = []
        for option in candidates:
            try:
                return _convert(value, option, path, duration, zero)
            except ConfigError as exc:
                errors.append(exc)
        wanted = " or ".join(_type_name(o) for o in options if o is not type(None))
        raise CONFIG.invalid(path, value, wanted)
    if duration and tp is float:
        return parse_duration(value, path, zero=zero)
    if origin is Literal:
        return CONFIG.choice(path, value, typing.get_args(tp))
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        return load_dataclass(tp, value, path)
    if origin is dict:
        key_type, value_type = typing.get_args(tp)
        if value is None:
            # A mapping whose entries are all commented out is an empty mapping, as for a section.
            return {}
        if not isinstance(value, dict):
            raise not_a_mapping(value, tp, path)
        return {
            _convert(k, key_type, f"{path}.{k}"): _convert(v, value_type, f"{path}.{k}")
            for k, v in value.items()
        }
    if origin is tuple:
        (item_type, _ellipsis) = typing.get_args(tp)
        if not isinstance(value, list):
            raise CONFIG.invalid(path, value, "a list")
        return tuple(_convert(v, item_type, f"{path}[{i}]") for i, v in enumerate(value))
    if tp is float and isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if tp is int and isinstance(value, int) and not isinstance(value, bool):
        return value
    if tp in (str, bool) and isinstance(value, tp):
        return value
    raise CONFIG.invalid(path, value, _type_name(tp))


def suggestions(cls: type, key: object) -> list[str]:
    """The keys of dataclass `cls` that `key` most likely meant (empty when none is close).

    A close spelling at this level first (`refresh_intervl` → `refresh_interval`); else every key of
    a section one level down spelt the same or closely (`url` at the top → `prometheus.url`; `port`
    → `scrape.port` and `server.port`), since a key one indentation level off is the other common slip.
    """
    names = [f.name for f in dataclasses.fields(cls)]
    close = difflib.get_close_matches(str(key), names, n=1, cutoff=0.6)
    if close:
        return close
    hints = typing.get_type_hints(cls)
    nested: dict[str, list[str]] = {}
    for name in names:
        inner = _optional_inner(hints[name])
        if dataclasses.is_dataclass(inner) and isinstance(inner, type):
            for child in dataclasses.fields(inner):
                nested.setdefault(child.name, []).append(f"{name}.{child.name}")
    close = difflib.get_close_matches(str(key), list(nested), n=1, cutoff=0.8)
    return nested[close[0]] if close else []


def unknown_key(cls: type, key: object, path: str) -> Exception:
    """The error for `key`, not a field of `cls`, at key path `path`: the key meant, then the valid ones."""
    return CONFIG.unknown(path, key, [f.name for f in dataclasses.fields(cls)], suggestions(cls, key))


def load_dataclass(cls: type, data: Any, path: str) -> Any:
    """An instance of dataclass `cls` from mapping `data` found at key path `path` ("" at the root)."""
    if data is None:
        # An empty section (`prometheus:` with every key commented out) means all its defaults.
        data = {}
    if not isinstance(data, dict):
        raise not_a_mapping(data, cls, path)
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - set(fields), key=str)
    if unknown:
        raise unknown_key(cls, unknown[0], path)
    values = {}
    for name, value in data.items():
        key_path = child(path, name)
        meta = fields[name].metadata
        values[name] = _convert(
            value, hints[name], key_path, bool(meta.get("duration")), bool(meta.get("zero"))
        )
    missing = [
        name
        for name, f in fields.items()
        if name not in values
        and f.default is dataclasses.MISSING
        and f.default_factory is dataclasses.MISSING
    ]
    if missing:
        raise CONFIG.required(child(path, missing[0]))
    return cls(**values)
