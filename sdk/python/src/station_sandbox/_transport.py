"""Blocking HTTP/1.1 to the controller with ``http.client``, over its unix socket or TCP
(``http://``, ``https://``): JSON requests, streamed bodies both ways, server-sent events read
incrementally, and the WebSocket handshake. Every wait on the network has a timeout."""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import socket
import ssl
import time
from typing import Any, BinaryIO, Iterable, Iterator, Mapping, Optional, Union

from ._ops import NO_BODY, Op, Req, T
from ._wire import (MAX_HEADER_BYTES, MAX_JSON_BYTES, SSE_HEARTBEAT_S, Endpoint, SseEvent,
                    SseParser, loads, parse_head, request_head, resolve_timeout, ws_accept,
                    ws_headers, ws_key)
from .errors import (ConnectionFailed, InvalidArgument, ProtocolError, StationError, Timeout,
                     WorkerTimeout, WorkerUnavailable, error_from_body)

Body = Union[bytes, BinaryIO, Iterable[bytes], None]


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: Optional[float]) -> None:
        super().__init__("localhost", timeout=timeout)
        self._path = path

    def connect(self) -> None:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.settimeout(self.timeout)
            s.connect(self._path)
        except BaseException:
            s.close()
            raise
        self.sock = s


def connect_socket(ep: Endpoint, timeout: float) -> socket.socket:
    """A connected socket (TLS for https) to the controller, with ``timeout`` set."""
    if ep.scheme == "unix":
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.settimeout(timeout)
            s.connect(ep.socket_path or "")
        except BaseException:
            s.close()
            raise
        return s
    s = socket.create_connection((ep.host, ep.port), timeout=timeout)
    if ep.scheme == "https":
        s = ssl.create_default_context().wrap_socket(s, server_hostname=ep.host)
    s.settimeout(timeout)
    return s


