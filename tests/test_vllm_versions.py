"""One declared vLLM version range: the catalogue's names, the emulator and the chart's image agree.

adapter/vocabulary/vllm.py declares the releases its names and aliases cover; the emulator must emit exactly
the two ends of that range, and the chart must not default to an image outside it (a newer vLLM may
have renamed a metric the HPA depends on).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from adapter.vocabulary import vllm
from lab.emulator.metrics_page import VERSIONS

REPO = Path(__file__).resolve().parents[1]


def test_the_emulator_emits_the_ends_of_the_range() -> None:
    assert set(VERSIONS) == {vllm.OLDEST_SUPPORTED, vllm.NEWEST_SUPPORTED}


def test_the_charts_default_image_is_in_the_range() -> None:
    values = yaml.safe_load((REPO / "helm" / "values.yaml").read_text(encoding="utf-8"))
    tag = values["vllm"]["image"]["tag"]
    assert vllm.supported(tag), (
        f"helm/values.yaml vllm.image.tag {tag} is outside {vllm.OLDEST_SUPPORTED}-{vllm.NEWEST_SUPPORTED}"
    )


def test_the_recorded_real_server_is_in_the_range() -> None:
    """The captures the emulator is calibrated on come from a release the names cover."""
    assert vllm.supported("0.26.0")


@pytest.mark.parametrize(
    ("version", "expected"),
    [
        ("0.10", True),
        ("v0.11.0", True),
        ("0.33.0rc1", True),
        ("0.9.2", False),
        ("0.34.0", False),
        ("1.0.0", False),
    ],
)
def test_supported(version: str, expected: bool) -> None:
    assert vllm.supported(version) is expected
