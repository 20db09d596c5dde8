"""uvicorn's httptools protocol, with a response's head and body sent in one write.

Why: uvicorn writes a response's head when the app sends ``http.response.start`` and its body
at ``http.response.body``, and the event loop's transport sends each at once: two ``write``
system calls, and two segments the client must wake up for, per answer. Over loopback a send is
most of its cost (the receiver's side of TCP runs in the sender's call): the two writes were a
sixth of the API server's CPU per single submit (py-spy, B1), the larger part of it the first.

What changes: a head that announces a body (a ``content-length`` above 0) is held, and goes out
with the next write, which is that body's first bytes; or, should no body follow (a HEAD, an app
that fails half way), when the response completes, when the connection is closed, at the latest.
Nothing else is held or reordered: a head without a body, a chunked head, ``100 Continue``, the
bodies themselves go out as written. ``tests/api/test_http_protocol.py`` serves real sockets."""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

_STATUS_LINE = b"HTTP/1.1 "
_END_OF_HEAD = b"\r\n\r\n"
_LENGTH = b"\r\ncontent-length: "  # uvicorn writes the names lower-cased, then ": "


def announces_body(data: bytes) -> bool:
    """Whether ``data`` is exactly a response head (uvicorn writes one in one piece) whose
    ``content-length`` is above 0."""
    if not (data.startswith(_STATUS_LINE) and data.endswith(_END_OF_HEAD)):
        return False
    at = data.find(_LENGTH)
    if at < 0:
        return False
    start = at + len(_LENGTH)
    value = data[start : data.index(b"\r\n", start)]
    return value.isdigit() and int(value) > 0


class HeldHead:
    """A transport that holds a head announcing a body until the next write; everything else
    is the wrapped transport's."""

    def __init__(self, transport: asyncio.Transport) -> None:
        self._transport = transport
        self._held: bytes | None = None

    def write(self, data: bytes | bytearray | memoryview) -> None:
        held = self._held
        if held is not None:
            self._held = None
            self._transport.write(held + bytes(data))
        elif isinstance(data, bytes) and announces_body(data):
            self._held = data
        else:
            self._transport.write(data)

    def flush(self) -> None:
        """Sends a head still held."""
        held, self._held = self._held, None
        if held is not None and not self._transport.is_closing():
            self._transport.write(held)

    def close(self) -> None:
        self.flush()
        self._transport.close()

    def abort(self) -> None:
        self._held = None
        self._transport.abort()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


class OneWriteHttpTools(HttpToolsProtocol):
    """uvicorn's protocol on a ``HeldHead``; ``tickwheel server`` passes it as ``http``."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(HeldHead(transport))  # type: ignore[arg-type]

    def on_response_complete(self) -> None:
        # A head whose body never came (a HEAD request) goes out with the response's end.
        transport = self.transport
        if isinstance(transport, HeldHead):
            transport.flush()
        super().on_response_complete()