class Transport:
    """One endpoint and its default timeout (seconds; None: ``$STATION_TIMEOUT_MS`` or 30)."""

    def __init__(self, endpoint: Endpoint, timeout: Optional[float]) -> None:
        timeout = resolve_timeout(timeout)
        if not timeout or timeout <= 0:
            raise InvalidArgument("timeout must be a positive number of seconds")
        self.ep = endpoint
        self.timeout = float(timeout)

    @contextlib.contextmanager
    def net(self, what: str, timeout: float) -> Iterator[None]:
        """Turns socket and http.client failures into StationErrors naming the endpoint."""
        try:
            yield
        except StationError:
            raise
        except (TimeoutError, socket.timeout):
            raise self.timeout_error(what, timeout) from None
        except (http.client.RemoteDisconnected, http.client.IncompleteRead) as e:
            # The connection broke (the controller went away): as the async client says it.
            raise ConnectionFailed(0, "connection_failed", f"{what}: the controller at "
                                   f"{self.ep.where} closed the connection: {e!r}") from None
        except (http.client.HTTPException, ValueError) as e:
            raise ProtocolError(0, "protocol_error", f"{what}: a bad answer from "
                                f"{self.ep.where}: {e!r}") from None
        except OSError as e:
            raise self._conn_error(what, e) from None

    def _conn_error(self, what: str, e: OSError) -> ConnectionFailed:
        return ConnectionFailed(0, "connection_failed", f"{what}: cannot reach the controller "
                                f"at {self.ep.where}: {e.strerror or e}")

    def timeout_error(self, what: str, t: float) -> Timeout:
        """No answer within ``t`` seconds: a Timeout naming the controller."""
        return Timeout(0, "timeout", f"{what}: no answer from the controller at {self.ep.where} "
                       f"within {t:g} s")

    def _conn(self, timeout: float) -> http.client.HTTPConnection:
        if self.ep.scheme == "unix":
            return _UnixConnection(self.ep.socket_path or "", timeout)
        if self.ep.scheme == "https":
            return http.client.HTTPSConnection(self.ep.host, self.ep.port, timeout=timeout)
        return http.client.HTTPConnection(self.ep.host, self.ep.port, timeout=timeout)

    def open(self, method: str, path: str, body: Body = None,
             headers: Optional[Mapping[str, str]] = None, timeout: Optional[float] = None,
             size: Optional[int] = None) -> tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
        """Sends a request and reads the answer's head. A 2xx answer is returned with its
        connection (close both when done); any other raises the API's error."""
        t = timeout or self.timeout
        what = f"{method} {path}"
        h = {"Host": self.ep.host_header}
        if self.ep.token:
            h["Authorization"] = f"Bearer {self.ep.token}"
        h.update(headers or {})
        conn = self._conn(t)
        try:
            with self.net(what, t):
                chunked = False
                if body is not None and not isinstance(body, (bytes, bytearray)):
                    if size is not None:
                        h["Content-Length"] = str(size)
                    else:
                        h["Transfer-Encoding"] = "chunked"
                        chunked = True
                conn.putrequest(method, self.ep.base_path + path, skip_host=True,
                                skip_accept_encoding=True)
                for k, v in h.items():
                    conn.putheader(k, v)
                if isinstance(body, (bytes, bytearray)) or body is None:
                    data = bytes(body) if body is not None else b""
                    if method in ("POST", "PUT") or data:
                        conn.putheader("Content-Length", str(len(data)))
                    conn.endheaders(data or None)
                else:
                    conn.endheaders()
                    try:
                        self._send_body(conn, body, chunked)
                    except (BrokenPipeError, ConnectionResetError):
                        pass  # the server answered before taking it all: read why below
                sock = conn.sock  # gone from conn once an answer that closes is read
                resp = conn.getresponse()
                resp.station_sock = sock  # type: ignore[attr-defined]
                if not 200 <= resp.status < 300 and resp.status != 101:
                    text = resp.read(64 * 1024)
                    raise error_from_body(resp.status, text, what)
            return conn, resp
        except BaseException:
            conn.close()
            raise

    @staticmethod
    def _send_body(conn: http.client.HTTPConnection, body: Any, chunked: bool) -> None:
        read = getattr(body, "read", None)
        chunks: Iterable[bytes]
        if read is not None:
            chunks = iter(lambda: read(256 * 1024), b"")
        else:
            chunks = body
        for c in chunks:
            if isinstance(c, str):
                c = c.encode("utf-8")
            if not c:
                continue
            conn.send(b"%x\r\n%s\r\n" % (len(c), c) if chunked else c)
        if chunked:
            conn.send(b"0\r\n\r\n")

    def json(self, req: Req) -> Any:
        """One JSON request: the parsed answer (2xx or a status in ``req.accept``)."""
        if req.method == "SLEEP":
            time.sleep(float(req.body))
            return None
        t = (req.timeout_s or self.timeout) + req.wait_s
        what = f"{req.method} {req.path}"
        h = {"Accept": "application/json"}
        body = None
        if req.body is not NO_BODY:
            body = json.dumps(req.body).encode("utf-8")
            h["Content-Type"] = "application/json"
        h.update(req.headers)
        conn = self._conn(t)
        try:
            with self.net(what, t):
                h["Host"] = self.ep.host_header
                if self.ep.token:
                    h["Authorization"] = f"Bearer {self.ep.token}"
                deadline = time.monotonic() + t
                conn.request(req.method, self.ep.base_path + req.path, body=body, headers=h)
                resp = conn.getresponse()
                text = self._read_body(resp, deadline, what, t)
            if not (200 <= resp.status < 300 or resp.status in req.accept):
                raise error_from_body(resp.status, text, what)
            if resp.status == 204:
                return None  # No Content (a port's DELETE)
            return loads(text, what)
        finally:
            conn.close()

    @staticmethod
    def _read_body(resp: http.client.HTTPResponse, deadline: float, what: str, t: float) -> bytes:
        """The whole body, at most MAX_JSON_BYTES, by ``deadline`` (a server that trickles
        bytes does not hold the call past its timeout)."""
        out = bytearray()
        while True:
            if time.monotonic() > deadline:
                raise TimeoutError
            c = resp.read1(256 * 1024)
            if not c:
                return bytes(out)
            out += c
            if len(out) > MAX_JSON_BYTES:
                raise ProtocolError(resp.status, "protocol_error",
                                    f"{what}: an answer over {MAX_JSON_BYTES} bytes")

    def drive(self, op: Op[T]) -> T:
        """Runs an operation of _ops to its result."""
        try:
            req = next(op)
            while True:
                try:
                    answer = self.json(req)
                except BaseException as e:
                    req = op.throw(e)
                    continue
                req = op.send(answer)
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]

    def events(self, path: str, timeout: Optional[float] = None) -> Iterator[SseEvent]:
        """A server-sent event stream, read as it comes. Each read waits at most ``timeout``
        plus the server's heartbeat interval (Timeout then); the iterator ends when the server
        ends the stream."""
        t = timeout or self.timeout
        conn, resp = self.open("GET", path, headers={"Accept": "text/event-stream"}, timeout=t)
        try:
            parser = SseParser()
            idle = t + SSE_HEARTBEAT_S
            sock = getattr(resp, "station_sock", None)
            if sock is not None:
                sock.settimeout(idle)
            while True:
                with self.net(f"GET {path}", idle):
                    chunk = resp.read1(64 * 1024)
                if not chunk:
                    return
                yield from parser.feed(chunk)
        finally:
            resp.close()
            conn.close()

    def upgrade(self, path: str, timeout: Optional[float] = None) -> tuple[socket.socket, bytes, str]:
        """A WebSocket handshake (RFC 6455): the socket, bytes already read past the answer's
        head, and the accepted subprotocol."""
        t = timeout or self.timeout
        what = f"GET {path} (WebSocket)"
        key = ws_key()
        with self.net(what, t):
            sock = connect_socket(self.ep, t)
            try:
                sock.sendall(request_head(self.ep, "GET", path, ws_headers(key)))
                buf = b""
                while b"\r\n\r\n" not in buf:
                    if len(buf) > MAX_HEADER_BYTES:
                        raise ProtocolError(0, "protocol_error", f"{what}: an answer head over 64 KiB")
                    c = sock.recv(65536)
                    if not c:
                        raise ConnectionFailed(0, "connection_failed",
                                               f"{what}: the controller closed the connection")
                    buf += c
                head, _, rest = buf.partition(b"\r\n\r\n")
                status, headers = parse_head(head, what)
                if status != 101:
                    n = int(headers.get("content-length", "0") or 0)
                    while len(rest) < min(n, 64 * 1024):
                        c = sock.recv(65536)
                        if not c:
                            break
                        rest += c
                    raise error_from_body(status, rest[:n], what)
                if headers.get("sec-websocket-accept") != ws_accept(key):
                    raise ProtocolError(status, "protocol_error", f"{what}: bad Sec-WebSocket-Accept")
                return sock, rest, headers.get("sec-websocket-protocol", "")
            except BaseException:
                sock.close()
                raise


