"""Which network addresses outgoing requests (callbacks, crawls, http_get) may reach.

Only global unicast addresses may be reached. Anything that resolves to
another address (private, loopback, link-local, shared as in 100.64.0.0/10,
site-local, multicast, broadcast, reserved, documentation, unspecified, IPv6
outside 2000::/3, or a 6to4/Teredo/NAT64/IPv4-mapped wrapper of one of these)
is refused, unless its host is listed in ``AGENTSITE_ALLOWED_PRIVATE_HOSTS``.
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


IPv4 = ipaddress.IPv4Address
IPv6 = ipaddress.IPv6Address
Address = IPv4 | IPv6

# Global unicast IPv6 lives in 2000::/3; inside it, these are not globally reachable
# although Python's is_global (as of 3.11) still says they are.
GLOBAL_UNICAST_V6 = ipaddress.ip_network("2000::/3")
NOT_GLOBAL_V6 = [
    ipaddress.ip_network("3fff::/20"),  # documentation (RFC 9637)
]
NOT_GLOBAL_V4 = [
    ipaddress.ip_network("192.0.0.0/24"),  # IETF protocol assignments (RFC 6890)
]
# NAT64's well-known prefix (RFC 6052) reaches the IPv4 address in its last 32 bits.
NAT64 = ipaddress.ip_network("64:ff9b::/96")


def embedded_ipv4(address: IPv6) -> list[IPv4]:
    """The IPv4 addresses an IPv6 address reaches: IPv4-mapped, 6to4, Teredo, NAT64."""
    inner = [address.ipv4_mapped, address.sixtofour, *(address.teredo or ())]
    if address in NAT64:
        inner.append(IPv4(int(address) & 0xFFFFFFFF))
    return [ip for ip in inner if ip is not None]


def is_global_unicast(address: Address) -> bool:
    if isinstance(address, IPv4):
        return (
            address.is_global
            and not address.is_multicast  # 224.0.0.0/4 counts as global for Python
            and not any(address in net for net in NOT_GLOBAL_V4)
        )
    wrapped = embedded_ipv4(address)
    if wrapped:
        return all(is_global_unicast(inner) for inner in wrapped)
    return (
        address in GLOBAL_UNICAST_V6
        and address.is_global
        and not any(address in net for net in NOT_GLOBAL_V6)
    )


def resolve(host: str, port: int) -> list[str]:
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:  # UnicodeError: a name IDNA cannot encode
        raise AddressRefused(f"cannot resolve host {host!r}") from exc
    return sorted({str(info[4][0]) for info in infos})


def check_url(url: str) -> str:
    """Return ``url`` if outgoing requests may reach it; raise AddressRefused otherwise."""
    checked_addresses(url)
    return url


def checked_addresses(url: str) -> list[str]:
    """The addresses ``url``'s host resolves to, each checked; raise AddressRefused otherwise.

    Empty for a host listed in ``AGENTSITE_ALLOWED_PRIVATE_HOSTS`` (not resolved). A
    request that must reach what was checked connects to one of these addresses
    rather than resolving the name again (``jobs.tools.outgoing_http.pinned_request``).
    """
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
        return []
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError as exc:
        raise AddressRefused("the URL has an invalid port") from exc
    addresses = resolve(host, port)
    for raw in addresses:
        if not is_global_unicast(ipaddress.ip_address(raw.split("%", 1)[0])):
            raise AddressRefused(
                f"{host} resolves to {raw}, which is not a public address; "
                "list the host in AGENTSITE_ALLOWED_PRIVATE_HOSTS to allow it"
            )
    return addresses
