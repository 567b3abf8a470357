"""A server answering garbage to the client: every answer is bounded and refused with a
StationError naming the problem, never a hang or an unbounded allocation. The server here is a
scripted stand-in on a unix socket; the codecs are also fed directly. Positive controls: the
same stand-in answering well-formed bytes is accepted."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import os
import socket
import struct
import tempfile
import threading
import time
from typing import Callable, Iterator

import pytest

from station_sandbox import (AsyncClient, Client, ProtocolError, StationError, Timeout,
                             Unavailable)
from station_sandbox._wire import (ChunkedDecoder, OffsetFilter, SseParser, TextStream, WsParser,
                                   ws_frame, WS_GUID)

Script = Callable[[socket.socket, bytes], None]


class Stage:
    """A unix socket whose every connection gets ``script(conn, request_head)``."""

    def __init__(self, script: Script) -> None:
        self.dir = tempfile.mkdtemp(prefix="station-py-")
        self.path = os.path.join(self.dir, "fake.sock")
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(self.path)
        self.sock.listen(8)
        self.script = script
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        self.sock.settimeout(0.1)
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except (TimeoutError, OSError):
                continue
            threading.Thread(target=self._one, args=(conn,), daemon=True).start()

    def _one(self, conn: socket.socket) -> None:
        conn.settimeout(5)
        head = b""
        try:
            while b"\r\n\r\n" not in head:
                c = conn.recv(65536)
                if not c:
                    return
                head += c
            self.script(conn, head)
        except OSError:
            pass
        finally:
            conn.close()

    def close(self) -> None:
        self.stop.set()
        self.thread.join(5)
        self.sock.close()
        os.unlink(self.path)
        os.rmdir(self.dir)


@pytest.fixture
def stage() -> Iterator[Callable[[Script], Stage]]:
    made: list[Stage] = []

    def make(script: Script) -> Stage:
        s = Stage(script)
        made.append(s)
        return s
    yield make
    for s in made:
        s.close()


def answer(status: int, body: bytes, ctype: str = "application/json",
           extra: str = "") -> Script:
    def script(conn: socket.socket, head: bytes) -> None:
        conn.sendall(f"HTTP/1.1 {status} X\r\nContent-Type: {ctype}\r\n"
                     f"Content-Length: {len(body)}\r\n{extra}\r\n".encode() + body)
    return script


READY_503 = json.dumps({"ready": False, "defaultAdapter": "container", "adapters": ["container"],
                        "checks": [{"name": "store", "ok": True, "message": "ok"},
                                   {"name": "runtime", "ok": False, "message": "runc not found"},
                                   {"name": "images", "ok": False, "message": "store unreadable"}]}).encode()


def test_unavailable_names_each_failing_check(stage: Callable[[Script], Stage]) -> None:
    s = stage(answer(503, READY_503))
    with pytest.raises(Unavailable) as e:
        Client(socket_path=s.path, timeout=2).ready()
    assert e.value.status == 503 and e.value.code == "unavailable"
    assert "runtime: runc not found" in e.value.message
    assert "images: store unreadable" in e.value.message
    assert "store:" not in e.value.message
    # For host workspaces the container checks do not matter, the worker's adapters do.
    with pytest.raises(Unavailable) as e:
        Client(socket_path=s.path, timeout=2).ready(adapter="host")
    assert "adapters: the worker does not allow 'host'" in e.value.message
    assert "runtime" not in e.value.message
    # Positive control: every check passing is a report, not an error.
    good = json.loads(READY_503)
    good["ready"] = True
    for c in good["checks"]:
        c["ok"] = True
    s2 = stage(answer(200, json.dumps(good).encode()))
    assert Client(socket_path=s2.path, timeout=2).ready()["ready"] is True

    async def main() -> None:
        with pytest.raises(Unavailable) as e2:
            await AsyncClient(socket_path=s.path, timeout=2).ready()
        assert "runtime: runc not found" in e2.value.message
    asyncio.run(main())


def test_api_error_body_and_garbage(stage: Callable[[Script], Stage]) -> None:
    err = json.dumps({"error": {"code": "conflict", "message": "workspace w is stopped", "field": "x"}}).encode()
    c = Client(socket_path=stage(answer(409, err)).path, timeout=2)
    with pytest.raises(StationError) as e:
        c.workspaces.list()
    assert (e.value.status, e.value.code, e.value.message, e.value.field) == (
        409, "conflict", "workspace w is stopped", "x")
    assert type(e.value).__name__ == "Conflict"
    # Not the API's error shape: the status and the start of the body.
    c = Client(socket_path=stage(answer(500, b"<html>oops</html>", "text/html")).path, timeout=2)
    with pytest.raises(StationError) as e:
        c.workspaces.list()
    assert e.value.status == 500 and "oops" in e.value.message
    # A 200 that is not JSON.
    c = Client(socket_path=stage(answer(200, b"{not json")).path, timeout=2)
    with pytest.raises(ProtocolError):
        c.workspaces.list()
    # Not HTTP at all.
    def junk(conn: socket.socket, head: bytes) -> None:
        conn.sendall(b"SSH-2.0-OpenSSH\r\n\r\n")
    with pytest.raises(ProtocolError):
        Client(socket_path=stage(junk).path, timeout=2).workspaces.list()
    # Positive control: a well-formed answer is taken.
    ok = answer(200, json.dumps({"workspaces": []}).encode())
    assert Client(socket_path=stage(ok).path, timeout=2).workspaces.list() == []


def test_trickling_server_is_cut_at_the_timeout(stage: Callable[[Script], Stage]) -> None:
    def trickle(conn: socket.socket, head: bytes) -> None:
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n")
        for _ in range(600):
            conn.sendall(b" ")
            time.sleep(0.05)
    s = stage(trickle)
    t0 = time.monotonic()
    with pytest.raises(Timeout):
        Client(socket_path=s.path, timeout=1).workspaces.list()
    assert time.monotonic() - t0 < 20

    async def main() -> None:
        with pytest.raises(Timeout):
            await AsyncClient(socket_path=s.path, timeout=1).workspaces.list()
    asyncio.run(main())


def _upgrade_then(frames: bytes) -> Script:
    def script(conn: socket.socket, head: bytes) -> None:
        if b"/attach" not in head.split(b"\r\n")[0]:
            body = json.dumps({"id": "t-1", "state": "running"}).encode()
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
            return
        key = [l.split(b":", 1)[1].strip() for l in head.split(b"\r\n")
               if l.lower().startswith(b"sec-websocket-key:")][0]
        accept = base64.b64encode(hashlib.sha1(key + WS_GUID.encode()).digest())
        conn.sendall(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                     b"Connection: Upgrade\r\nSec-WebSocket-Accept: " + accept + b"\r\n\r\n" + frames)
        time.sleep(1)
    return script


def _ws(path: str):  # type: ignore[no-untyped-def]
    from station_sandbox.client import Workspace
    c = Client(socket_path=path, timeout=2)
    return Workspace(c, {"id": "w-1", "state": "ready"})


def test_websocket_garbage(stage: Callable[[Script], Stage]) -> None:
    # Positive control: an unmasked binary frame is output.
    t = _ws(stage(_upgrade_then(b"\x82\x03abc")).path).terminals.attach("t-1")
    assert t.read(2) == b"abc"
    t.close()
    # A masked frame from the server: refused.
    t = _ws(stage(_upgrade_then(b"\x82\x83abcd" + b"xyz")).path).terminals.attach("t-1")
    with pytest.raises(ProtocolError):
        t.read(2)
    # A header claiming 2^63 bytes: refused from the header, nothing allocated.
    huge = b"\x82\x7f" + struct.pack("!Q", 1 << 63)
    t = _ws(stage(_upgrade_then(huge)).path).terminals.attach("t-1")
    with pytest.raises(ProtocolError) as e:
        t.read(2)
    assert getattr(e.value, "close_code", None) == 1009


def test_event_stream_without_line_ends_is_bounded() -> None:
    p = SseParser(max_line=1024)
    with pytest.raises(ProtocolError):
        for _ in range(10):
            p.feed(b"x" * 200)


def test_codecs() -> None:
    # SSE: CRLF and LF, fields split across feeds, comments.
    p = SseParser()
    evs = p.feed(b": hello\r\n\r\nevent: output\r\ndata: {\"a\"") + p.feed(b":1}\n\nevent: end\ndata: x\n")
    assert [(e.event, e.data) for e in evs] == [("output", '{"a":1}')]
    assert [(e.event, e.data) for e in p.feed(b"\n")] == [("end", "x")]
    # Chunked, fed a byte at a time.
    d = ChunkedDecoder()
    raw = b"3\r\nabc\r\n10;ext=1\r\n" + b"x" * 16 + b"\r\n0\r\nTrailer: y\r\n\r\n"
    out = b"".join(d.feed(raw[i:i + 1]) for i in range(len(raw)))
    assert out == b"abc" + b"x" * 16 and d.done
    with pytest.raises(ProtocolError):
        ChunkedDecoder().feed(b"zz\r\n")
    with pytest.raises(ProtocolError):
        ChunkedDecoder().feed(b"1" * 5000)
    # WebSocket: fragments joined, pings surfaced, a close ends the batch.
    w = WsParser(max_message=10)
    msgs = w.feed(b"\x01\x02he" + b"\x89\x01p" + b"\x80\x03llo" + b"\x88\x02\x03\xe8")
    assert [(m.kind, m.data, m.code) for m in msgs] == [
        ("ping", b"p", None), ("text", b"hello", None), ("close", b"", 1000)]
    with pytest.raises(ProtocolError):
        WsParser(max_message=10).feed(b"\x02\x06abcdef\x80\x06ghijkl")  # 12 > 10 once joined
    with pytest.raises(ProtocolError):
        WsParser().feed(b"\x80\x01a")  # a continuation without a message
    with pytest.raises(ProtocolError):
        WsParser().feed(b"\x92\x01a")  # RSV bit
    # Our frames are masked and decode back.
    for n in (0, 5, 125, 126, 65535, 65536):
        payload = os.urandom(n)
        f = ws_frame(0x2, payload)
        assert f[1] & 0x80
        off = 2 if n < 126 else 4 if n < 65536 else 10
        mask = f[off:off + 4]
        assert bytes(b ^ mask[i % 4] for i, b in enumerate(f[off + 4:])) == payload
    # Offsets: repeated bytes after a re-open are dropped, new ones kept.
    flt = OffsetFilter(2)
    assert flt.take("stdout", b"abcd", 0) == (b"cd", 2)
    assert flt.take("stdout", b"abcd", 0) is None
    assert flt.take("stdout", b"cdef", 2) == (b"ef", 4)
    assert flt.take("stderr", b"zz", 0) is None


def test_text_stream_for_callbacks() -> None:
    t = TextStream()
    assert t.feed(b"a\xc3", 0) == [("a", 0)]       # the half character is held back
    assert t.feed(b"\xa9b", 2) == [("\u00e9b", 1)]  # ... and comes whole, at its first byte
    assert t.feed(b"\xe2\x82", 4) == []
    assert t.feed(b"\xac", 6) == [("\u20ac", 4)]
    assert t.feed(b"\xff\xfe", 7) == [(b"\xff\xfe", 7)]  # not UTF-8: bytes from here on
    assert t.feed(b"ok", 9) == [(b"ok", 9)]
    g = TextStream()
    assert g.feed(b"x\xc3", 0) == [("x", 0)]
    # A gap: what was held cannot complete, and comes as the bytes it is, before the rest.
    assert g.feed(b"y", 100) == [(b"\xc3", 1), ("y", 100)]
    assert g.feed(b"\xe2\x82", 101) == []
    assert g.flush() == [(b"\xe2\x82", 101)]  # the stream's end: the same
    assert g.flush() == []


def test_header_injection_is_refused() -> None:
    assert Client(socket_path="/x", token="abc").endpoint == "unix:/x"  # positive control
    with pytest.raises(ValueError):
        Client(socket_path="/x", token="abc\r\nX-Evil: 1")
    w = _ws("/nonexistent/station.sock")
    with pytest.raises(ValueError):
        w.files.write("f", "x", if_match='"e"\r\nX-Evil: 1')
    # A path or an id is quoted, never a header or a second request line.
    with pytest.raises(StationError) as e:
        w.files.stat("a\r\nX-Evil: 1")
    assert e.value.code == "connection_failed"  # it got as far as connecting: nothing refused it
