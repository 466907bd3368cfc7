"""A renamed flag's old spelling (lab/flags.py): it still works, says so, and hides from --help."""

from __future__ import annotations

import argparse

import pytest

from adapter.cli import LAB_COMMANDS, _sub_command, build_parser
from lab.flags import renamed
from lab.units import duration, duration_or_zero


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="cmd")
    parser.add_argument("--query-step", type=duration, default=30.0)
    renamed(parser, "--step", "--query-step", "query_step", duration)
    return parser


def test_the_old_name_means_the_new_one_and_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    assert _parser().parse_args(["--step", "1m"]).query_step == 60.0
    assert capsys.readouterr().err == "cmd: --step is deprecated: use --query-step\n"


def test_the_new_name_and_its_default_are_untouched(capsys: pytest.CaptureFixture[str]) -> None:
    parser = _parser()
    assert parser.parse_args([]).query_step == 30.0
    assert parser.parse_args(["--query-step", "5"]).query_step == 5.0
    assert capsys.readouterr().err == ""
    assert "--step" not in parser.format_help().replace("--query-step", "")


# The lab's commands but the emulator, whose flags are an engine's parameters (`--step-base-seconds`,
# in vLLM's own words), not durations of the run.
COMMANDS = [name for name in LAB_COMMANDS if name != "emulate"]
#: every flag of a lab command that is a length of time
DURATION_FLAGS = {
    "--slo-ttft",
    "--slo-tpot",
    "--sync-period",
    "--downscale-stabilization",
    "--cold-start",
    "--budget",
    "--query-step",
    "--window",
    "--measure-step",
    "--settle",
    "--resolution",
    "--duration",
    "--scrape-interval",
    "--grace",
    "--ready-within",
    "--unresponsive-after",
}


def _commands() -> dict[str, argparse.ArgumentParser]:
    return {name: _sub_command(build_parser(name), name) for name in COMMANDS}


def test_every_duration_flag_takes_the_one_grammar() -> None:
    """`500ms`, `30s`, `2m` and a bare number of seconds, on every flag of every command."""
    seen = set()
    for name, parser in _commands().items():
        for action in parser._actions:
            flag = next((o for o in action.option_strings if o in DURATION_FLAGS), None)
            if flag is None:
                continue
            seen.add(flag)
            assert action.type in (duration, duration_or_zero), f"{name} {flag}"
            assert action.metavar == "DURATION", f"{name} {flag}"
            read = duration if action.type is duration else duration_or_zero
            assert (read("500ms"), read("2m"), read("15")) == (0.5, 120.0, 15.0)
    assert seen == DURATION_FLAGS


def test_the_slo_reads_the_same_on_every_command() -> None:
    """`--slo-ttft 500ms` was 500 ms for `profile` and an error (or seconds) for the others."""
    for name, parser in _commands().items():
        for action in parser._actions:
            if "--slo-ttft" in action.option_strings:
                assert action.type is duration, name  # 500ms and 0.5 alike: 0.5 s


def test_step_names_one_thing_and_only_as_a_deprecated_alias() -> None:
    """`--step` meant a query step (backtest, rehearse), a measured window in the server's seconds
    (fidelity) and one in real seconds (experiment): now `--query-step`, `--window`, `--measure-step`."""
    renamed_to = {}
    for name, parser in _commands().items():
        for action in parser._actions:
            if "--step" in action.option_strings:
                assert action.help == argparse.SUPPRESS, name
                renamed_to[name] = action.dest
    assert renamed_to == {"backtest": "query_step", "rehearse": "query_step", "fidelity": "window"}
