"""Every start-up failure of `serve` is one stderr line naming its cause, exit status 2, no traceback.

Taken ports are real listening sockets held by the test; certificates are real (tests/certs.py).
The console script runs as a subprocess where its whole stderr matters (gRPC's C core writes there
on its own); the file checks call `cli.main` in-process.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from adapter import cli, server
from adapter.app import create_app
from adapter.config import load
from adapter.errors import ConfigError
from lab.engine.placement import free_port
from tests.certs import CA
from tests.fakes import FakeSource


@contextlib.contextmanager
def taken_port() -> Iterator[int]:
    """A loopback port with a listening socket on it for the duration of the block."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield int(sock.getsockname()[1])


def console(*argv: str) -> subprocess.CompletedProcess[str]:
    """Run the installed `vllm-autoscale` console script (it must exit by itself)."""
    script = shutil.which("vllm-autoscale", path=str(Path(sys.executable).parent))
    assert script is not None, "the console script is installed beside the interpreter"
    return subprocess.run([script, *argv], capture_output=True, text=True, timeout=60, check=False)


def one_line(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    return lines[0]


def test_serve_on_a_taken_port() -> None:
    with taken_port() as port:
        line = one_line(console("serve", "--insecure-serving", "--port", str(port)))
    assert (
        line
        == f"vllm-autoscale: unable to listen on 127.0.0.1:{port} (--address, --port): Address already in use"
    )


def test_serve_on_a_taken_keda_port() -> None:
    """Refused before the HTTP server starts, and without gRPC's own complaint on stderr."""
    with taken_port() as port:
        line = one_line(
            console("serve", "--insecure-serving", "--port", str(free_port()), "--keda-port", str(port))
        )
    assert line == (
        f"vllm-autoscale: unable to listen on 127.0.0.1:{port} for the KEDA external scaler (--keda-port): "
        "Address already in use"
    )


async def test_a_port_taken_after_the_checks_is_still_one_error() -> None:
    """The bind itself (port taken between the probe and the listen) raises the same ConfigError."""
    stop = asyncio.Event()
    with taken_port() as port:
        config = load(None, {"server.port": port, "server.insecure_serving": True})
        with pytest.raises(
            ConfigError, match=rf"^unable to listen on 127.0.0.1:{port} \(--address, --port\): "
        ):
            await server.serve(config, create_app(config, source=FakeSource()), stop)
        config = dataclasses.replace(config, server=dataclasses.replace(config.server, port=0))
        with pytest.raises(
            ConfigError, match=rf"^unable to listen on 127.0.0.1:{port} for the KEDA external"
        ):
            await server.serve(config, create_app(config, source=FakeSource()), stop, keda=server.Keda(port))


def _main_error(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    assert cli.main(list(argv)) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    (line,) = captured.err.splitlines()
    return line


@pytest.mark.parametrize("kind", ["missing", "a directory"])
def test_an_unreadable_config_file(tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str) -> None:
    path = tmp_path / "config.yaml"
    if kind == "a directory":
        path.mkdir()
    reason = "No such file or directory" if kind == "missing" else "Is a directory"
    line = _main_error(capsys, "serve", "--config", str(path), "--insecure-serving")
    assert line == f"vllm-autoscale: unable to read configuration file {str(path)!r}: {reason}"


@pytest.fixture
def pki(tmp_path: Path) -> dict[str, Path]:
    """A serving pair and a CA on disk, plus a text file that is no PEM at all."""
    ca = CA("client-ca")
    cert, key = CA("serving-ca").issue("vllm-autoscale", server=True).write(tmp_path, "serving")
    garbage = tmp_path / "garbage.pem"
    garbage.write_text("not a certificate\n")
    (tmp_path / "ca.d").mkdir()
    return {"cert": cert, "key": key, "ca": ca.write(tmp_path, "ca"), "garbage": garbage, "dir": tmp_path}


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        pytest.param(
            {"--tls-cert-file": "missing.crt"},
            "--tls-cert-file ('security.tls_cert_file') '{dir}/missing.crt': "
            "unable to read it: No such file or directory",
            id="missing certificate",
        ),
        pytest.param(
            {"--tls-private-key-file": "missing.key"},
            "--tls-private-key-file ('security.tls_private_key_file') "
            "'{dir}/missing.key': unable to read it: "
            "No such file or directory",
            id="missing key",
        ),
        pytest.param(
            {"--tls-cert-file": "serving.key"},
            "--tls-cert-file ('security.tls_cert_file') '{dir}/serving.key': holds no PEM CERTIFICATE block "
            "(-----BEGIN ...CERTIFICATE-----)",
            id="key given as the certificate",
        ),
        pytest.param(
            {"--tls-private-key-file": "serving.crt"},
            "--tls-private-key-file ('security.tls_private_key_file') '{dir}/serving.crt': holds no PEM "
            "PRIVATE KEY block (-----BEGIN ...PRIVATE KEY-----)",
            id="certificate given as the key",
        ),
        pytest.param(
            {"--client-ca-file": "garbage.pem"},
            "--client-ca-file ('security.client_ca_file') "
            "'{dir}/garbage.pem': holds no PEM CERTIFICATE block "
            "(-----BEGIN ...CERTIFICATE-----)",
            id="client CA not PEM",
        ),
        pytest.param(
            {"--requestheader-client-ca-file": "ca.d"},
            "--requestheader-client-ca-file "
            "('security.requestheader_client_ca_file') '{dir}/ca.d': unable to "
            "read it: Is a directory",
            id="front-proxy CA a directory",
        ),
        pytest.param(
            {"--kubeconfig": "missing-kubeconfig"},
            "--kubeconfig ('security.kubeconfig') "
            "'{dir}/missing-kubeconfig': unable to read it: No such file or "
            "directory",
            id="missing kubeconfig",
        ),
    ],
)
def test_certificate_key_and_ca_files(
    capsys: pytest.CaptureFixture[str], pki: dict[str, Path], flags: dict[str, str], expected: str
) -> None:
    """Each is named by its flag (and setting) before anything
    connects: no kube-apiserver is needed to be told."""
    files = {"--tls-cert-file": str(pki["cert"]), "--tls-private-key-file": str(pki["key"])}
    files |= {flag: str(pki["dir"] / name) for flag, name in flags.items()}
    argv = ["serve", "--port", str(free_port()), *(word for pair in files.items() for word in pair)]
    line = _main_error(capsys, *argv)
    assert line == "vllm-autoscale: " + expected.format(dir=pki["dir"])
