"""The demo's day backtest, kept on disk: a second demo of the same day starts at once.

The backtest of the demo's day (`lab.demo.choice.backtest_day`: the built-in sweep on the
decision's seeds, ten seconds of CPU or so) depends on the day, the engine and the cluster, not on
the HPA flags a user tries one after another (`--metric`, `--target`, `--downscale-stabilization`).
A result is kept under the digest of everything it depends on: those inputs and the source of the
package that computed it, so an edit to the code is a new key, never a stale answer. The folder is
`$VLLM_AUTOSCALE_CACHE`, else `$XDG_CACHE_HOME/vllm-autoscale`, else `~/.cache/vllm-autoscale`; a
file that cannot be read is computed again and rewritten, and a folder that cannot be written leaves
the demo uncached, never failing it.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import os
import pickle
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Final, TypeVar

import lab

log = logging.getLogger(__name__)

T = TypeVar("T")

_PACKAGES: Final = ("adapter", "lab")
_FOLDER: Final = "demo-days"


def cache_root() -> Path:
    """Where cached results live (see the module's docstring)."""
    explicit = os.environ.get("VLLM_AUTOSCALE_CACHE")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "vllm-autoscale"


@functools.cache
def code_digest() -> str:
    """The digest of this installation's code (`source_digest` of the folder holding the packages)."""
    return source_digest(Path(lab.__file__).resolve().parents[1])


def source_digest(root: Path) -> str:
    """The digest of every Python source of the packages under `root`, and the interpreter's version."""
    digest = hashlib.sha256(sys.version.encode())
    for package in _PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            digest.update(str(path.relative_to(root)).encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()


def cached(inputs: object, compute: Callable[[], T]) -> T:
    """`compute()`, or the result it gave before for the same `inputs` (picklable) and code."""
    key = hashlib.sha256(pickle.dumps(inputs, protocol=5) + code_digest().encode()).hexdigest()
    path = cache_root() / _FOLDER / f"{key}.pickle"
    try:
        with path.open("rb") as file:
            result: T = pickle.load(file)
        return result
    except FileNotFoundError:
        pass
    except Exception as error:  # a torn or foreign file: computed again and replaced
        log.warning("the cached demo day %s could not be read (%s): computing it again", path, error)
    result = compute()
    _store(path, result)
    return result


def _store(path: Path, result: object) -> None:
    """Write `result` atomically (a demo running beside this one reads a whole file or none)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path.parent, suffix=".tmp", delete=False) as file:
            pickle.dump(result, file, protocol=5)
        os.replace(file.name, path)
    except OSError as error:
        log.warning(
            "the demo day could not be cached in %s (%s): the next demo computes it again", path.parent, error
        )
