"""The command line's shape: the server's sub-commands never load the lab; usage errors help.

`serve` runs in the cluster's image, which has no matplotlib; the lab's sub-commands are imported
only when they run. Those tests start a fresh interpreter, because this one has imported the lab.
An unknown option shows the sub-command's usage with the option meant; `--scrape-target` means the
scrape source, and a flag the chosen source would ignore is refused.
"""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import pytest

from adapter import cli
from adapter.config import load_file
from adapter.flags import overrides, serve_overrides
from tests.integration.procs import ExpositionServer
from tests.vllm_pages import PodLoad, page

LAB_MODULES = ("lab", "matplotlib", "numpy")


def _loaded_after(*argv: str) -> set[str]:
    """Top-level packages a fresh interpreter has imported after parsing `argv` (with `--help`)."""
    code = (
        "import sys\nfrom adapter import cli\n"
        f"try:\n    cli.build_parser(cli._command({list(argv)!r})).parse_args({list(argv)!r})\n"
        "except SystemExit:\n    pass\n"
        "print(' '.join(sorted({name.split('.')[0] for name in sys.modules})))"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return set(run.stdout.split())


@pytest.mark.parametrize("argv", [("serve", "--help"), ("query", "--help"), ("--help",)])
def test_server_commands_load_no_lab(argv: tuple[str, ...]) -> None:
    """`serve --help`, `query --help` and the top-level help import no emulator, HPA model or plots."""
    assert _loaded_after(*argv) & set(LAB_MODULES) == set()


def test_a_lab_command_loads_its_module_when_named() -> None:
    """`demo --help` builds the demo's full parser (the module is imported then, and only then)."""
    assert "lab" in _loaded_after("demo", "--help")


@pytest.mark.parametrize("name", sorted(cli.LAB_COMMANDS))
def test_lab_command_help_is_the_module_docstring(name: str) -> None:
    """The help shown without importing a lab module is its docstring's first line, so they cannot drift."""
    module_name, help_text = cli.LAB_COMMANDS[name]
    module = importlib.import_module(module_name)
    assert module.__doc__ is not None and module.__doc__.splitlines()[0] == help_text


# --- Usage errors: the sub-command's usage, and the option meant ------------------------------------


def _usage_error(capsys: pytest.CaptureFixture[str], *argv: str) -> list[str]:
    """The stderr lines of `vllm-autoscale ARGV` when argparse refuses it (exit status 2)."""
    with pytest.raises(SystemExit) as exited:
        cli.main(list(argv))
    assert exited.value.code == 2
    return capsys.readouterr().err.splitlines()


@pytest.mark.parametrize(
    ("argv", "usage", "hint"),
    [
        pytest.param(
            ("serve", "--prometheus_url", "x"), "usage: vllm-autoscale serve", "--prometheus-url", id="serve"
        ),
        pytest.param(
            ("query", "m", "--selecter", "a=b"), "usage: vllm-autoscale query", "--selector", id="query"
        ),
        pytest.param(
            ("serve", "--kedaport", "9443"), "usage: vllm-autoscale serve", "--keda-port", id="joined"
        ),
        pytest.param(("demo", "--metrc", "x"), "usage: vllm-autoscale demo", "--metric", id="a lab command"),
        pytest.param(("emulate", "--replcas=2"), "usage: vllm-autoscale emulate", "--replicas", id="with ="),
    ],
)
def test_an_unknown_option_shows_the_sub_command_usage_and_the_option_meant(
    capsys: pytest.CaptureFixture[str], argv: tuple[str, ...], usage: str, hint: str
) -> None:
    """Not the top-level usage (which lists only the sub-commands): the one whose options were misspelt."""
    lines = _usage_error(capsys, *argv)
    assert lines[0].startswith(usage)
    command = argv[0]
    assert lines[-1].startswith(f"vllm-autoscale {command}: error: unrecognized arguments: ")
    assert lines[-1].endswith(f"(did you mean {hint}?)")


def test_several_unknown_options_each_get_their_hint(capsys: pytest.CaptureFixture[str]) -> None:
    lines = _usage_error(capsys, "query", "m", "--prometheus-ulr", "x", "--namespce", "a")
    assert lines[-1].endswith(
        "(--prometheus-ulr: did you mean --prometheus-url?; --namespce: did you mean --namespace?)"
    )


def test_no_hint_when_nothing_is_close(capsys: pytest.CaptureFixture[str]) -> None:
    lines = _usage_error(capsys, "serve", "--frobnicate")
    assert lines[0].startswith("usage: vllm-autoscale serve")
    assert lines[-1] == "vllm-autoscale serve: error: unrecognized arguments: --frobnicate"


def test_query_namespace_says_its_default(capsys: pytest.CaptureFixture[str]) -> None:
    """`-n` defaults to `default`, and its help says so (the HPA's namespace is what a user expects)."""
    with pytest.raises(SystemExit):
        cli.main(["query", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert (
        "-n NAMESPACE, --namespace NAMESPACE namespace the metric is read in, as the HPA's (default: default)"
        in help_text
    )
    assert cli.build_parser().parse_args(["query", "m"]).namespace == "default"


# --- --scrape-target means the scrape source --------------------------------------------------------


def test_scrape_target_without_source_queries_that_target(capsys: pytest.CaptureFixture[str]) -> None:
    """`query --scrape-target URL` reads URL (a real HTTP page), not the default Prometheus on 9090."""
    pods = ExpositionServer()
    try:
        port = pods.add("llama-0", lambda: page(PodLoad(model="llama", waiting=3)))
        status = cli.main(
            ["query", "vllm_requests_waiting", "--scrape-target", f"http://127.0.0.1:{port}/metrics"]
        )
    finally:
        pods.close()
    out = capsys.readouterr().out
    assert status == 0, out
    assert out.startswith("# scrape:   1 targets in namespace 'default'")
    assert '"value": "3"' in out


@pytest.mark.parametrize(
    ("flags", "source"),
    [
        pytest.param(["--scrape-target", "http://10.0.0.5:8000/metrics"], "scrape", id="implied"),
        pytest.param(
            ["--source", "scrape", "--scrape-target", "http://10.0.0.5:8000/metrics"], "scrape", id="said"
        ),
        pytest.param(["--prometheus-url", "http://p:9090"], "prometheus", id="prometheus flags alone"),
        pytest.param([], "prometheus", id="nothing said"),
    ],
)
def test_the_source_the_flags_imply(flags: list[str], source: str) -> None:
    for command in (["serve"], ["query", "m"]):
        args = cli.build_parser().parse_args([*command, *flags])
        assert load_file(None, overrides(args)).source == source


def test_the_implied_source_wins_over_the_file(tmp_path: Path) -> None:
    """A flag overrides the file: `source: prometheus` there and `--scrape-target` here scrapes."""
    path = tmp_path / "config.yaml"
    path.write_text("source: prometheus\n", encoding="utf-8")
    args = cli.build_parser().parse_args(
        ["serve", "--config", str(path), "--scrape-target", "http://a:1/metrics"]
    )
    assert load_file(args.config, serve_overrides(args)).source == "scrape"


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        pytest.param(
            ["--source", "prometheus", "--scrape-target", "http://a:1/metrics"],
            "--scrape-target needs the scrape source; drop --source prometheus or use --source scrape",
            id="scrape target with prometheus",
        ),
        pytest.param(
            ["--prometheus-url", "http://p:9090", "--scrape-target", "http://a:1/metrics"],
            "--scrape-target (the scrape source) cannot be combined with --prometheus-url",
            id="scrape target with a prometheus url",
        ),
        pytest.param(
            ["--source", "scrape", "--prometheus-url", "http://p:9090"],
            "--prometheus-url is not used by --source scrape; drop one of them",
            id="prometheus url with scrape",
        ),
        pytest.param(
            ["--source", "prometheus", "--scrape-namespace", "prod"],
            "--scrape-namespace is not used by --source prometheus; drop one of them",
            id="scrape namespace with prometheus",
        ),
    ],
)
def test_a_flag_the_source_would_ignore_is_refused(
    capsys: pytest.CaptureFixture[str], flags: list[str], message: str
) -> None:
    """One line, exit 2, for `serve` and `query` alike; nothing is silently ignored."""
    for command in (["serve", "--insecure-serving"], ["query", "vllm_requests_waiting"]):
        assert cli.main([*command, *flags]) == 2
        captured = capsys.readouterr()
        assert captured.err.splitlines() == [f"vllm-autoscale: {message}"]
