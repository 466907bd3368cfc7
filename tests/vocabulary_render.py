"""Render every generated artifact with one vLLM series renamed, in a fresh interpreter:

    python -m tests.vocabulary_render [FAMILY INDEX NEW_NAME]

prints a JSON object: the adapter's PromQL for each catalogue metric (the combined query the Prometheus source
sends), the rules file, the chart's rules template and every dashboard. With arguments, name INDEX of the
family `adapter.vocabulary.vllm.FAMILY` becomes NEW_NAME before anything else reads `adapter.vocabulary.vllm`:
the renamed module is then the only place the name is written, as a release of vLLM that renames a metric
would need. A fresh process keeps the rename out of every other test.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence

from adapter.vocabulary import vllm

#: the request a combined query is rendered for (a namespace and a model, as an HPA sends)
MATCHERS = ('namespace="prod"', 'model_name="llama"')


def rename(family: str, index: int, new_name: str) -> None:
    """Replace one name of a family of `adapter.vocabulary.vllm` (before any module has read it)."""
    names = list(getattr(vllm, family))
    names[index] = new_name
    setattr(vllm, family, tuple(names))


def render() -> dict[str, str]:
    """Artifact name → text, for every artifact built from the vocabulary."""
    # Imported here, after any rename: these modules read adapter.vocabulary.vllm as they are imported.
    from adapter.vocabulary.catalogue import BUILTIN
    from adapter.vocabulary.promql.combined import combined_query
    from alerts import generate as alerts
    from dashboards import generate as dashboards

    out = {f"adapter:{metric.name}": str(combined_query(metric, MATCHERS)) for metric in BUILTIN}
    out["rules"] = alerts.render_rules()
    out["helm-rules"] = alerts.render_helm_rules()
    out.update({f"dashboard:{name}": text for name, text in dashboards.render().items()})
    return out


def main(argv: Sequence[str]) -> int:
    if argv:
        family, index, new_name = argv
        rename(family, int(index), new_name)
    json.dump(render(), sys.stdout)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
