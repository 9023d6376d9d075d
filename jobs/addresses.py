"""Which network addresses outgoing requests (callbacks, crawls, http_get) may reach.

Anything that resolves to an address that is not globally reachable (private,
loopback, link-local, shared as in 100.64.0.0/10, site-local, multicast,
reserved, unspecified, or a 6to4/Teredo/IPv4-mapped wrapper of one) is
refused, unless its host is listed in ``AGENTSITE_ALLOWED_PRIVATE_HOSTS``.
Every address a name resolves to is checked, so a name with one public and one
private record is refused.
"""

from __future__ import annotations

import ipaddress
import socket
from urllib.parse import urlsplit

from django.conf import settings


class AddressRefused(Exception):
    """The URL is malformed or points somewhere outgoing requests may not go."""


def _is_internal(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    if isinstance(address, ipaddress.IPv6Address):
        # Addresses that carry an IPv4 address reach it: judge that one too.
        wrapped = [address.ipv4_mapped, address.sixtofour, *(address.teredo or ())]
        if any(inner is not None and _is_internal(inner) for inner in wrapped):
            return True
        if address.is_site_local:  # fec0::/10, deprecated but still routed on some networks
            return True
    return not address.is_global or address.is_multicast


def resolve(host: str, port: int) -> list[str]:
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise AddressRefused(f"cannot resolve host {host!r}") from exc
    return sorted({str(info[4][0]) for info in infos})


def check_url(url: str) -> str:
    """Return ``url`` if outgoing requests may reach it; raise AddressRefused otherwise."""
    try:
        parts = urlsplit(url)
        host = parts.hostname
    except ValueError as exc:  # e.g. "http://[1.1.1.1]/": brackets are for IPv6 only
        raise AddressRefused(f"the URL is malformed: {exc}") from exc
    if parts.scheme not in {"http", "https"}:
        raise AddressRefused("only http and https URLs are allowed")
    if not host:
        raise AddressRefused("the URL has no host")
    if host in settings.AGENTSITE_ALLOWED_PRIVATE_HOSTS:
        return url
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError as exc:
        raise AddressRefused("the URL has an invalid port") from exc
    for raw in resolve(host, port):
        if _is_internal(ipaddress.ip_address(raw.split("%", 1)[0])):
            raise AddressRefused(
                f"{host} resolves to {raw}, which is not a public address; "
                "list the host in AGENTSITE_ALLOWED_PRIVATE_HOSTS to allow it"
            )
    return url
