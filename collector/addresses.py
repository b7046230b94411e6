"""Client addresses and networks in one form: an IPv4 client is its IPv4 address, however it came.

A collector listening on ``"::"`` (``collector.listen_address``) takes IPv4 connections too, and
the kernel gives their peer as an IPv4-mapped IPv6 address (``::ffff:192.0.2.7``, RFC 4291
2.5.5.2). Compared as it is with IPv4 networks, such an address is in none of them: a proxy on
127.0.0.1 was not trusted (``collector.trusted_proxies``), and an operator who wrote the mapped
form to work around it saw the same sender refused on a collector listening on ``0.0.0.0``. So
every address the collector compares or shows, and every network an operator writes, is read
here, once: an IPv4-mapped one as the IPv4 address or network it is. IPv6 addresses and networks
are left as they are (an IPv4 client is then never in ``::/0``: list ``0.0.0.0/0`` for it).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable

__all__ = ["IPAddress", "Network", "ip_of", "network_of", "shown", "trust_list"]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network

_MAPPED = ipaddress.IPv6Network("::ffff:0:0/96")
_IPV4_BITS = 32


def ip_of(address: str | None) -> IPAddress | None:
    """``address`` (a peer's, or one an ``X-Forwarded-For`` gives) as an IP address, an
    IPv4-mapped one as its IPv4 address; None for what is no address (a Unix socket, a name)."""
    try:
        ip = ipaddress.ip_address(address or "")
    except ValueError:
        return None
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    return ip


def shown(address: str) -> str:
    """A peer's address as the collector compares and logs it: an IPv4-mapped one in its IPv4
    form (``::ffff:127.0.0.1`` -> ``127.0.0.1``), anything else as given."""
    ip = ip_of(address)
    return str(ip) if isinstance(ip, ipaddress.IPv4Address) else address


def network_of(value: str) -> Network:
    """A network as an operator writes it, a CIDR or one address; an IPv4-mapped IPv6 network
    (``::ffff:192.0.2.0/120``) as the IPv4 network it is (``192.0.2.0/24``). ValueError when
    it is neither (or has host bits set)."""
    network = ipaddress.ip_network(value.strip())
    if isinstance(network, ipaddress.IPv6Network) and network.subnet_of(_MAPPED):
        low_bits = int(network.network_address) & (2**_IPV4_BITS - 1)
        return ipaddress.IPv4Network((low_bits, network.prefixlen - (128 - _IPV4_BITS)))
    return network


def trust_list(networks: Iterable[Network]) -> list[str]:
    """``networks`` as uvicorn's ``forwarded_allow_ips`` needs them: each IPv4 network also in
    its IPv4-mapped form, for an ``X-Forwarded-For`` hop a proxy wrote that way (uvicorn compares
    each hop as it is written; the peer itself reaches it in IPv4 form already)."""
    out = []
    for network in networks:
        out.append(str(network))
        if isinstance(network, ipaddress.IPv4Network):
            mapped = ipaddress.IPv6Network((int(_MAPPED.network_address) | int(network.network_address),
                                            network.prefixlen + 128 - _IPV4_BITS))  # fmt: skip
            out.append(str(mapped))
    return out
