"""The asyncio client: :class:`AsyncClient`, the same methods as :class:`Client` as
coroutines, over asyncio streams (unix socket or TCP). Every wait has a timeout."""

from __future__ import annotations

import asyncio
import contextlib
import json
import ssl
import time
from typing import (Any, AsyncIterator, Awaitable, BinaryIO, Callable, Iterable, Mapping, Optional,
                    Union, overload)

from . import _ops
from ._ops import NO_BODY, Op, Req, T, UsageSince, UsageStep, ws_path
from ._wire import (MAX_HEADER_BYTES, MAX_JSON_BYTES, OP_BINARY, OP_CLOSE,
                    OP_PING, OP_PONG, OP_TEXT, SSE_HEARTBEAT_S, ChunkedDecoder, Endpoint,
                    SseEvent, SseParser, TextStream, WsParser, file_query, loads, octal_mode,
                    parse_head, query, request_head, resolve_endpoint, resolve_timeout, seg,
                    ws_accept, ws_close_payload, ws_frame, ws_headers, ws_key)
from ._follow import RETRIES, FollowState, Item, OutputGap
from ._transport import NoRoute, os_reason
from ._workers import (WorkersArg, place, resolve_workers, state_of, unknown_worker,
                       worker_of_id)
from .client import (SnapshotList, WorkspaceList, _create_worker, _endpoint_of, _holder, _none_answered,
                     _snapshot_route, _snapshots_of, _unreachable_of, discover_workers)
from .errors import (ConnectionFailed, InvalidArgument, NotFound, PayloadTooLarge, ProtocolError, StationError,
                     Timeout, Unavailable, WorkerTimeout, WorkerUnavailable, error_from_body,
                     error_from_event)
from .models import (ContextInfo, Execution, FileEntry, FileList, Image, Network, PortExposure,
                     PortList, ReadyReport, Run, Secret, Service, Snapshot, TerminalInfo,
                     UsageHistory, WorkspaceInfo)

__all__ = ["AsyncClient", "AsyncWorkspace", "AsyncRunHandle", "AsyncServices",
           "AsyncTerminals", "AsyncTerminal", "AsyncFiles", "AsyncPorts", "AsyncSnapshots",
           "AsyncContexts", "AsyncCodeContext"]

AsyncOutputCallback = Callable[[Union[str, bytes], int], Union[None, Awaitable[None]]]
AsyncGapCallback = Callable[[OutputGap], Union[None, Awaitable[None]]]
Chunk = tuple[str, bytes, int]


class _Answer:
    """An answer whose head was read; its body is read from ``reader`` (chunked or not)."""

    def __init__(self, status: int, headers: dict[str, str], reader: asyncio.StreamReader,
                 writer: asyncio.StreamWriter, what: str) -> None:
        self.status, self.headers, self.reader, self.writer, self.what = (
            status, headers, reader, writer, what)
        te = headers.get("transfer-encoding", "").lower()
        self._chunked = ChunkedDecoder() if "chunked" in te else None
        cl = headers.get("content-length")
        self._left: Optional[int] = int(cl) if cl and cl.isdigit() and not self._chunked else None
        self._eof = False

    async def read1(self) -> bytes:
        """The next body bytes there are; b"" at the end."""
        while not self._eof:
            if self._left == 0:
                self._eof = True
                break
            n = 65536 if self._left is None else min(65536, self._left)
            data = await self.reader.read(n)
            if not data:
                self._eof = True
                if self._chunked is not None and not self._chunked.done or (self._left or 0) > 0:
                    raise ConnectionFailed(0, "connection_failed", f"{self.what}: the answer broke off")
                break
            if self._left is not None:
                self._left -= len(data)
            if self._chunked is not None:
                data = self._chunked.feed(data)
                if self._chunked.done:
                    self._left = 0
                if not data:
                    continue
            return data
        return b""

    async def read_all(self, limit: int) -> bytes:
        out = bytearray()
        while True:
            c = await self.read1()
            if not c:
                return bytes(out)
            out += c
            if len(out) > limit:
                raise PayloadTooLarge(self.status, "payload_too_large",
                                      f"{self.what}: an answer over {limit} bytes")

    def close(self) -> None:
        self.writer.close()


class _AsyncTransport:
    def __init__(self, endpoint: Endpoint, timeout: Optional[float]) -> None:
        timeout = resolve_timeout(timeout)
        if not timeout or timeout <= 0:
            raise InvalidArgument("timeout must be a positive number of seconds")
        self.ep = endpoint
        self.timeout = float(timeout)

    def _timeout_error(self, what: str, t: float) -> Timeout:
        return Timeout(0, "timeout", f"{what}: no answer from the controller at {self.ep.where} "
                       f"within {t:g} s")

    def _conn_error(self, what: str, e: OSError) -> ConnectionFailed:
        return ConnectionFailed(0, "connection_failed", f"{what}: cannot reach the controller "
                                f"at {self.ep.where}: {e.strerror or e}")

    async def _connect(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        limit = MAX_HEADER_BYTES
        if self.ep.scheme == "unix":
            return await asyncio.open_unix_connection(self.ep.socket_path, limit=limit)
        ctx = ssl.create_default_context() if self.ep.scheme == "https" else None
        return await asyncio.open_connection(self.ep.host, self.ep.port, ssl=ctx, limit=limit)

    async def _head(self, method: str, path: str, headers: dict[str, str], body: Optional[bytes],
                    what: str) -> _Answer:
        reader, writer = await self._connect()
        try:
            writer.write(request_head(self.ep, method, path, headers) + (body or b""))
            await writer.drain()
            try:
                head = await reader.readuntil(b"\r\n\r\n")
            except asyncio.LimitOverrunError:
                raise ProtocolError(0, "protocol_error", f"{what}: an answer head over 64 KiB") from None
            except asyncio.IncompleteReadError:
                raise ConnectionFailed(0, "connection_failed",
                                       f"{what}: the controller closed the connection") from None
            status, h = parse_head(head[:-4], what)
            return _Answer(status, h, reader, writer, what)
        except BaseException:
            writer.close()
            raise

    async def open(self, method: str, path: str, body: Optional[bytes] = None,
                   headers: Optional[Mapping[str, str]] = None,
                   timeout: Optional[float] = None) -> _Answer:
        """A 2xx answer whose body is still to be read; any other raises the API's error."""
        t = timeout or self.timeout
        what = f"{method} {path}"
        h = dict(headers or {})
        h["Connection"] = "close"
        if body is not None or method in ("POST", "PUT"):
            h["Content-Length"] = str(len(body or b""))
        try:
            async with asyncio.timeout(t):
                ans = await self._head(method, path, h, body, what)
                if not 200 <= ans.status < 300:
                    try:
                        text = await ans.read_all(64 * 1024)
                    finally:
                        ans.close()
                    raise error_from_body(ans.status, text, what)
                return ans
        except TimeoutError:
            raise self._timeout_error(what, t) from None
        except OSError as e:
            raise self._conn_error(what, e) from None

    async def json(self, req: Req) -> Any:
        if req.method == "SLEEP":
            await asyncio.sleep(float(req.body))
            return None
        t = (req.timeout_s or self.timeout) + req.wait_s
        what = f"{req.method} {req.path}"
        h = {"Accept": "application/json", "Connection": "close"}
        body = None
        if req.body is not NO_BODY:
            body = json.dumps(req.body).encode("utf-8")
            h["Content-Type"] = "application/json"
        h.update(req.headers)
        if body is not None or req.method in ("POST", "PUT"):
            h["Content-Length"] = str(len(body or b""))
        try:
            async with asyncio.timeout(t):
                ans = await self._head(req.method, req.path, h, body, what)
                try:
                    text = await ans.read_all(MAX_JSON_BYTES)
                finally:
                    ans.close()
        except TimeoutError:
            raise self._timeout_error(what, t) from None
        except OSError as e:
            raise self._conn_error(what, e) from None
        if not (200 <= ans.status < 300 or ans.status in req.accept):
            raise error_from_body(ans.status, text, what)
        if ans.status == 204:
            return None  # No Content (a port's DELETE)
        return loads(text, what)

    async def drive(self, op: Op[T]) -> T:
        try:
            req = next(op)
            while True:
                try:
                    answer = await self.json(req)
                except BaseException as e:
                    req = op.throw(e)
                    continue
                req = op.send(answer)
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]

    async def events(self, path: str, timeout: Optional[float] = None) -> AsyncIterator[SseEvent]:
        t = timeout or self.timeout
        ans = await self.open("GET", path, headers={"Accept": "text/event-stream"}, timeout=t)
        idle = t + SSE_HEARTBEAT_S  # the server's heartbeat keeps a quiet stream talking
        try:
            parser = SseParser()
            while True:
                try:
                    async with asyncio.timeout(idle):
                        chunk = await ans.read1()
                except TimeoutError:
                    raise self._timeout_error(f"GET {path}", idle) from None
                except OSError as e:
                    raise self._conn_error(f"GET {path}", e) from None
                if not chunk:
                    return
                for ev in parser.feed(chunk):
                    yield ev
        finally:
            ans.close()

    async def upgrade(self, path: str) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        t = self.timeout
        what = f"GET {path} (WebSocket)"
        key = ws_key()
        try:
            async with asyncio.timeout(t):
                ans = await self._head("GET", path, ws_headers(key), None, what)
                if ans.status != 101:
                    try:
                        text = await ans.read_all(64 * 1024)
                    finally:
                        ans.close()
                    raise error_from_body(ans.status, text, what)
                if ans.headers.get("sec-websocket-accept") != ws_accept(key):
                    ans.close()
                    raise ProtocolError(101, "protocol_error", f"{what}: bad Sec-WebSocket-Accept")
                return ans.reader, ans.writer
        except TimeoutError:
            raise self._timeout_error(what, t) from None
        except OSError as e:
            raise self._conn_error(what, e) from None


