"""templates/apiregistration-apiservice-external-metrics.yaml and core-secret-adapter-tls.yaml: the aggregator
reaches the adapter's Service and trusts exactly the CA that signed the adapter's serving certificate."""

from __future__ import annotations

import base64
import datetime
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from tests.helm.conftest import ADAPTER, NAMESPACE, ONE_MODEL, Rendered, container, render

APISERVICE = "v1beta1.external.metrics.k8s.io"


def _pem(data: str) -> bytes:
    return base64.b64decode(data)


def test_apiservice_points_at_the_adapter_service(rendered: dict[str, Rendered]) -> None:
    """The APIService names the external metrics group and the adapter Service's namespace and port."""
    result = rendered["single-model"]
    spec = result.one("APIService", APISERVICE)["spec"]
    assert (spec["group"], spec["version"]) == ("external.metrics.k8s.io", "v1beta1")
    service = result.one("Service", ADAPTER)
    assert spec["service"] == {
        "name": ADAPTER,
        "namespace": NAMESPACE,
        "port": service["spec"]["ports"][0]["port"],
    }
    assert "insecureSkipTLSVerify" not in spec


def test_generated_ca_bundle_signed_the_serving_certificate(rendered: dict[str, Rendered]) -> None:
    """caBundle is the CA in the TLS Secret, which directly issued the serving certificate; the certificate
    names the Service's DNS name and matches the private key next to it, an ECDSA P-256 key (the
    chart's choice: RSA keys made on every render cost ~0.4 s of CPU each)."""
    result = rendered["single-model"]
    ca_bundle = x509.load_pem_x509_certificate(_pem(result.one("APIService", APISERVICE)["spec"]["caBundle"]))
    secret = result.one("Secret", f"{ADAPTER}-tls")
    assert secret["type"] == "kubernetes.io/tls"
    assert x509.load_pem_x509_certificate(_pem(secret["data"]["ca.crt"])) == ca_bundle
    cert = x509.load_pem_x509_certificate(_pem(secret["data"]["tls.crt"]))
    cert.verify_directly_issued_by(ca_bundle)
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value.get_values_for_type(
        x509.DNSName
    )
    assert f"{ADAPTER}.{NAMESPACE}.svc" in names
    key = serialization.load_pem_private_key(_pem(secret["data"]["tls.key"]), password=None)
    assert isinstance(key, ec.EllipticCurvePrivateKey) and isinstance(key.curve, ec.SECP256R1), key
    assert isinstance(ca_bundle.public_key(), ec.EllipticCurvePublicKey)
    assert key.public_key().public_numbers() == cert.public_key().public_numbers()  # type: ignore[union-attr]
    assert cert.not_valid_after_utc > datetime.datetime.now(datetime.UTC) + datetime.timedelta(days=365)


def test_keda_scenario_registers_no_apiservice(rendered: dict[str, Rendered]) -> None:
    """With apiService.create false another adapter owns the group: no APIService, no HPA reader binding."""
    result = rendered["keda-apiservice"]
    assert result.find("APIService") == []
    assert result.find("ClusterRoleBinding", f"{ADAPTER}-external-metrics-reader") == []
    assert result.one("Deployment", ADAPTER)


def test_cert_manager_injects_the_ca(rendered: dict[str, Rendered]) -> None:
    """With cert-manager, the APIService has no inline caBundle but asks the cainjector for the serving
    Certificate's CA, and no chart-generated Secret exists."""
    result = rendered["prometheus-cert-manager"]
    apiservice = result.one("APIService", APISERVICE)
    assert apiservice["metadata"]["annotations"]["cert-manager.io/inject-ca-from"] == f"{NAMESPACE}/{ADAPTER}"
    assert "caBundle" not in apiservice["spec"]
    assert result.one("Certificate", ADAPTER)
    assert result.find("Secret", f"{ADAPTER}-tls") == []


def _ca_pem() -> str:
    """A real self-signed CA certificate, as PEM."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "test-ca")])
    now = datetime.datetime.now(datetime.UTC)
    ca = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    return ca.public_bytes(serialization.Encoding.PEM).decode()


def test_existing_secret_uses_the_given_ca(tmp_path: Path) -> None:
    """mode existingSecret mounts the user's Secret and publishes the user's CA PEM as caBundle."""
    ca_pem = _ca_pem()
    values = {
        **ONE_MODEL,
        "adapter": {
            "tls": {"mode": "existingSecret", "existingSecret": {"name": "my-tls", "caBundle": ca_pem}}
        },
    }
    result = render(tmp_path, values)
    assert _pem(result.one("APIService", APISERVICE)["spec"]["caBundle"]).decode() == ca_pem
    volumes = result.one("Deployment", ADAPTER)["spec"]["template"]["spec"]["volumes"]
    assert {"name": "serving-cert", "secret": {"secretName": "my-tls"}} in volumes
    assert result.find("Secret", f"{ADAPTER}-tls") == []


def test_self_signed_skips_verification_only_when_asked(self_signed: Rendered) -> None:
    """mode selfSigned: the adapter makes its own certificate and the APIService skips TLS verification."""
    result = self_signed
    spec = result.one("APIService", APISERVICE)["spec"]
    assert spec["insecureSkipTLSVerify"] is True
    assert "caBundle" not in spec
    adapter = container(result.one("Deployment", ADAPTER), "adapter")
    assert "--self-signed" in adapter["args"]
    assert not any(a.startswith("--tls-cert-file") for a in adapter["args"])


@pytest.mark.parametrize("scenario", ["single-model", "scrape-source", "two-models-pools", "scale-to-zero"])
def test_no_scenario_skips_verification(scenario: str, rendered: dict[str, Rendered]) -> None:
    """Outside selfSigned mode the aggregator always verifies the adapter."""
    for apiservice in rendered[scenario].find("APIService"):
        assert not apiservice["spec"].get("insecureSkipTLSVerify")
        assert apiservice["spec"]["caBundle"]
