"""`adapter.security.authn`: who a request is, from front-proxy headers, a client certificate or a
bearer token, decided as the kube-apiserver does.

Certificates are real (made by `tests.certs`); bearer tokens are reviewed by the official
`kubernetes` client against `tests.kubeapi_fake.FakeKubeAPI`, the stand-in for the kube-apiserver.
"""

from __future__ import annotations

import time

import pytest
from cryptography.hazmat.primitives import serialization
from multidict import CIMultiDict, CIMultiDictProxy

from adapter.errors import ReviewUnavailable, Unauthorized
from adapter.kube import KubeClient
from adapter.security import authn
from adapter.security.authn import Authenticator, RequestHeaderConfig, TokenReviewer, UserInfo
from adapter.security.certauth import CertificateAuthority
from adapter.security.ttlcache import TTLCache
from tests.certs import CA, Issued
from tests.fakes import HandClock
from tests.kubeapi_fake import FakeKubeAPI


def headers(*pairs: tuple[str, str]) -> CIMultiDictProxy[str]:
    """Request headers, repeated names kept in order."""
    return CIMultiDictProxy(CIMultiDict(pairs))


def der(issued: Issued) -> bytes:
    """The certificate as the TLS layer hands it over."""
    return issued.cert.public_bytes(serialization.Encoding.DER)


# -- front-proxy headers -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("config", "sent", "expected"),
    [
        pytest.param(
            {},
            [("X-Remote-User", "alice"), ("X-Remote-Group", "a"), ("X-Remote-Group", "b")],
            UserInfo("alice", ("a", "b")),
            id="default headers with a repeated group header",
        ),
        pytest.param(
            {}, [("x-remote-user", "alice")], UserInfo("alice"), id="header names are case-insensitive"
        ),
        pytest.param({}, [("X-Remote-Group", "a")], None, id="no user header means no user"),
        pytest.param({}, [("X-Remote-User", "  ")], None, id="a blank user header means no user"),
        pytest.param(
            {"username_headers": ("X-Proxy-User", "X-Remote-User")},
            [("X-Remote-User", "second"), ("X-Proxy-User", "first")],
            UserInfo("first"),
            id="the first configured user header that is set wins",
        ),
        pytest.param(
            {},
            [
                ("X-Remote-User", "alice"),
                ("X-Remote-Extra-Scopes", "a"),
                ("X-Remote-Extra-Scopes", "b"),
                ("X-Remote-Extra-authentication.kubernetes.io%2fpod-name", "p"),
            ],
            UserInfo(
                "alice", extra=(("authentication.kubernetes.io/pod-name", ("p",)), ("scopes", ("a", "b")))
            ),
            id="extra keys are lowercased and percent-decoded",
        ),
        pytest.param(
            {"group_headers": ("X-Groups",)},
            [("X-Remote-User", "alice"), ("X-Remote-Group", "ignored"), ("X-Groups", "g")],
            UserInfo("alice", ("g",)),
            id="only the configured group headers count",
        ),
        pytest.param(
            {},
            [("X-Remote-User", "alice"), ("X-Remote-User", "admin")],
            UserInfo("alice"),
            id="a repeated user header: only its first value counts",
        ),
        pytest.param(
            {},
            [("X-Remote-User", "alice"), ("X-Remote-Group", ""), ("X-Remote-Group", "g")],
            UserInfo("alice", ("g",)),
            id="empty group values are not groups",
        ),
        pytest.param(
            {"extra_headers_prefixes": ("",)},
            [("X-Remote-User", "alice"), ("Authorization", "Bearer t")],
            UserInfo("alice"),
            id="an empty extra prefix does not turn every header into an extra",
        ),
        pytest.param(
            {},
            [("X-Remote-User", "alice"), ("X-Remote-Extra-", "v")],
            UserInfo("alice"),
            id="the bare extra prefix names no key",
        ),
        pytest.param(
            {"extra_headers_prefixes": ("X-Remote-Extra-", "X-Other-")},
            [("X-Remote-User", "alice"), ("X-Other-Scopes", "b"), ("x-remote-extra-SCOPES", "a")],
            UserInfo("alice", extra=(("scopes", ("a", "b")),)),
            id="values of several prefixes for one key keep the order of the prefixes",
        ),
    ],
)
def test_user_from_headers(
    config: dict[str, tuple[str, ...]], sent: list[tuple[str, str]], expected: UserInfo | None
) -> None:
    """A trusted front proxy names the user, groups and extra in headers, as the kube-apiserver reads them."""
    settings = RequestHeaderConfig(ca=CertificateAuthority((CA("x").cert,), "x"), **config)
    assert authn.user_from_headers(settings, headers(*sent)) == expected


