"""docs/profile.md (the README's former 'Profile a replica'): every `vllm-autoscale profile` command it
shows parses, and the saturation snippet it shows is the one the profile writes."""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path

from lab.profile import cli
from lab.profile.recommend import config_snippet

PAGE = Path(__file__).parents[3] / "docs" / "profile.md"


def _section() -> str:
    """The whole page: it is about profiling a replica and nothing else."""
    return PAGE.read_text(encoding="utf-8")


def test_every_profile_command_parses() -> None:
    commands = [
        shlex.split(line)[2:]
        for line in _section().replace("\\\n", " ").splitlines()
        if line.startswith("vllm-autoscale profile ") and " --pd " not in line  # P/D: test_pd_profile
    ]
    assert len(commands) == 2
    for argv in commands:
        parser = argparse.ArgumentParser()
        cli.add_arguments(parser)
        args = parser.parse_args(argv)
        assert args.url == "http://127.0.0.1:8000" and args.model == "llama"


def test_the_saturation_snippet_is_the_profiles_own_format() -> None:
    section = _section()
    shown = section[section.index("```yaml\n") + 8 : section.index("```", section.index("```yaml\n") + 8)]
    plain = "\n".join(line.split("#")[0].rstrip() for line in shown.splitlines()) + "\n"
    assert plain == config_snippet({"capacity": 10.2, "kv_target": 0.31, "queue_target": 1.0})
