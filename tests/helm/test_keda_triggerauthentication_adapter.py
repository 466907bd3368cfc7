"""templates/keda-triggerauthentication-adapter.yaml and core-secret-adapter-keda.yaml: the TLS material
KEDA calls the adapter's gRPC port with: the CA of the serving certificate (caCert) and KEDA's client
certificate (tlsClientCert, tlsClientKey), which the chart issues from a client CA of its own.

kubernetes-validate skips CRDs: the TriggerAuthentication is checked against the shape of KEDA's CRD
(`spec.secretTargetRef[]` of parameter, name and key), and every reference against the rendered Secrets.
"""

from __future__ import annotations

import base64
import copy
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID

from tests.helm.conftest import ADAPTER, NAMESPACE, ONE_MODEL, Doc, Rendered, render

SCENARIO = "keda-scaler"
KEDA_SECRET = f"{ADAPTER}-keda"
#: the parameters KEDA's external scaler reads from a TriggerAuthentication
PARAMETERS = ("caCert", "tlsClientCert", "tlsClientKey")


def _keda(**values: Any) -> dict[str, Any]:
    return {**copy.deepcopy(ONE_MODEL), "autoscaler": "keda", **values}


def trigger_authentication_shape(doc: Doc) -> list[Doc]:
    """Fail unless `doc` fits KEDA's TriggerAuthentication CRD for our use; returns its secretTargetRef."""
    assert (doc["apiVersion"], doc["kind"]) == ("keda.sh/v1alpha1", "TriggerAuthentication")
    refs: list[Doc] = doc["spec"]["secretTargetRef"]
    assert set(doc["spec"]) == {"secretTargetRef"}
    for ref in refs:
        assert set(ref) == {"parameter", "name", "key"} and all(isinstance(v, str) for v in ref.values())
        assert ref["parameter"] in PARAMETERS
    return refs


def _refs(result: Rendered) -> dict[str, tuple[str, str]]:
    refs = trigger_authentication_shape(result.one("TriggerAuthentication", ADAPTER))
    return {ref["parameter"]: (ref["name"], ref["key"]) for ref in refs}


def _secret_value(result: Rendered, name: str, key: str) -> bytes:
    return base64.b64decode(result.one("Secret", name)["data"][key])


def _cert(pem: bytes) -> x509.Certificate:
    return x509.load_pem_x509_certificate(pem)


def test_every_reference_names_a_rendered_secret_key(rendered: dict[str, Rendered]) -> None:
    """caCert, tlsClientCert and tlsClientKey each point at a key of a Secret the chart renders."""
    result = rendered[SCENARIO]
    refs = _refs(result)
    assert list(refs) == list(PARAMETERS)
    for name, key in refs.values():
        assert _secret_value(result, name, key).startswith(b"-----BEGIN ")


def test_ca_cert_verifies_the_serving_certificate_for_the_scaler_address(
    rendered: dict[str, Rendered],
) -> None:
    """caCert is the CA of the serving certificate, which names the host of every trigger's scalerAddress:
    KEDA's TLS check of the adapter succeeds."""
    result = rendered[SCENARIO]
    ca = _cert(_secret_value(result, *_refs(result)["caCert"]))
    serving = _cert(_secret_value(result, f"{ADAPTER}-tls", "tls.crt"))
    serving.verify_directly_issued_by(ca)
    names = serving.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    for scaled in result.find("ScaledObject"):
        for trigger in scaled["spec"]["triggers"]:
            host = trigger["metadata"]["scalerAddress"].rsplit(":", 1)[0]
            assert host in names.get_values_for_type(x509.DNSName)


