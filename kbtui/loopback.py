"""Model servers on this machine only: the address check for every model endpoint.

Chunk text and queries go to the embedder, the reranker and the chat model in
clear HTTP, so each of them must listen on a loopback address unless the
operator set ``allow_cloud_model_access = true``. The check is made twice:

- when the settings load, on the URL (:func:`is_loopback_url`): a loopback
  address or ``localhost``; any other host name is refused, since it may
  resolve anywhere;
- at every connection, on the addresses the name resolves to *now*
  (:func:`loopback_addresses`), because DNS or ``/etc/hosts`` can change
  under a running node; the connection is then made to exactly the addresses
  that were checked (:func:`connect_loopback`).

Standard library only: the settings import it at every command's start.
"""

from __future__ import annotations

import ipaddress
import socket
from urllib.parse import urlsplit

from kbtui.errors import KbtuiError

Address = tuple[socket.AddressFamily, tuple]  # family, sockaddr as getaddrinfo gives it


class NotLoopback(KbtuiError):
    """A model endpoint resolved to an address off this machine; nothing was sent."""


def is_loopback_address(text: str) -> bool:
    """True for ``127.0.0.0/8``, ``::1`` and IPv4-mapped loopback (``::ffff:127.0.0.1``)."""
    try:
        address = ipaddress.ip_address(text.split("%", 1)[0])
    except ValueError:
        return False
    mapped = getattr(address, "ipv4_mapped", None)
    return bool(address.is_loopback or (mapped is not None and mapped.is_loopback))


def url_host(url: str) -> str:
    """The host of ``url`` (a scheme is optional: Ollama takes ``127.0.0.1:11434``), or ""."""
    try:
        return urlsplit(url if "://" in url else f"http://{url}").hostname or ""
    except ValueError:
        return ""


def is_loopback_url(url: str) -> bool:
    """True when ``url`` names this machine: a loopback address or ``localhost``."""
    host = url_host(url)
    return host.rstrip(".").lower() == "localhost" or is_loopback_address(host)


def loopback_addresses(host: str, port: int) -> list[Address]:
    """Resolve ``host`` now; every address must be a loopback one, else :class:`NotLoopback`.

    One address off this machine refuses the whole name: a resolver that
    mixes them is not to be trusted with document text.
    """
    found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)  # a name that does not resolve: OSError
    addresses: list[Address] = [(family, sockaddr) for family, _, _, _, sockaddr in found]
    if not addresses or not all(is_loopback_address(str(sockaddr[0])) for _, sockaddr in addresses):
        raise NotLoopback("a model server's host name resolved to an address off this machine; nothing was sent")
    return addresses


def connect_loopback(host: str, port: int, timeout: float | None) -> socket.socket:
    """A TCP connection to ``host`` made only to the loopback addresses it resolves to now."""
    last: OSError | None = None
    for family, sockaddr in loopback_addresses(host, port):
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.settimeout(timeout)
            sock.connect(sockaddr)
            return sock
        except OSError as exc:
            sock.close()
            last = exc
    assert last is not None
    raise last