# -- the authenticator ---------------------------------------------------------------------------


class Pki:
    """A cluster's client CA and front-proxy CA."""

    def __init__(self) -> None:
        self.client_ca = CA("kubernetes")
        self.front_proxy_ca = CA("front-proxy-ca")

    def authenticator(
        self, *, allowed: tuple[str, ...] = ("front-proxy-client",), tokens: TokenReviewer | None = None
    ) -> Authenticator:
        """An authenticator trusting this PKI's front proxy (CNs `allowed`) and client CA."""
        return Authenticator(
            requestheader=RequestHeaderConfig(
                CertificateAuthority((self.front_proxy_ca.cert,), "requestheader client CA"), allowed
            ),
            client_ca=CertificateAuthority((self.client_ca.cert,), "client CA"),
            tokens=tokens,
        )


@pytest.mark.parametrize(
    ("who", "sent", "allowed", "expected"),
    [
        pytest.param(
            "front-proxy-client",
            [("X-Remote-User", "hpa"), ("X-Remote-Group", "sa")],
            ("front-proxy-client",),
            UserInfo("hpa", ("sa",)),
            id="allowed front proxy: the user is the header's",
        ),
        pytest.param(
            "intruder",
            [("X-Remote-User", "hpa")],
            ("front-proxy-client",),
            None,
            id="front-proxy certificate with a CN not allowed is refused",
        ),
        pytest.param(
            "anybody",
            [("X-Remote-User", "hpa")],
            (),
            UserInfo("hpa"),
            id="empty allowed names accept any certificate of the requestheader CA",
        ),
        pytest.param(
            "client:mallory",
            [("X-Remote-User", "hpa")],
            ("front-proxy-client",),
            UserInfo("mallory", ("team-m",)),
            id="headers over a client-ca certificate are ignored",
        ),
        pytest.param(
            "client:alice",
            [],
            ("front-proxy-client",),
            UserInfo("alice", ("team-m",)),
            id="client certificate: CN is the user, O the groups",
        ),
        pytest.param(
            "front-proxy-client",
            [],
            ("front-proxy-client",),
            None,
            id="front proxy without a user header is not a user",
        ),
    ],
)
async def test_certificate_authentication(
    who: str, sent: list[tuple[str, str]], allowed: tuple[str, ...], expected: UserInfo | None
) -> None:
    """Headers are trusted only from an allowed front-proxy
    certificate; a client certificate is its own user."""
    pki = Pki()
    if who.startswith("client:"):
        cert = pki.client_ca.issue(who.removeprefix("client:"), ("team-m",))
    else:
        cert = pki.front_proxy_ca.issue(who)
    authenticator = pki.authenticator(allowed=allowed)
    if expected is None:
        with pytest.raises(Unauthorized, match="the client certificate is not accepted"):
            await authenticator.authenticate(der(cert), headers(*sent))
    else:
        assert await authenticator.authenticate(der(cert), headers(*sent)) == expected


async def test_front_proxy_certificate_is_not_a_client_certificate() -> None:
    """A front-proxy certificate whose CN is not allowed does not fall back to being user "intruder"."""
    pki = Pki()
    with pytest.raises(Unauthorized):
        await pki.authenticator().authenticate(der(pki.front_proxy_ca.issue("intruder")), headers())


async def test_expired_front_proxy_certificate_is_not_trusted_on_an_open_connection() -> None:
    """Chains are verified at request time: headers over a certificate that has since expired are ignored.

    (The TLS handshake already refuses an expired certificate; this covers a keep-alive connection or
    a resumed TLS session that outlives it.)
    """
    pki = Pki()
    expired = pki.front_proxy_ca.issue("front-proxy-client", expired=True)
    with pytest.raises(Unauthorized, match="the client certificate is not accepted"):
        await pki.authenticator().authenticate(der(expired), headers(("X-Remote-User", "admin")))


async def test_an_unparseable_client_certificate_is_not_a_user() -> None:
    """A certificate the TLS layer passed but that does not parse is refused with 401, not a 500."""
    with pytest.raises(Unauthorized, match="the client certificate is not accepted"):
        await Pki().authenticator().authenticate(b"\x30\x03\x02\x01\x00", headers(("X-Remote-User", "u")))


async def test_a_bearer_token_does_not_make_front_proxy_headers_trusted(client: KubeClient) -> None:
    """`X-Remote-User` beside a valid bearer token is ignored: the user is the token's."""
    user = (
        await Pki()
        .authenticator(tokens=client)
        .authenticate(
            None,
            headers(
                ("Authorization", "Bearer good"),
                ("X-Remote-User", "system:admin"),
                ("X-Remote-Group", "system:masters"),
            ),
        )
    )
    assert (user.name, user.groups) == ("bob", ("devs",))


