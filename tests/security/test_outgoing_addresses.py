"""Outgoing requests (callbacks, http_get, crawl_site) reach global unicast addresses only.

Everything runs in-process: names resolve through a fake table, and no request
is ever sent, so no test reaches an outside address.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterator
from typing import Any

import pytest
from django.test import override_settings

from jobs.addresses import AddressRefused, check_url
from tests.jobs.factories import start_job

FAKE_DNS = {
    "public.test": ["93.184.215.14"],
    "mixed.test": ["93.184.215.14", "100.64.0.10"],  # one record public, one shared space
    "nat64.test": ["64:ff9b::a9fe:a9fe"],  # NAT64 to 169.254.169.254
    "internal.test": ["10.0.0.5"],
}


@pytest.fixture(autouse=True)
def fake_dns(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    def getaddrinfo(host: str, port: int, *args: Any, **kwargs: Any) -> list[Any]:
        host.encode("idna")  # as the real resolver, before it asks anyone
        records = FAKE_DNS.get(host)
        if records is None:
            try:
                records = [str(ipaddress.ip_address(host.split("%")[0]))]
            except ValueError:
                raise socket.gaierror(socket.EAI_NONAME, "not in the test's table") from None
        return [
            (socket.AF_INET6 if ":" in r else socket.AF_INET, socket.SOCK_STREAM, 6, "", (r, port))
            for r in records
        ]

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    with override_settings(AGENTSITE_ALLOWED_PRIVATE_HOSTS=["internal.test"]):
        yield


NOT_GLOBAL_UNICAST = [
    "http://[64:ff9b::7f00:1]/",  # NAT64 to 127.0.0.1
    "http://[64:ff9b:1::a00:1]/",  # local-use NAT64 prefix
    "http://[::7f00:1]/",  # IPv4-compatible (deprecated) 127.0.0.1
    "http://[::808:808]/",  # IPv4-compatible, even of a public address
    "http://[2002:6440:1::1]/",  # 6to4 wrapping 100.64.0.1
    "http://[2002::1]/",  # 6to4 wrapping 0.0.0.0
    "http://[2002:7f00:1::1]/",  # 6to4 wrapping 127.0.0.1
    "http://[fec0::1]/",  # site-local (deprecated, never global)
    "http://[feff::1]/",  # the top of fec0::/10
    "http://100.64.0.1/",  # shared address space (RFC 6598)
    "http://100.127.255.254/",  # the top of 100.64.0.0/10
    "http://[3fff::1]/",  # documentation
    "http://[5f00::1]/",  # SRv6 segment identifiers
    "http://[4000::1]/",  # outside 2000::/3, unassigned
    "http://[ff0e::1]/",  # global-scope multicast
    "http://224.0.0.251/",  # multicast
    "http://239.255.255.250/",  # multicast (SSDP)
    "http://255.255.255.255/",  # broadcast
    "http://192.0.0.8/",  # IETF protocol assignments
    "http://198.18.0.1/",  # benchmarking
    "http://240.0.0.1/",  # reserved
    "http://mixed.test/",
    "http://nat64.test/",
]


@pytest.mark.parametrize("url", NOT_GLOBAL_UNICAST)
def test_an_address_that_is_not_global_unicast_is_refused(url: str) -> None:
    with pytest.raises(AddressRefused, match="not a public address"):
        check_url(url)


MALFORMED = [
    "http://[1.1.1.1]/",
    "http://foo..bar/",  # an empty label: IDNA cannot encode it
    "http://\u3002127.0.0.1/",  # an ideographic full stop makes an empty label too
    "http://[::1/",
    "http://h:99999/",
    "http://-/",
]


@pytest.mark.parametrize("url", MALFORMED)
def test_a_malformed_url_is_a_clear_refusal(url: str) -> None:
    with pytest.raises(AddressRefused):
        check_url(url)


@pytest.mark.parametrize(
    "url",
    [
        "https://public.test/hook",
        "http://8.8.8.8/",
        "http://[2001:4860:4860::8888]/",
        "http://[64:ff9b::808:808]/",  # NAT64 to a public address
        "http://[2002:808:808::1]/",  # 6to4 of a public address
        "http://internal.test/",  # listed in AGENTSITE_ALLOWED_PRIVATE_HOSTS
    ],
)
def test_a_global_unicast_or_listed_address_is_allowed(url: str) -> None:
    assert check_url(url) == url


@pytest.mark.django_db
@pytest.mark.parametrize("url", [*MALFORMED, *NOT_GLOBAL_UNICAST])
def test_the_job_api_answers_422_for_a_refused_callback(api_client: Any, url: str) -> None:
    response = start_job(api_client, "noop", callback_url=url)

    assert response.status_code == 422, response.content
    assert response.json()["error"]["code"] == "callback_url_refused"