class _AsyncWorkerTransport(_AsyncTransport):
    """One worker of a client with several: no answer is a WorkerUnavailable naming it."""

    def __init__(self, endpoint: Endpoint, timeout: float, worker: str, url: str) -> None:
        super().__init__(endpoint, timeout)
        self.worker = worker
        self.url = url

    def _conn_error(self, what: str, e: OSError) -> ConnectionFailed:
        return WorkerUnavailable(self.worker, self.url, os_reason(e))

    def _timeout_error(self, what: str, t: float) -> Timeout:
        return WorkerTimeout(self.worker, self.url, t)


class _AsyncNoRoute(NoRoute):
    async def drive(self, op: Op[T]) -> T:  # type: ignore[override]
        return super().drive(op)


async def _maybe_await(x: Any) -> None:
    if asyncio.iscoroutine(x) or isinstance(x, asyncio.Future):
        await x


async def _ws_once(t: _AsyncTransport, path: str, state: FollowState, end_key: str,
                   what: str) -> AsyncIterator[Item]:
    """One connection of a follow (see :func:`station_sandbox.client._ws_once`)."""
    reader, writer = await t.upgrade(path)
    parser = WsParser()

    async def send(opcode: int, payload: bytes) -> None:
        writer.write(ws_frame(opcode, payload))
        try:
            async with asyncio.timeout(t.timeout):
                await writer.drain()
        except TimeoutError:
            raise t._timeout_error(what, t.timeout) from None
        except OSError as e:
            raise t._conn_error(what, e) from None

    async def recv() -> bytes:
        for ping in (True, False):
            try:
                async with asyncio.timeout(t.timeout):
                    return await reader.read(256 * 1024)
            except TimeoutError:
                pass
            except OSError:
                return b""
            if ping:
                try:
                    await send(OP_PING, b"alive?")
                except ConnectionFailed:
                    return b""
        raise t._timeout_error(what, t.timeout)

    try:
        while True:
            data = await recv()
            if not data:
                return
            try:
                msgs = parser.feed(data)
            except ProtocolError as e:
                writer.write(ws_frame(OP_CLOSE, ws_close_payload(getattr(e, "close_code", 1002))))
                raise
            for m in msgs:
                items: list[Item] = []
                if m.kind == "binary":
                    items = state.binary(m.data, what)
                elif m.kind == "text":
                    items = state.text(m.data, end_key, what)
                elif m.kind == "ping":
                    await send(OP_PONG, m.data)
                elif m.kind == "close":
                    return
                for item in items:
                    yield item
                if state.end is not None:
                    return
    finally:
        try:
            if state.end is None:
                writer.write(ws_frame(OP_CLOSE, ws_close_payload(1000)))
        except (OSError, RuntimeError):
            pass
        writer.close()


async def _ws_follow(t: _AsyncTransport, base: str, state: FollowState, end_key: str,
                     again: Optional[Callable[[], Awaitable[Optional[list[Item]]]]] = None
                     ) -> AsyncIterator[Item]:
    """A run's output or a service's logs over WebSocket, opened again from where the follower
    stands (see :func:`station_sandbox.client._ws_follow`)."""
    what = f"GET {base}"
    failed = 0
    while True:
        before = state.progress
        try:
            async with contextlib.aclosing(_ws_once(t, state.path(base), state, end_key, what)) as it:
                async for item in it:
                    yield item
        except ConnectionFailed:
            if failed >= RETRIES:
                raise
        if state.end is not None:
            return
        failed = 0 if state.progress > before else failed + 1
        if failed > RETRIES:
            raise ProtocolError(0, "protocol_error", f"{what}: the stream ended {failed} times "
                                "without its end and without new output")
        if again is not None:
            rest = await again()
            if rest is not None:
                for item in rest:
                    yield item
                return
        await asyncio.sleep(0.1 * failed)


class AsyncOutputStream(AsyncIterator[Chunk]):
    """The chunks of a follow as an async iterator (see :class:`station_sandbox.OutputStream`):
    ``gaps`` lists the :class:`OutputGap` met so far; ``on_gap`` (a function or a coroutine
    function) gets each."""

    def __init__(self, items: AsyncIterator[Item], on_gap: Optional[AsyncGapCallback] = None,
                 gaps: Optional[list[OutputGap]] = None) -> None:
        self._items = items
        self._on_gap = on_gap
        self.gaps: list[OutputGap] = gaps if gaps is not None else []

    def __aiter__(self) -> "AsyncOutputStream":
        return self

    async def __anext__(self) -> Chunk:
        while True:
            item = await self._items.__anext__()
            if not isinstance(item, OutputGap):
                return item
            self.gaps.append(item)
            if self._on_gap is not None:
                await _maybe_await(self._on_gap(item))

    async def aclose(self) -> None:
        """Stops following (closes the connection)."""
        close = getattr(self._items, "aclose", None)
        if close is not None:
            await close()


