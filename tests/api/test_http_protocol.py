"""``tickwheel server``'s HTTP protocol (``server/http_protocol.py``): a response's head that
announces a body goes out with the body's first bytes, in one write; every other write as it
comes; and over a real socket every kind of answer arrives whole (JSON, HEAD, streamed, empty,
a 500), one request after another on one kept-alive connection."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import uvicorn
from fastapi import FastAPI, Response
from fastapi.responses import StreamingResponse

from tickwheel.server.http_protocol import HeldHead, OneWriteHttpTools, announces_body

HEAD = b"HTTP/1.1 201 Created\r\ndate: x\r\ncontent-length: 12\r\ncontent-type: a/b\r\n\r\n"


class Recorded:
    """A transport that records its writes."""

    def __init__(self) -> None:
        self.writes: list[bytes] = []
        self.closed = False
        self.aborted = False

    def write(self, data: bytes) -> None:
        self.writes.append(bytes(data))

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True

    def abort(self) -> None:
        self.aborted = True

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("extra", name)


def test_which_writes_announce_a_body() -> None:
    assert announces_body(HEAD)
    assert not announces_body(HEAD.replace(b"content-length: 12", b"content-length: 0"))
    chunked = HEAD.replace(b"content-length: 12", b"transfer-encoding: chunked")
    assert not announces_body(chunked)
    assert not announces_body(b"HTTP/1.1 100 Continue\r\n\r\n")
    assert not announces_body(HEAD + b"{}")  # a head and its body in one piece
    assert not announces_body(b'{"content-length: 5\r\n\r\n')  # a body, not a head


def test_a_head_goes_out_with_its_body() -> None:
    inner = Recorded()
    held = HeldHead(inner)  # type: ignore[arg-type]
    held.write(HEAD)
    assert inner.writes == []
    held.write(b'{"ok": true}')
    held.write(b"HTTP/1.1 100 Continue\r\n\r\n")
    assert inner.writes == [HEAD + b'{"ok": true}', b"HTTP/1.1 100 Continue\r\n\r\n"]
    assert held.get_extra_info("socket") == ("extra", "socket")


def test_a_head_without_its_body_goes_out_at_a_flush_or_a_close_and_not_after_an_abort() -> None:
    inner = Recorded()
    held = HeldHead(inner)  # type: ignore[arg-type]
    held.write(HEAD)
    held.flush()
    held.flush()
    assert inner.writes == [HEAD]
    held.write(HEAD)
    held.close()
    assert inner.writes == [HEAD, HEAD] and inner.closed
    inner = Recorded()
    held = HeldHead(inner)  # type: ignore[arg-type]
    held.write(HEAD)
    held.abort()
    assert inner.writes == [] and inner.aborted


def _app() -> FastAPI:
    app = FastAPI()

    @app.api_route("/json", methods=["GET", "HEAD"])
    async def as_json() -> dict[str, Any]:
        return {"answer": 42, "text": "x" * 3000}

    @app.get("/empty", status_code=204)
    async def empty() -> Response:
        return Response(status_code=204)

    @app.get("/stream")
    async def stream() -> StreamingResponse:
        async def parts() -> AsyncIterator[bytes]:
            for n in range(3):
                yield f"part {n};".encode()
                await asyncio.sleep(0)

        return StreamingResponse(parts(), media_type="text/plain")

    @app.get("/bug")
    async def bug() -> dict[str, Any]:
        raise RuntimeError("a bug")

    return app


@pytest.fixture
async def server() -> AsyncIterator[tuple[str, list[int]]]:
    sock = socket.create_server(("127.0.0.1", 0))
    writes: list[int] = []

    class Counted(OneWriteHttpTools):
        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            real_write = transport.write

            def write(data: Any) -> None:
                writes.append(len(data))
                real_write(data)

            transport.write = write  # type: ignore[method-assign]
            super().connection_made(transport)

    config = uvicorn.Config(_app(), log_level="critical", lifespan="off", http=Counted)
    served = uvicorn.Server(config)
    task = asyncio.create_task(served.serve(sockets=[sock]))
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}", writes
    finally:
        served.should_exit = True
        await task


async def test_every_kind_of_answer_arrives_whole_on_one_connection(
    server: tuple[str, list[int]],
) -> None:
    url, writes = server
    connects: list[str] = []

    async def trace(event: str, info: dict[str, Any]) -> None:
        if event == "connection.connect_tcp.complete":
            connects.append(event)

    async with httpx.AsyncClient(base_url=url) as http:
        for _ in range(2):
            before = len(writes)
            r = await http.get("/json", extensions={"trace": trace})
            assert r.status_code == 200 and r.json() == {"answer": 42, "text": "x" * 3000}
            assert len(writes) == before + 1  # head and body in one write
            head = await http.head("/json", extensions={"trace": trace})
            assert head.status_code == 200 and head.content == b""
            assert head.headers["content-length"] == r.headers["content-length"]
            r = await http.get("/empty", extensions={"trace": trace})
            assert r.status_code == 204 and r.content == b""
            r = await http.get("/stream", extensions={"trace": trace})
            assert r.status_code == 200 and r.text == "part 0;part 1;part 2;"
        assert len(connects) == 1  # kept alive throughout
        # Starlette re-raises after its 500 and uvicorn then closes: the answer arrives first.
        r = await http.get("/bug")
        assert r.status_code == 500 and r.text == "Internal Server Error"
