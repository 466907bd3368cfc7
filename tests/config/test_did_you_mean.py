"""A misspelt configuration key names the key that was meant, on one line, before the valid keys."""

from __future__ import annotations

from pathlib import Path

import pytest

from adapter.cli import main
from adapter.config import load
from adapter.errors import ConfigError


@pytest.mark.parametrize(
    ("text", "meant"),
    [
        pytest.param("prometheus: {refresh_intervl: 5s}", "'refresh_interval'", id="a letter missing"),
        pytest.param("prometheus: {refreshinterval: 5s}", "'refresh_interval'", id="underscore missing"),
        pytest.param("sorce: scrape", "'source'", id="top level"),
        pytest.param("scrape: {target: []}", "'targets'", id="singular for plural"),
        pytest.param("security: {tls_cert: a.crt}", "'tls_cert_file'", id="a prefix"),
        pytest.param("metrics: {queue_depth: {qeury: x}}", "'query'", id="inside a user metric"),
        pytest.param("url: http://p:9090", "'prometheus.url'", id="one indentation level off"),
        pytest.param("refresh_interval: 5s", "'prometheus.refresh_interval'", id="section left out"),
        pytest.param("port: 7443", "'scrape.port' or 'server.port'", id="several sections hold it"),
    ],
)
def test_the_meant_key_is_named(text: str, meant: str) -> None:
    """The suggestion comes first, then the keys valid at that level, all on one line."""
    with pytest.raises(ConfigError) as caught:
        load(text)
    message = str(caught.value)
    assert f"is unknown; did you mean {meant}? valid keys here: [" in message
    assert "\n" not in message


def test_no_suggestion_when_nothing_is_close() -> None:
    """A key like no other gets the valid keys only, never a far-fetched guess."""
    with pytest.raises(ConfigError) as caught:
        load("prometheus: {colour: blue}")
    assert str(caught.value).startswith("config key 'prometheus.colour' is unknown; valid keys here: [")
    assert "did you mean" not in str(caught.value)


def test_the_console_says_it_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Through `serve --config`: one stderr line with the suggestion, exit 2, no traceback."""
    path = tmp_path / "config.yaml"
    path.write_text("prometheus:\n  refresh_intervl: 5s\n", encoding="utf-8")
    assert main(["serve", "--config", str(path), "--insecure-serving"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    (line,) = captured.err.splitlines()
    assert line.startswith(
        "vllm-autoscale: config key 'prometheus.refresh_intervl' is unknown; did you mean 'refresh_interval'?"
    )
