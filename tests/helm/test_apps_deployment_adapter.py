"""templates/apps-deployment-adapter.yaml and the adapter's Service, PDB and ServiceAccount; with KEDA, the
gRPC port and its client CA."""

from __future__ import annotations

from pathlib import Path

import pytest

from adapter.cli import build_parser, run_serve
from adapter.config import Config, load
from adapter.flags import serve_overrides
from adapter.server import Keda, check_keda, check_serving
from tests.helm.conftest import ADAPTER, ONE_MODEL, SCENARIOS, Rendered, container, mounted_files, render


def test_two_replicas_spread_over_nodes(rendered: dict[str, Rendered]) -> None:
    """Two adapter replicas, preferably on different nodes, and a PDB keeping one up."""
    result = rendered["single-model"]
    deployment = result.one("Deployment", ADAPTER)
    assert deployment["spec"]["replicas"] == 2
    anti = deployment["spec"]["template"]["spec"]["affinity"]["podAntiAffinity"]
    term = anti["preferredDuringSchedulingIgnoredDuringExecution"][0]["podAffinityTerm"]
    assert term["topologyKey"] == "kubernetes.io/hostname"
    assert term["labelSelector"]["matchLabels"] == deployment["spec"]["selector"]["matchLabels"]
    pdb = result.one("PodDisruptionBudget", ADAPTER)
    assert pdb["spec"]["minAvailable"] == 1
    assert pdb["spec"]["selector"] == deployment["spec"]["selector"]


def test_scrape_example_requests_the_cpu_of_its_fleet_limit(rendered: dict[str, Rendered]) -> None:
    """The scrape source costs about 0.3 CPU per replica at 500 pods (docs/operations.md "At fleet size"): the
    scrape scenario requests half a CPU, where the Prometheus default needs a tenth."""
    scrape = container(rendered["scrape-source"].one("Deployment", ADAPTER), "adapter")
    default = container(rendered["single-model"].one("Deployment", ADAPTER), "adapter")
    assert scrape["resources"]["requests"]["cpu"] == "500m"
    assert default["resources"]["requests"]["cpu"] == "100m"