class AsyncRunHandle:
    """A started command (see :class:`station_sandbox.RunHandle`)."""

    def __init__(self, workspace: "AsyncWorkspace", run: Run) -> None:
        self._ws = workspace
        self._t = workspace._t
        self.run = run
        self.gaps: list[OutputGap] = []

    @property
    def id(self) -> str:
        return self.run.id

    @property
    def status(self) -> str:
        return self.run.status

    async def refresh(self) -> Run:
        self.run = await self._t.drive(_ops.get_run(self._ws.id, self.id))
        return self.run

    async def wait(self, timeout_ms: Optional[int] = None) -> Run:
        self.run = await self._t.drive(_ops.wait_run(self._ws.id, self.id, timeout_ms))
        return self.run

    async def cancel(self) -> Run:
        self.run = await self._t.drive(_ops.cancel(self._ws.id, self.id))
        return self.run

    def follow(self, from_offset: Union[int, Mapping[str, int]] = 0,
               on_gap: Optional[AsyncGapCallback] = None) -> AsyncOutputStream:
        """``(stream, data, offset)`` chunks live until the run ends (``async for``); gaps as
        for :meth:`station_sandbox.RunHandle.follow`."""
        state = FollowState(dict(from_offset) if isinstance(from_offset, Mapping) else from_offset)
        path = ws_path(self._ws.id, f"/commands/{seg(self.id)}/output")

        async def items() -> AsyncIterator[Item]:
            async with contextlib.aclosing(_ws_follow(self._t, path, state, "run")) as it:
                async for item in it:
                    yield item
            await self.refresh()
        return AsyncOutputStream(items(), on_gap, self.gaps)

    def __repr__(self) -> str:
        return f"AsyncRunHandle(id={self.id!r}, status={self.status!r})"


class AsyncServices:
    def __init__(self, workspace: "AsyncWorkspace") -> None:
        self._ws = workspace
        self._t = workspace._t

    async def start(self, name: str, command: str,
                    restart: Union[str, Mapping[str, Any], None] = None, *,
                    max_restarts: Optional[int] = None, delay_ms: Optional[int] = None,
                    backoff: Optional[Mapping[str, Any]] = None, cwd: Optional[str] = None,
                    env: Optional[Mapping[str, str]] = None,
                    stop_signal: Union[str, int, None] = None,
                    stop_timeout_ms: Optional[int] = None,
                    autostart: Optional[bool] = None,
                    idempotency_key: Optional[str] = None) -> Service:
        body = _ops.service_body(name, command, restart, max_restarts, delay_ms, backoff, cwd, env,
                                 stop_signal, stop_timeout_ms, autostart)
        return Service(await self._t.drive(_ops.create(ws_path(self._ws.id, "/services"), body,
                                                       idempotency_key)))

    async def get(self, name: str) -> Service:
        return Service(await self._t.drive(_ops.simple("GET", _ops.svc_path(self._ws.id, name))))

    async def list(self) -> list[Service]:
        doc = await self._t.drive(_ops.simple("GET", ws_path(self._ws.id, "/services")))
        return [Service(s) for s in _ops.list_of(doc, "services", "GET services")]

    async def stop(self, name: str, timeout: float = 60.0) -> Service:
        return await self._t.drive(_ops.stop_service(self._ws.id, name, timeout))

    async def restart(self, name: str) -> Service:
        return Service(await self._t.drive(_ops.simple("POST", _ops.svc_path(self._ws.id, name, "/restart"))))

    async def delete(self, name: str) -> dict[str, Any]:
        return await self._t.drive(_ops.simple("DELETE", _ops.svc_path(self._ws.id, name)))  # type: ignore[no-any-return]

    async def wait(self, name: str, predicate: Callable[[Service], bool],
                   timeout: float = 60.0) -> Service:
        deadline = time.monotonic() + timeout
        while True:
            svc = await self.get(name)
            if predicate(svc):
                return svc
            if time.monotonic() > deadline:
                raise Timeout(0, "timeout", f"service {name!r}: condition not met within "
                              f"{timeout:g} s (state {svc.state})")
            await asyncio.sleep(_ops.POLL_S)

    def logs(self, name: str, attempt: Optional[int] = None, follow: bool = False,
             on_gap: Optional[AsyncGapCallback] = None) -> AsyncOutputStream:
        """A service's output as an async iterator (see
        :meth:`station_sandbox.client.Services.logs`)."""
        if attempt is not None:
            return AsyncOutputStream(self._attempt_items(name, attempt), on_gap)
        return AsyncOutputStream(self._log_items(name, follow), on_gap)

    async def _attempt_items(self, name: str, number: int,
                             state: Optional[FollowState] = None) -> AsyncIterator[Item]:
        for item in await self._stored(name, number, state or FollowState()):
            yield item

    async def _stored(self, name: str, number: int, state: FollowState) -> list[Item]:
        svc = await self.get(name)
        found = [a for a in svc.attempts if a.number == number]
        if not found:
            raise NotFound(404, "not_found", f"service {name!r} has no attempt {number}")
        return state.stored(_ops.attempt_parts(found[0]))

    async def _log_items(self, name: str, follow: bool) -> AsyncIterator[Item]:
        path = _ops.svc_path(self._ws.id, name, "/logs" + query({"follow": follow}))
        state = FollowState()
        number = None
        if follow:
            number = (await self._t.drive(_ops.wait_attempt(self._ws.id, name, self._t.timeout))).current_attempt

        async def again() -> Optional[list[Item]]:
            if number is None:
                return None
            svc = await self.get(name)
            if svc.current_attempt == number:
                return None
            if not any(a.number == number and a.state == "ended" for a in svc.attempts):
                return []
            return await self._stored(name, number, state)
        async with contextlib.aclosing(_ws_follow(self._t, path, state, "service", again)) as it:
            async for item in it:
                yield item


