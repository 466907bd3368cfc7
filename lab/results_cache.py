"""Results kept on disk: a second run with the same inputs and code reads the first one's result.

Two computations are pure, slow and asked for again and again with the same inputs: the backtest of
the demo's day (`lab.demo.decision.choice`: the built-in sweep on the decision's seeds, ten seconds of
CPU or so, the same for every HPA flag a user tries) and a profile's twin (`lab.profile.twin.params`:
the open-loop ratio, dozens of engine runs on virtual time, 25 s for an 8B profile, the same for every
`emulate --profile` of that file). A result is kept under the digest of everything it depends on: its
kind, its inputs and the source of the packages that computed it, so an edit to the code is a new
key, never a stale answer. The folder is `$VLLM_AUTOSCALE_CACHE`, else
`$XDG_CACHE_HOME/vllm-autoscale`, else `~/.cache/vllm-autoscale`; a file that cannot be read is
computed again and rewritten, and a folder that cannot be written leaves the run uncached, never
failing it.
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


def cached(kind: str, inputs: object, compute: Callable[[], T]) -> T:
    """`compute()`, or the result it gave before for the same `kind` (a folder: `demo-days`, `twins`),
    `inputs` (picklable) and code."""
    key = hashlib.sha256(pickle.dumps(inputs, protocol=5) + code_digest().encode()).hexdigest()
    path = cache_root() / kind / f"{key}.pickle"
    try:
        with path.open("rb") as file:
            result: T = pickle.load(file)
        return result
    except FileNotFoundError:
        pass
    except Exception as error:  # a torn or foreign file: computed again and replaced
        log.warning("the cached result %s could not be read (%s): computing it again", path, error)
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
            "a result could not be cached in %s (%s): the next run computes it again", path.parent, error
        )
