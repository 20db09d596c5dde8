"""A loopback TCP proxy in front of PostgreSQL, for the faults a server cannot be asked to make:
a connection whose far end closes without a word (a backend that died, as when a postmaster is
SIGKILLed), and one whose answers never come (a backend that hangs, a stalled network). The
shared test server itself is left alone: only the proxy's copy of the stream is cut or held."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

from psycopg.conninfo import conninfo_to_dict, make_conninfo

CHUNK = 65536


@dataclass(eq=False)
class Link:
    """One client connection and its upstream; ``answers`` open lets the server's bytes through."""

    client: asyncio.StreamWriter
    upstream: asyncio.StreamWriter
    answers: asyncio.Event = field(default_factory=asyncio.Event)

    def cut(self) -> None:
        """Both ends closed at once: the client reads the end of the stream mid-statement."""
        self.client.transport.abort()
        self.upstream.transport.abort()

    def hold(self) -> None:
        """The server's answers are kept from the client from now on."""
        self.answers.clear()


@dataclass(eq=False)
class Proxy:
    host: str  # the server's
    port: int
    proxy_port: int = 0
    links: dict[int, Link] = field(default_factory=dict)  # by the client's local port
    _tasks: set[asyncio.Task[None]] = field(default_factory=set)

    def url(self, pg_url: str) -> str:
        """``pg_url`` with its host and port replaced by the proxy's."""
        params = conninfo_to_dict(pg_url)
        params.update(host="127.0.0.1", port=str(self.proxy_port))
        params.pop("hostaddr", None)
        return make_conninfo("", **params)

    def link_of(self, fd: int) -> Link:
        """The link of the client socket ``fd`` (a connection's ``pgconn.socket``)."""
        with socket.socket(fileno=fd) as sock:
            try:
                port = sock.getsockname()[1]
            finally:
                sock.detach()  # the descriptor stays the connection's
        return self.links[port]

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection(self.host, self.port)
        link = Link(writer, up_writer)
        link.answers.set()
        self.links[writer.get_extra_info("peername")[1]] = link
        for pump in (self._pump(reader, up_writer, None), self._pump(up_reader, writer, link)):
            task = asyncio.create_task(pump)
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    @staticmethod
    async def _pump(
        reader: asyncio.StreamReader, writer: asyncio.StreamWriter, gate: Link | None
    ) -> None:
        with contextlib.suppress(ConnectionError, OSError):
            while data := await reader.read(CHUNK):
                if gate is not None:
                    await gate.answers.wait()
                writer.write(data)
                await writer.drain()
        writer.transport.abort()


@asynccontextmanager
async def proxy_to(pg_url: str) -> AsyncIterator[Proxy]:
    """A proxy to ``pg_url``'s server on a free loopback port, closed at the end."""
    params = conninfo_to_dict(pg_url)
    proxy = Proxy(str(params.get("host") or "127.0.0.1"), int(params.get("port") or 5432))
    server = await asyncio.start_server(proxy._serve, "127.0.0.1", 0)
    proxy.proxy_port = server.sockets[0].getsockname()[1]
    try:
        yield proxy
    finally:
        server.close()
        for link in list(proxy.links.values()):
            link.cut()
        for task in list(proxy._tasks):
            task.cancel()
        await asyncio.gather(*proxy._tasks, return_exceptions=True)
        await server.wait_closed()