class AsyncTerminal(TerminalInfo):
    """A terminal session over WebSocket (see :class:`station_sandbox.Terminal`)."""

    def __init__(self, terminals: "AsyncTerminals", info: Any, reader: asyncio.StreamReader,
                 writer: asyncio.StreamWriter) -> None:
        self._load(info)
        self._terms = terminals
        self._t = terminals._t
        self._reader, self._writer = reader, writer
        self._parser = WsParser()
        self._pending: list[bytes] = []
        self._closed = False
        self._detached = False
        self._close_code: Optional[int] = None
        self.gap_bytes = 0
        self.exit: Optional[dict[str, Any]] = None

    async def __aenter__(self) -> "AsyncTerminal":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    async def _send(self, opcode: int, payload: bytes) -> None:
        if self._closed:
            raise ConnectionFailed(0, "connection_failed", f"terminal {self.id}: the session is closed")
        self._writer.write(ws_frame(opcode, payload))
        try:
            async with asyncio.timeout(self._t.timeout):
                await self._writer.drain()
        except TimeoutError:
            raise self._t._timeout_error(f"terminal {self.id}", self._t.timeout) from None
        except OSError as e:
            raise self._t._conn_error(f"terminal {self.id}", e) from None

    async def send(self, data: Union[str, bytes]) -> None:
        await self._send(OP_BINARY, data.encode("utf-8") if isinstance(data, str) else bytes(data))

    async def resize(self, cols: int, rows: int) -> None:
        await self._send(OP_TEXT, json.dumps({"type": "resize", "cols": cols, "rows": rows}).encode())
        self.cols, self.rows = cols, rows

    async def _shut(self, code: Optional[int]) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            self._writer.write(ws_frame(OP_CLOSE, ws_close_payload(code or 1000)))
            async with asyncio.timeout(1.0):
                await self._writer.drain()
        except (OSError, TimeoutError):
            pass
        self._writer.close()

    async def _recv(self, timeout: float) -> bool:
        try:
            async with asyncio.timeout(timeout):
                data = await self._reader.read(65536)
        except TimeoutError:
            return False
        except OSError as e:
            raise self._t._conn_error(f"terminal {self.id}", e) from None
        if not data:
            self._closed = True
            self._writer.close()
            return True
        try:
            msgs = self._parser.feed(data)
        except ProtocolError as e:
            await self._shut(getattr(e, "close_code", 1002))
            raise
        for m in msgs:
            if m.kind == "binary":
                self._pending.append(m.data)
            elif m.kind == "text":
                self._text(m.data)
            elif m.kind == "ping":
                await self._send(OP_PONG, m.data)
            elif m.kind == "close":
                self._close_code = m.code
                await self._shut(m.code)
        return True

    def _text(self, data: bytes) -> None:
        try:
            m = json.loads(data.decode("utf-8"))
        except ValueError:
            return
        if not isinstance(m, dict):
            return
        if m.get("type") == "gap" and isinstance(m.get("bytes"), int):
            self.gap_bytes += m["bytes"]
        elif m.get("type") == "exit":
            self.exit = {"exitCode": m.get("exitCode"), "signal": m.get("signal"),
                         "state": m.get("state")}
            self.state = str(m.get("state") or "exited")
            self.exit_code = m.get("exitCode")
            self.signal = m.get("signal")
        elif m.get("type") == "error":
            raise error_from_event(m.get("error"), f"terminal {self.id}")

    async def read(self, timeout: Optional[float] = None) -> bytes:
        t = self._t.timeout if timeout is None else timeout
        deadline = time.monotonic() + t
        while not self._pending and not self._closed:
            left = deadline - time.monotonic()
            if left <= 0 or not await self._recv(left):
                raise Timeout(0, "timeout", f"terminal {self.id}: no output within {t:g} s")
        if self._pending:
            out = b"".join(self._pending)
            self._pending.clear()
            return out
        if self.exit is None and not self._detached:
            how = "" if self._close_code is None else f" (close code {self._close_code})"
            raise ConnectionFailed(0, "connection_failed", f"terminal {self.id}: the session "
                                   f"ended before the terminal did{how}: the controller went "
                                   "away or closed it; the terminal may still run (attach again)")
        return b""

    async def expect(self, pattern: Union[str, bytes], timeout: Optional[float] = None) -> bytes:
        pat = pattern.encode("utf-8") if isinstance(pattern, str) else pattern
        t = self._t.timeout if timeout is None else timeout
        deadline = time.monotonic() + t
        buf = b""
        while pat not in buf:
            left = deadline - time.monotonic()
            try:
                if left <= 0:
                    raise Timeout(0, "timeout", "")
                chunk = await self.read(left)
            except Timeout:
                raise Timeout(0, "timeout", f"terminal {self.id}: {pat!r} not seen within "
                              f"{t:g} s; got {buf[-200:]!r}") from None
            if not chunk:
                raise ProtocolError(0, "protocol_error", f"terminal {self.id} ended before "
                                    f"{pat!r}; got {buf[-200:]!r}")
            buf += chunk
        cut = buf.index(pat) + len(pat)
        if cut < len(buf):
            self._pending.insert(0, buf[cut:])
        return buf[:cut]

    def __aiter__(self) -> AsyncIterator[bytes]:
        return self._iter()

    async def _iter(self) -> AsyncIterator[bytes]:
        while True:
            try:
                chunk = await self.read()
            except Timeout:
                await self._send(OP_PING, b"alive?")
                if not await self._recv(self._t.timeout):
                    raise
                continue
            if not chunk:
                return
            yield chunk

    async def close(self) -> None:
        """Detaches; the terminal keeps running."""
        self._detached = True
        await self._shut(1000)

    async def kill(self) -> TerminalInfo:
        """Force-closes the terminal."""
        await self.close()
        return await self._terms.kill(self.id)


class AsyncTerminals:
    def __init__(self, workspace: "AsyncWorkspace") -> None:
        self._ws = workspace
        self._t = workspace._t

    async def create(self, cols: int = 80, rows: int = 24, command: Optional[str] = None,
                     cwd: Optional[str] = None,
                     env: Optional[Mapping[str, str]] = None,
                     idempotency_key: Optional[str] = None) -> AsyncTerminal:
        body = _ops.defined(cols=cols, rows=rows, command=command, cwd=cwd,
                            env=dict(env) if env is not None else None)
        doc = await self._t.drive(_ops.create(ws_path(self._ws.id, "/terminals"), body,
                                            idempotency_key, wait_s=5))
        return await self._attach(doc, False)

    async def attach(self, terminal_id: str, read_only: bool = False) -> AsyncTerminal:
        path = ws_path(self._ws.id, f"/terminals/{seg(terminal_id)}")
        return await self._attach(await self._t.drive(_ops.simple("GET", path)), read_only)

    async def _attach(self, doc: Any, read_only: bool) -> AsyncTerminal:
        info = TerminalInfo(doc)
        path = ws_path(self._ws.id, f"/terminals/{seg(info.id)}/attach" + query({"readOnly": read_only}))
        reader, writer = await self._t.upgrade(path)
        return AsyncTerminal(self, doc, reader, writer)

    async def get(self, terminal_id: str) -> TerminalInfo:
        path = ws_path(self._ws.id, f"/terminals/{seg(terminal_id)}")
        return TerminalInfo(await self._t.drive(_ops.simple("GET", path)))

    async def list(self) -> list[TerminalInfo]:
        doc = await self._t.drive(_ops.simple("GET", ws_path(self._ws.id, "/terminals")))
        return [TerminalInfo(x) for x in _ops.list_of(doc, "terminals", "GET terminals")]

    async def resize(self, terminal_id: str, cols: int, rows: int) -> TerminalInfo:
        path = ws_path(self._ws.id, f"/terminals/{seg(terminal_id)}/resize")
        return TerminalInfo(await self._t.drive(_ops.simple("POST", path, {"cols": cols, "rows": rows})))

    async def kill(self, terminal_id: str) -> TerminalInfo:
        path = ws_path(self._ws.id, f"/terminals/{seg(terminal_id)}")
        return TerminalInfo(await self._t.drive(_ops.simple("DELETE", path, wait_s=10)))


class AsyncFiles:
    """A workspace's files (see :class:`station_sandbox.Files`); bodies in memory."""

    def __init__(self, workspace: "AsyncWorkspace") -> None:
        self._ws = workspace
        self._t = workspace._t

    def _p(self, rest: str, path: Union[str, bytes], **q: Any) -> str:
        return ws_path(self._ws.id, f"{rest}?path={file_query(path)}" + query(q).replace("?", "&", 1))

    async def stat(self, path: Union[str, bytes]) -> FileEntry:
        return await self._t.drive(_ops.simple("GET", self._p("/files/stat", path)))  # type: ignore[no-any-return]

    async def list(self, path: Union[str, bytes] = ".") -> FileList:
        return await self._t.drive(_ops.simple("GET", self._p("/files/list", path)))  # type: ignore[no-any-return]

    async def read(self, path: Union[str, bytes], max_bytes: int = 64 * 1024 * 1024) -> bytes:
        ans = await self._t.open("GET", self._p("/files", path, maxBytes=max_bytes),
                                 headers={"Accept": "*/*"})
        try:
            async with asyncio.timeout(self._t.timeout):
                return await ans.read_all(max_bytes)
        except TimeoutError:
            raise self._t._timeout_error(f"read {path!r}", self._t.timeout) from None
        finally:
            ans.close()

    async def read_text(self, path: Union[str, bytes], max_bytes: int = 64 * 1024 * 1024) -> str:
        return (await self.read(path, max_bytes)).decode("utf-8")

    async def write(self, path: Union[str, bytes], data: Union[str, bytes],
                    mode: Union[str, int, None] = None, parents: bool = False,
                    exclusive: bool = False, if_match: Optional[str] = None) -> FileEntry:
        body = data.encode("utf-8") if isinstance(data, str) else bytes(data)
        q = self._p("/files", path, mode=None if mode is None else octal_mode(mode),
                    parents=parents, exclusive=exclusive)
        headers = {"Content-Type": "application/octet-stream", "Accept": "application/json"}
        if if_match is not None:
            if any(c in if_match for c in "\r\n\0"):
                raise InvalidArgument("if_match holds a line break or NUL")
            headers["If-Match"] = if_match
        ans = await self._t.open("PUT", q, body=body, headers=headers)
        try:
            async with asyncio.timeout(self._t.timeout):
                return loads(await ans.read_all(1024 * 1024), f"PUT {path!r}")  # type: ignore[no-any-return]
        except TimeoutError:
            raise self._t._timeout_error(f"write {path!r}", self._t.timeout) from None
        finally:
            ans.close()

    async def mkdir(self, path: str, parents: bool = False,
                    mode: Union[str, int, None] = None) -> FileEntry:
        body = _ops.defined(path=path, parents=parents,
                            mode=None if mode is None else octal_mode(mode))
        return await self._t.drive(_ops.simple("POST", ws_path(self._ws.id, "/files/mkdir"), body))  # type: ignore[no-any-return]

    async def rename(self, src: str, dst: str, overwrite: bool = True) -> FileEntry:
        body = {"from": src, "to": dst, "overwrite": overwrite}
        return await self._t.drive(_ops.simple("POST", ws_path(self._ws.id, "/files/rename"), body))  # type: ignore[no-any-return]

    async def remove(self, path: Union[str, bytes], recursive: bool = False) -> dict[str, Any]:
        return await self._t.drive(_ops.simple("DELETE", self._p("/files", path, recursive=recursive)))  # type: ignore[no-any-return]

    async def exists(self, path: Union[str, bytes]) -> bool:
        try:
            await self.stat(path)
            return True
        except NotFound:
            return False


