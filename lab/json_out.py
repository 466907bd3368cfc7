"""JSON as every reader takes it: jq, Go and JavaScript refuse the bare `Infinity` and `NaN` that
Python's `json` writes by default, so every JSON file the lab writes goes through `text`.

An unbounded or undefined number (±inf, NaN) is written `null`; each file says what its `null` means
where the field is documented (profile.json: `lab.profile.schema`, docs/profile.md). `text` writes
with `allow_nan=False`, so a non-finite number that slipped past `finite` fails loudly instead of
writing a file that other tools cannot read.
"""

from __future__ import annotations

import json
import math
from typing import Any


def finite(value: Any) -> Any:
    """`value` with every non-finite float in it (in mappings, lists and tuples) replaced by `None`."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {key: finite(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [finite(item) for item in value]
    return value


def text(value: Any, *, sort_keys: bool = False) -> str:
    """Indented standard JSON of `value`, with a final newline."""
    return json.dumps(finite(value), indent=2, sort_keys=sort_keys, allow_nan=False) + "\n"
