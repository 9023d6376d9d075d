from __future__ import annotations

import pytest
from django.test import override_settings

from jobs.addresses import AddressRefused, check_url


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1/",
        "http://localhost:8000/x",
        "http://10.1.2.3/",
        "http://192.168.0.1/",
        "http://169.254.169.254/latest/meta-data",
        "http://[::1]/",
        "http://0.0.0.0/",
        "http://[::ffff:127.0.0.1]/",
        "ftp://example.com/",
        "http:///nohost",
        "http://h:99999/",
        "http://[1.1.1.1]/",  # brackets hold IPv6 only: malformed, not a 500
        "http://[not-an-address]/",
        "http://100.64.0.1/",  # shared address space (carrier NAT, some metadata services)
        "http://[2002:7f00:1::1]/",  # 6to4 wrapping 127.0.0.1
        "http://[2002:a00:1::1]/",  # 6to4 wrapping 10.0.0.1
        "http://[fec0::1]/",  # site-local
        "http://[2001:0:4136:e378:8000:63bf:f5ff:fffe]/",  # Teredo to a private client
    ],
)
@override_settings(AGENTSITE_ALLOWED_PRIVATE_HOSTS=[])
def test_internal_or_malformed_urls_are_refused(url: str) -> None:
    with pytest.raises(AddressRefused):
        check_url(url)


@override_settings(AGENTSITE_ALLOWED_PRIVATE_HOSTS=["127.0.0.1"])
def test_a_listed_host_is_allowed() -> None:
    assert check_url("http://127.0.0.1:9/hook") == "http://127.0.0.1:9/hook"


@override_settings(AGENTSITE_ALLOWED_PRIVATE_HOSTS=[])
def test_a_public_address_is_allowed() -> None:
    assert check_url("https://93.184.215.14/") == "https://93.184.215.14/"
