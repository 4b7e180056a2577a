"""The address guard (SSRF guard): which hosts Flowloom's outbound HTTP may reach.

Used by every outbound request a workflow or a tenant can aim: the ``http_request`` node
(:mod:`nodes.http.request`), MCP servers over HTTP (:mod:`nodes.agent.mcp_tools`) and a
tenant's model endpoints (:mod:`nodes.llm.tenant_registry`,
:mod:`nodes.llm.provider_endpoints`). Refusals are :class:`~engine.errors.BlockedAddress`
naming the host, the address, its category and the setting that would allow it.

The guard is an httpcore network backend (:class:`GuardedBackend`). For every new
connection it resolves the host itself, refuses the connection when *any* resolved
address is blocked, then connects to one of the validated IPs - never to the
name - so a DNS answer that changes between check and connect (rebinding) cannot
slip through. TLS SNI and ``Host`` still carry the original host name (httpcore
takes them from the URL, not from the connected address). Blocked
(:func:`blocked_category`): loopback, private (10/8, 172.16/12, 192.168/16),
link-local incl. cloud metadata (169.254/16), CGNAT 100.64/10, multicast, reserved
and unspecified ranges of both families, IPv6 ULA fc00::/7 and link-local fe80::/10,
and IPv6 forms embedding a blocked IPv4 (mapped, translated, compatible, 6to4, NAT64,
Teredo). Integer/hex/octal/short IPv4 forms (``2130706433``, ``0x7f000001``,
``0177.0.0.1``, ``127.1``) are read as the address they spell. Documentation
ranges (192.0.2/24, 198.51.100/24, 203.0.113/24, 2001:db8::/32) are not blocked:
they are not routed, and tests use them as stand-ins for public hosts.

``Settings.http_allow`` (``FLOWLOOM_HTTP_ALLOW``, comma separated) lets targets
through: a host entry matches the URL's host name exactly (case-insensitive), an
IP or CIDR entry matches a resolved address (an IPv4 entry also matches its
IPv4-mapped IPv6 form). Environment proxies and ``.netrc`` are ignored
(:class:`GuardedTransport`: ``trust_env=False``). Resolution uses the running asyncio
loop, so the guard works under asyncio only.
"""

from __future__ import annotations

import asyncio
import functools
import ipaddress
import re
import socket
import ssl
import typing
from dataclasses import dataclass

import httpcore
import httpx

from engine.errors import BlockedAddress
from engine.settings import Settings
from schemas.node_records import HttpConnection

__all__ = [
    "AddressPolicy",
    "GuardedBackend",
    "GuardedTransport",
    "blocked_category",
    "literal_ip",
]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

# ------------------------------------------------------------------ address policy

# Order matters: the first match names the category (metadata before link-local).
_BLOCKED_V4: tuple[tuple[ipaddress.IPv4Network, str], ...] = tuple(
    (ipaddress.IPv4Network(net), label)
    for net, label in (
        ("0.0.0.0/8", "unspecified ('this network')"),
        ("127.0.0.0/8", "loopback"),
        ("10.0.0.0/8", "private"),
        ("172.16.0.0/12", "private"),
        ("192.168.0.0/16", "private"),
        ("100.64.0.0/10", "carrier-grade NAT"),
        ("169.254.169.254/32", "cloud metadata (link-local)"),
        ("169.254.0.0/16", "link-local"),
        ("192.0.0.0/24", "reserved (IETF protocol assignments)"),
        ("198.18.0.0/15", "reserved (benchmarking)"),
        ("224.0.0.0/4", "multicast"),
        ("240.0.0.0/4", "reserved"),  # includes the broadcast address 255.255.255.255
    )
)

_BLOCKED_V6: tuple[tuple[ipaddress.IPv6Network, str], ...] = tuple(
    (ipaddress.IPv6Network(net), label)
    for net, label in (
        ("::/128", "unspecified"),
        ("::1/128", "loopback"),
        ("fc00::/7", "unique local (private)"),
        ("fe80::/10", "link-local"),
        ("fec0::/10", "site-local (private)"),
        ("ff00::/8", "multicast"),
        ("64:ff9b:1::/48", "reserved (local-use NAT64)"),
        ("100::/64", "reserved (discard-only)"),
    )
)