async def test_no_credentials_is_unauthorized() -> None:
    """Neither a certificate nor a token: 401."""
    with pytest.raises(Unauthorized, match="no credentials"):
        await Pki().authenticator().authenticate(None, headers(("X-Remote-User", "admin")))


async def test_set_authorities_takes_effect_for_the_next_request() -> None:
    """After a CA rotation the new front-proxy CA is trusted and the old one is not."""
    pki = Pki()
    authenticator = pki.authenticator(allowed=())
    rotated = CA("front-proxy-ca-2")
    old_cert = der(pki.front_proxy_ca.issue("p"))
    authenticator.set_authorities(RequestHeaderConfig(CertificateAuthority((rotated.cert,), "new")), None)
    assert await authenticator.authenticate(
        der(rotated.issue("p")), headers(("X-Remote-User", "u"))
    ) == UserInfo("u")
    with pytest.raises(Unauthorized):
        await authenticator.authenticate(old_cert, headers(("X-Remote-User", "u")))


async def test_valid_bearer_token_is_the_reviewed_user(kube: FakeKubeAPI, client: KubeClient) -> None:
    """A TokenReview that authenticates the token gives its user, uid, groups and extra."""
    user = await Authenticator(tokens=client).authenticate(None, headers(("Authorization", "Bearer good")))
    assert user == UserInfo("bob", ("devs",), uid="42", extra=(("scopes", ("x",)),))
    assert kube.token_reviews[0]["spec"]["token"] == "good"


@pytest.mark.parametrize(
    "value",
    [
        pytest.param("Bearer forged", id="token the kube-apiserver does not know"),
        pytest.param("Basic Ym9iOnB3", id="basic authentication is not a bearer token"),
        pytest.param("Bearer ", id="empty bearer token"),
    ],
)
async def test_invalid_bearer_token_is_unauthorized(client: KubeClient, value: str) -> None:
    """Anything but a token the kube-apiserver authenticates is 401."""
    with pytest.raises(Unauthorized):
        await Authenticator(tokens=client).authenticate(None, headers(("Authorization", value)))


async def test_token_reviews_are_cached_for_their_ttl(kube: FakeKubeAPI, client: KubeClient) -> None:
    """Within the TTL a token costs one TokenReview, valid or not; after it, the token is reviewed again."""
    clock = HandClock()
    authenticator = Authenticator(tokens=client, token_ttl=10, cache=TTLCache(monotonic=clock))
    for _ in range(3):
        await authenticator.authenticate(None, headers(("Authorization", "Bearer good")))
        with pytest.raises(Unauthorized):
            await authenticator.authenticate(None, headers(("Authorization", "Bearer forged")))
    assert len(kube.token_reviews) == 2
    clock.now += 10
    await authenticator.authenticate(None, headers(("Authorization", "Bearer good")))
    assert len(kube.token_reviews) == 3


async def test_token_review_failure_is_unavailable_and_not_cached(
    kube: FakeKubeAPI, client: KubeClient
) -> None:
    """When the kube-apiserver cannot answer, the token is neither accepted nor called invalid (503, not 401);
    once it recovers the token works."""
    authenticator = Authenticator(tokens=client)
    kube.failing = True
    with pytest.raises(ReviewUnavailable, match="unable to create tokenreview: HTTP 500") as raised:
        await authenticator.authenticate(None, headers(("Authorization", "Bearer good")))
    assert raised.value.code == 503
    assert "500" not in raised.value.status()["message"]
    kube.failing = False
    assert (await authenticator.authenticate(None, headers(("Authorization", "Bearer good")))).name == "bob"


async def test_a_kube_apiserver_that_hangs_fails_the_review_within_the_timeout(kube: FakeKubeAPI) -> None:
    """A TokenReview the kube-apiserver never answers ends
    after the review timeout, as `ReviewUnavailable`."""
    async with kube.client(request_timeout=0.2) as client:
        kube.stalled = True
        started = time.monotonic()
        with pytest.raises(ReviewUnavailable, match="unable to create tokenreview"):
            await Authenticator(tokens=client).authenticate(None, headers(("Authorization", "Bearer good")))
        assert time.monotonic() - started < 2.0
        assert kube.stalled_calls >= 1


async def test_without_a_token_reviewer_tokens_are_refused() -> None:
    """A token cannot be checked without the kube-apiserver, so it is refused."""
    with pytest.raises(Unauthorized, match="token review is not configured"):
        await Authenticator().authenticate(None, headers(("Authorization", "Bearer good")))
