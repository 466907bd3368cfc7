"""Secure serving: how a request is authenticated and authorized before it reaches the API.

* `serving`: the assembly (TLS context, authentication chain, authorization, middleware).
* `tls`: serving certificates, reloaded when they change; `certauth`: client-certificate checks.
* `authn`: front-proxy headers, client certificates and bearer tokens (TokenReview).
* `authz`: SubjectAccessReview with a decision cache; `access`: the aiohttp middleware.
* `clusterauth`: the kube-system/extension-apiserver-authentication ConfigMap; `ttlcache`.

None of it knows metrics, sources or the HTTP routes (an import contract holds it to that).
"""
