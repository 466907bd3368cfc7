"""Standard JSON from every writer (lab/json_out.py): no bare `Infinity` or `NaN`, which jq, Go and
JavaScript refuse."""

from __future__ import annotations

import ast
import json
import math
from pathlib import Path

import pytest

from lab.json_out import finite, text

ROOT = Path(__file__).resolve().parents[2]
#: json.dumps calls that never see a float of the lab's own, each with why
NOT_NUMBERS = {
    "adapter/api/routes.py": "external metric values are Kubernetes quantity strings",
    "adapter/api/openapi.py": "a hash of the static OpenAPI document",
    "adapter/cli.py": "a Status and a metric value list: strings and quantity strings",
    "adapter/logs.py": "a log line's fields, read by log tooling, not a file of the project's",
    "lab/load/client.py": "an error chunk the server sent, quoted back into a message",
    "lab/emulator/streaming.py": "the emulator's OpenAI stream, token text and counts",
}


def test_every_non_finite_number_becomes_null() -> None:
    value = {"a": math.inf, "b": [1.0, -math.inf, (math.nan, 2)], "c": "inf", "d": 3}
    assert finite(value) == {"a": None, "b": [1.0, None, [None, 2]], "c": "inf", "d": 3}
    assert json.loads(text(value)) == finite(value)


def test_the_writer_refuses_what_it_could_not_make_standard() -> None:
    """`allow_nan=False`: a non-finite number that escaped `finite` (a float subclass, say) fails here,
    never in a reader elsewhere."""

    class Odd(float):
        pass

    with pytest.raises(ValueError, match="not JSON compliant"):
        json.dumps(Odd("inf"), allow_nan=False)
    assert text([Odd("inf")]) == "[\n  null\n]\n"


def _dumps_calls(path: Path) -> list[ast.Call]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in ("dump", "dumps")
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == "json"
    ]


def test_every_json_writer_in_the_project_goes_through_it() -> None:
    """Every `json.dump(s)` in lab/ and adapter/ is `lab.json_out.text`, passes `allow_nan=False`, or
    writes no number of the project's (`NOT_NUMBERS`, with why)."""
    loose = []
    for path in sorted([*ROOT.glob("lab/**/*.py"), *ROOT.glob("adapter/**/*.py")]):
        relative = path.relative_to(ROOT).as_posix()
        if relative == "lab/json_out.py" or relative in NOT_NUMBERS:
            continue
        for call in _dumps_calls(path):
            strict = any(
                k.arg == "allow_nan" and isinstance(k.value, ast.Constant) and k.value.value is False
                for k in call.keywords
            )
            if not strict:
                loose.append(f"{relative}:{call.lineno}")
    assert loose == []
