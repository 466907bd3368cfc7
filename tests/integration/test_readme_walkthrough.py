"""README's "Run it locally" runs as written: the commands are read from README.md, so they cannot drift.

The shell block after the comment that names this file is split into commands (a here-document and
a `\\` continuation stay with their line) and each is run with `bash -c` in an empty directory, as a
newcomer pastes them: one ending in `&` in the background, the others in the foreground. The real
binaries run: `vllm-autoscale` from this interpreter's environment, Prometheus from Debian, curl.
The only change is the ports, each replaced by a free one (the README's are fixed for people).

A foreground command is re-run, as a person would, until it succeeds or a deadline passes: `query`
answers 503 until Prometheus has scraped once. Every command runs in its own process group, and
every group is killed and checked gone at the end, the background servers and the `for` loop's
curls alike.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from adapter.vocabulary.quantity import parse_quantity
from lab.engine.placement import free_port_range
from tests.integration.procs import free_port, require_binary

pytestmark = pytest.mark.integration

README = Path(__file__).parents[2] / "README.md"
MARKER = "tests/integration/test_readme_walkthrough.py"
#: the README's fixed ports: the two emulated replicas (consecutive), Prometheus, the adapter
README_PORTS = (8000, 8001, 9091, 8080)
# Generous for a loaded CI machine: every wait polls and returns as soon as it can.
DEADLINE_SECONDS = 90.0


def walkthrough(text: str) -> str:
    """The first ```sh block after the comment naming this test."""
    after = text[text.index(MARKER) :]
    start = after.index("```sh\n") + len("```sh\n")
    return after[start : after.index("\n```\n", start)]


def commands(block: str) -> list[str]:
    """The block's commands: one a line, with here-document bodies and `\\` continuations attached."""
    out: list[str] = []
    lines = iter(block.splitlines())
    for line in lines:
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        command = line
        while command.endswith("\\"):
            command += "\n" + next(lines)
        if here := re.search(r"<<'?(\w+)'?", command):
            for body in lines:
                command += "\n" + body
                if body == here.group(1):
                    break
        out.append(command)
    return out


def substitute(command: str, ports: dict[int, int]) -> str:
    """The command with each README port replaced by its free stand-in."""
    return re.sub(r"(?<!\d)(\d{4})(?!\d)", lambda m: str(ports.get(int(m.group(1)), m.group(1))), command)


def background(command: str) -> str | None:
    """The command without its trailing `&` (and any comment after it), or None for a foreground one."""
    bare = re.sub(r"\s+#[^'\"]*$", "", command.splitlines()[0]).rstrip()
    return bare[:-1].rstrip() if bare.endswith("&") and not bare.endswith("&&") else None


def value_list(document: Any, metric: str) -> float:
    """The one value of an ExternalMetricValueList for `metric` (raises on anything else)."""
    assert document["kind"] == "ExternalMetricValueList", document
    (item,) = document["items"]
    assert item["metricName"] == metric
    value = parse_quantity(item["value"])
    assert math.isfinite(value) and value >= 0
    return value


def query_output(stdout: str) -> Any:
    """`query`'s JSON document, between its `#` comment lines."""
    return json.loads("\n".join(line for line in stdout.splitlines() if not line.startswith("#")))