_V4_COMPATIBLE = ipaddress.IPv6Network("::/96")
_V4_TRANSLATED = ipaddress.IPv6Network("::ffff:0:0:0/96")
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")


def _embedded_ipv4(ip: ipaddress.IPv6Address) -> list[tuple[ipaddress.IPv4Address, str]]:
    """IPv4 addresses an IPv6 address carries, with the name of the form (may be empty)."""
    low32 = ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    if ip.ipv4_mapped is not None:
        return [(ip.ipv4_mapped, "IPv4-mapped")]
    if ip in _V4_TRANSLATED:
        return [(low32, "IPv4-translated")]
    if ip in _NAT64:
        return [(low32, "NAT64")]
    if ip in _V4_COMPATIBLE and int(ip) > 1:  # :: and ::1 are their own categories
        return [(low32, "IPv4-compatible")]
    if ip.sixtofour is not None:
        return [(ip.sixtofour, "6to4")]
    if ip.teredo is not None:
        server, client = ip.teredo
        return [(client, "Teredo client"), (server, "Teredo server")]
    return []


def blocked_category(ip: IPAddress) -> str | None:
    """Why the guard refuses ``ip`` (e.g. ``"loopback"``), or None for an address it lets through.

    An IPv6 address embedding an IPv4 address is judged by that IPv4 address only
    (``::ffff:8.8.8.8`` and ``64:ff9b::808:808`` reach 8.8.8.8 and pass).
    """
    if isinstance(ip, ipaddress.IPv4Address):
        for net, label in _BLOCKED_V4:
            if ip in net:
                return label
        return None
    embedded = _embedded_ipv4(ip)
    if embedded:
        for v4, form in embedded:
            category = blocked_category(v4)
            if category is not None:
                return f"{category}, embedded as {form} {v4}"
        return None
    for net6, label in _BLOCKED_V6:
        if ip in net6:
            return label
    # Python's list: everything outside the assigned unicast/ULA/link-local/multicast blocks.
    return "reserved" if ip.is_reserved else None


def literal_ip(host: str) -> IPAddress | None:
    """The address ``host`` spells, including inet_aton forms (``127.1``, ``0x7f000001``); else None.

    Parsing only: no resolver is consulted.
    """
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        pass
    # inet_aton also accepts trailing junk after a space; the character check rules that out.
    if re.fullmatch(r"[0-9a-fA-FxX.]+", host) and any(c.isdigit() for c in host):
        try:
            return ipaddress.IPv4Address(socket.inet_aton(host))
        except OSError:
            return None
    return None


def _ip(text: str) -> IPAddress:
    # getaddrinfo may append "%scope" to link-local IPv6 addresses
    return ipaddress.ip_address(text.split("%", 1)[0])


@dataclass(frozen=True, slots=True)
class AddressPolicy:
    """The operator's allow-list, split into host names and networks.

    Build it with :meth:`from_settings`; :meth:`check` applies it.
    """

    hosts: frozenset[str]
    networks: tuple[IPNetwork, ...]

    @classmethod
    def from_settings(cls, settings: Settings) -> AddressPolicy:
        """Read ``settings.http_allow``: entries that parse as an IP or CIDR are networks, the rest host names."""
        hosts: set[str] = set()
        networks: list[IPNetwork] = []
        for entry in settings.http_allow:
            text = (
                entry.strip().replace("[", "").replace("]", "")
            )  # "[::1]" or "[fd00::]/8" as written in URLs
            try:
                networks.append(ipaddress.ip_network(text, strict=False))
            except ValueError:
                hosts.add(_norm_host(text))
        return cls(frozenset(hosts), tuple(networks))

    def allows_host(self, host: str) -> bool:
        """True when the host name itself is on the allow-list."""
        return _norm_host(host) in self.hosts

    def allows_address(self, ip: IPAddress) -> bool:
        """True when ``ip`` (or the IPv4 address it maps) is inside an allowed network."""
        candidates: list[IPAddress] = [ip]
        if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
            candidates.append(ip.ipv4_mapped)
        return any(c in net for c in candidates for net in self.networks)

    def check(self, host: str, addresses: list[str], *, node_id: str | None = None) -> None:
        """Refuse ``host`` unless it is allowed by name or every one of ``addresses`` passes.

        Raises:
            BlockedAddress: names the host, the refused address, its category and the setting to change.
        """
        if self.allows_host(host):
            return
        for text in addresses:
            ip = _ip(text)
            if self.allows_address(ip):
                continue
            category = blocked_category(ip)
            if category is not None:
                # Quote the address as given: Python prints ::ffff:127.0.0.1 as ::ffff:7f00:1.
                where = (
                    f"{host!r} is" if _norm_host(host) == text.lower() else f"{host!r} resolves to {text},"
                )
                raise BlockedAddress(
                    f"HTTP target refused: {where} a blocked address ({category}). The HTTP node does not reach internal "
                    f"addresses unless the operator allows them: add the host name ({_norm_host(host)}), the address "
                    f"({text}) or its network to FLOWLOOM_HTTP_ALLOW (comma separated)",
                    node_id=node_id,
                )