class AsyncSecrets:
    def __init__(self, workspace: "AsyncWorkspace") -> None:
        self._ws = workspace
        self._t = workspace._t

    async def set(self, name: str, value: str, host: Optional[str] = None,
                  username: Optional[str] = None, expires_at: Optional[str] = None) -> Secret:
        body = _ops.defined(value=value, host=host, username=username, expiresAt=expires_at)
        return await self._t.drive(_ops.simple("PUT", ws_path(self._ws.id, f"/secrets/{seg(name)}"), body))  # type: ignore[no-any-return]

    async def get(self, name: str) -> Secret:
        return await self._t.drive(_ops.simple("GET", ws_path(self._ws.id, f"/secrets/{seg(name)}")))  # type: ignore[no-any-return]

    async def list(self) -> list[Secret]:
        doc = await self._t.drive(_ops.simple("GET", ws_path(self._ws.id, "/secrets")))
        return _ops.list_of(doc, "secrets", "GET secrets")

    async def delete(self, name: str) -> dict[str, Any]:
        return await self._t.drive(_ops.simple("DELETE", ws_path(self._ws.id, f"/secrets/{seg(name)}")))  # type: ignore[no-any-return]


class AsyncPorts:
    """A workspace's previews (see :class:`station_sandbox.Ports`)."""

    def __init__(self, workspace: "AsyncWorkspace") -> None:
        self._ws = workspace
        self._t = workspace._t

    async def expose(self, port: int, public: bool = False,
                     expires_in_ms: Optional[int] = None) -> PortExposure:
        return await self._t.drive(_ops.port_expose(self._ws.id, port, public, expires_in_ms))  # type: ignore[no-any-return]

    async def list(self) -> PortList:
        return await self._t.drive(_ops.port_list(self._ws.id))  # type: ignore[no-any-return]

    async def revoke(self, port: int) -> None:
        await self._t.drive(_ops.port_revoke(self._ws.id, port))


AsyncTextCallback = Callable[[str], Union[None, Awaitable[None]]]


class AsyncCodeContext(ContextInfo):
    """A code context (see :class:`station_sandbox.CodeContext`): ``await execute(code)``."""

    def __init__(self, workspace: "AsyncWorkspace", doc: Any) -> None:
        self.__dict__.update(ContextInfo.from_doc(doc).__dict__)
        self._ws = workspace
        self._t = workspace._t

    def _path(self, rest: str = "") -> str:
        return _ops.context_path(self._ws.id, self.id, rest)

    def _load(self, doc: Any) -> "AsyncCodeContext":
        self.__dict__.update(ContextInfo.from_doc(doc).__dict__)
        return self

    async def refresh(self) -> "AsyncCodeContext":
        return self._load(await self._t.drive(_ops.simple("GET", self._path())))

    async def execute(self, code: str, on_stdout: Optional[AsyncTextCallback] = None,
                      on_stderr: Optional[AsyncTextCallback] = None,
                      timeout_ms: Optional[int] = None) -> Execution:
        """Runs a cell and returns it ended (see
        :meth:`station_sandbox.CodeContext.execute`); ``on_stdout``/``on_stderr`` (functions
        or coroutine functions) get its output live as text."""
        live = on_stdout is not None or on_stderr is not None
        e = Execution.from_doc(await self._t.drive(
            _ops.context_execute(self._ws.id, self.id, code, timeout_ms, live)))
        cbs = {"stdout": on_stdout, "stderr": on_stderr}
        if live and not e.done:
            await self._follow(e.id, cbs)
        elif live:
            for stream, out in (("stdout", e.stdout), ("stderr", e.stderr)):
                await self._hand(cbs[stream], out)
        while not e.done:
            e = await self.execution(e.id, wait_ms=_ops.SERVER_WAIT_CAP_MS)
        return e

    @staticmethod
    async def _hand(cb: Optional[AsyncTextCallback], piece: Union[str, bytes]) -> None:
        if cb is not None and piece:
            await _maybe_await(cb(piece if isinstance(piece, str) else
                                  piece.decode("utf-8", "replace")))

    async def _follow(self, eid: str, cbs: Mapping[str, Optional[AsyncTextCallback]]) -> None:
        path = self._path(f"/executions/{seg(eid)}/output")
        text = {"stdout": TextStream(), "stderr": TextStream()}
        items = _ws_follow(self._t, path, FollowState(0), "run")
        async with contextlib.aclosing(items):
            async for stream, data, offset in AsyncOutputStream(items):
                for piece, _ in text[stream].feed(data, offset):
                    await self._hand(cbs[stream], piece)
        for stream, cb in cbs.items():
            for piece, _ in text[stream].flush():
                await self._hand(cb, piece)

    async def execution(self, execution_id: str, wait_ms: Optional[int] = None) -> Execution:
        """One execution; with ``wait_ms`` the answer waits that long for it to end."""
        return Execution.from_doc(await self._t.drive(_ops.simple(
            "GET", self._path(f"/executions/{seg(execution_id)}{query({'waitMs': wait_ms})}"),
            wait_s=(wait_ms or 0) / 1000)))

    async def executions(self) -> list[Execution]:
        """The context's executions, newest first."""
        doc = await self._t.drive(_ops.simple("GET", self._path("/executions")))
        return [Execution.from_doc(e) for e in _ops.list_of(doc, "executions", "GET executions")]

    async def interrupt(self) -> Execution:
        """Interrupts the running cell and returns it ended (``interrupted``). Conflict when
        no cell runs."""
        return Execution.from_doc(await self._t.drive(
            _ops.simple("POST", self._path("/interrupt"), wait_s=10)))

    async def restart(self) -> "AsyncCodeContext":
        """A new interpreter: its variables are gone, the state ``idle``."""
        return self._load(await self._t.drive(_ops.context_restart(self._ws.id, self.id)))

    async def delete(self) -> None:
        await self._t.drive(_ops.simple("DELETE", self._path()))
        self.state = "deleted"

    def __repr__(self) -> str:
        return f"AsyncCodeContext(id={self.id!r}, language={self.language!r}, state={self.state!r})"


