"""`adapter.security.clusterauth`: the cluster's extension-apiserver-authentication ConfigMap, read
through the Kubernetes client, and how its front-proxy settings combine with the flags.

The ConfigMap is served by `tests.kubeapi_fake.FakeKubeAPI` (the `kube` fixture), a stand-in for the
kube-apiserver; certificates are real (made by `tests.certs`).
"""

from __future__ import annotations

import pytest

from adapter.config import SecuritySettings
from adapter.kube import KubeClient
from adapter.security import authn, clusterauth
from tests.certs import CA
from tests.kubeapi_fake import FakeKubeAPI


async def test_configmap_is_read_through_the_kubernetes_client(kube: FakeKubeAPI, client: KubeClient) -> None:
    """extension-apiserver-authentication is read from kube-system and parsed."""
    ca = CA("front-proxy-ca")
    kube.config_map = {
        "requestheader-client-ca-file": ca.cert_pem.decode(),
        "requestheader-allowed-names": '["front-proxy-client"]',
        "requestheader-username-headers": '["X-Remote-User"]',
    }
    data = await client.read_config_map(clusterauth.CONFIGMAP_NAMESPACE, clusterauth.CONFIGMAP_NAME)
    parsed = clusterauth.parse_cluster_authentication(data)
    assert parsed.requestheader_ca_pem == ca.cert_pem
    assert parsed.allowed_names == ("front-proxy-client",)
    assert parsed.username_headers == ("X-Remote-User",)
    assert parsed.client_ca_pem == b""


@pytest.mark.parametrize(
    ("data", "message"),
    [
        pytest.param(
            {"requestheader-allowed-names": "front-proxy-client"},
            "configmap key 'requestheader-allowed-names' value 'front-proxy-client' must be a JSON list",
            id="allowed names that are not JSON",
        ),
        pytest.param(
            {"requestheader-group-headers": "[1, 2]"},
            "configmap key 'requestheader-group-headers' value '\\[1, 2\\]' must be a JSON list of strings",
            id="header list that holds numbers",
        ),
    ],
)
def test_malformed_configmap_names_the_key(data: dict[str, str], message: str) -> None:
    """A malformed key is an error naming the key and its value."""
    with pytest.raises(ValueError, match=message):
        clusterauth.parse_cluster_authentication(data)


@pytest.mark.parametrize(
    ("settings", "from_configmap", "expected"),
    [
        pytest.param(
            SecuritySettings(),
            True,
            (("front-proxy-client",), ("X-Proxy-User",), ("X-Proxy-Group",), ("X-Proxy-Extra-",)),
            id="CA from the configmap: its header settings too",
        ),
        pytest.param(
            SecuritySettings(requestheader_client_ca_file="/ca.crt"),
            False,
            (
                (),
                authn.DEFAULT_USERNAME_HEADERS,
                authn.DEFAULT_GROUP_HEADERS,
                authn.DEFAULT_EXTRA_HEADERS_PREFIXES,
            ),
            id="CA from the flag: the configmap's header settings do not apply",
        ),
        pytest.param(
            SecuritySettings(
                requestheader_allowed_names=("aggregator",), requestheader_username_headers=("X-U",)
            ),
            True,
            (("aggregator",), ("X-U",), ("X-Proxy-Group",), ("X-Proxy-Extra-",)),
            id="a flag wins over the configmap",
        ),
        pytest.param(
            SecuritySettings(requestheader_allowed_names=()),
            True,
            ((), ("X-Proxy-User",), ("X-Proxy-Group",), ("X-Proxy-Extra-",)),
            id="an empty allowed-names flag accepts any CN even when the configmap lists some",
        ),
    ],
)
def test_requestheader_settings_combine_flags_and_the_configmap(
    settings: SecuritySettings, from_configmap: bool, expected: tuple[tuple[str, ...], ...]
) -> None:
    """Each front-proxy setting comes from its flag, else
    from the configmap when the CA does, else the default."""
    ca = CA("front-proxy-ca")
    published = clusterauth.ClusterAuthentication(
        requestheader_ca_pem=ca.cert_pem if from_configmap else b"",
        allowed_names=("front-proxy-client",),
        username_headers=("X-Proxy-User",),
        group_headers=("X-Proxy-Group",),
        extra_headers_prefixes=("X-Proxy-Extra-",),
    )
    config = clusterauth.requestheader_config(settings, ca.cert_pem, published)
    assert config is not None
    assert config.ca.verifies(ca.issue("front-proxy-client").cert)
    assert (
        config.allowed_names,
        config.username_headers,
        config.group_headers,
        config.extra_headers_prefixes,
    ) == (expected)


def test_no_requestheader_ca_means_no_front_proxy() -> None:
    """Without a requestheader CA no connection is a front proxy, whatever the header settings say."""
    assert clusterauth.requestheader_config(SecuritySettings(), b"\n", None) is None
