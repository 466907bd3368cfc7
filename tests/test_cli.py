"""The command line's shape: the server's sub-commands never load the lab.

`serve` runs in the cluster's image, which has no matplotlib; the lab's sub-commands are imported
only when they run. These tests start a fresh interpreter, because this one has imported the lab.
"""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

from adapter import cli

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
