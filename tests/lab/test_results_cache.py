"""`lab.results_cache`: a result is reused only for the same inputs and code, a bad file is computed
again, and a cache that cannot be written never fails the demo."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

import pytest

from lab import results_cache


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("VLLM_AUTOSCALE_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def _counting() -> tuple[list[int], Callable[[], dict[str, int]]]:
    calls: list[int] = []

    def compute() -> dict[str, int]:
        calls.append(1)
        return {"answer": len(calls)}

    return calls, compute


def test_the_same_inputs_are_computed_once_and_others_again(root: Path) -> None:
    calls, compute = _counting()
    assert results_cache.cached("demo-days", ("day", 1.5), compute) == {"answer": 1}
    assert results_cache.cached("demo-days", ("day", 1.5), compute) == {"answer": 1}
    assert results_cache.cached("demo-days", ("day", 1.6), compute) == {"answer": 2}
    assert len(calls) == 2 and len(list((root / "demo-days").iterdir())) == 2


def test_changed_code_is_a_new_key(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _, compute = _counting()
    results_cache.cached("demo-days", "day", compute)
    monkeypatch.setattr(results_cache, "code_digest", lambda: "another version of the code")
    assert results_cache.cached("demo-days", "day", compute) == {"answer": 2}


def test_the_digest_follows_every_python_source_of_the_packages(tmp_path: Path) -> None:
    for name in ("adapter/api.py", "lab/backtest/fleet.py", "lab/data.csv"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("x = 1\n")
    before = results_cache.source_digest(tmp_path)
    (tmp_path / "lab/data.csv").write_text("not code")
    assert results_cache.source_digest(tmp_path) == before
    (tmp_path / "lab/backtest/fleet.py").write_text("x = 2\n")
    edited = results_cache.source_digest(tmp_path)
    assert edited != before
    (tmp_path / "adapter/new.py").write_text("")
    assert results_cache.source_digest(tmp_path) not in (before, edited)


def test_a_torn_file_is_computed_again_and_replaced(root: Path, caplog: pytest.LogCaptureFixture) -> None:
    _, compute = _counting()
    results_cache.cached("demo-days", "day", compute)
    (only,) = (root / "demo-days").iterdir()
    only.write_bytes(b"\x80not a pickle")
    with caplog.at_level(logging.WARNING):
        assert results_cache.cached("demo-days", "day", compute) == {"answer": 2}
    assert "could not be read" in caplog.text
    assert results_cache.cached("demo-days", "day", compute) == {"answer": 2}


def test_a_cache_that_cannot_be_written_leaves_the_demo_uncached(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("VLLM_AUTOSCALE_CACHE", str(blocker))
    _, compute = _counting()
    with caplog.at_level(logging.WARNING):
        assert results_cache.cached("demo-days", "day", compute) == {"answer": 1}
        assert results_cache.cached("demo-days", "day", compute) == {"answer": 2}
    assert "could not be cached" in caplog.text


def test_the_folder_follows_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("VLLM_AUTOSCALE_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert results_cache.cache_root() == tmp_path / "vllm-autoscale"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert results_cache.cache_root() == tmp_path / "home" / ".cache" / "vllm-autoscale"


def test_this_installations_digest_reads_the_packages_sources() -> None:
    """The digest of the code the cache keys on is this checkout's: adapter/ and lab/ found, not an
    empty folder (a digest of nothing would never change, and a stale result would be served)."""
    import adapter
    import lab

    root = Path(lab.__file__).resolve().parents[1]
    assert (root / "adapter").is_dir() and Path(adapter.__file__).resolve().parent == root / "adapter"
    assert results_cache.code_digest() == results_cache.source_digest(root)
    assert results_cache.code_digest() != results_cache.source_digest(root / "no-such-folder")


def test_kinds_are_kept_apart(root: Path) -> None:
    """The same inputs under two kinds (a demo's day, a twin) are two results."""
    assert results_cache.cached("demo-days", 1, lambda: "day") == "day"
    assert results_cache.cached("twins", 1, lambda: "twin") == "twin"
    assert results_cache.cached("demo-days", 1, lambda: "other") == "day"