def _norm_host(host: str) -> str:
    return host.strip().lower().rstrip(".")


# -------------------------------------------------------------------- transport


class GuardedBackend(httpcore.AsyncNetworkBackend):
    """httpcore backend that checks every connection against an :class:`AddressPolicy`.

    ``connect_tcp(host, ...)`` resolves ``host`` (:meth:`resolve`), applies the policy
    to all addresses, then asks the wrapped backend (``inner``, default
    :class:`httpcore.AnyIOBackend`) to connect to a validated IP literal, trying each
    in resolver order. ``connections`` lists what was connected to, for the record.

    Raises (from ``connect_tcp``):
        BlockedAddress: the policy refuses the host.
        httpcore.ConnectError: the name does not resolve, or no address accepts the connection.
    """

    def __init__(
        self,
        policy: AddressPolicy,
        *,
        node_id: str | None = None,
        inner: httpcore.AsyncNetworkBackend | None = None,
    ) -> None:
        self.policy = policy
        self.node_id = node_id
        self.inner = inner if inner is not None else httpcore.AnyIOBackend()
        self.connections: list[HttpConnection] = []

    async def resolve(self, host: str, port: int) -> list[str]:
        """All addresses of ``host`` (IP text, resolver order, no duplicates).

        Raises:
            httpcore.ConnectError: the name does not resolve.
        """
        loop = asyncio.get_running_loop()
        try:
            infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except socket.gaierror as exc:
            raise httpcore.ConnectError(f"cannot resolve host {host!r}: {exc.strerror}") from None
        return list(dict.fromkeys(str(info[4][0]) for info in infos))

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: typing.Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        addresses = await self.resolve(host, port)
        if not addresses:
            raise httpcore.ConnectError(f"host {host!r} resolved to no address")
        self.policy.check(host, addresses, node_id=self.node_id)
        last: Exception | None = None
        for address in addresses:
            try:
                stream = await self.inner.connect_tcp(
                    address, port, timeout=timeout, local_address=local_address, socket_options=socket_options
                )
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                last = exc
                continue
            self.connections.append({"host": host, "address": address, "port": port})
            return stream
        assert last is not None
        raise last

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: typing.Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        raise BlockedAddress("HTTP target refused: Unix sockets are not allowed", node_id=self.node_id)

    async def sleep(self, seconds: float) -> None:
        await self.inner.sleep(seconds)


@functools.cache
def _ssl_context() -> ssl.SSLContext:
    # Built once: loading the CA bundle costs milliseconds per client. SSL_CERT_FILE /
    # SSL_CERT_DIR are still honoured; only proxies and .netrc are ignored.
    return httpx.create_ssl_context()


class GuardedTransport(httpx.AsyncHTTPTransport):
    """httpx's default transport with its connection pool built on a :class:`GuardedBackend`.

    httpx 0.28 has no public parameter for the network backend (proposed upstream in
    encode/httpx#3749), while httpcore's pool takes one (``network_backend``, public
    API). So the pool httpx builds is replaced by an identical one using the guard.
    """

    def __init__(self, backend: GuardedBackend) -> None:
        super().__init__(verify=_ssl_context(), trust_env=False)
        if not isinstance(getattr(self, "_pool", None), httpcore.AsyncConnectionPool):
            # Fail closed: without the replacement below, connections would bypass the guard.
            raise RuntimeError(
                "unsupported httpx version: cannot install the SSRF guard on AsyncHTTPTransport"
            )
        self._pool = httpcore.AsyncConnectionPool(ssl_context=_ssl_context(), network_backend=backend)