class AsyncContexts:
    """A workspace's code contexts (see :class:`station_sandbox.Contexts`)."""

    def __init__(self, workspace: "AsyncWorkspace") -> None:
        self._ws = workspace
        self._t = workspace._t

    async def create(self, language: str = "python", cwd: Optional[str] = None,
                     env: Optional[Mapping[str, str]] = None) -> AsyncCodeContext:
        """A new context once its interpreter answers (see
        :meth:`station_sandbox.Contexts.create`)."""
        return AsyncCodeContext(self._ws, await self._t.drive(
            _ops.context_create(self._ws.id, language, cwd, env)))

    async def get(self, context_id: str) -> AsyncCodeContext:
        return AsyncCodeContext(self._ws, await self._t.drive(_ops.simple(
            "GET", _ops.context_path(self._ws.id, context_id))))

    async def list(self) -> list[AsyncCodeContext]:
        doc = await self._t.drive(_ops.simple("GET", ws_path(self._ws.id, "/contexts")))
        return [AsyncCodeContext(self._ws, c) for c in _ops.list_of(doc, "contexts", "GET contexts")]


class AsyncWorkspace(WorkspaceInfo):
    """A workspace (see :class:`station_sandbox.Workspace`)."""

    def __init__(self, client: "AsyncClient", doc: Any) -> None:
        self._load(doc)
        self._client = client
        self._t = client._transport_of(self.id)
        self.services = AsyncServices(self)
        self.terminals = AsyncTerminals(self)
        self.files = AsyncFiles(self)
        self.secrets = AsyncSecrets(self)
        self.ports = AsyncPorts(self)
        self.contexts = AsyncContexts(self)

    async def __aenter__(self) -> "AsyncWorkspace":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        try:
            await self.delete()
        except StationError:
            if exc[0] is None:
                raise

    async def refresh(self) -> "AsyncWorkspace":
        self._load(await self._t.drive(_ops.simple("GET", ws_path(self.id))))
        return self

    async def delete(self) -> dict[str, Any]:
        doc = await self._t.drive(_ops.simple("DELETE", ws_path(self.id), wait_s=60))
        self.state = "deleted"
        return doc  # type: ignore[no-any-return]

    async def restart(self) -> "AsyncWorkspace":
        self._load(await self._t.drive(_ops.simple("POST", ws_path(self.id, "/restart"), wait_s=60)))
        return self

    async def update(self, name: Any = _ops.UNSET,
                     labels: Optional[Mapping[str, Optional[str]]] = None) -> "AsyncWorkspace":
        """See :meth:`station_sandbox.client.Workspace.update`."""
        self._load(await self._t.drive(_ops.simple("PATCH", ws_path(self.id), _ops.update_body(name, labels))))
        return self

    async def start(self, command: str, cwd: Optional[str] = None,
                    env: Optional[Mapping[str, str]] = None, stdin: Union[str, bytes, None] = None,
                    timeout_ms: Optional[int] = None,
                    max_output_bytes: Optional[int] = None,
                    idempotency_key: Optional[str] = None) -> AsyncRunHandle:
        body = _ops.command_body(command, cwd, env, stdin, timeout_ms, max_output_bytes)
        return AsyncRunHandle(self, await self._t.drive(_ops.start(self.id, body, key=idempotency_key)))

    async def run(self, command: str, cwd: Optional[str] = None,
                  env: Optional[Mapping[str, str]] = None, stdin: Union[str, bytes, None] = None,
                  timeout_ms: Optional[int] = None, max_output_bytes: Optional[int] = None,
                  on_stdout: Optional[AsyncOutputCallback] = None,
                  on_stderr: Optional[AsyncOutputCallback] = None,
                  on_gap: Optional[AsyncGapCallback] = None,
                  idempotency_key: Optional[str] = None) -> Run:
        """The terminal :class:`Run`; callbacks (plain functions or coroutines) get
        ``(data, offset)`` live, every kept byte exactly once, and ``on_gap`` each
        :class:`OutputGap` (see :meth:`station_sandbox.Workspace.run`)."""
        body = _ops.command_body(command, cwd, env, stdin, timeout_ms, max_output_bytes)
        if on_stdout is None and on_stderr is None:
            return await self._t.drive(_ops.run(self.id, body, idempotency_key))
        h = AsyncRunHandle(self, await self._t.drive(_ops.start(self.id, body, key=idempotency_key)))
        text = {"stdout": TextStream(), "stderr": TextStream()}
        cbs = {"stdout": on_stdout, "stderr": on_stderr}
        async for stream, data, offset in h.follow(on_gap=on_gap):
            cb = cbs[stream]
            for piece, at in text[stream].feed(data, offset):
                if cb is not None:
                    await _maybe_await(cb(piece, at))
        for stream, cb in cbs.items():
            for piece, at in text[stream].flush():
                if cb is not None:
                    await _maybe_await(cb(piece, at))
        if not h.run.done:
            await h.wait()
        h.run.gaps = h.gaps
        return h.run

    async def run_handle(self, run_id: str) -> AsyncRunHandle:
        return AsyncRunHandle(self, await self._t.drive(_ops.get_run(self.id, run_id)))

    async def runs(self, limit: Optional[int] = None) -> list[Run]:
        doc = await self._t.drive(_ops.simple("GET", ws_path(self.id, "/commands" + query({"limit": limit}))))
        return [Run(r) for r in _ops.list_of(doc, "commands", "GET commands")]

    async def get_network(self) -> Network:
        return await self._t.drive(_ops.simple("GET", ws_path(self.id, "/network")))  # type: ignore[no-any-return]

    async def set_egress(self, egress: Mapping[str, Any]) -> Network:
        return await self._t.drive(_ops.simple("PUT", ws_path(self.id, "/network"), {"egress": dict(egress)}))  # type: ignore[no-any-return]

    @overload
    async def usage(self) -> dict[str, Any]: ...
    @overload
    async def usage(self, since: UsageSince, step: Optional[UsageStep] = None) -> UsageHistory: ...
    @overload
    async def usage(self, *, step: UsageStep) -> UsageHistory: ...

    async def usage(self, since: Optional[UsageSince] = None,
                    step: Optional[UsageStep] = None) -> Union[dict[str, Any], UsageHistory]:
        """See :meth:`station_sandbox.Workspace.usage`."""
        if since is None and step is None:
            return await self._t.drive(_ops.simple("GET", ws_path(self.id, "/usage"), wait_s=3))  # type: ignore[no-any-return]
        return await self._t.drive(_ops.usage_history(ws_path(self.id, "/usage"), since, step))  # type: ignore[no-any-return]

    async def pause(self) -> "AsyncWorkspace":
        """Freezes every process of the workspace; its run timeouts and idle time stop. Files
        are still read; a command, terminal, file write or service start raises
        :class:`Paused` (409) until :meth:`resume`, unless it was created with
        ``auto_resume``. Pausing a paused workspace changes nothing."""
        self._load(await self._t.drive(_ops.simple("POST", ws_path(self.id, "/pause"), wait_s=60)))
        return self

    async def resume(self) -> "AsyncWorkspace":
        """Thaws a paused workspace: its processes and clocks go on (``state`` ``ready``)."""
        self._load(await self._t.drive(_ops.simple("POST", ws_path(self.id, "/resume"), wait_s=60)))
        return self

    async def snapshot(self, name: Optional[str] = None, memory: bool = False) -> Snapshot:
        """Keeps HOME and the root filesystem's changes (a host workspace: its directory) as a
        snapshot, the workspace paused while they are read. ``memory``: the processes too
        (501 naming what the worker lacks where it cannot). ``client.workspaces.create(
        snapshot=s["id"])`` starts a workspace from it."""
        return await self._t.drive(_ops.snapshot_create(self.id, name, memory))  # type: ignore[no-any-return]

    async def fork(self, n: int = 1) -> list["AsyncWorkspace"]:
        """One snapshot of this workspace, then ``n`` (1 to 100) workspaces made from it, each
        independent from then on. The new workspaces, ``ready``; delete them when done."""
        doc = await self._t.drive(_ops.fork(self.id, n))
        return [AsyncWorkspace(self._client, w) for w in doc["workspaces"]]


