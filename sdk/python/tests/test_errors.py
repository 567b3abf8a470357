"""Every failure is a typed StationError: a call refused before it is sent
(:class:`InvalidArgument`), a connection the controller drops (:class:`ConnectionFailed` in
both clients), a terminal session that ends without the terminal's end (ConnectionFailed, not
``b""``). A small fake controller on a unix socket plays the dead parts; each case has its
positive control."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import os
import socket
import tempfile
import threading
from typing import Any, Callable, Iterator

import pytest

import station_sandbox as ss
from station_sandbox import (AsyncClient, BadRequest, Client, ConnectionFailed, InvalidArgument,
                             StationError)

WS_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
WORKSPACE = {"id": "test-aaaaaaaaaaaaaaaaaaaaaaaaaa", "state": "ready", "adapter": "host"}
TERMINAL = {"id": "t-1", "state": "running", "cols": 80, "rows": 24}


def _answer(status: int, doc: Any) -> bytes:
    body = json.dumps(doc).encode()
    return (f"HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: "
            f"{len(body)}\r\nConnection: close\r\n\r\n").encode() + body


def _frame(opcode: int, payload: bytes) -> bytes:
    assert len(payload) < 126
    return bytes([0x80 | opcode, len(payload)]) + payload


class Fake:
    """Answers each request with ``handle(head)``: bytes to send, then the connection closes."""

    def __init__(self, handle: Callable[[str], bytes]) -> None:
        self.dir = tempfile.mkdtemp(prefix="station-py-")
        self.path = os.path.join(self.dir, "fake.sock")
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(self.path)
        self.sock.listen(16)
        self.handle = handle
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            with c:
                head = b""
                while b"\r\n\r\n" not in head:
                    got = c.recv(65536)
                    if not got:
                        break
                    head += got
                try:
                    c.sendall(self.handle(head.decode("latin-1")))
                except OSError:
                    pass

    def close(self) -> None:
        self.sock.close()
        os.unlink(self.path)
        os.rmdir(self.dir)


def _controller(drop: str) -> Callable[[str], bytes]:
    """A controller that knows one workspace and one terminal; requests whose line contains
    ``drop`` get the connection closed without an answer."""
    def handle(head: str) -> bytes:
        line = head.split("\r\n", 1)[0]
        if drop and drop in line:
            return b""
        if "/attach" in line:
            key = [h.split(":", 1)[1].strip() for h in head.split("\r\n")
                   if h.lower().startswith("sec-websocket-key:")][0]
            accept = base64.b64encode(hashlib.sha1((key + WS_GUID).encode()).digest()).decode()
            # 101, some output, then the connection ends: no exit message, no close frame.
            return (f"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: "
                    f"Upgrade\r\nSec-WebSocket-Accept: {accept}\r\n\r\n").encode() + _frame(2, b"hi")
        if "/terminals/" in line:
            return _answer(200, TERMINAL)
        if "/v1/workspaces/" in line:
            return _answer(200, WORKSPACE)
        return _answer(200, {"workspaces": [WORKSPACE]})
    return handle


@pytest.fixture
def fake() -> Iterator[Callable[[str], Fake]]:
    made: list[Fake] = []

    def make(drop: str = "") -> Fake:
        f = Fake(_controller(drop))
        made.append(f)
        return f
    yield make
    for f in made:
        f.close()


def test_client_side_refusals_are_station_errors() -> None:
    ws = Client(socket_path="/nonexistent/station.sock").workspaces
    w = ss.Workspace.__new__(ss.Workspace)
    w.__init__(Client(socket_path="/nonexistent/station.sock"), WORKSPACE)  # no request made
    for call in (lambda: w.run(""), lambda: w.start(""), lambda: w.run("x", stdin=3),  # type: ignore[arg-type]
                 lambda: w.files.write("f", "x", mode="999"),
                 lambda: w.files.write("f", "x", if_match="a\r\nb"),
                 lambda: ws.get(""), lambda: Client(url="ftp://x"),
                 lambda: Client(socket_path="/x", token="a\nb")):
        with pytest.raises(InvalidArgument) as e:
            call()
        assert isinstance(e.value, StationError) and isinstance(e.value, BadRequest)
        assert isinstance(e.value, ValueError)  # what it was before: callers that caught it still do
        assert (e.value.status, e.value.code) == (0, "invalid_argument")
    # Positive control: a valid command gets as far as the (absent) controller.
    with pytest.raises(ConnectionFailed):
        w.run("true")


def test_async_client_side_refusals_are_station_errors() -> None:
    async def main() -> None:
        c = AsyncClient(socket_path="/nonexistent/station.sock")
        w = ss.AsyncWorkspace(c, WORKSPACE)
        with pytest.raises(InvalidArgument):
            await w.run("")
        with pytest.raises(ConnectionFailed):
            await w.run("true")
    asyncio.run(main())


def test_dropped_connection_is_connection_failed_in_both_clients(fake: Callable[[str], Fake]) -> None:
    f = fake("GET /v1/workspaces ")
    # Positive control: the same fake answers another request.
    assert Client(socket_path=f.path, timeout=5).workspaces.get(WORKSPACE["id"]).state == "ready"
    with pytest.raises(ConnectionFailed) as e:
        Client(socket_path=f.path, timeout=5).workspaces.list()
    assert (e.value.status, e.value.code) == (0, "connection_failed")

    async def main() -> None:
        c = AsyncClient(socket_path=f.path, timeout=5)
        assert (await c.workspaces.get(WORKSPACE["id"])).state == "ready"
        with pytest.raises(ConnectionFailed) as e:
            await c.workspaces.list()
        assert (e.value.status, e.value.code) == (0, "connection_failed")
    asyncio.run(main())


def test_terminal_whose_controller_went_away_raises(fake: Callable[[str], Fake]) -> None:
    f = fake()
    w = Client(socket_path=f.path, timeout=5).workspaces.get(WORKSPACE["id"])
    t = w.terminals.attach("t-1")
    assert t.read() == b"hi"  # positive control: the session worked
    with pytest.raises(ConnectionFailed) as e:
        t.read()
    assert t.exit is None and "ended before the terminal did" in e.value.message
    # Detached by the caller: b"" as before.
    t2 = w.terminals.attach("t-1")
    assert t2.read() == b"hi"
    t2.close()
    assert t2.read() == b""

    async def main() -> None:
        aw = await AsyncClient(socket_path=f.path, timeout=5).workspaces.get(WORKSPACE["id"])
        at = await aw.terminals.attach("t-1")
        assert await at.read() == b"hi"
        with pytest.raises(ConnectionFailed):
            await at.read()
    asyncio.run(main())
