"""Which network addresses outgoing requests (callbacks, crawls, http_get) may reach.

Anything that resolves to a private, loopback, link-local, multicast, reserved
or unspecified address is refused, unless its host is listed in
``AGENTSITE_ALLOWED_PRIVATE_HOSTS``. Every address a name resolves to is
checked, so a name with one public and one private record is refused.
"""

from __future__ import annotations

import ipaddress
import socket
from urllib.parse import urlsplit

from django.conf import settings


class AddressRefused(Exception):
    """The URL is malformed or points somewhere outgoing requests may not go."""


def _is_internal(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return (
        address.is_private
        or address.is_loopback
        or address.is_link_local
        or address.is_multicast
        or address.is_reserved
        or address.is_unspecified
    )


def resolve(host: str, port: int) -> list[str]:
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise AddressRefused(f"cannot resolve host {host!r}") from exc
    return sorted({str(info[4][0]) for info in infos})


def check_url(url: str) -> str:
    """Return ``url`` if outgoing requests may reach it; raise AddressRefused otherwise."""
    parts = urlsplit(url)
    if parts.scheme not in {"http", "https"}:
        raise AddressRefused("only http and https URLs are allowed")
    host = parts.hostname
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
                f"{host} resolves to {raw}, a private or loopback address; "
                "list the host in AGENTSITE_ALLOWED_PRIVATE_HOSTS to allow it"
            )
    return url
