"""Secure serving from the cluster's extension-apiserver-authentication ConfigMap: without CA flags
the CAs, allowed names and header names are read from it, re-read while the adapter runs, and a
failing read holds nothing else back.

The ConfigMap is served by `tests.kubeapi_fake.FakeKubeAPI` (tests/integration/secure_serving/harness.py).
"""

from __future__ import annotations

import pytest

from adapter.security import serving
from tests.certs import CA
from tests.integration.secure_serving.harness import (
    HPA_USER,
    Adapter,
    Cluster,
    StartAdapter,
    answers,
    front_proxy_headers,
    metric_path,
    rotate_serving_certificate,
)
from tests.kubeapi_fake import FakeKubeAPI


async def trusting_the_configmap(
    start_adapter: StartAdapter, cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> Adapter:
    """An adapter whose front-proxy CA comes from the cluster's ConfigMap, re-read on every 50 ms
    reload tick instead of once a minute."""
    monkeypatch.setattr(serving, "CLUSTER_AUTHENTICATION_REFRESH_SECONDS", 0.0)
    cluster.kube.config_map = {"requestheader-client-ca-file": cluster.front_proxy_ca.cert_pem.decode()}
    files = cluster.files()
    return await start_adapter(
        "--tls-cert-file",
        str(files["cert"]),
        "--tls-private-key-file",
        str(files["key"]),
        config_text="security:\n  tls_reload_interval: 50ms\n",
        defaults=False,
    )


async def test_front_proxy_settings_come_from_the_cluster_configmap(
    start_adapter: StartAdapter, cluster: Cluster, grants: FakeKubeAPI
) -> None:
    """Without CA flags, the CAs, allowed names and header names are read from
    extension-apiserver-authentication."""
    cluster.kube.config_map = {
        "client-ca-file": cluster.client_ca.cert_pem.decode(),
        "requestheader-client-ca-file": cluster.front_proxy_ca.cert_pem.decode(),
        "requestheader-allowed-names": '["front-proxy-client"]',
        "requestheader-username-headers": '["X-Proxy-User"]',
        "requestheader-group-headers": '["X-Proxy-Group"]',
        "requestheader-extra-headers-prefix": '["X-Proxy-Extra-"]',
    }
    files = cluster.files()
    adapter = await start_adapter(
        "--tls-cert-file", str(files["cert"]), "--tls-private-key-file", str(files["key"]), defaults=False
    )
    status, _ = await adapter.get(metric_path(), cert=cluster.front_proxy, headers={"X-Proxy-User": HPA_USER})
    assert status == 200
    status, _ = await adapter.get(
        metric_path(), cert=cluster.front_proxy_ca.issue("intruder"), headers={"X-Proxy-User": HPA_USER}
    )
    assert status == 401
    status, _ = await adapter.get(metric_path("a"), cert=cluster.client_ca.issue("alice"))
    assert status == 200
    assert cluster.kube.config_map_reads == 1


async def test_missing_configmap_stops_start_up_with_a_clear_error(
    start_adapter: StartAdapter, cluster: Cluster
) -> None:
    """Without CA flags and without the ConfigMap the adapter refuses to start and says what it needs."""
    files = cluster.files()
    with pytest.raises(Exception, match="extension-apiserver-authentication") as raised:
        await start_adapter(
            "--tls-cert-file", str(files["cert"]), "--tls-private-key-file", str(files["key"]), defaults=False
        )
    assert "reader" in str(raised.value)


async def test_configmap_changes_are_picked_up(
    start_adapter: StartAdapter, cluster: Cluster, grants: FakeKubeAPI, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A rotated front-proxy CA published in the ConfigMap is trusted without a restart."""
    adapter = await trusting_the_configmap(start_adapter, cluster, monkeypatch)
    rotated = CA("front-proxy-ca-2")
    proxy = rotated.issue("front-proxy-client")
    headers = front_proxy_headers(HPA_USER)
    await answers(adapter, metric_path(), 0, cert=proxy, headers=headers)
    cluster.kube.config_map = {"requestheader-client-ca-file": rotated.cert_pem.decode()}
    await answers(adapter, metric_path(), 200, cert=proxy, headers=headers)


async def test_an_unreadable_configmap_does_not_hold_back_a_certificate_rotation(
    start_adapter: StartAdapter,
    cluster: Cluster,
    grants: FakeKubeAPI,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """While the kube-apiserver fails the ConfigMap read, the rotated serving certificate is still picked up
    and the last front-proxy CA read is still trusted."""
    adapter = await trusting_the_configmap(start_adapter, cluster, monkeypatch)
    grants.failing = True
    await rotate_serving_certificate(cluster, adapter.port)
    assert any(
        "unable to re-read the cluster's authentication settings" in r.getMessage() for r in caplog.records
    )
    grants.failing = False
    status, _ = await adapter.get(
        metric_path(), cert=cluster.front_proxy, headers=front_proxy_headers(HPA_USER)
    )
    assert status == 200
