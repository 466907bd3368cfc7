"""The `vllm-autoscale` command line: one sub-command per job, each in the module that owns it."""

from __future__ import annotations

import argparse
import asyncio
import difflib
import importlib
import json
import logging
import signal
import sys
import time
from typing import Any

from adapter import __version__, logs
from adapter.config import Config, load_file
from adapter.errors import AdapterError, ConfigError
from adapter.flags import config_flags, overrides, security_flags, serve_overrides
from adapter.telemetry import Telemetry
from adapter.vocabulary import selectors
from adapter.vocabulary.names import check_namespace

log = logging.getLogger("adapter")

# The lab's sub-commands: name -> (module exposing add_arguments(parser) and run(args), one-line help).
# A module is imported only when its own sub-command runs, so `serve` and `query` never load the
# emulator, the HPA model, numpy or matplotlib (tests/test_cli.py holds the help to the docstrings).
LAB_COMMANDS: dict[str, tuple[str, str]] = {
    "emulate": ("lab.emulate.cli", "Run emulated vLLM servers on local ports (`vllm-autoscale emulate`)."),
    "demo": (
        "lab.demo.cli",
        "Run the whole autoscaling loop locally: emulated vLLM, the adapter, load and a model of the HPA.",
    ),
    "profile": (
        "lab.profile.cli",
        "Measure one vLLM replica's capacity curve and knee under a workload and SLO, and recommend targets.",
    ),
    "fidelity": (
        "lab.profile.twin.fidelity_cli",
        "Check a twin against the server it was profiled from: one open-loop sweep of each, side by side.",
    ),
    "experiment": (
        "lab.experiments.cli",
        "Compare engine configurations side by side on the host's GPUs, repeated, with evidence gates.",
    ),
    "backtest": (
        "lab.backtest.cli",
        "Replay recorded traffic through the HPA model for a "
        "set of scaling policies and write a decision record.",
    ),
    "rehearse": (
        "lab.rehearsal.cli",
        "Rehearse a scaling policy on real engine processes, "
        "beside the backtest's prediction of the same run.",
    ),
}