class AsyncWorkspaces:
    def __init__(self, client: "AsyncClient") -> None:
        self._client = client
        self._t = client._t

    async def create(self, adapter: Optional[str] = None, image: Optional[str] = None,
                     env: Optional[Mapping[str, str]] = None, cpus: Optional[float] = None,
                     memory_mb: Optional[int] = None, pids_limit: Optional[int] = None,
                     network: Optional[str] = None, seccomp_profile: Optional[str] = None,
                     egress: Optional[Mapping[str, Any]] = None,
                     timeout: float = 120.0, worker: Optional[str] = None,
                     idle_timeout_ms: Optional[int] = None,
                     idempotency_key: Optional[str] = None, retries: int = 2,
                     snapshot: Optional[str] = None, auto_resume: Optional[bool] = None,
                     idle_action: Optional[str] = None, name: Optional[str] = None,
                     labels: Optional[Mapping[str, str]] = None) -> AsyncWorkspace:
        body = _ops.create_body(adapter, image, env, cpus, memory_mb, pids_limit, network,
                                seccomp_profile, egress, idle_timeout_ms, snapshot, auto_resume,
                                idle_action, name, labels)
        if snapshot is not None and self._client._routes is not None:
            worker = _create_worker(snapshot, worker)
        t = await self._client._create_transport(worker)
        return AsyncWorkspace(self._client, await t.drive(
            _ops.create("/v1/workspaces", body, idempotency_key, retries, timeout_s=timeout)))

    async def get(self, workspace_id: str) -> AsyncWorkspace:
        """A workspace by its id or its name (see :meth:`station_sandbox.client.Workspaces.get`)."""
        t = await self._client._route(workspace_id)
        return AsyncWorkspace(self._client, await t.drive(_ops.simple("GET", ws_path(workspace_id))))

    async def update(self, workspace_id: str, name: Any = _ops.UNSET,
                     labels: Optional[Mapping[str, Optional[str]]] = None) -> AsyncWorkspace:
        """See :meth:`station_sandbox.client.Workspaces.update`."""
        body = _ops.update_body(name, labels)
        t = await self._client._route(workspace_id)
        return AsyncWorkspace(self._client, await t.drive(_ops.simple("PATCH", ws_path(workspace_id), body)))

    async def list(self, labels: Union[Mapping[str, Optional[str]], Iterable[str], None] = None,
                   name: Optional[str] = None, state: Optional[str] = None) -> WorkspaceList:
        """Every workspace, or those matching the filters; with several workers of all at once
        (asyncio.gather), and ``unreachable`` (see
        :meth:`station_sandbox.client.Workspaces.list`)."""
        path = _ops.list_path(labels, name, state)
        routes = self._client._routes
        if routes is None:
            doc = await self._t.drive(_ops.simple("GET", path))
            return WorkspaceList(AsyncWorkspace(self._client, w)
                                 for w in _ops.list_of(doc, "workspaces", "GET /v1/workspaces"))

        async def one(t: _AsyncWorkerTransport) -> Any:
            try:
                doc = await t.drive(_ops.simple("GET", path))
                return _ops.list_of(doc, "workspaces", "GET /v1/workspaces")
            except StationError as e:
                return e

        answers = await asyncio.gather(*(one(t) for t in routes.values()))
        out = WorkspaceList()
        for t, a in zip(routes.values(), answers):
            if isinstance(a, BaseException):
                out.unreachable.append(_unreachable_of(t.worker, t.url, a))
            else:
                out.extend(AsyncWorkspace(self._client, w) for w in a)
        if len(out.unreachable) == len(routes):
            raise _none_answered(out.unreachable)
        return out


class AsyncImages:
    def __init__(self, client: "AsyncClient") -> None:
        self._t = client._t

    async def list(self) -> list[Image]:
        return _ops.list_of(await self._t.drive(_ops.simple("GET", "/v1/images")), "images", "GET /v1/images")

    async def get(self, digest: str) -> Image:
        return await self._t.drive(_ops.simple("GET", f"/v1/images/{seg(digest)}"))  # type: ignore[no-any-return]

    async def import_path(self, path: str, name: Optional[str] = None,
                          timeout: float = 600.0) -> Image:
        body = _ops.defined(path=path, name=name)
        return await self._t.drive(_ops.simple("POST", "/v1/images", body, timeout_s=timeout))  # type: ignore[no-any-return]

    async def pull(self, reference: str, registry: Optional[str] = None,
                   plain_http: bool = False, timeout: float = 600.0) -> Image:
        body = _ops.defined(reference=reference, registry=registry, plainHttp=plain_http or None)
        return await self._t.drive(_ops.simple("POST", "/v1/images", body, timeout_s=timeout))  # type: ignore[no-any-return]

    async def delete(self, digest: str) -> dict[str, Any]:
        return await self._t.drive(_ops.simple("DELETE", f"/v1/images/{seg(digest)}"))  # type: ignore[no-any-return]

    async def export(self, digest: str, dest: BinaryIO) -> int:
        """Streams the image as an OCI image layout tar into ``dest`` (see
        :meth:`station_sandbox.Images.export`); the bytes written. The timeout holds for each
        wait for more bytes, not for the whole image."""
        ans = await self._t.open("GET", f"/v1/images/{seg(digest)}/export",
                                 headers={"Accept": "application/x-tar"})
        n = 0
        try:
            while True:
                async with asyncio.timeout(self._t.timeout):
                    c = await ans.read1()
                if not c:
                    return n
                dest.write(c)
                n += len(c)
        except TimeoutError:
            raise self._t._timeout_error(f"export {digest}", self._t.timeout) from None
        finally:
            ans.close()


class AsyncSnapshots:
    """Snapshots, newest first; routed by their ids with several workers (see
    :class:`station_sandbox.client.Snapshots`)."""

    def __init__(self, client: "AsyncClient") -> None:
        self._client = client
        self._t = client._t

    async def list(self) -> SnapshotList:
        """Every snapshot; with several workers of all at once (asyncio.gather), and
        ``unreachable`` (see :meth:`station_sandbox.client.Snapshots.list`)."""
        routes = self._client._routes
        if routes is None:
            doc = await self._t.drive(_ops.simple("GET", "/v1/snapshots"))
            return SnapshotList(_ops.list_of(doc, "snapshots", "GET /v1/snapshots"))

        async def one(t: _AsyncWorkerTransport) -> Any:
            try:
                doc = await t.drive(_ops.simple("GET", "/v1/snapshots"))
                return _ops.list_of(doc, "snapshots", "GET /v1/snapshots")
            except StationError as e:
                return e

        answers = await asyncio.gather(*(one(t) for t in routes.values()))
        return _snapshots_of(list(routes.values()), answers)

    def _route(self, snapshot_id: str) -> Any:
        return _snapshot_route(self._client._routes, self._client._source, self._t, snapshot_id)

    async def get(self, snapshot_id: str) -> Snapshot:
        """:class:`NotFound` for an unknown id (or another tenant's)."""
        t = self._route(snapshot_id)
        return await t.drive(_ops.simple("GET", _ops.snapshot_path(snapshot_id)))  # type: ignore[no-any-return]

    async def delete(self, snapshot_id: str) -> None:
        """Deletes the snapshot and its image; :class:`Conflict` while a workspace runs on
        it."""
        t = self._route(snapshot_id)
        await t.drive(_ops.simple("DELETE", _ops.snapshot_path(snapshot_id)))


