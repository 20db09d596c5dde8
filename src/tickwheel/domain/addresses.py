"""Which network addresses an ``http`` execution may reach: the deny-by-default ranges and the
lenient IP spellings a URL host can hide them behind.

Pure: no DNS here. The http runner resolves a host name and asks ``denied_reason`` about every
address it got; registration asks about a host written as an address (``ip_from_host``), in any
of the spellings a resolver accepts: ``2130706433``, ``0x7f.1``, ``0177.0.0.1`` and ``127.1`` all
mean 127.0.0.1.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from typing import Final

__all__ = [
    "IPAddress",
    "IPNetwork",
    "denied_reason",
    "ip_from_host",
    "is_localhost_name",
    "parse_networks",
]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


def _nets(*pairs: tuple[str, str]) -> tuple[tuple[IPNetwork, str], ...]:
    return tuple((ipaddress.ip_network(net), why) for net, why in pairs)


# Each range with the words an error uses for it. Checked in this order; the first match names it.
DENIED: Final = _nets(
    ("0.0.0.0/8", "an unspecified ('this network') address"),
    ("127.0.0.0/8", "a loopback address"),
    ("169.254.0.0/16", "a link-local address (where cloud metadata services live)"),
    ("10.0.0.0/8", "a private address"),
    ("172.16.0.0/12", "a private address"),
    ("192.168.0.0/16", "a private address"),
    ("100.64.0.0/10", "a carrier-grade NAT (shared) address"),
    ("192.0.0.0/24", "an IETF protocol address"),
    ("198.18.0.0/15", "a benchmarking address"),
    ("224.0.0.0/4", "a multicast address"),
    ("240.0.0.0/4", "a reserved address"),
    ("::/128", "an unspecified address"),
    ("::1/128", "a loopback address"),
    ("fe80::/10", "a link-local address"),
    ("fec0::/10", "a site-local address"),
    ("fc00::/7", "a unique local (private) address, cloud metadata among them"),
    ("ff00::/8", "a multicast address"),
    ("100::/64", "a discard address"),
    ("::/96", "an IPv4-compatible address"),
)


def _embedded_v4(ip: IPAddress) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address carries and routes to (mapped, NAT64, 6to4)."""
    if not isinstance(ip, ipaddress.IPv6Address):
        return None
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip in ipaddress.ip_network("64:ff9b::/96"):
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return ip.sixtofour


def denied_reason(ip: IPAddress, allowed: Iterable[IPNetwork] = ()) -> str | None:
    """Why ``ip`` may not be reached (words for an error message), or None when it may.

    An IPv6 address that carries an IPv4 one (``::ffff:127.0.0.1``, NAT64, 6to4) is judged by
    the IPv4 address, which is where a connection to it ends up. ``allowed`` networks (the
    operator's setting) win over the denied ranges.
    """
    allowed = tuple(allowed)
    embedded = _embedded_v4(ip)
    for candidate in (ip,) if embedded is None else (ip, embedded):
        if any(candidate.version == net.version and candidate in net for net in allowed):
            return None
    target = ip if embedded is None else embedded
    for net, why in DENIED:
        if target.version == net.version and target in net:
            return why
    return None


def _ipv4_part(text: str) -> int | None:
    """One part of a lenient IPv4 spelling: decimal, octal (leading 0) or hex (0x)."""
    try:
        if text[:2].lower() == "0x":
            return int(text[2:] or "0", 16)
        if len(text) > 1 and text.startswith("0"):
            return int(text[1:], 8)
        return int(text, 10) if text.isdigit() else None
    except ValueError:
        return None


def _lenient_ipv4(host: str) -> ipaddress.IPv4Address | None:
    """``host`` read the way inet_aton (and so most resolvers) reads it, or None."""
    parts = host.removesuffix(".").split(".")
    if not 1 <= len(parts) <= 4 or any(not p for p in parts):
        return None
    values = [_ipv4_part(p) for p in parts]
    if any(v is None for v in values):
        return None
    numbers = [v for v in values if v is not None]
    *head, last = numbers
    if any(v > 255 for v in head) or last >= 256 ** (5 - len(numbers)):
        return None
    value = 0
    for v in head:
        value = value * 256 + v
    return ipaddress.IPv4Address(value * 256 ** (5 - len(numbers)) + last)


def ip_from_host(host: str) -> IPAddress | None:
    """The address a URL host names by itself (no DNS), in any spelling; None for a name."""
    text = host.strip().lower()
    if text.startswith("[") and text.endswith("]"):
        text = text[1:-1]
    try:
        return ipaddress.ip_address(text.partition("%")[0])  # drop an IPv6 zone id
    except ValueError:
        return _lenient_ipv4(text)


def is_localhost_name(host: str) -> bool:
    """Names that resolve to loopback by convention, without asking DNS."""
    name = host.strip().lower().removesuffix(".")
    return name in ("localhost", "ip6-localhost", "ip6-loopback") or name.endswith(".localhost")


def parse_networks(items: Iterable[str]) -> tuple[IPNetwork, ...]:
    """CIDRs (or single addresses) as networks. Raises ValueError naming a bad one."""
    networks: list[IPNetwork] = []
    for item in items:
        try:
            networks.append(ipaddress.ip_network(item.strip(), strict=False))
        except ValueError as exc:
            raise ValueError(f"not a network: {item!r} (want a CIDR such as 10.1.0.0/16)") from exc
    return tuple(networks)