def _command(argv: list[str]) -> str | None:
    """The sub-command named on the command line (the first word that is not an option)."""
    return next((word for word in argv if not word.startswith("-")), None)


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser; the lab's sub-command `command`, if named, gets its full arguments (imported now)."""
    parser = argparse.ArgumentParser(
        prog="vllm-autoscale",
        description="Autoscale vLLM on queue depth, KV-cache usage and TPOT: an external metrics adapter.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    serve = commands.add_parser("serve", help="run the external metrics API server")
    config_flags(serve)
    serve.add_argument("--address", help="listen address (override 'server.address')")
    serve.add_argument("--port", type=int, help="listen port (override 'server.port')")
    serve.add_argument(
        "--insecure-serving",
        action="store_true",
        help="plain HTTP without authentication; refused on any address but loopback",
    )
    serve.add_argument(
        "--keda-port",
        type=int,
        metavar="PORT",
        help="also serve the KEDA external scaler (gRPC) on this port: TLS with the serving certificate, "
        "mutual TLS with --client-ca-file (docs/keda.md)",
    )
    security_flags(serve)
    serve.add_argument("--log-level", choices=["debug", "info", "warning", "error"])
    serve.add_argument("--log-format", choices=["json", "text"])
    serve.set_defaults(func=run_serve)

    query = commands.add_parser("query", help="print a metric exactly as the HPA would receive it")
    query.add_argument("metric", help="external metric name, e.g. vllm_requests_inflight")
    query.add_argument(
        "-n",
        "--namespace",
        default="default",
        help="namespace the metric is read in, as the HPA's (default: default)",
    )
    query.add_argument("-l", "--selector", default="", help="label selector, e.g. model_name=llama")
    query.add_argument(
        "--kubeconfig",
        metavar="FILE",
        help="how to reach the kube-apiserver for EndpointSlice discovery (default: in-cluster)",
    )
    config_flags(query)
    query.set_defaults(func=run_query)

    for name, (module_name, help_text) in LAB_COMMANDS.items():
        sub = commands.add_parser(name, help=help_text)
        if name == command:
            try:
                module = importlib.import_module(module_name)
            except ModuleNotFoundError as missing:
                # The adapter image ships the server only: say what is missing in one line.
                parser.exit(
                    2,
                    f"vllm-autoscale: '{name}' is part of the lab, which this installation lacks "
                    f"({missing}); install from a source checkout: pip install -e '.[lab]'\n",
                )
            module.add_arguments(sub)
            sub.set_defaults(func=module.run)
    return parser


def run_serve(args: argparse.Namespace) -> int:
    # The server (and through it the kubernetes client, a third of a second of imports) is loaded only
    # for the commands that use it: every emulator process and lab command starts without it.
    from adapter.server import Keda, serve_config

    config = load_file(args.config, serve_overrides(args))
    logs.configure(config.logging.level, config.logging.format)
    keda = Keda(args.keda_port) if args.keda_port is not None else None

    async def main() -> None:  # serve_config checks modes, files and ports before it starts anything
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        await serve_config(config, stop, keda=keda)

    asyncio.run(main())
    return 0


async def query_once(config: Config, metric: str, namespace: str, selector_text: str) -> dict[str, Any]:
    """Fetch one value through the same provider the server uses; return what `query` prints."""
    from adapter.api.routes import value_list
    from adapter.app import connect_kube, lists_endpoint_slices, started_provider

    check_namespace(namespace)  # the HTTP API's rule: a junk namespace costs no upstream query
    # EndpointSlice discovery lists through the client `serve` would use (same kubeconfig and deadline).
    kube = await connect_kube(config) if lists_endpoint_slices(config) else None
    try:
        async with started_provider(config, Telemetry(), kube) as provider:
            definition = provider.lookup(metric)
            selector = selectors.parse(selector_text)
            scope = namespace if definition.namespaced else None
            report: dict[str, Any] = {"query": provider.source.describe(definition, scope, selector)}
            try:
                value = await provider.get(metric, namespace, selector)
            except AdapterError as error:
                report.update(status=error.status(metric), cause=str(error))
                return report
            report.update(response=value_list(value), sample_age_seconds=round(value.age, 3))
            return report
    finally:
        if kube is not None:
            await kube.close()


def run_query(args: argparse.Namespace) -> int:
    config = load_file(args.config, {**overrides(args), "security.kubeconfig": args.kubeconfig})
    logs.configure("warning", "text")
    started = time.monotonic()
    try:
        report = asyncio.run(query_once(config, args.metric, args.namespace, args.selector))
    except AdapterError as error:
        print(json.dumps(error.status(args.metric), indent=2))
        print(f"cause: {error}", file=sys.stderr)
        return 1
    print(f"# {report.pop('query')}".replace("\n", "\n# "))
    if "status" in report:
        print(json.dumps(report["status"], indent=2))
        print(f"cause: {report['cause']}", file=sys.stderr)
        return 1
    print(json.dumps(report["response"], indent=2))
    print(f"# sample age {report['sample_age_seconds']}s, answered in {time.monotonic() - started:.3f}s")
    return 0


def _sub_command(parser: argparse.ArgumentParser, name: str | None) -> argparse.ArgumentParser:
    """The parser of sub-command `name`, or `parser` itself when there is none by that name."""
    for action in parser._actions:  # argparse has no public accessor for its sub-parsers
        if isinstance(action, argparse._SubParsersAction) and name in action.choices:
            found: argparse.ArgumentParser = action.choices[name]
            return found
    return parser


def unrecognized(parser: argparse.ArgumentParser, extras: list[str]) -> str:
    """argparse's "unrecognized arguments" text, with the closest option of `parser` for each unknown one."""
    known = [option for action in parser._actions for option in action.option_strings]
    options = [word.split("=", 1)[0] for word in extras if word.startswith("-")]
    # `--prometheus_url` is the commonest slip: compare with dashes, as the options are spelt.
    close = {option: difflib.get_close_matches(option.replace("_", "-"), known, n=1) for option in options}
    hints = {option: found[0] for option, found in close.items() if found}
    text = f"unrecognized arguments: {' '.join(extras)}"
    if not hints:
        return text
    if len(options) == 1:
        return f"{text} (did you mean {hints[options[0]]}?)"
    return f"{text} ({'; '.join(f'{bad}: did you mean {good}?' for bad, good in hints.items())})"


def parse_arguments(argv: list[str]) -> argparse.Namespace:
    """Parse `argv`; an unknown option is reported with the sub-command's usage and the option meant."""
    parser = build_parser(_command(argv))
    args, extras = parser.parse_known_args(argv)
    if extras:
        command = _sub_command(parser, getattr(args, "command", None))
        command.error(unrecognized(command, extras))
    return args


def main(argv: list[str] | None = None) -> int:
    """Entry point of the console script."""
    if argv is None:
        argv = sys.argv[1:]
    args = parse_arguments(argv)
    try:
        result: int = args.func(args)
        return result
    except ConfigError as error:
        # One line whatever the cause's text holds (tools such as promtool answer on several lines).
        print(f"vllm-autoscale: {' '.join(str(error).split())}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