class AsyncTokens:
    """Bearer tokens (see :class:`station_sandbox.client.Tokens`)."""

    def __init__(self, client: "AsyncClient") -> None:
        self._client = client

    async def create(self, name: str, scope: str, tenant: Optional[str] = None,
                     expires_at: Optional[str] = None,
                     limits: Optional[Mapping[str, Any]] = None) -> dict[str, Any]:
        body = _ops.token_body(name, scope, tenant, expires_at, limits)
        return await self._client._t.drive(_ops.simple("POST", "/v1/tokens", body))  # type: ignore[no-any-return]

    async def list(self) -> list[dict[str, Any]]:
        doc = await self._client._t.drive(_ops.simple("GET", "/v1/tokens"))
        return _ops.list_of(doc, "tokens", "GET /v1/tokens")

    async def get(self, token_id: str) -> dict[str, Any]:
        return await self._client._t.drive(_ops.simple("GET", f"/v1/tokens/{seg(token_id)}"))  # type: ignore[no-any-return]

    async def delete(self, token_id: str) -> dict[str, Any]:
        return await self._client._t.drive(_ops.simple("DELETE", f"/v1/tokens/{seg(token_id)}"))  # type: ignore[no-any-return]


class AsyncClient:
    """The asyncio twin of :class:`station_sandbox.Client`: same arguments (``workers=``
    included), same discovery order, every method a coroutine.
    ``async with AsyncClient() as client: ...``"""

    def __init__(self, socket_path: Optional[str] = None, url: Optional[str] = None,
                 token: Optional[str] = None, timeout: Optional[float] = None,
                 root_dir: Optional[str] = None, workers: Optional[Union[WorkersArg, str]] = None) -> None:
        # discover:URL asks that worker once, here, with a blocking call (bounded by timeout)
        found = resolve_workers(workers, socket_path, url, root_dir,
                                lambda at: discover_workers(at, token, timeout))
        if found is None:
            self._setup(_AsyncTransport(resolve_endpoint(socket_path, url, root_dir, token), timeout))
        else:
            configs, source = found
            routes = {w.name: _AsyncWorkerTransport(_endpoint_of(w, token), timeout, w.name, w.url)
                      for w in configs}
            self._setup(_AsyncNoRoute(list(routes)), routes, source)

    def _setup(self, t: Any, routes: Optional[dict[str, "_AsyncWorkerTransport"]] = None,
               source: str = "") -> None:
        self._t = t
        self._routes = routes
        self._source = source
        self._on: dict[str, "AsyncClient"] = {}
        self.workspaces = AsyncWorkspaces(self)
        self.images = AsyncImages(self)
        self.tokens = AsyncTokens(self)
        self.snapshots = AsyncSnapshots(self)

    @property
    def worker_names(self) -> list[str]:
        return list(self._routes or ())

    def _transport_of(self, workspace_id: str) -> Any:
        if self._routes is None:
            return self._t
        seg(workspace_id)  # a non-empty string
        name = worker_of_id(workspace_id)
        t = self._routes.get(name)
        if t is None:
            raise unknown_worker(name, self._source, workspace_id)
        return t

    async def _route(self, workspace_id: str) -> Any:
        """The route for a workspace by id or, with several workers, by name: the one worker
        that has a workspace of that name."""
        if self._routes is not None and isinstance(workspace_id, str) and _ops.is_name(workspace_id):
            found = await self.workspaces.list(name=workspace_id)
            return _holder(self._routes, self._source, workspace_id, found)
        return self._transport_of(workspace_id)

    async def _create_transport(self, worker: Optional[str]) -> Any:
        if self._routes is None:
            if worker is not None:
                raise InvalidArgument(f"worker {worker!r}: this client has one controller, not several workers")
            return self._t
        if worker is None:
            states = await self.workers()
            best, why = place(states)
            if best is None and not any(s["up"] for s in states):
                raise _none_answered([{"worker": s["name"], "url": s["url"], "error": s["error"]}
                                      for s in states])
            if best is None:
                raise Unavailable(503, "unavailable", f"no worker can take this workspace: {why}")
            worker = best["name"]
        t = self._routes.get(worker)
        if t is None:
            raise unknown_worker(worker, self._source)
        return t

    def on(self, worker: str) -> "AsyncClient":
        """A client of one of this client's workers (see :meth:`station_sandbox.Client.on`)."""
        if self._routes is None:
            return self
        t = self._routes.get(worker)
        if t is None:
            raise unknown_worker(worker, self._source)
        if worker not in self._on:
            c = AsyncClient.__new__(AsyncClient)
            c._setup(t)
            self._on[worker] = c
        return self._on[worker]

    async def workers(self) -> list[dict[str, Any]]:
        """Each worker's state (see :meth:`station_sandbox.Client.workers`), asked at once."""
        async def one(name: str, url: str, t: Any) -> dict[str, Any]:
            try:
                return state_of(name, url, await t.drive(_ops.simple("GET", "/v1/worker")))
            except StationError as e:
                err = _unreachable_of(name, url, e)["error"]
                if e.status:
                    err = f"HTTP {e.status}: {e.message}"
                return {"name": name, "url": url, "up": False, "error": err}
        if self._routes is None:
            return [await one("", self._t.ep.where, self._t)]
        return list(await asyncio.gather(*(one(n, t.url, t) for n, t in self._routes.items())))

    @property
    def endpoint(self) -> str:
        if self._routes is not None:
            return ",".join(f"{n}={t.url}" for n, t in self._routes.items())
        return self._t.ep.where  # type: ignore[no-any-return]

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    async def close(self) -> None:
        """Nothing stays open between calls."""

    async def ready(self, adapter: Optional[str] = None) -> ReadyReport:
        return await self._t.drive(_ops.ready(self.endpoint, adapter))

    async def worker(self) -> dict[str, Any]:
        return await self._t.drive(_ops.simple("GET", "/v1/worker"))  # type: ignore[no-any-return]

    async def worker_usage(self, since: Optional[UsageSince] = None, step: Optional[UsageStep] = None,
                           worker: Optional[str] = None) -> UsageHistory:
        """See :meth:`station_sandbox.Client.worker_usage`."""
        c = self.on(worker) if worker is not None else self
        return await c._t.drive(_ops.usage_history("/v1/worker/usage", since, step))  # type: ignore[no-any-return]

    async def workspace(self, workspace_id: str) -> AsyncWorkspace:
        return await self.workspaces.get(workspace_id)

    async def openapi(self) -> dict[str, Any]:
        return await self._t.drive(_ops.simple("GET", "/v1/openapi.json"))  # type: ignore[no-any-return]

    async def audit(self, limit: Optional[int] = None, before: Optional[int] = None,
                    token_id: Optional[str] = None, tenant: Optional[str] = None,
                    workspace: Optional[str] = None) -> dict[str, Any]:
        """The audit log (see :meth:`station_sandbox.Client.audit`)."""
        return await self._t.drive(_ops.simple("GET", _ops.audit_path(  # type: ignore[no-any-return]
            limit, before, token_id, tenant, workspace)))

    async def events(self, workspace: Optional[str] = None,
                     types: Optional[Iterable[str]] = None, since: Optional[int] = None,
                     retries: int = 5) -> AsyncIterator[dict[str, Any]]:
        """State changes as they happen (see :meth:`station_sandbox.Client.events`)."""
        what = "GET /v1/events"
        failed = 0
        while True:
            before = since
            try:
                async with contextlib.aclosing(self._t.events(
                        _ops.events_path(workspace, types, since))) as events:
                    async for ev in events:
                        if not ev.data:
                            continue
                        doc = _ops.event_of(ev.data, what)
                        if since is not None and doc["seq"] <= since:
                            continue
                        since = doc["seq"]
                        yield doc
            except Timeout:
                await self._t.drive(_ops.simple("GET", "/v1/worker"))
                continue
            except ConnectionFailed:
                if failed >= retries:
                    raise
            failed = 0 if since != before else failed + 1
            if failed > retries:
                raise ConnectionFailed(0, "connection_failed", f"{what}: the event stream "
                                       f"ended {failed} times without a new event")
            await asyncio.sleep(min(0.25 * 2 ** max(failed - 1, 0), 4.0))
