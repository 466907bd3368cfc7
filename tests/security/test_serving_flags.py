"""Serving modes and security flags (adapter/server.py `check_serving`, the `serve` flags): TLS always,
unless explicitly insecure on loopback, with exactly one certificate source; comma-separated flags
become the security settings."""

from __future__ import annotations

import pytest

from adapter import cli, server
from adapter.config import load_file
from adapter.errors import ConfigError
from adapter.flags import serve_overrides


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        pytest.param(
            ["--insecure-serving", "--address", "0.0.0.0"],
            "refuses address '0.0.0.0'",
            id="insecure serving refuses a non-loopback address",
        ),
        pytest.param(
            ["--insecure-serving", "--self-signed"],
            "cannot be combined",
            id="insecure serving with a certificate is contradictory",
        ),
        pytest.param(["--tls-cert-file", "x.crt"], "must be set together", id="certificate without key"),
        pytest.param(
            ["--self-signed", "--tls-cert-file", "x.crt", "--tls-private-key-file", "x.key"],
            "--self-signed cannot be combined",
            id="self-signed and files",
        ),
        pytest.param([], "serving needs a certificate", id="no certificate and not insecure"),
        pytest.param(["--insecure-serving"], None, id="insecure serving on loopback is allowed"),
        pytest.param(["--self-signed"], None, id="self-signed alone is allowed"),
        pytest.param(
            ["--tls-cert-file", "x.crt", "--tls-private-key-file", "x.key"], None, id="files are allowed"
        ),
    ],
)
def test_check_serving(flags: list[str], message: str | None) -> None:
    """TLS always, unless explicitly insecure on loopback; exactly one certificate source."""
    args = cli.build_parser().parse_args(["serve", *flags])
    config = load_file(None, serve_overrides(args))
    if message is None:
        server.check_serving(config)
    else:
        with pytest.raises(ConfigError, match=message):
            server.check_serving(config)


def test_serve_flags_become_security_settings() -> None:
    """Comma-separated flags become lists; an empty allowed-names flag means "any CN of the CA"."""
    args = cli.build_parser().parse_args(
        [
            "serve",
            "--self-signed",
            "--requestheader-allowed-names",
            "",
            "--requestheader-group-headers",
            "X-A, X-B",
            "--authorization-always-allow-paths",
            "/healthz,/debug/*",
            "--no-authorize-metrics",
            "--kubeconfig",
            "/k",
        ]
    )
    security = load_file(None, serve_overrides(args)).security
    assert security.requestheader_allowed_names == ()
    assert security.requestheader_group_headers == ("X-A", "X-B")
    assert security.requestheader_username_headers is None
    assert security.authorization_always_allow_paths == ("/healthz", "/debug/*")
    assert security.authorize_metrics is False
    assert security.kubeconfig == "/k"
    assert load_file(None, {}).security.authorize_metrics is True
