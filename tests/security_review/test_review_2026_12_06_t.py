"""Review 2026-12-06 (t): IPv6 blocks the outbound address policy let through (noted by review q, fixed after it).

Finding (fails before the fix, passes after it):

1. ``address_refused`` trusted Python 3.11's ``is_global``, which counts as global four IPv6 blocks that are not
   globally reachable: local-use NAT64 ``64:ff9b:1::/48`` (RFC 8215: through a site's translator
   ``64:ff9b:1::a9fe:a9fe`` reaches the cloud metadata service), the deprecated site-local ``fec0::/10``, IPv6
   documentation ``3fff::/20`` and SRv6 segment ids ``5f00::/16``. They are refused unless
   ``TOOLHUB["OUTBOUND_ALLOWED_NETWORKS"]`` lists them.

Checked and holds: a public IPv6 address (``2606:4700::1111``) and the well-known NAT64 prefix carrying a public
IPv4 address are allowed; listing a block allows it.
"""

import pytest
from django.test import override_settings

from toolhub.outbound_addresses import address_refused


@pytest.mark.parametrize("address", ["64:ff9b:1::a9fe:a9fe", "fec0::1", "3fff::1", "5f00::1"])
def test_blocks_not_globally_reachable_are_refused(address: str) -> None:
    """Found: each was allowed (``is_global`` is true for it on Python 3.11). Expect: refused, with the reason."""
    with override_settings(TOOLHUB={"OUTBOUND_ALLOWED_NETWORKS": []}):
        assert address_refused(address) == "not a public address (loopback, private, link-local, multicast or reserved)"


def test_public_addresses_and_listed_blocks_are_allowed() -> None:
    """Found: nothing (holds). Expect: public addresses allowed; a listed block allowed, the rest still refused."""
    with override_settings(TOOLHUB={"OUTBOUND_ALLOWED_NETWORKS": []}):
        assert address_refused("2606:4700::1111") is None
        assert address_refused("64:ff9b::808:808") is None  # 8.8.8.8 through the well-known prefix
    with override_settings(TOOLHUB={"OUTBOUND_ALLOWED_NETWORKS": ["64:ff9b:1::/48"]}):
        assert address_refused("64:ff9b:1::a9fe:a9fe") is None
        assert address_refused("fec0::1") is not None
