"""Configuration shape errors through the command line: one line naming the key, never a traceback.

Every section is tried as a scalar, a list and an empty value (`prometheus:` with every key commented
out), alone and with a flag that overrides one of its keys, through the path `serve` and `query` take
(their argument parser, their flag overrides, `load_file`). An empty section means "all defaults", as
an absent one does; a scalar or a list is a `ConfigError` naming the section and its valid keys.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from adapter.cli import build_parser, main
from adapter.config import Config, load_file
from adapter.errors import ConfigError
from adapter.flags import overrides, serve_overrides

#: section -> (a key that section must accept, serve flags overriding one of its keys, how to read it back)
SECTIONS: dict[str, tuple[str, list[str], str]] = {
    "prometheus": ("url", ["--prometheus-url", "http://prom.example:9090"], "prometheus.url"),
    "scrape": ("targets", ["--scrape-target", "http://10.0.0.5:8000/metrics"], "scrape.targets"),
    "cache": ("max_keys", [], ""),
    "server": ("port", ["--port", "7443"], "server.port"),
    "security": ("tls_cert_file", ["--tls-cert-file", "/tls/tls.crt"], "security.tls_cert_file"),
    "logging": ("level", ["--log-level", "debug"], "logging.level"),
    "metrics": ("", [], ""),
}
SHAPES = {"scalar": "{section}: 5\n", "list": "{section}: [url, port]\n", "empty": "{section}:\n"}
# More overriding flags for the same sections: the source switch, the scrape namespace, TLS and booleans.
EXTRA_FLAGS = [
    ("scrape", ["--source", "scrape", "--scrape-namespace", "prod"]),
    ("server", ["--address", "127.0.0.2", "--insecure-serving"]),
    ("security", ["--self-signed", "--no-authorize-metrics", "--tls-private-key-file", "/tls/tls.key"]),
    ("security", ["--requestheader-allowed-names", "front-proxy", "--kubeconfig", "/kube/config"]),
    ("logging", ["--log-format", "text"]),
]


def serve_config(tmp_path: Path, text: str, flags: list[str]) -> Config:
    """Load the configuration exactly as `vllm-autoscale serve --config FILE FLAGS...` does."""
    path = tmp_path / "config.yaml"
    path.write_text(text, encoding="utf-8")
    args = build_parser().parse_args(["serve", "--config", str(path), *flags])
    return load_file(args.config, serve_overrides(args))


def cases() -> list[object]:
    out: list[object] = []
    for section, (_, flags, _) in SECTIONS.items():
        flag_sets: list[tuple[str, list[str]]] = [("no flag", [])]
        flag_sets += [(" ".join(flags), flags)] if flags else []
        flag_sets += [(" ".join(extra), extra) for name, extra in EXTRA_FLAGS if name == section]
        for shape in SHAPES:
            for flag_id, flag_args in flag_sets:
                out.append(pytest.param(section, shape, flag_args, id=f"{section} {shape} + {flag_id}"))
    return out


@pytest.mark.parametrize(("section", "shape", "flags"), cases())
def test_every_section_shape_with_and_without_flags(
    tmp_path: Path, section: str, shape: str, flags: list[str]
) -> None:
    """A scalar or list section is one ConfigError line naming it and its valid keys; an empty section
    is the defaults, and a flag overriding one of its keys still applies."""
    text = SHAPES[shape].format(section=section)
    if shape == "empty":
        config = serve_config(tmp_path, text, flags)
        key, own_flags, dotted = SECTIONS[section]
        if flags == own_flags and dotted:
            part, leaf = dotted.split(".")
            value = getattr(getattr(config, part), leaf)
            assert flags[-1] in (value if isinstance(value, tuple) else (str(value),))
        elif not flags:
            assert getattr(config, section) == getattr(Config(), section), "empty means all defaults"
        return
    with pytest.raises(ConfigError) as caught:
        serve_config(tmp_path, text, flags)
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(f"config key {section!r} value ")
    assert "must be a mapping" in message
    key = SECTIONS[section][0]
    if key:
        assert repr(key) in message, "the valid keys of the section are listed"


@pytest.mark.parametrize(
    ("text", "flags", "message"),
    [
        pytest.param(
            "prometheus: {basic_auth: x}\n",
            ["--prometheus-url", "http://p:9090"],
            "config key 'prometheus.basic_auth' value 'x' must be a mapping",
            id="nested section as scalar",
        ),
        pytest.param(
            "prometheus: {headers: [a]}\n",
            [],
            "config key 'prometheus.headers' value ['a'] must be a mapping",
            id="string mapping as list",
        ),
        pytest.param(
            "metrics: {queue_depth: 1}\n",
            [],
            "config key 'metrics.queue_depth' value 1 must be a mapping",
            id="one metric as scalar",
        ),
        pytest.param(
            f"prometheus: {'x' * 5000}\n",
            ["--prometheus-url", "http://p:9090"],
            "config key 'prometheus' value 'xxxx",
            id="a huge value is cut",
        ),
    ],
)
def test_nested_shapes_are_one_line(tmp_path: Path, text: str, flags: list[str], message: str) -> None:
    """Shapes below the top level fail the same way; a long value is shortened in the message."""
    with pytest.raises(ConfigError) as caught:
        serve_config(tmp_path, text, flags)
    assert message in str(caught.value)
    assert "\n" not in str(caught.value) and len(str(caught.value)) < 400


def test_query_flags_take_the_same_path(tmp_path: Path) -> None:
    """`query` overrides keys with its own flag set; a scalar section fails the same way there."""
    path = tmp_path / "config.yaml"
    path.write_text("prometheus: nope\n", encoding="utf-8")
    args = build_parser().parse_args(
        ["query", "vllm_requests_waiting", "--config", str(path), "--prometheus-url", "http://p:9090"]
    )
    with pytest.raises(ConfigError, match=r"^config key 'prometheus' value 'nope' must be a mapping"):
        load_file(args.config, overrides(args))


def test_empty_mapping_keys_mean_empty(tmp_path: Path) -> None:
    """`metrics:` and `headers:` with every entry commented out are empty mappings, not errors."""
    config = serve_config(tmp_path, "metrics:\nprometheus:\n  headers:\n", [])
    assert config.metrics == {} and config.prometheus.headers == {}


def test_serve_prints_one_line_and_exits_2(tmp_path: Path) -> None:
    """The real console script: a scalar section plus an overriding flag is one stderr line, exit 2."""
    script = shutil.which("vllm-autoscale", path=str(Path(sys.executable).parent))
    assert script is not None, "the console script is installed beside the interpreter"
    bad = tmp_path / "bad.yaml"
    bad.write_text("prometheus: http://prom:9090\n", encoding="utf-8")
    done = subprocess.run(
        [script, "serve", "--config", str(bad), "--prometheus-url", "http://p:9090"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(
        "vllm-autoscale: config key 'prometheus' value 'http://prom:9090' must be a mapping"
    )


def test_broken_yaml_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """PyYAML's several-line parse error reaches stderr as one line, with its position, and exit 2."""
    bad = tmp_path / "bad.yaml"
    bad.write_text("prometheus:\n  url: [\n", encoding="utf-8")
    assert main(["serve", "--config", str(bad)]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("vllm-autoscale: unable to parse configuration YAML: ")
    assert "line 3" in line
