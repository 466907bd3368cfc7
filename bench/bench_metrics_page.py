"""The emulator's `/metrics` page: CPU per page of `PageWriter` against `prometheus_client.generate_latest`.

One engine under a steady load (a request every third 50 ms step), scraped after every step, as the
demo's scrapers see it: most families unchanged, histograms moving a few buckets at a time. Each page
is checked equal to the library's; the CPU (this thread's) is summed over the pages, with and without
the `process_*`/`python_*` collectors a vLLM server also serves.

    .venv/bin/python bench/bench_metrics_page.py [--pages 1000]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

from prometheus_client import CollectorRegistry, generate_latest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from lab.emulator.engine import Engine
from lab.emulator.exposition import PageWriter
from lab.emulator.metrics_page import EngineCollector, make_registry
from lab.emulator.params import EngineParams


def _per_page(
    pages: int, process_metrics: bool, write: Callable[[CollectorRegistry], Callable[[], bytes]]
) -> float:
    """Milliseconds of CPU per page over `pages` scrapes of a loaded engine."""
    engine = Engine(EngineParams(num_gpu_blocks=2048, max_num_seqs=64, max_model_len=4096), seed=3)
    registry = make_registry(EngineCollector(engine, "m"), process_metrics=process_metrics)
    page = write(registry)
    spent = 0.0
    for step in range(pages):
        if step % 3 == 0:
            engine.submit(300 + step % 200, 50 + step % 70)
        engine.run_until(0.05 * (step + 1))
        start = time.thread_time()
        body = page()
        spent += time.thread_time() - start
        # Process collectors move between two calls; the engine's page is compared byte for byte.
        if not process_metrics:
            assert body == generate_latest(registry), f"page {step} differs from the library's"
    return 1000 * spent / pages


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=1000)
    args = parser.parse_args()
    for process_metrics in (False, True):
        library = _per_page(args.pages, process_metrics, lambda r: lambda: generate_latest(r))
        writer = _per_page(args.pages, process_metrics, lambda r: PageWriter(r).page)
        print(
            f"process_metrics={process_metrics!s:5}  generate_latest {library:.3f} ms/page  "
            f"PageWriter {writer:.3f} ms/page  ({library / writer:.1f}x)"
        )


if __name__ == "__main__":
    main()
