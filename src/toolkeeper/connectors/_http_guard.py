"""Where an HTTP tool may connect: the address policy, checked on the resolved address.

What it is: `AddressPolicy` (which IP addresses a source may reach), `HostList` (which host
names), and `guarded_transport`, an httpx2 transport whose every new connection resolves the
host itself, checks *every* address the name resolves to, and connects to a checked address:
a name that resolves to a private address is refused as the address itself is, and a name
that resolves differently the second time (DNS rebinding) cannot slip past, since the address
checked is the address connected to. Redirects go through the same transport, so each hop is
checked again; proxies from the environment are never used (a proxy would resolve the name
itself, unchecked).

What it is not: the HTTP connector (`http.py`) or its error mapping (`_http_errors.py`).
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import anyio

from ..core.extras import MissingExtra

try:
    import httpcore2
    import httpx2
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise MissingExtra("http", "an HTTP tool") from exc

__all__ = ["AddressPolicy", "AddressRefused", "HostList", "guarded_transport"]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

METADATA_NETWORKS: tuple[IPNetwork, ...] = (
    ipaddress.ip_network("169.254.169.254/32"),  # AWS, GCP, Azure, OpenStack, DigitalOcean
    ipaddress.ip_network("169.254.170.2/32"),  # AWS ECS task credentials
    ipaddress.ip_network("100.100.100.200/32"),  # Alibaba Cloud
    ipaddress.ip_network("fd00:ec2::254/128"),  # AWS over IPv6
)
"""Cloud metadata endpoints (instance credentials): refused even when private addresses are
allowed, unless a network in `allow_networks` names them."""

_NAT64 = ipaddress.ip_network("64:ff9b::/96")


class AddressRefused(Exception):
    """A request's host or address is not one this source may reach: nothing was sent."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _embedded(address: IPAddress) -> IPAddress:
    """The IPv4 address an IPv6 one stands for (`::ffff:127.0.0.1`, NAT64), else itself."""
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return address.ipv4_mapped
        if address in _NAT64:
            return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return address


@dataclass(frozen=True, kw_only=True, slots=True)
class AddressPolicy:
    """Which IP addresses a source may connect to. By default only global unicast ones:
    loopback, private, link-local, shared (CGNAT), multicast, reserved and metadata addresses
    are refused."""

    allow_private: bool = False
    """Whether loopback, private and link-local addresses may be reached too (a service on
    the gateway's own network); metadata endpoints stay refused."""
    allow_networks: tuple[IPNetwork, ...] = ()
    """Networks that may be reached whatever the rules above say (`10.1.2.0/24`)."""

    @classmethod
    def of(
        cls, *, allow_private: bool = False, allow_networks: Iterable[str] = ()
    ) -> AddressPolicy:
        """A policy from configuration text (`"10.0.0.0/8"`, `"::1"`).

        Raises:
            ValueError: a network is not an IP network.
        """
        networks = tuple(ipaddress.ip_network(n, strict=False) for n in allow_networks)
        return cls(allow_private=allow_private, allow_networks=networks)

    def permits(self, address: IPAddress) -> bool:
        """Whether `address` may be connected to."""
        plain = _embedded(address)
        if any(plain in net or address in net for net in self.allow_networks):
            return True
        if any(plain in net for net in METADATA_NETWORKS):
            return False
        if plain.is_multicast or plain.is_unspecified or plain.is_reserved:
            return False
        if plain.is_global:
            return True
        return self.allow_private and (plain.is_private or plain.is_loopback or plain.is_link_local)


@dataclass(frozen=True, kw_only=True, slots=True)
class HostList:
    """The host names a source may send requests to: exact names, or `*.example.com` for any
    name below a domain (not the domain itself). Empty allows every host."""

    patterns: tuple[str, ...] = ()
    """Lower-case names and `*.` suffix patterns."""

    def permits(self, host: str) -> bool:
        """Whether requests to `host` may be sent."""
        if not self.patterns:
            return True
        host = host.lower().rstrip(".")
        for pattern in self.patterns:
            if pattern.startswith("*."):
                if host.endswith(pattern[1:]):
                    return True
            elif host == pattern:
                return True
        return False


def _address(host: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(host.strip("[]").partition("%")[0])
    except ValueError:
        return None


class _GuardedBackend(httpcore2.AsyncNetworkBackend):
    """Connects only to addresses the policy permits, resolving names itself."""

    def __init__(self, policy: AddressPolicy) -> None:
        self._policy = policy
        self._inner = httpcore2.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,  # noqa: ASYNC109 - httpcore's signature
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore2.AsyncNetworkStream:
        literal = _address(host)
        if literal is not None:
            addresses: list[IPAddress | None] = [literal]
        else:
            try:
                with anyio.fail_after(timeout):
                    infos = await anyio.getaddrinfo(host, port, type=socket.SOCK_STREAM)
            except TimeoutError as exc:
                raise httpcore2.ConnectTimeout(f"resolving {host} timed out") from exc
            except OSError as exc:
                raise httpcore2.ConnectError(f"cannot resolve {host}: {exc}") from exc
            addresses = list(dict.fromkeys(_address(str(info[4][0])) for info in infos))
        refused = [a for a in addresses if a is None or not self._policy.permits(a)]
        if refused or not addresses:
            # Every address is checked, not only the first: a name resolving to a public and
            # a private address could be connected to the private one on a retry.
            raise AddressRefused(
                f"{host} resolves to an address this source may not reach ({refused[0]})"
                if refused and literal is None
                else f"{host} is an address this source may not reach"
            )
        last: Exception | None = None
        for address in addresses:
            assert address is not None
            try:
                return await self._inner.connect_tcp(
                    str(address),
                    port,
                    timeout=timeout,
                    local_address=local_address,
                    socket_options=socket_options,
                )
            except httpcore2.ConnectError as exc:
                last = exc
        assert last is not None
        raise last

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,  # noqa: ASYNC109 - httpcore's signature
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore2.AsyncNetworkStream:
        raise AddressRefused("an HTTP tool does not connect to unix sockets")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


class _GuardedTransport(httpx2.AsyncHTTPTransport):
    """httpx2's own transport (its error mapping, its pool), on the guarded backend, with the
    host list checked for every request (each hop of a redirect is a request)."""

    def __init__(self, policy: AddressPolicy, hosts: HostList, limits: httpx2.Limits) -> None:
        super().__init__(trust_env=False, limits=limits)
        # httpx2 takes no network backend; its pool is rebuilt the way it builds it, on ours.
        self._pool = httpcore2.AsyncConnectionPool(
            ssl_context=httpx2.create_ssl_context(trust_env=False),
            max_connections=limits.max_connections,
            max_keepalive_connections=limits.max_keepalive_connections,
            keepalive_expiry=limits.keepalive_expiry,
            network_backend=_GuardedBackend(policy),
        )
        self._hosts = hosts

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        url = request.url
        if url.scheme not in ("http", "https"):
            raise AddressRefused(f"{url.scheme}:// is not HTTP")
        if not self._hosts.permits(url.host):
            raise AddressRefused(f"{url.host} is not on this source's host list")
        return await super().handle_async_request(request)


def guarded_transport(
    policy: AddressPolicy, hosts: HostList, limits: httpx2.Limits | None = None
) -> httpx2.AsyncBaseTransport:
    """An httpx2 transport that reaches only the hosts of `hosts` at addresses `policy`
    permits; anything else raises `AddressRefused` before a byte is sent."""
    return _GuardedTransport(policy, hosts, limits or httpx2.Limits())