def os_reason(e: OSError) -> str:
    """``connection refused`` from ECONNREFUSED's ``Connection refused``."""
    r = os.strerror(e.errno) if e.errno else (e.strerror or str(e))
    return r[:1].lower() + r[1:]


class WorkerTransport(Transport):
    """One worker of a client with several: no answer is a WorkerUnavailable naming it."""

    def __init__(self, endpoint: Endpoint, timeout: float, worker: str, url: str) -> None:
        super().__init__(endpoint, timeout)
        self.worker = worker
        self.url = url

    def _conn_error(self, what: str, e: OSError) -> ConnectionFailed:
        return WorkerUnavailable(self.worker, self.url, os_reason(e))

    def timeout_error(self, what: str, t: float) -> Timeout:
        return WorkerTimeout(self.worker, self.url, t)


class NoRoute:
    """What a client with several workers uses for a call that names no workspace."""

    def __init__(self, names: list[str]) -> None:
        self.names = names

    def _refuse(self, what: str) -> InvalidArgument:
        return InvalidArgument(f"{what}: this client has several workers ({', '.join(self.names)}): "
                          f"pick one with client.on(NAME)")

    def drive(self, op: Op[T]) -> T:
        req = next(op)
        op.close()
        raise self._refuse(f"{req.method} {req.path.split('?')[0]}")

    def __getattr__(self, name: str) -> Any:
        raise self._refuse(name)
