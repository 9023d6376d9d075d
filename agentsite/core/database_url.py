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
    """Django's settings for ``url``: ``dj_database_url.parse``, with several hosts allowed."""
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