@dataclass
class Shell:
    """Runs commands as `bash -c` in `directory`, each in
    a new process group; kills every group at the end."""

    directory: Path
    env: dict[str, str]
    groups: list[int] = field(default_factory=list)
    servers: list[tuple[str, subprocess.Popen[bytes]]] = field(default_factory=list)

    def start(self, command: str) -> None:
        popen = subprocess.Popen(
            ["bash", "-c", command],
            cwd=self.directory,
            env=self.env,
            start_new_session=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        self.groups.append(popen.pid)
        self.servers.append((command, popen))

    def run_once(self, command: str) -> subprocess.CompletedProcess[str]:
        popen = subprocess.Popen(
            ["bash", "-c", command],
            cwd=self.directory,
            env=self.env,
            start_new_session=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.groups.append(popen.pid)
        stdout, stderr = popen.communicate(timeout=60)
        return subprocess.CompletedProcess(command, popen.returncode, stdout, stderr)

    def run_until(self, command: str, accept: Callable[[subprocess.CompletedProcess[str]], bool]) -> str:
        """Re-run `command` until `accept` takes its result; its stdout. Fails early if a server died."""
        deadline = time.monotonic() + DEADLINE_SECONDS
        while True:
            self.check_servers()
            done = self.run_once(command)
            with contextlib.suppress(Exception):
                if accept(done):
                    return done.stdout
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"{command!r} did not succeed within "
                    f"{DEADLINE_SECONDS:g}s; last exit {done.returncode}:\n"
                    f"{done.stdout[-2000:]}\n{done.stderr[-2000:]}\n{self.logs()}"
                )
            time.sleep(0.5)  # a person's pause before running it again; the deadline bounds the wait

    def check_servers(self) -> None:
        for command, popen in self.servers:
            if popen.poll() is not None:
                raise AssertionError(f"{command!r} exited with {popen.returncode}\n{self.logs()}")

    def logs(self) -> str:
        return "\n".join(
            f"--- {p.name}\n{p.read_text(errors='replace')[-1500:]}" for p in self.directory.glob("*.log")
        )

    def kill_all(self) -> list[int]:
        """SIGTERM every group, SIGKILL what is left after a grace period; the groups still alive after."""
        for signum, grace in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 5.0)):
            for group in self.groups:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(group, signum)
            deadline = time.monotonic() + grace
            while self.alive() and time.monotonic() < deadline:
                for _command, popen in self.servers:
                    popen.poll()  # reap the group leaders this test started
                time.sleep(0.05)
        return self.alive()

    def alive(self) -> list[int]:
        living = []
        for group in self.groups:
            try:
                os.killpg(group, 0)
                living.append(group)
            except ProcessLookupError:
                pass
        return living


@pytest.fixture
def shell(tmp_path: Path) -> Iterator[Shell]:
    require_binary("prometheus")
    require_binary("curl")
    bin_dir = str(Path(sys.executable).parent)  # the environment's `vllm-autoscale`
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ.get('PATH', '/usr/bin:/bin')}"}
    env.pop("PYTHONPATH", None)
    shell = Shell(tmp_path, env)
    try:
        yield shell
    finally:
        assert shell.kill_all() == [], "every process the walkthrough started is gone"


def test_the_commands_are_the_walkthrough() -> None:
    """The block holds each step the section promises, so an emptied block cannot pass the test below."""
    steps = commands(walkthrough(README.read_text(encoding="utf-8")))
    joined = "\n".join(steps)
    for part in (
        "vllm-autoscale emulate",
        "prometheus --config.file",
        "labels: {namespace: default, pod:",
        "vllm-autoscale serve",
        "--insecure-serving",
        "vllm-autoscale query",
        "--scrape-target",
        "/apis/external.metrics.k8s.io/v1beta1/namespaces/default/",
    ):
        assert part in joined, part
    assert [background(step) is not None for step in steps][:4] == [True, False, True, True]


def test_the_readme_walkthrough_runs(shell: Shell) -> None:
    """Each command as written (ports aside): `query`
    answers a number, the curl an ExternalMetricValueList."""
    base = free_port_range(2)
    ports = dict(zip(README_PORTS, (base, base + 1, free_port(), free_port()), strict=True))
    answers: dict[str, list[Any]] = {"query": [], "list": [], "discovery": []}

    def accept(command: str) -> Callable[[subprocess.CompletedProcess[str]], bool]:
        def check(done: subprocess.CompletedProcess[str]) -> bool:
            if done.returncode != 0:
                return False
            if command.startswith("vllm-autoscale query"):
                answers["query"].append(value_list(query_output(done.stdout), "vllm_requests_inflight"))
            elif command.startswith("curl") and "/namespaces/" in command:
                answers["list"].append(value_list(json.loads(done.stdout), "vllm_requests_inflight"))
            elif command.startswith("curl"):
                document = json.loads(done.stdout)
                assert document["kind"] == "APIResourceList", document
                answers["discovery"].append({r["name"] for r in document["resources"]})
            return True

        return check

    for command in commands(walkthrough(README.read_text(encoding="utf-8"))):
        command = substitute(command, ports)
        bare = background(command)
        if bare is not None:
            shell.start(bare)
        else:
            shell.run_until(command, accept(command))
    assert len(answers["query"]) == 2, "query through Prometheus, then through --scrape-target"
    assert len(answers["list"]) == 1
    assert "vllm_requests_inflight" in answers["discovery"][0]