def test_client_certificate_comes_from_the_adapters_client_ca(rendered: dict[str, Rendered]) -> None:
    """KEDA's client certificate is for client authentication, issued by the CA the adapter mounts as
    --client-ca-file, its key matches it, and that CA is not the serving CA (a client CA trusted for
    mutual TLS must not also vouch for servers)."""
    result = rendered[SCENARIO]
    refs = _refs(result)
    cert = _cert(_secret_value(result, *refs["tlsClientCert"]))
    key = serialization.load_pem_private_key(_secret_value(result, *refs["tlsClientKey"]), password=None)
    assert isinstance(key, ec.EllipticCurvePrivateKey) and isinstance(key.curve, ec.SECP256R1), key
    assert key.public_key().public_numbers() == cert.public_key().public_numbers()  # type: ignore[union-attr]
    client_ca = _cert(_secret_value(result, KEDA_SECRET, "ca.crt"))
    cert.verify_directly_issued_by(client_ca)
    usages = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert ExtendedKeyUsageOID.CLIENT_AUTH in usages
    assert client_ca != _cert(_secret_value(result, *refs["caCert"]))


def test_cert_manager_serving_ca_comes_from_its_secret(tmp_path: Path) -> None:
    """adapter.tls.mode certManager: caCert is the ca.crt cert-manager writes into the serving Secret."""
    result = render(tmp_path, _keda(adapter={"tls": {"mode": "certManager"}}))
    assert _refs(result)["caCert"] == (f"{ADAPTER}-tls", "ca.crt")
    assert "serving-ca.crt" not in result.one("Secret", KEDA_SECRET)["data"]


def test_existing_serving_secret_ca_is_the_given_bundle(tmp_path: Path) -> None:
    """adapter.tls.mode existingSecret: caCert is adapter.tls.existingSecret.caBundle, as given."""
    pem = _secret_value(render(tmp_path / "g", _keda()), f"{ADAPTER}-tls", "ca.crt").decode()
    values = _keda(
        adapter={"tls": {"mode": "existingSecret", "existingSecret": {"name": "tls", "caBundle": pem}}}
    )
    result = render(tmp_path / "e", values)
    assert _refs(result)["caCert"] == (KEDA_SECRET, "serving-ca.crt")
    assert _secret_value(result, KEDA_SECRET, "serving-ca.crt").decode() == pem


def test_existing_client_secret_is_referenced_not_made(tmp_path: Path) -> None:
    """keda.clientCertificate.mode existingSecret: KEDA's certificate and the adapter's client CA come
    from that Secret; the chart's Secret holds only the serving CA."""
    values = _keda(keda={"clientCertificate": {"mode": "existingSecret", "existingSecret": "keda-client"}})
    result = render(tmp_path, values)
    refs = _refs(result)
    assert refs["tlsClientCert"] == ("keda-client", "tls.crt")
    assert refs["tlsClientKey"] == ("keda-client", "tls.key")
    assert set(result.one("Secret", KEDA_SECRET)["data"]) == {"serving-ca.crt"}
    volumes = result.one("Deployment", ADAPTER)["spec"]["template"]["spec"]["volumes"]
    (volume,) = [v for v in volumes if v["name"] == "keda-client-ca"]
    assert volume["secret"]["secretName"] == "keda-client"


def test_without_client_certificate_only_the_ca(tmp_path: Path) -> None:
    """keda.clientCertificate.mode none: the TriggerAuthentication carries the serving CA alone."""
    result = render(tmp_path, _keda(keda={"clientCertificate": {"mode": "none"}}))
    assert list(_refs(result)) == ["caCert"]
    assert set(result.one("Secret", KEDA_SECRET)["data"]) == {"serving-ca.crt"}


def test_no_keda_objects_with_the_hpa(rendered: dict[str, Rendered]) -> None:
    """autoscaler hpa renders no KEDA object and no KEDA Secret."""
    result = rendered["single-model"]
    assert result.find("TriggerAuthentication") == [] and result.find("Secret", KEDA_SECRET) == []
    assert {d["metadata"]["namespace"] for d in rendered[SCENARIO].find("TriggerAuthentication")} == {
        NAMESPACE
    }