def test_runs_locked_down(rendered: dict[str, Rendered]) -> None:
    """Non-root, read-only root filesystem, no capabilities, no privilege escalation, resource requests."""
    deployment = rendered["single-model"].one("Deployment", ADAPTER)
    pod = deployment["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] != 0
    adapter = container(deployment, "adapter")
    assert adapter["securityContext"]["readOnlyRootFilesystem"] is True
    assert adapter["securityContext"]["allowPrivilegeEscalation"] is False
    assert adapter["securityContext"]["capabilities"]["drop"] == ["ALL"]
    assert {"cpu", "memory"} <= set(adapter["resources"]["requests"])
    assert pod["serviceAccountName"] == ADAPTER


def test_serves_tls_with_the_mounted_certificate(rendered: dict[str, Rendered]) -> None:
    """The adapter is started with the serving certificate files from the TLS Secret it mounts."""
    deployment = rendered["single-model"].one("Deployment", ADAPTER)
    adapter = container(deployment, "adapter")
    args = adapter["args"]
    assert args[:2] == ["serve", "--config=/etc/vllm-autoscale/config.yaml"]
    assert "--tls-cert-file=/var/run/serving-cert/tls.crt" in args
    assert "--tls-private-key-file=/var/run/serving-cert/tls.key" in args
    assert "--authorization-always-allow-paths=/healthz,/livez,/readyz" in args
    assert not any(a.startswith("--self-signed") or a.startswith("--insecure") for a in args)
    volumes = {v["name"]: v for v in deployment["spec"]["template"]["spec"]["volumes"]}
    assert volumes["serving-cert"]["secret"]["secretName"] == f"{ADAPTER}-tls"
    assert volumes["config"]["configMap"]["name"] == ADAPTER


def test_probes_and_service_reach_the_https_port(rendered: dict[str, Rendered]) -> None:
    """Probes hit /livez and /readyz over HTTPS; the Service maps 443 to the config's server port."""
    result = rendered["single-model"]
    adapter = container(result.one("Deployment", ADAPTER), "adapter")
    (port,) = adapter["ports"]
    assert port == {"name": "https", "containerPort": 6443, "protocol": "TCP"}
    assert adapter["livenessProbe"]["httpGet"] == {"path": "/livez", "port": "https", "scheme": "HTTPS"}
    assert adapter["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "https", "scheme": "HTTPS"}
    (service_port,) = result.one("Service", ADAPTER)["spec"]["ports"]
    assert service_port["port"] == 443 and service_port["targetPort"] == "https"


def test_config_change_rolls_the_pods(rendered: dict[str, Rendered]) -> None:
    """The pod template carries a checksum of the config, different when the config differs."""
    checksums = {
        rendered[name].one("Deployment", ADAPTER)["spec"]["template"]["metadata"]["annotations"][
            "checksum/config"
        ]
        for name in ("single-model", "scrape-source")
    }
    assert len(checksums) == 2


def _serve(result: Rendered, tmp: Path) -> tuple[Config, list[str]]:
    """The adapter's command line and ConfigMap, parsed and checked by the adapter's own CLI with the
    mounted Secrets in place; returns the config (with the pod's paths) and the arguments."""
    args = container(result.one("Deployment", ADAPTER), "adapter")["args"]
    namespace = build_parser().parse_args(args)
    assert namespace.func is run_serve
    text = result.one("ConfigMap", ADAPTER)["data"]["config.yaml"]
    config = load(text, serve_overrides(namespace))
    local = list(args)
    for mount, directory in mounted_files(result, tmp).items():
        local = [arg.replace(f"={mount}/", f"={directory}/") for arg in local]
    check_serving(load(text, serve_overrides(build_parser().parse_args(local))))
    return config, args


@pytest.mark.parametrize("scenario", [pytest.param(s, id=s) for s in SCENARIOS])
def test_adapter_cli_accepts_the_rendered_command_line(
    scenario: str, rendered: dict[str, Rendered], tmp_path: Path
) -> None:
    """`vllm-autoscale serve` accepts the chart's flags, serves TLS from files inside the mounted Secret,
    and leaves the probes' paths unauthenticated."""
    result = rendered[scenario]
    config, _ = _serve(result, tmp_path)
    deployment = result.one("Deployment", ADAPTER)
    mounts = {m["name"]: m["mountPath"] for m in container(deployment, "adapter")["volumeMounts"]}
    assert config.security.tls_cert_file == f"{mounts['serving-cert']}/tls.crt"
    assert config.security.tls_private_key_file == f"{mounts['serving-cert']}/tls.key"
    assert config.security.self_signed is False
    assert {"/healthz", "/livez", "/readyz"} <= set(config.security.authorization_always_allow_paths)


def test_keda_mode_serves_grpc_with_mutual_tls(rendered: dict[str, Rendered], tmp_path: Path) -> None:
    """With autoscaler keda the adapter serves gRPC on a port named grpc (also on the Service), with the
    client CA of KEDA's certificate as --client-ca-file, mounted without KEDA's key."""
    result = rendered["keda-scaler"]
    config, args = _serve(result, tmp_path)
    assert "--keda-port=9443" in args
    check_keda(config, Keda(9443))  # raises ConfigError if the rendered arguments cannot serve gRPC
    adapter = container(result.one("Deployment", ADAPTER), "adapter")
    assert {"name": "grpc", "containerPort": 9443, "protocol": "TCP"} in adapter["ports"]
    service_ports = {p["name"]: p for p in result.one("Service", ADAPTER)["spec"]["ports"]}
    assert service_ports["grpc"] == {"name": "grpc", "port": 9443, "targetPort": "grpc", "protocol": "TCP"}
    mounts = {m["name"]: m["mountPath"] for m in adapter["volumeMounts"]}
    assert config.security.client_ca_file == f"{mounts['keda-client-ca']}/ca.crt"
    volumes = {v["name"]: v for v in result.one("Deployment", ADAPTER)["spec"]["template"]["spec"]["volumes"]}
    assert volumes["keda-client-ca"]["secret"] == {
        "secretName": f"{ADAPTER}-keda",
        "items": [{"key": "ca.crt", "path": "ca.crt"}],
    }


def test_hpa_mode_serves_no_grpc_unless_asked(rendered: dict[str, Rendered], tmp_path: Path) -> None:
    """autoscaler hpa serves no gRPC port by default; keda.serveWithHpa adds it beside the APIService
    (the first step of a move to KEDA), without ScaledObjects."""
    adapter = container(rendered["single-model"].one("Deployment", ADAPTER), "adapter")
    assert not any(a.startswith(("--keda-port", "--client-ca-file")) for a in adapter["args"])
    assert [p["name"] for p in rendered["single-model"].one("Service", ADAPTER)["spec"]["ports"]] == ["https"]
    both = render(tmp_path, {**ONE_MODEL, "keda": {"serveWithHpa": True}})
    args = container(both.one("Deployment", ADAPTER), "adapter")["args"]
    assert "--keda-port=9443" in args and "--client-ca-file=/var/run/keda-client-ca/ca.crt" in args
    assert both.one("APIService") and both.one("HorizontalPodAutoscaler")
    assert both.find("ScaledObject") == [] and both.find("TriggerAuthentication") == []


def test_keda_without_client_certificate_is_tls_only(tmp_path: Path) -> None:
    """keda.clientCertificate.mode none: the gRPC port is served without --client-ca-file."""
    values = {**ONE_MODEL, "autoscaler": "keda", "keda": {"clientCertificate": {"mode": "none"}}}
    adapter = container(render(tmp_path, values).one("Deployment", ADAPTER), "adapter")
    assert "--keda-port=9443" in adapter["args"]
    assert not any(a.startswith("--client-ca-file") for a in adapter["args"])
    assert "keda-client-ca" not in {m["name"] for m in adapter["volumeMounts"]}


def test_self_signed_mode_passes_the_cli_checks(self_signed: Rendered, tmp_path: Path) -> None:
    """mode selfSigned gives `--self-signed` without certificate files, which the CLI accepts."""
    config, _ = _serve(self_signed, tmp_path)
    assert config.security.self_signed is True
    assert config.security.tls_cert_file is None
