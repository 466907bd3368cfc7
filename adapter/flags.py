"""The command line's flags, and how they become configuration overrides.

`serve` and `query` share the source flags; `serve` adds the listening, security and logging flags
(named as the kube-apiserver's). Each flag maps to a dotted configuration key, so the file and the
flags are validated by the same loader; a flag the chosen source would ignore is refused.
"""

from __future__ import annotations

import argparse
from typing import Any

from adapter.errors import ConfigError


def config_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--config", metavar="FILE", help="YAML configuration file (see docs/configuration.md)"
    )
    parser.add_argument("--source", choices=["prometheus", "scrape"], help="override 'source'")
    parser.add_argument("--prometheus-url", metavar="URL", help="override 'prometheus.url'")
    parser.add_argument(
        "--scrape-target",
        metavar="URL",
        action="append",
        help="scrape this vLLM /metrics URL (repeatable; override 'scrape.targets'); implies --source scrape",
    )
    parser.add_argument(
        "--scrape-namespace", metavar="NS", help="namespace of the --scrape-target pods (default 'default')"
    )


def source_of(args: argparse.Namespace) -> str | None:
    """`--source`, or the source the other flags imply: `--scrape-target` means the scrape source.

    A flag the chosen source would ignore is refused rather than silently dropped (a user who gives
    `--scrape-target` and sees Prometheus answer is misled about what was measured).
    """
    if args.scrape_target and args.source == "prometheus":
        raise ConfigError(
            "--scrape-target needs the scrape source; drop --source prometheus or use --source scrape"
        )
    if args.scrape_target and args.prometheus_url:
        raise ConfigError("--scrape-target (the scrape source) cannot be combined with --prometheus-url")
    if args.prometheus_url and args.source == "scrape":
        raise ConfigError("--prometheus-url is not used by --source scrape; drop one of them")
    if args.scrape_namespace and args.source == "prometheus":
        raise ConfigError("--scrape-namespace is not used by --source prometheus; drop one of them")
    return "scrape" if args.scrape_target and args.source is None else args.source


def overrides(args: argparse.Namespace) -> dict[str, Any]:
    return {
        "source": source_of(args),
        "prometheus.url": args.prometheus_url,
        "scrape.targets": args.scrape_target,
        "scrape.namespace": args.scrape_namespace,
        **{key: value for key, value in getattr(args, "extra_overrides", {}).items()},
    }


def csv_list(value: str) -> list[str]:
    return [item.strip() for item in value.split(",") if item.strip()]


def security_flags(parser: argparse.ArgumentParser) -> None:
    """The `serve` flags of TLS, authentication and authorization; names as the kube-apiserver's."""
    group = parser.add_argument_group("secure serving (docs/security.md)")
    flag = group.add_argument
    flag(
        "--tls-cert-file",
        metavar="FILE",
        help="serving certificate (PEM, leaf first); reloaded when it changes",
    )
    flag("--tls-private-key-file", metavar="FILE", help="private key of --tls-cert-file")
    flag(
        "--self-signed",
        action="store_true",
        default=None,
        help="serve a certificate generated in memory (APIService insecureSkipTLSVerify only)",
    )
    flag(
        "--client-ca-file",
        metavar="FILE",
        help="client certificates from this CA authenticate as CN/O (default: the cluster's)",
    )
    flag(
        "--requestheader-client-ca-file",
        metavar="FILE",
        help="CA of the front proxy whose X-Remote-* headers are trusted (default: the cluster's)",
    )
    flag(
        "--requestheader-allowed-names",
        type=csv_list,
        metavar="CN,...",
        help="front-proxy certificate common names to accept ('' accepts any)",
    )
    flag(
        "--requestheader-username-headers", type=csv_list, metavar="HEADER,...", help="default X-Remote-User"
    )
    flag("--requestheader-group-headers", type=csv_list, metavar="HEADER,...", help="default X-Remote-Group")
    flag(
        "--requestheader-extra-headers-prefix",
        type=csv_list,
        metavar="PREFIX,...",
        help="default X-Remote-Extra-",
    )
    flag(
        "--kubeconfig",
        metavar="FILE",
        help="how to reach the kube-apiserver for TokenReview, SubjectAccessReview, the "
        "extension-apiserver-authentication ConfigMap and EndpointSlice discovery (default: in-cluster)",
    )
    flag(
        "--authorization-always-allow-paths",
        type=csv_list,
        metavar="PATH,...",
        help="paths served without authentication or authorization (default /healthz,/livez,/readyz)",
    )
    flag(
        "--authorize-metrics",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="whether /metrics needs authorization, as for Kubernetes components (default: yes)",
    )


def security_overrides(args: argparse.Namespace) -> dict[str, Any]:
    names = (
        "tls_cert_file",
        "tls_private_key_file",
        "self_signed",
        "client_ca_file",
        "requestheader_client_ca_file",
        "requestheader_allowed_names",
        "requestheader_username_headers",
        "requestheader_group_headers",
        "requestheader_extra_headers_prefix",
        "kubeconfig",
        "authorization_always_allow_paths",
        "authorize_metrics",
    )
    return {f"security.{name}": getattr(args, name) for name in names}


def serve_overrides(args: argparse.Namespace) -> dict[str, Any]:
    """Flag values of `serve` as dotted config overrides."""
    return {
        **overrides(args),
        "server.address": args.address,
        "server.port": args.port,
        "server.insecure_serving": True if args.insecure_serving else None,
        **security_overrides(args),
        "logging.level": args.log_level,
        "logging.format": args.log_format,
    }
