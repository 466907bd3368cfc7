"""The one namespace rule (adapter/vocabulary/names.py) and the front ends that apply it.

The HTTP API (tests/api/test_routes.py) and KEDA's metadata (tests/keda/test_metadata.py) test their own
answers; here are the rule's causes, the echo of a caller's input, and `vllm-autoscale query -n`,
run against a real HTTP server standing in for Prometheus that records whether it was asked.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from aiohttp import web

from adapter import cli
from adapter.errors import InvalidNamespace
from adapter.vocabulary.names import check_namespace, echo


@pytest.mark.parametrize("namespace", ["a", "0", "team-a-01", "a" * 63])
def test_a_dns_label_is_a_namespace(namespace: str) -> None:
    assert check_namespace(namespace) == namespace


@pytest.mark.parametrize(
    ("namespace", "cause"),
    [
        pytest.param("", "must start and end with a lowercase letter or digit", id="empty"),
        pytest.param("prod-", "must start and end with a lowercase letter or digit", id="trailing dash"),
        pytest.param("Prod", "must not contain 'P'", id="upper case"),
        pytest.param("a_b", "must not contain '_'", id="underscore"),
        pytest.param("pröd", r"must not contain '\xf6'", id="non-ASCII, escaped"),
        pytest.param("a" * 64, "must be at most 63 characters", id="64 characters"),
    ],
)
def test_each_refusal_names_its_cause(namespace: str, cause: str) -> None:
    """The message says what is wrong, then the rule, as the kube-apiserver's own messages do."""
    with pytest.raises(InvalidNamespace) as caught:
        check_namespace(namespace)
    message = caught.value.status()["message"]
    assert message.startswith(f"invalid namespace {echo(namespace)}: {cause} (an RFC 1123 label")
    assert caught.value.code == 400


def test_an_echo_is_escaped_and_cut() -> None:
    """A caller's input comes back printable and short, whatever it held."""
    assert echo("a\nb") == r"'a\nb'"
    long = echo("x" * 6000)
    assert long.endswith("... (6000 characters)")
    assert len(long) < 100


async def test_query_refuses_a_junk_namespace_before_asking_the_source(
    aiohttp_server: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """`vllm-autoscale query -n` applies the HTTP API's rule: a Status and exit 1, and Prometheus
    is never asked; a valid namespace is asked (so the count above could fail)."""
    asked: list[str] = []

    async def prometheus(request: web.Request) -> web.Response:
        asked.append(request.path)
        return web.json_response({"status": "error", "error": "down for the test"}, status=503)

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", prometheus)
    server = await aiohttp_server(app)
    argv = ["query", "vllm_requests_waiting", "--prometheus-url", str(server.make_url("/"))]

    assert await asyncio.to_thread(cli.main, [*argv, "-n", "Team_A"]) == 1
    out, err = capsys.readouterr()
    status = json.loads(out)
    assert (status["kind"], status["code"], status["reason"]) == ("Status", 400, "BadRequest")
    assert status["message"].startswith("invalid namespace 'Team_A': must not contain 'T'")
    assert "cause: 'Team_A'" in err
    assert asked == []

    assert await asyncio.to_thread(cli.main, [*argv, "-n", "team-a"]) == 1
    assert asked, "a valid namespace reaches the source"
