"""``DATABASE_URL`` as Django's database settings, several PostgreSQL hosts included.

``postgres://user@h1:5432,h2:5432/db?target_session_attrs=read-write`` is libpq's
multi-host form: libpq tries the hosts in order and keeps the first that
answers and (with ``target_session_attrs=read-write``) accepts writes, so after
a failover new connections reach the promoted server. dj-database-url reads
one host only; here the host list is set aside while it parses the rest, then
handed to libpq as ``host="h1,h2"`` and ``port="5432,5432"``.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit, urlunsplit

import dj_database_url

PLACEHOLDER_HOST = "multi-host.invalid"

# A primary that vanishes without a word (its host powered off or cut off, as in a
# failover) sends no reset: without these a connection waits on it for minutes
# (the kernel's retransmissions, two hours of idle before a keepalive). With them:
# a host that does not answer a connection within 5 s is passed over for the next,
# an idle connection probes after 5 s and gives up after 5 probes a second apart,
# and data sent and not acknowledged for 5 s ends the connection. libpq's names;
# the URL's own query parameters win.
DEAD_PEER_OPTIONS: dict[str, Any] = {
    "connect_timeout": 5,
    "keepalives": 1,
    "keepalives_idle": 5,
    "keepalives_interval": 1,
    "keepalives_count": 5,
    "tcp_user_timeout": 5000,
}


def database_hosts(url: str) -> list[tuple[str, str]]:
    """The (host, port) pairs of ``url``'s authority; port "" where none is given."""
    netloc = urlsplit(url).netloc
    hosts = netloc.rpartition("@")[2]
    pairs = []
    for entry in hosts.split(","):
        if entry.startswith("["):  # [ipv6]:port
            host, _, rest = entry[1:].partition("]")
            pairs.append((host, rest.removeprefix(":")))
        else:
            host, _, port = entry.partition(":")
            pairs.append((host, port))
    return pairs


def database_url_parse(url: str, **kwargs: Any) -> dict[str, Any]:
    """Django's settings for ``url``: ``dj_database_url.parse``, with several hosts
    allowed, and ``DEAD_PEER_OPTIONS`` for PostgreSQL."""
    config = _parse(url, **kwargs)
    if str(config["ENGINE"]).endswith("postgresql"):
        config["OPTIONS"] = {**DEAD_PEER_OPTIONS, **config.get("OPTIONS", {})}
    return config


def _parse(url: str, **kwargs: Any) -> dict[str, Any]:
    parts = urlsplit(url)
    if "," not in parts.netloc.rpartition("@")[2]:
        return dict(dj_database_url.parse(url, **kwargs))
    pairs = database_hosts(url)
    if any(not host for host, _ in pairs):
        raise ValueError("a host of the list is empty")
    if any(port and not port.isdigit() for _, port in pairs):
        raise ValueError("a port of the host list is not a number")
    userinfo, at, _ = parts.netloc.rpartition("@")
    single = urlunsplit(parts._replace(netloc=f"{userinfo}{at}{PLACEHOLDER_HOST}"))
    config = dict(dj_database_url.parse(single, **kwargs))
    if not str(config["ENGINE"]).endswith("postgresql"):
        raise ValueError("several hosts are for PostgreSQL only")
    config["HOST"] = ",".join(host for host, _ in pairs)
    ports = [port for _, port in pairs]
    config["PORT"] = ",".join(ports) if any(ports) else ""
    return config
