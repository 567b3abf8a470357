"""The blocking client: :class:`Client` and the objects it hands out."""

from __future__ import annotations

import json
import select
import socket
import time
from concurrent.futures import ThreadPoolExecutor
from typing import (Any, BinaryIO, Callable, Iterable, Iterator, Mapping, Optional, Union,
                    overload)

from . import _ops
from ._ops import UsageSince, UsageStep, ws_path
from ._follow import RETRIES, FollowState, Item, OutputGap
from ._transport import NoRoute, Transport, WorkerTransport
from ._workers import (WorkerConfig, WorkersArg, place, reason_of, resolve_workers, snapshot_worker, state_of,
                       unknown_worker, worker_of_id, workers_of_list)
from ._wire import (OP_BINARY, OP_CLOSE, OP_PING, OP_PONG, OP_TEXT,
                    TextStream, WsParser, file_query, octal_mode, output_event,
                    query, resolve_endpoint, seg, ws_close_payload, ws_frame)
from .errors import (ConnectionFailed, InvalidArgument, NotFound, PayloadTooLarge, ProtocolError, StationError, Timeout,
                     Unavailable, WorkerUnavailable, error_from_event)
from .models import (ContextInfo, Execution, FileEntry, FileList, Image,
                     Network, PortExposure, PortList, ReadyReport, Run, Secret, Service,
                     Snapshot, TerminalInfo, UsageHistory, WorkspaceInfo)

__all__ = ["Client", "Workspace", "WorkspaceList", "RunHandle", "Services", "Terminals",
           "Terminal", "Files", "Images", "Secrets", "Ports", "Snapshots", "OutputCallback",
           "Contexts", "CodeContext",
           "READ_MAX_BYTES"]

OutputCallback = Callable[[Union[str, bytes], int], None]
"""``callback(data, offset)``: a chunk of live output and its position in the stream."""

GapCallback = Callable[[OutputGap], None]
"""``on_gap(gap)``: bytes of a stream the run (or the attempt) did not keep: ``gap.stream``,
``gap.offset``, ``gap.bytes``."""

READ_MAX_BYTES = 64 * 1024 * 1024
"""What ``files.read`` caps a file at unless told otherwise."""

Chunk = tuple[str, bytes, int]


def _ws_recv(t: Transport, sock: socket.socket, what: str) -> bytes:
    """The next bytes of a followed stream; b"" when it broke. A silent stream is pinged after
    the client's timeout: a controller that does not answer that either is a Timeout."""
    for ping in (True, False):
        pending = getattr(sock, "pending", lambda: 0)()  # TLS: bytes already decrypted
        if pending or select.select([sock], [], [], t.timeout)[0]:
            try:
                with t.net(what, t.timeout):
                    sock.settimeout(t.timeout)
                    return sock.recv(256 * 1024)
            except ConnectionFailed:
                return b""
        if ping:
            try:
                with t.net(what, t.timeout):
                    sock.sendall(ws_frame(OP_PING, b"alive?"))
            except ConnectionFailed:
                return b""
    raise t.timeout_error(what, t.timeout)


def _ws_once(t: Transport, path: str, state: FollowState, end_key: str,
             what: str) -> Iterator[Item]:
    """One connection of a follow: what it brings, until its end or the connection breaking."""
    sock, data, _ = t.upgrade(path)
    parser = WsParser()
    try:
        while True:
            try:
                msgs = parser.feed(data) if data else []
            except ProtocolError as e:
                sock.sendall(ws_frame(OP_CLOSE, ws_close_payload(getattr(e, "close_code", 1002))))
                raise
            for m in msgs:
                if m.kind == "binary":
                    yield from state.binary(m.data, what)
                elif m.kind == "text":
                    yield from state.text(m.data, end_key, what)
                elif m.kind == "ping":
                    with t.net(what, t.timeout):
                        sock.sendall(ws_frame(OP_PONG, m.data))
                elif m.kind == "close":
                    return
                if state.end is not None:
                    return
            data = _ws_recv(t, sock, what)
            if not data:
                return
    finally:
        try:
            sock.settimeout(1.0)
            if state.end is None:
                sock.sendall(ws_frame(OP_CLOSE, ws_close_payload(1000)))
        except OSError:
            pass
        sock.close()


def _ws_follow(t: Transport, base: str, state: FollowState, end_key: str,
               again: Optional[Callable[[], Optional[list[Item]]]] = None) -> Iterator[Item]:
    """A run's output or a service's logs over WebSocket (docs/api.md), opened again from where
    the follower stands when it broke; :mod:`._follow` decides what is handed over.
    ``again``: asked before each reconnect; a list ends the follow with those items."""
    what = f"GET {base}"
    failed = 0
    while True:
        before = state.progress
        try:
            yield from _ws_once(t, state.path(base), state, end_key, what)
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
            rest = again()
            if rest is not None:
                yield from rest
                return
        time.sleep(0.1 * failed)


class OutputStream(Iterator[Chunk]):
    """The chunks of a follow, ``(stream, data, offset)``, as an iterator; ``gaps``: the
    :class:`OutputGap` met so far (each also handed to ``on_gap`` when given), in order."""

    def __init__(self, items: Iterator[Item], on_gap: Optional[GapCallback] = None,
                 gaps: Optional[list[OutputGap]] = None) -> None:
        self._items = items
        self._on_gap = on_gap
        self.gaps: list[OutputGap] = gaps if gaps is not None else []

    def __iter__(self) -> "OutputStream":
        return self

    def __next__(self) -> Chunk:
        while True:
            item = next(self._items)
            if not isinstance(item, OutputGap):
                return item
            self.gaps.append(item)
            if self._on_gap is not None:
                self._on_gap(item)

    def close(self) -> None:
        """Stops following (closes the connection)."""
        close = getattr(self._items, "close", None)
        if close is not None:
            close()


class RunHandle:
    """A started command: ``wait()`` for its result, ``follow()`` its output live,
    ``cancel()`` it. ``run`` is the run as last seen."""

    def __init__(self, workspace: "Workspace", run: Run) -> None:
        self._ws = workspace
        self._t = workspace._t
        self.run = run
        self.gaps: list[OutputGap] = []
        """What ``follow()`` reported the run did not keep."""

    @property
    def id(self) -> str:
        return self.run.id

    @property
    def status(self) -> str:
        return self.run.status

    def refresh(self) -> Run:
        """The run now."""
        self.run = self._t.drive(_ops.get_run(self._ws.id, self.id))
        return self.run

    def wait(self, timeout_ms: Optional[int] = None) -> Run:
        """Waits until the run is terminal (long-polls the controller). With ``timeout_ms``,
        returns after that long with the run as it is (check ``status``: maybe ``running``)."""
        self.run = self._t.drive(_ops.wait_run(self._ws.id, self.id, timeout_ms))
        return self.run

    def cancel(self) -> Run:
        """Kills the run's whole process tree; the run, ``cancelled``. Conflict when it had
        already finished."""
        self.run = self._t.drive(_ops.cancel(self._ws.id, self.id))
        return self.run

    def follow(self, from_offset: Union[int, Mapping[str, int]] = 0,
               on_gap: Optional[GapCallback] = None) -> "OutputStream":
        """``(stream, data, offset)`` for each chunk of output, live, until the run ends (then
        ``run`` is its final state). ``stream`` is ``"stdout"`` or ``"stderr"``; ``data`` the raw
        bytes (a multi-byte character may span two chunks); ``offset`` its position. Every byte
        the run keeps comes exactly once, however slowly the loop consumes (a follower that
        falls behind is caught up from the run's kept output). Bytes the run did not keep (the
        middle of an output over ``max_output_bytes``) are an :class:`OutputGap` each, handed to
        ``on_gap`` before the chunk after them and listed in ``gaps``. Bytes before
        ``from_offset`` (an int for both streams, or ``{"stdout": n, "stderr": m}``) are
        skipped."""
        state = FollowState(dict(from_offset) if isinstance(from_offset, Mapping) else from_offset)
        path = ws_path(self._ws.id, f"/commands/{seg(self.id)}/output")

        def items() -> Iterator[Item]:
            yield from _ws_follow(self._t, path, state, "run")
            self.refresh()
        return OutputStream(items(), on_gap, self.gaps)

    def __repr__(self) -> str:
        return f"RunHandle(id={self.id!r}, status={self.status!r})"


class Services:
    """A workspace's services (named by ``name``)."""

    def __init__(self, workspace: "Workspace") -> None:
        self._ws = workspace
        self._t = workspace._t

    def start(self, name: str, command: str, restart: Union[str, Mapping[str, Any], None] = None,
              *, max_restarts: Optional[int] = None, delay_ms: Optional[int] = None,
              backoff: Optional[Mapping[str, Any]] = None, cwd: Optional[str] = None,
              env: Optional[Mapping[str, str]] = None, stop_signal: Union[str, int, None] = None,
              stop_timeout_ms: Optional[int] = None, autostart: Optional[bool] = None,
              idempotency_key: Optional[str] = None) -> Service:
        """Starts a foreground ``command`` under a restart policy: ``restart`` is ``"no"``
        (default), ``"on-failure"`` or ``"always"`` (or the API's ``restart`` object);
        ``max_restarts`` restarts at most, ``delay_ms`` before each."""
        body = _ops.service_body(name, command, restart, max_restarts, delay_ms, backoff, cwd, env,
                                 stop_signal, stop_timeout_ms, autostart)
        return Service(self._t.drive(_ops.create(ws_path(self._ws.id, "/services"), body,
                                                       idempotency_key)))

    def get(self, name: str) -> Service:
        """The service with its attempts and their output."""
        return Service(self._t.drive(_ops.simple("GET", _ops.svc_path(self._ws.id, name))))

    def list(self) -> list[Service]:
        """Every service; attempts without output."""
        doc = self._t.drive(_ops.simple("GET", ws_path(self._ws.id, "/services")))
        return [Service(s) for s in _ops.list_of(doc, "services", "GET services")]

    def stop(self, name: str, timeout: float = 60.0) -> Service:
        """Stops the service and returns once its attempt has ended (at most ``timeout``
        seconds; the stop signal, then SIGKILL after the service's ``stop_timeout_ms``)."""
        return self._t.drive(_ops.stop_service(self._ws.id, name, timeout))

    def restart(self, name: str) -> Service:
        """A fresh attempt (a running one is stopped first)."""
        return Service(self._t.drive(_ops.simple("POST", _ops.svc_path(self._ws.id, name, "/restart"))))

    def delete(self, name: str) -> dict[str, Any]:
        """Stops the service and forgets it."""
        return self._t.drive(_ops.simple("DELETE", _ops.svc_path(self._ws.id, name)))  # type: ignore[no-any-return]

    def wait(self, name: str, predicate: Callable[[Service], bool], timeout: float = 60.0) -> Service:
        """Polls until ``predicate(service)`` holds; Timeout after ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            svc = self.get(name)
            if predicate(svc):
                return svc
            if time.monotonic() > deadline:
                raise Timeout(0, "timeout", f"service {name!r}: condition not met within "
                              f"{timeout:g} s (state {svc.state})")
            time.sleep(_ops.POLL_S)

    def logs(self, name: str, attempt: Optional[int] = None, follow: bool = False,
             on_gap: Optional[GapCallback] = None) -> "OutputStream":
        """``(stream, data, offset)`` chunks of a service's output. ``follow``: the current
        attempt's output (its kept head, then live; a service still ``starting`` is waited
        for) until the attempt ends; else the newest finished attempt's stored output;
        ``attempt``: that attempt's stored output. Every kept byte comes exactly once, however
        slowly the loop consumes; bytes the attempt did not keep are an :class:`OutputGap`
        each, handed to ``on_gap`` and listed in the iterator's ``gaps``."""
        if attempt is not None:
            return OutputStream(self._attempt_items(name, attempt), on_gap)
        return OutputStream(self._log_items(name, follow), on_gap)

    def _attempt_items(self, name: str, number: int, state: Optional[FollowState] = None) -> Iterator[Item]:
        svc = self.get(name)
        found = [a for a in svc.attempts if a.number == number]
        if not found:
            from .errors import NotFound
            raise NotFound(404, "not_found", f"service {name!r} has no attempt {number}")
        yield from (state or FollowState()).stored(_ops.attempt_parts(found[0]))

    def _log_items(self, name: str, follow: bool) -> Iterator[Item]:
        path = _ops.svc_path(self._ws.id, name, "/logs" + query({"follow": follow}))
        state = FollowState()
        number = None
        if follow:
            number = self._t.drive(_ops.wait_attempt(self._ws.id, name, self._t.timeout)).current_attempt

        def again() -> Optional[list[Item]]:
            # Opened again: the attempt followed, unless a newer one has begun since (the
            # stream would show that one): the rest of ours then comes from its stored output.
            if number is None:
                return None
            svc = self.get(name)
            if svc.current_attempt == number:
                return None
            if not any(a.number == number and a.state == "ended" for a in svc.attempts):
                return []
            return list(self._attempt_items(name, number, state))
        yield from _ws_follow(self._t, path, state, "service", again)

class Terminal(TerminalInfo):
    """A terminal session attached over WebSocket. ``send`` keystrokes, ``read`` output (the
    scrollback first, then live), ``resize``; iterate for output chunks until it ends.
    ``close()`` detaches (the terminal keeps running); ``kill()`` force-closes it."""

    def __init__(self, terminals: "Terminals", info: Any, sock: socket.socket, head: bytes) -> None:
        self._load(info)
        self._terms = terminals
        self._t = terminals._t
        self._sock = sock
        self._parser = WsParser()
        self._pending: list[bytes] = []
        self._closed = False
        self._detached = False
        self._close_code: Optional[int] = None
        self.gap_bytes = 0
        """Output bytes this session missed (it read too slowly)."""
        self.exit: Optional[dict[str, Any]] = None
        """``{"exitCode", "signal", "state"}`` once the terminal ended."""
        self._head = head  # bytes that came with the handshake's answer: parsed by read()

    def __enter__(self) -> "Terminal":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _send(self, opcode: int, payload: bytes) -> None:
        if self._closed:
            raise ConnectionFailed(0, "connection_failed", f"terminal {self.id}: the session is closed")
        with self._t.net(f"terminal {self.id}", self._t.timeout):
            self._sock.settimeout(self._t.timeout)
            self._sock.sendall(ws_frame(opcode, payload))

    def send(self, data: Union[str, bytes]) -> None:
        """Keystrokes (UTF-8 for a str), written to the PTY."""
        self._send(OP_BINARY, data.encode("utf-8") if isinstance(data, str) else bytes(data))

    def resize(self, cols: int, rows: int) -> None:
        """The PTY's size; its processes get SIGWINCH."""
        self._send(OP_TEXT, json.dumps({"type": "resize", "cols": cols, "rows": rows}).encode())
        self.cols, self.rows = cols, rows

    def _take(self, data: bytes) -> bool:
        """Feeds received bytes; True when something happened (output, a control frame)."""
        try:
            msgs = self._parser.feed(data)
        except ProtocolError as e:
            code = getattr(e, "close_code", 1002)
            self._shut(code)
            raise
        for m in msgs:
            if m.kind == "binary":
                self._pending.append(m.data)
            elif m.kind == "text":
                self._text(m.data)
            elif m.kind == "ping":
                self._send(OP_PONG, m.data)
            elif m.kind == "close":
                self._close_code = m.code
                self._shut(m.code)
        return bool(msgs)

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

    def _shut(self, code: Optional[int]) -> None:
        if not self._closed:
            self._closed = True
            try:
                self._sock.settimeout(1.0)
                self._sock.sendall(ws_frame(OP_CLOSE, ws_close_payload(code or 1000)))
            except OSError:
                pass
            self._sock.close()

    def _recv(self, timeout: float) -> bool:
        """Waits up to ``timeout`` for bytes; False on timeout. Closes on EOF."""
        with self._t.net(f"terminal {self.id}", timeout):
            pending = getattr(self._sock, "pending", lambda: 0)()  # TLS: bytes already decrypted
            if not pending and not select.select([self._sock], [], [], timeout)[0]:
                return False
            self._sock.settimeout(timeout)
            data = self._sock.recv(65536)
        if not data:
            self._closed = True
            self._sock.close()
            return True
        self._take(data)
        return True

    def read(self, timeout: Optional[float] = None) -> bytes:
        """The next output there is (waiting at most ``timeout`` seconds, default the
        client's timeout, then Timeout); ``b""`` once the terminal ended (``exit`` says how)
        or after ``close()``. A session that ends without the terminal's end (the controller
        went away or closed it) raises ConnectionFailed."""
        t = self._t.timeout if timeout is None else timeout
        deadline = time.monotonic() + t
        if self._head:
            head, self._head = self._head, b""
            self._take(head)
        while not self._pending and not self._closed:
            left = deadline - time.monotonic()
            if left <= 0 or not self._recv(left):
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

    def expect(self, pattern: Union[str, bytes], timeout: Optional[float] = None) -> bytes:
        """Reads until ``pattern`` appears; everything read up to and including it (Timeout
        after ``timeout`` seconds, ProtocolError if the terminal ends first)."""
        pat = pattern.encode("utf-8") if isinstance(pattern, str) else pattern
        t = self._t.timeout if timeout is None else timeout
        deadline = time.monotonic() + t
        buf = b""
        while pat not in buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise Timeout(0, "timeout", f"terminal {self.id}: {pat!r} not seen within "
                              f"{t:g} s; got {buf[-200:]!r}")
            try:
                chunk = self.read(left)
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

    def __iter__(self) -> Iterator[bytes]:
        """Output chunks until the terminal ends. A silent terminal is pinged after each
        timeout; a controller that answers nothing raises Timeout."""
        while True:
            try:
                chunk = self.read()
            except Timeout:
                self._send(OP_PING, b"alive?")
                if not self._recv(self._t.timeout):
                    raise
                continue
            if not chunk:
                return
            yield chunk

    def refresh(self) -> "Terminal":
        self._load(self._terms._get_doc(self.id))
        return self

    def close(self) -> None:
        """Detaches: the terminal keeps running (``terminals.attach(id)`` again later)."""
        self._detached = True
        self._shut(1000)

    def kill(self) -> TerminalInfo:
        """Force-closes the terminal: its process tree is killed; its final state."""
        self.close()
        return self._terms.kill(self.id)


class Terminals:
    """A workspace's terminals (PTY sessions)."""

    def __init__(self, workspace: "Workspace") -> None:
        self._ws = workspace
        self._t = workspace._t

    def create(self, cols: int = 80, rows: int = 24, command: Optional[str] = None,
               cwd: Optional[str] = None, env: Optional[Mapping[str, str]] = None,
               idempotency_key: Optional[str] = None) -> Terminal:
        """Starts a terminal (``command`` under ``/bin/sh -c``, else the user's login shell)
        and attaches to it."""
        body = _ops.defined(cols=cols, rows=rows, command=command, cwd=cwd,
                            env=dict(env) if env is not None else None)
        doc = self._t.drive(_ops.create(ws_path(self._ws.id, "/terminals"), body,
                                            idempotency_key, wait_s=5))
        return self._attach(doc, False)

    def attach(self, terminal_id: str, read_only: bool = False) -> Terminal:
        """Attaches to a running terminal: its scrollback first, then live output."""
        return self._attach(self._get_doc(terminal_id), read_only)

    def _attach(self, doc: Any, read_only: bool) -> Terminal:
        info = TerminalInfo(doc)
        path = ws_path(self._ws.id, f"/terminals/{seg(info.id)}/attach" + query({"readOnly": read_only}))
        sock, head, _ = self._t.upgrade(path)
        return Terminal(self, doc, sock, head)

    def _get_doc(self, terminal_id: str) -> Any:
        return self._t.drive(_ops.simple("GET", ws_path(self._ws.id, f"/terminals/{seg(terminal_id)}")))

    def get(self, terminal_id: str) -> TerminalInfo:
        return TerminalInfo(self._get_doc(terminal_id))

    def list(self) -> list[TerminalInfo]:
        doc = self._t.drive(_ops.simple("GET", ws_path(self._ws.id, "/terminals")))
        return [TerminalInfo(x) for x in _ops.list_of(doc, "terminals", "GET terminals")]

    def resize(self, terminal_id: str, cols: int, rows: int) -> TerminalInfo:
        path = ws_path(self._ws.id, f"/terminals/{seg(terminal_id)}/resize")
        return TerminalInfo(self._t.drive(_ops.simple("POST", path, {"cols": cols, "rows": rows})))

    def kill(self, terminal_id: str) -> TerminalInfo:
        """Force-close: kills the terminal's process tree; its final state."""
        path = ws_path(self._ws.id, f"/terminals/{seg(terminal_id)}")
        return TerminalInfo(self._t.drive(_ops.simple("DELETE", path, wait_s=10)))


class Files:
    """A workspace's files, read and written by its agent inside the sandbox as the sandbox's
    user. Paths are absolute in the sandbox's view or relative to the workspace's ``workdir``."""

    def __init__(self, workspace: "Workspace") -> None:
        self._ws = workspace
        self._t = workspace._t

    def _p(self, rest: str, path: Union[str, bytes], **q: Any) -> str:
        return ws_path(self._ws.id, f"{rest}?path={file_query(path)}" + query(q).replace("?", "&", 1))

    def stat(self, path: Union[str, bytes]) -> FileEntry:
        """The entry (a final symlink is not followed)."""
        return self._t.drive(_ops.simple("GET", self._p("/files/stat", path)))  # type: ignore[no-any-return]

    def list(self, path: Union[str, bytes] = ".") -> FileList:
        """``{"path", "entries", "truncated"}``: entries sorted by name."""
        return self._t.drive(_ops.simple("GET", self._p("/files/list", path)))  # type: ignore[no-any-return]

    def read(self, path: Union[str, bytes], max_bytes: Optional[int] = READ_MAX_BYTES,
             start: Optional[int] = None, end: Optional[int] = None) -> bytes:
        """The file's bytes (or bytes ``start``..``end`` inclusive); PayloadTooLarge beyond
        ``max_bytes``."""
        headers = {"Accept": "*/*"}
        if start is not None or end is not None:
            headers["Range"] = f"bytes={start or 0}-{'' if end is None else end}"
        conn, resp = self._t.open("GET", self._p("/files", path, maxBytes=max_bytes), headers=headers)
        try:
            out = bytearray()
            with self._t.net(f"read {path!r}", self._t.timeout):
                while True:
                    c = resp.read1(256 * 1024)
                    if not c:
                        break
                    out += c
                    if max_bytes is not None and len(out) > max_bytes:
                        raise PayloadTooLarge(413, "payload_too_large",
                                              f"{path!r}: more than the {max_bytes} bytes asked for")
            return bytes(out)
        finally:
            conn.close()

    def read_text(self, path: Union[str, bytes], max_bytes: Optional[int] = READ_MAX_BYTES) -> str:
        """The file as UTF-8 text (UnicodeDecodeError when it is not)."""
        return self.read(path, max_bytes).decode("utf-8")

    def download(self, path: Union[str, bytes], dest: BinaryIO) -> int:
        """Streams the file into ``dest`` (a binary file object); the bytes written."""
        conn, resp = self._t.open("GET", self._p("/files", path), headers={"Accept": "*/*"})
        try:
            n = _copy_body(self._t, resp, dest, f"download {path!r}")
            length = resp.getheader("Content-Length")
            if length is not None and int(length) != n:
                raise ConnectionFailed(0, "connection_failed",
                                       f"download {path!r}: {n} of {length} bytes came")
            return n
        finally:
            conn.close()

    def write(self, path: Union[str, bytes], data: Union[str, bytes, BinaryIO, Iterable[bytes]],
              mode: Union[str, int, None] = None, parents: bool = False, exclusive: bool = False,
              if_match: Optional[str] = None, size: Optional[int] = None) -> FileEntry:
        """Replaces or creates the file atomically. ``data``: bytes, text (UTF-8), a binary
        file object or an iterable of byte chunks (streamed; give ``size`` to send a
        Content-Length). ``exclusive``: Conflict if it exists; ``if_match``: PreconditionFailed
        if the file's etag changed."""
        body: Any = data.encode("utf-8") if isinstance(data, str) else data
        q = self._p("/files", path, mode=None if mode is None else octal_mode(mode),
                    parents=parents, exclusive=exclusive)
        headers = {"Content-Type": "application/octet-stream", "Accept": "application/json"}
        if if_match is not None:
            if any(c in if_match for c in "\r\n\0"):
                raise InvalidArgument("if_match holds a line break or NUL")
            headers["If-Match"] = if_match
        conn, resp = self._t.open("PUT", q, body=body, headers=headers, size=size)
        try:
            with self._t.net(f"write {path!r}", self._t.timeout):
                text = resp.read(1024 * 1024)
            return _ops_loads(text, f"PUT {path!r}")  # type: ignore[no-any-return]
        finally:
            conn.close()

    def mkdir(self, path: Union[str, bytes], parents: bool = False,
              mode: Union[str, int, None] = None) -> FileEntry:
        body = _ops.defined(path=path if isinstance(path, str) else path.decode("utf-8"),
                            parents=parents, mode=None if mode is None else octal_mode(mode))
        return self._t.drive(_ops.simple("POST", ws_path(self._ws.id, "/files/mkdir"), body))  # type: ignore[no-any-return]

    def rename(self, src: str, dst: str, overwrite: bool = True) -> FileEntry:
        body = {"from": src, "to": dst, "overwrite": overwrite}
        return self._t.drive(_ops.simple("POST", ws_path(self._ws.id, "/files/rename"), body))  # type: ignore[no-any-return]

    def remove(self, path: Union[str, bytes], recursive: bool = False) -> dict[str, Any]:
        """A symlink is removed, never followed; a non-empty directory needs ``recursive``."""
        return self._t.drive(_ops.simple("DELETE", self._p("/files", path, recursive=recursive)))  # type: ignore[no-any-return]

    def exists(self, path: Union[str, bytes]) -> bool:
        from .errors import NotFound
        try:
            self.stat(path)
            return True
        except NotFound:
            return False

    def watch(self, path: Union[str, bytes] = ".", recursive: bool = False,
              timeout: Optional[float] = None) -> Iterator[dict[str, Any]]:
        """Changes beneath a directory: ``{"type": "ready" | "created" | "modified" |
        "deleted" | "moved" | "overflow", "path", ...}``. Each wait for the next event is
        bounded by ``timeout`` (default the client's; Timeout then)."""
        what = f"watch {path!r}"
        for ev in self._t.events(self._p("/files/watch", path, recursive=recursive), timeout):
            doc = output_event(ev, what)
            if ev.event == "error":
                raise error_from_event(doc.get("error"), what)
            yield doc


def _ops_loads(text: bytes, what: str) -> Any:
    from ._wire import loads
    return loads(text, what)


class Secrets:
    """A workspace's secrets: values go in and never come back out."""

    def __init__(self, workspace: "Workspace") -> None:
        self._ws = workspace
        self._t = workspace._t

    def set(self, name: str, value: str, host: Optional[str] = None,
            username: Optional[str] = None, expires_at: Optional[str] = None) -> Secret:
        body = _ops.defined(value=value, host=host, username=username, expiresAt=expires_at)
        path = ws_path(self._ws.id, f"/secrets/{seg(name)}")
        return self._t.drive(_ops.simple("PUT", path, body))  # type: ignore[no-any-return]

    def get(self, name: str) -> Secret:
        return self._t.drive(_ops.simple("GET", ws_path(self._ws.id, f"/secrets/{seg(name)}")))  # type: ignore[no-any-return]

    def list(self) -> list[Secret]:
        doc = self._t.drive(_ops.simple("GET", ws_path(self._ws.id, "/secrets")))
        return _ops.list_of(doc, "secrets", "GET secrets")

    def delete(self, name: str) -> dict[str, Any]:
        return self._t.drive(_ops.simple("DELETE", ws_path(self._ws.id, f"/secrets/{seg(name)}")))  # type: ignore[no-any-return]


class Ports:
    """A workspace's previews (docs/api.md, "Previews"): a port inside it given a URL of its
    own, reached through the controller's preview listener inside the workspace's network (a
    server bound to 127.0.0.1 included). Needs a controller with ``--preview-listen`` and a
    container workspace: else :class:`Conflict`."""

    def __init__(self, workspace: "Workspace") -> None:
        self._ws = workspace
        self._t = workspace._t

    def expose(self, port: int, public: bool = False,
               expires_in_ms: Optional[int] = None) -> PortExposure:
        """Exposes ``port`` until ``expires_in_ms`` from now (default 24 hours, at most 30
        days). Token access unless ``public``: the answer's ``token`` (shown this once) opens
        ``url`` as ``Authorization: Bearer TOKEN``, and ``openUrl`` opens it in a browser.
        :class:`Conflict` when the port is exposed already."""
        return self._t.drive(_ops.port_expose(self._ws.id, port, public, expires_in_ms))  # type: ignore[no-any-return]

    def list(self) -> PortList:
        """The exposed ports (without tokens) and the TCP ports listening in the workspace."""
        return self._t.drive(_ops.port_list(self._ws.id))  # type: ignore[no-any-return]

    def revoke(self, port: int) -> None:
        """Ends the exposure of ``port``: its URL answers 404 from now on. :class:`NotFound`
        when it is not exposed."""
        self._t.drive(_ops.port_revoke(self._ws.id, port))



class CodeContext(ContextInfo):
    """A code context (``ws.contexts.create("python")``): ``execute()`` cells in it; what one
    cell defines the next sees. Attributes as last fetched (``refresh()``)."""

    def __init__(self, workspace: "Workspace", doc: Any) -> None:
        info = ContextInfo.from_doc(doc)
        self.__dict__.update(info.__dict__)
        self._ws = workspace
        self._t = workspace._t

    def _path(self, rest: str = "") -> str:
        return ws_path(self._ws.id, f"/contexts/{seg(self.id)}{rest}")

    def _load(self, doc: Any) -> "CodeContext":
        self.__dict__.update(ContextInfo.from_doc(doc).__dict__)
        return self

    def refresh(self) -> "CodeContext":
        return self._load(self._t.drive(_ops.simple("GET", self._path())))

    def execute(self, code: str, on_stdout: Optional[Callable[[str], None]] = None,
                on_stderr: Optional[Callable[[str], None]] = None,
                timeout_ms: Optional[int] = None) -> Execution:
        """Runs a cell and returns it ended: check ``status`` (``ok``, ``error``,
        ``timed_out``, ``interrupted``); a cell that raised is a result, not an exception.
        With ``on_stdout``/``on_stderr``, its output is handed over live as text. Conflict
        (``busy``) while another cell runs here."""
        live = on_stdout is not None or on_stderr is not None
        doc = self._t.drive(_ops.context_execute(self._ws.id, self.id, code, timeout_ms, live))
        e = Execution.from_doc(doc)
        if live and not e.done:
            self._follow(e.id, {"stdout": on_stdout, "stderr": on_stderr})
        elif live:
            for cb, out in ((on_stdout, e.stdout), (on_stderr, e.stderr)):
                if cb is not None and out:
                    cb(out if isinstance(out, str) else out.decode("utf-8", "replace"))
        return self._wait(e)

    def _follow(self, eid: str, cbs: Mapping[str, Optional[Callable[[str], None]]]) -> None:
        path = self._path(f"/executions/{seg(eid)}/output")
        text = {"stdout": TextStream(), "stderr": TextStream()}
        for stream, data, offset in OutputStream(_ws_follow(self._t, path, FollowState(0), "run")):
            cb = cbs[stream]
            for piece, _ in text[stream].feed(data, offset):
                if cb is not None:
                    cb(piece if isinstance(piece, str) else piece.decode("utf-8", "replace"))
        for stream, cb in cbs.items():
            for piece, _ in text[stream].flush():
                if cb is not None:
                    cb(piece if isinstance(piece, str) else piece.decode("utf-8", "replace"))

    def _wait(self, e: Execution) -> Execution:
        while not e.done:
            e = self.execution(e.id, wait_ms=_ops.SERVER_WAIT_CAP_MS)
        return e

    def execution(self, execution_id: str, wait_ms: Optional[int] = None) -> Execution:
        """One execution; with ``wait_ms`` the answer waits that long for it to end."""
        q = query({"waitMs": wait_ms})
        return Execution.from_doc(self._t.drive(_ops.simple(
            "GET", self._path(f"/executions/{seg(execution_id)}{q}"),
            wait_s=(wait_ms or 0) / 1000)))

    def executions(self) -> list[Execution]:
        """The context's executions, newest first."""
        doc = self._t.drive(_ops.simple("GET", self._path("/executions")))
        return [Execution.from_doc(e) for e in _ops.list_of(doc, "executions", "GET executions")]

    def interrupt(self) -> Execution:
        """Interrupts the running cell and returns it ended (``interrupted``); the context and
        its variables stay. Conflict when no cell runs."""
        return Execution.from_doc(self._t.drive(_ops.simple("POST", self._path("/interrupt"),
                                                            wait_s=10)))

    def restart(self) -> "CodeContext":
        """A new interpreter: its variables are gone, the state ``idle``."""
        return self._load(self._t.drive(_ops.context_restart(self._ws.id, self.id)))

    def delete(self) -> None:
        """Ends the interpreter; the context is gone."""
        self._t.drive(_ops.simple("DELETE", self._path()))
        self.state = "deleted"

    def __repr__(self) -> str:
        return f"CodeContext(id={self.id!r}, language={self.language!r}, state={self.state!r})"


class Contexts:
    """A workspace's code contexts (docs/api.md, "Code contexts")."""

    def __init__(self, workspace: "Workspace") -> None:
        self._ws = workspace
        self._t = workspace._t

    def create(self, language: str = "python", cwd: Optional[str] = None,
               env: Optional[Mapping[str, str]] = None) -> CodeContext:
        """A new context once its interpreter answers. A StationError with status 422 and
        code ``kernel_missing`` when the workspace has no interpreter for ``language`` (the
        message names the package); TooManyRequests past 8 per workspace."""
        doc = self._t.drive(_ops.context_create(self._ws.id, language, cwd, env))
        return CodeContext(self._ws, doc)

    def get(self, context_id: str) -> CodeContext:
        return CodeContext(self._ws, self._t.drive(_ops.simple(
            "GET", ws_path(self._ws.id, f"/contexts/{seg(context_id)}"))))

    def list(self) -> list[CodeContext]:
        doc = self._t.drive(_ops.simple("GET", ws_path(self._ws.id, "/contexts")))
        return [CodeContext(self._ws, c) for c in _ops.list_of(doc, "contexts", "GET contexts")]


class Workspace(WorkspaceInfo):
    """A workspace: its attributes as last fetched (``refresh()``), and what runs in it."""

    def __init__(self, client: "Client", doc: Any) -> None:
        self._load(doc)
        self._client = client
        self._t = client._transport_of(self.id)
        self.services = Services(self)
        self.terminals = Terminals(self)
        self.files = Files(self)
        self.secrets = Secrets(self)
        self.ports = Ports(self)
        self.contexts = Contexts(self)

    def __enter__(self) -> "Workspace":
        return self

    def __exit__(self, *exc: Any) -> None:
        try:
            self.delete()
        except StationError:
            if exc[0] is None:
                raise

    def refresh(self) -> "Workspace":
        self._load(self._t.drive(_ops.simple("GET", ws_path(self.id))))
        return self

    def delete(self) -> dict[str, Any]:
        """Kills every run and service, removes the workspace and its files."""
        doc = self._t.drive(_ops.simple("DELETE", ws_path(self.id), wait_s=60))
        self.state = "deleted"
        return doc  # type: ignore[no-any-return]

    def restart(self) -> "Workspace":
        """Stops the agent (runs end ``lost``) and starts a new one; HOME is kept."""
        self._load(self._t.drive(_ops.simple("POST", ws_path(self.id, "/restart"), wait_s=60)))
        return self

    def update(self, name: Any = _ops.UNSET,
               labels: Optional[Mapping[str, Optional[str]]] = None) -> "Workspace":
        """Renames (``name=None`` removes the name) and relabels: ``labels`` is merged into
        the workspace's, a value of None removes that key."""
        body = _ops.update_body(name, labels)
        self._load(self._t.drive(_ops.simple("PATCH", ws_path(self.id), body)))
        return self

    def start(self, command: str, cwd: Optional[str] = None, env: Optional[Mapping[str, str]] = None,
              stdin: Union[str, bytes, None] = None, timeout_ms: Optional[int] = None,
              max_output_bytes: Optional[int] = None,
              idempotency_key: Optional[str] = None) -> RunHandle:
        """Starts ``/bin/sh -c command`` and returns at once; a run id is not success. Sent
        with an ``Idempotency-Key`` (``idempotency_key``, else a random one) and retried with
        it when no answer came: never a second run."""
        body = _ops.command_body(command, cwd, env, stdin, timeout_ms, max_output_bytes)
        return RunHandle(self, self._t.drive(_ops.start(self.id, body, key=idempotency_key)))

    def run(self, command: str, cwd: Optional[str] = None, env: Optional[Mapping[str, str]] = None,
            stdin: Union[str, bytes, None] = None, timeout_ms: Optional[int] = None,
            max_output_bytes: Optional[int] = None, on_stdout: Optional[OutputCallback] = None,
            on_stderr: Optional[OutputCallback] = None, on_gap: Optional[GapCallback] = None,
            idempotency_key: Optional[str] = None) -> Run:
        """Runs ``/bin/sh -c command`` and returns the terminal :class:`Run`. A non-zero exit
        (or a timeout, a kill) is a result, not an exception: check ``status`` and
        ``exit_code``. With ``on_stdout``/``on_stderr``, output is followed live and each
        callback gets ``(data, offset)`` (``data`` a str when the chunk is UTF-8, else bytes):
        every byte the run keeps, exactly once, however slow the callback. Bytes the run did
        not keep (the middle of an output over ``max_output_bytes``) are an
        :class:`OutputGap` each, handed to ``on_gap`` and listed in the run's ``gaps``."""
        body = _ops.command_body(command, cwd, env, stdin, timeout_ms, max_output_bytes)
        if on_stdout is None and on_stderr is None:
            return self._t.drive(_ops.run(self.id, body, idempotency_key))
        h = RunHandle(self, self._t.drive(_ops.start(self.id, body, key=idempotency_key)))
        text = {"stdout": TextStream(), "stderr": TextStream()}
        cbs = {"stdout": on_stdout, "stderr": on_stderr}
        for stream, data, offset in h.follow(on_gap=on_gap):
            cb = cbs[stream]
            for piece, at in text[stream].feed(data, offset):
                if cb is not None:
                    cb(piece, at)
        for stream, cb in cbs.items():
            for piece, at in text[stream].flush():
                if cb is not None:
                    cb(piece, at)
        if not h.run.done:
            h.wait()
        h.run.gaps = h.gaps
        return h.run

    def run_handle(self, run_id: str) -> RunHandle:
        """Reattaches to a run by id (from another process, after a restart of this one)."""
        return RunHandle(self, self._t.drive(_ops.get_run(self.id, run_id)))

    def runs(self, limit: Optional[int] = None) -> list[Run]:
        """Runs, newest first, without output."""
        doc = self._t.drive(_ops.simple("GET", ws_path(self.id, "/commands" + query({"limit": limit}))))
        return [Run(r) for r in _ops.list_of(doc, "commands", "GET commands")]

    def get_network(self) -> Network:
        """Mode, address, gateway, egress policy and counters."""
        return self._t.drive(_ops.simple("GET", ws_path(self.id, "/network")))  # type: ignore[no-any-return]

    def set_egress(self, egress: Mapping[str, Any]) -> Network:
        """Replaces a ``restricted`` workspace's egress policy (Conflict for another mode)."""
        return self._t.drive(_ops.simple("PUT", ws_path(self.id, "/network"), {"egress": dict(egress)}))  # type: ignore[no-any-return]

    @overload
    def usage(self) -> dict[str, Any]: ...
    @overload
    def usage(self, since: UsageSince, step: Optional[UsageStep] = None) -> UsageHistory: ...
    @overload
    def usage(self, *, step: UsageStep) -> UsageHistory: ...

    def usage(self, since: Optional[UsageSince] = None,
              step: Optional[UsageStep] = None) -> Union[dict[str, Any], UsageHistory]:
        """Without arguments: CPU time and memory of the workspace and of each running command
        and service now. With ``since`` or ``step``: its usage over time, a
        :class:`UsageHistory` of :class:`UsageSample` (``since`` default an hour ago; ``step``
        default the sampling interval within the last hour, else a minute)."""
        if since is None and step is None:
            return self._t.drive(_ops.simple("GET", ws_path(self.id, "/usage"), wait_s=3))  # type: ignore[no-any-return]
        return self._t.drive(_ops.usage_history(ws_path(self.id, "/usage"), since, step))

    def pause(self) -> "Workspace":
        """Freezes every process of the workspace; its run timeouts and idle time stop. Files
        are still read; a command, terminal, file write or service start raises
        :class:`Paused` (409) until :meth:`resume`, unless it was created with
        ``auto_resume``. Pausing a paused workspace changes nothing."""
        self._load(self._t.drive(_ops.simple("POST", ws_path(self.id, "/pause"), wait_s=60)))
        return self

    def resume(self) -> "Workspace":
        """Thaws a paused workspace: its processes and clocks go on (``state`` ``ready``)."""
        self._load(self._t.drive(_ops.simple("POST", ws_path(self.id, "/resume"), wait_s=60)))
        return self

    def snapshot(self, name: Optional[str] = None, memory: bool = False) -> Snapshot:
        """Keeps HOME and the root filesystem's changes (a host workspace: its directory) as a
        snapshot, the workspace paused while they are read. ``memory``: the processes too
        (501 naming what the worker lacks where it cannot). ``client.workspaces.create(
        snapshot=s["id"])`` starts a workspace from it."""
        return self._t.drive(_ops.snapshot_create(self.id, name, memory))  # type: ignore[no-any-return]

    def fork(self, n: int = 1) -> list["Workspace"]:
        """One snapshot of this workspace, then ``n`` (1 to 100) workspaces made from it, each
        independent from then on. The new workspaces, ``ready``; delete them when done."""
        doc = self._t.drive(_ops.fork(self.id, n))
        return [Workspace(self._client, w) for w in doc["workspaces"]]


class WorkspaceList(list):  # type: ignore[type-arg]
    """``workspaces.list()``: the workspaces, and ``unreachable``, the workers that did not
    answer (``[{"worker", "url", "error"}]``; always empty with one controller)."""

    unreachable: list[dict[str, str]]

    def __init__(self, items: Iterable[Any] = (), unreachable: Optional[list[dict[str, str]]] = None) -> None:
        super().__init__(items)
        self.unreachable = unreachable or []


def _unreachable_of(name: str, url: str, e: BaseException) -> dict[str, str]:
    if isinstance(e, WorkerUnavailable):
        return {"worker": name, "url": url, "error": e.reason}
    if isinstance(e, StationError) and e.status == 0 and e.code == "connection_failed":
        return {"worker": name, "url": url, "error": reason_of(e)}
    return {"worker": name, "url": url, "error": str(e)}


def _none_answered(unreachable: list[dict[str, str]]) -> WorkerUnavailable:
    first = unreachable[0]
    all_ = "; ".join(f"{u['worker']} ({u['url']}): {u['error']}" for u in unreachable)
    return WorkerUnavailable(first["worker"], first["url"], first["error"], f"no worker answered: {all_}")


def _holder(routes: Any, source: str, ws_name: str, found: WorkspaceList) -> Any:
    """The route to the one worker of ``found`` (every worker's workspaces named ``ws_name``);
    none or several are an error, the several named with their ids."""
    if len(found) > 1:
        holders = ", ".join(f"{w.worker} ({w.id})" for w in found)
        raise InvalidArgument(f"workspace name {ws_name!r} is on several workers: {holders}; "
                              "use the id", "name")
    if not found:
        if found.unreachable:
            raise NotFound(404, "not_found", f"no worker that answered has a workspace named "
                           f"{ws_name!r} ({found.unreachable[0]['error']})")
        raise NotFound(404, "not_found", f"no worker has a workspace named {ws_name!r}")
    t = routes.get(found[0].worker)
    if t is None:
        raise unknown_worker(found[0].worker, source, found[0].id)
    return t


class SnapshotList(WorkspaceList):
    """``snapshots.list()``: the snapshots, newest first, and ``unreachable``, the workers that
    did not answer (``[{"worker", "url", "error"}]``; always empty with one controller)."""


def _newest_first(snapshots: Iterable[Any], unreachable: list[dict[str, str]]) -> SnapshotList:
    return SnapshotList(sorted(snapshots, key=lambda s: str(s.get("createdAt", "")), reverse=True),
                        unreachable)


def _snapshots_of(workers: list[Any], answers: Iterable[Any]) -> SnapshotList:
    """Every worker's answer to ``GET /v1/snapshots`` (its list, or the StationError it gave)
    as one list, newest first, with the workers that did not answer; WorkerUnavailable when
    none did."""
    found: list[Any] = []
    unreachable: list[dict[str, str]] = []
    for t, a in zip(workers, answers):
        if isinstance(a, BaseException):
            unreachable.append(_unreachable_of(t.worker, t.url, a))
        else:
            found.extend(a)
    if len(unreachable) == len(workers):
        raise _none_answered(unreachable)
    return _newest_first(found, unreachable)


def _create_worker(snapshot: str, worker: Optional[str]) -> str:
    """With several workers, a create from a snapshot goes to the worker its id names (an id
    of the older shape names none: ``worker`` must)."""
    named = snapshot_worker(snapshot)
    if named is None:
        if worker is None:
            raise InvalidArgument(f"snapshot {snapshot} names no worker (it was taken before "
                                  "snapshot ids carried one): name it (worker=...)", "snapshot")
        return worker
    if worker is not None and worker != named:
        raise InvalidArgument(f"snapshot {snapshot} is kept by worker {named}: a workspace "
                              f"made from it starts there, not on {worker}", "worker")
    return named


def _snapshot_route(routes: Optional[dict[str, Any]], source: str, t: Any, snapshot_id: str) -> Any:
    """The transport of the worker a snapshot id names (``t`` with one controller)."""
    name = snapshot_worker(snapshot_id)
    if routes is None:
        return t
    if name is None:
        raise InvalidArgument(f"snapshot {snapshot_id} names no worker (it was taken before "
                              "snapshot ids carried one): ask the worker that keeps it, "
                              "client.on(NAME).snapshots", "snapshot")
    route = routes.get(name)
    if route is None:
        raise NotFound(404, "not_found", f"snapshot {snapshot_id} is kept by worker {name}, "
                       f"which is not in {source}")
    return route


class Workspaces:
    def __init__(self, client: "Client") -> None:
        self._client = client
        self._t = client._t

    def create(self, adapter: Optional[str] = None, image: Optional[str] = None,
               env: Optional[Mapping[str, str]] = None, cpus: Optional[float] = None,
               memory_mb: Optional[int] = None, pids_limit: Optional[int] = None,
               network: Optional[str] = None, seccomp_profile: Optional[str] = None,
               egress: Optional[Mapping[str, Any]] = None, timeout: float = 120.0,
               worker: Optional[str] = None, idle_timeout_ms: Optional[int] = None,
               idempotency_key: Optional[str] = None, retries: int = 2,
               snapshot: Optional[str] = None, auto_resume: Optional[bool] = None,
               idle_action: Optional[str] = None, name: Optional[str] = None,
               labels: Optional[Mapping[str, str]] = None) -> Workspace:
        """A new workspace (``ready``). ``name``: unique among your workspaces on its worker,
        usable wherever an id is; ``labels``: ``{"team": "x"}``. ``adapter``: ``"host"`` or ``"container"`` (default:
        the worker's); ``image`` a reference pinned by digest; ``network``: ``"none"``,
        ``"bridge"`` or ``"restricted"`` (with ``egress``). ``idle_timeout_ms``: stop the
        workspace once it has been idle that long (1000 to 30 days; 0 or None: never), so a
        crashed caller does not leave it running. Sent with an ``Idempotency-Key``
        (``idempotency_key``, else a random one) and sent again with it, at most ``retries``
        times, when no answer came: never a second workspace. Keep its id. With several
        workers: on ``worker``, else where the placement rule puts it (docs/operations.md,
        "Placement"): not on a worker that is down, full or private to another tenant; the
        caller's own private worker first, then the most free."""
        body = _ops.create_body(adapter, image, env, cpus, memory_mb, pids_limit, network,
                                seccomp_profile, egress, idle_timeout_ms, snapshot, auto_resume,
                                idle_action, name, labels)
        if snapshot is not None and self._client._routes is not None:
            worker = _create_worker(snapshot, worker)
        t = self._client._create_transport(worker)
        return Workspace(self._client, t.drive(
            _ops.create("/v1/workspaces", body, idempotency_key, retries, timeout_s=timeout)))

    def get(self, workspace_id: str) -> Workspace:
        """A workspace by its id or its name (with several workers: on the one worker that
        has a workspace of that name; several: InvalidArgument naming them)."""
        t = self._client._transport_of(workspace_id)
        return Workspace(self._client, t.drive(_ops.simple("GET", ws_path(workspace_id))))

    def update(self, workspace_id: str, name: Any = _ops.UNSET,
               labels: Optional[Mapping[str, Optional[str]]] = None) -> Workspace:
        """Renames (``name=None`` removes the name) and relabels a workspace (by id or name):
        ``labels`` is merged into its labels, a value of None removes that key (PATCH, a
        JSON merge patch)."""
        body = _ops.update_body(name, labels)
        t = self._client._transport_of(workspace_id)
        return Workspace(self._client, t.drive(_ops.simple("PATCH", ws_path(workspace_id), body)))

    def list(self, labels: Union[Mapping[str, Optional[str]], Iterable[str], None] = None,
             name: Optional[str] = None, state: Optional[str] = None) -> WorkspaceList:
        """Every workspace, or those that match all the filters given: ``labels`` a mapping
        (``{"team": "x"}``; a value of None: the key is set) or a list of ``"k=v"`` and
        ``"k"``; ``name``; ``state``. With several workers: of all of them, asked at once, in
        the configured order; ``unreachable`` names the workers that did not answer (their
        workspaces are missing); none answering raises WorkerUnavailable."""
        path = _ops.list_path(labels, name, state)
        router = self._client._routes
        if router is None:
            doc = self._t.drive(_ops.simple("GET", path))
            return WorkspaceList(Workspace(self._client, w)
                                 for w in _ops.list_of(doc, "workspaces", "GET /v1/workspaces"))

        def one(t: WorkerTransport) -> Any:
            try:
                doc = t.drive(_ops.simple("GET", path))
                return _ops.list_of(doc, "workspaces", "GET /v1/workspaces")
            except StationError as e:
                return e

        with ThreadPoolExecutor(max_workers=min(16, len(router))) as pool:
            answers = list(pool.map(one, router.values()))
        out = WorkspaceList()
        for t, a in zip(router.values(), answers):
            if isinstance(a, BaseException):
                out.unreachable.append(_unreachable_of(t.worker, t.url, a))
            else:
                out.extend(Workspace(self._client, w) for w in a)
        if len(out.unreachable) == len(router):
            raise _none_answered(out.unreachable)
        return out


def _copy_body(t: Transport, resp: Any, dest: BinaryIO, what: str) -> int:
    """Streams an answer's body into ``dest``; the bytes written."""
    n = 0
    with t.net(what, t.timeout):
        while True:
            c = resp.read1(256 * 1024)
            if not c:
                return n
            dest.write(c)
            n += len(c)


class Images:
    """The worker's image store (images are named by digest)."""

    def __init__(self, client: "Client") -> None:
        self._t = client._t

    def list(self) -> list[Image]:
        return _ops.list_of(self._t.drive(_ops.simple("GET", "/v1/images")), "images", "GET /v1/images")

    def get(self, digest: str) -> Image:
        return self._t.drive(_ops.simple("GET", f"/v1/images/{seg(digest)}"))  # type: ignore[no-any-return]

    def import_path(self, path: str, name: Optional[str] = None, timeout: float = 600.0) -> Image:
        """Imports an OCI image layout (a directory or a tar) at an absolute path on the worker,
        beneath one of its ``--import-dir`` directories."""
        body = _ops.defined(path=path, name=name)
        return self._t.drive(_ops.simple("POST", "/v1/images", body, timeout_s=timeout))  # type: ignore[no-any-return]

    def pull(self, reference: str, registry: Optional[str] = None, plain_http: bool = False,
             timeout: float = 600.0) -> Image:
        """Pulls ``registry/name@sha256:...`` (never by tag)."""
        body = _ops.defined(reference=reference, registry=registry, plainHttp=plain_http or None)
        return self._t.drive(_ops.simple("POST", "/v1/images", body, timeout_s=timeout))  # type: ignore[no-any-return]

    def delete(self, digest: str) -> dict[str, Any]:
        return self._t.drive(_ops.simple("DELETE", f"/v1/images/{seg(digest)}"))  # type: ignore[no-any-return]

    def export(self, digest: str, dest: BinaryIO) -> int:
        """Streams the image as an OCI image layout tar into ``dest`` (a binary file object),
        which ``import_path`` on another worker takes back to the same digest; the bytes
        written. A transfer the worker cut short (a damaged blob) is ConnectionFailed."""
        conn, resp = self._t.open("GET", f"/v1/images/{seg(digest)}/export",
                                  headers={"Accept": "application/x-tar"})
        try:
            return _copy_body(self._t, resp, dest, f"export {digest}")
        finally:
            conn.close()


class Snapshots:
    """Snapshots (docs/api.md, "Snapshots and fork"), newest first. A snapshot's id names the
    worker that keeps it (``s-w2-…``): with several workers, ``get`` and ``delete`` go there and
    ``list`` asks every worker. An id of the older shape ``s-…`` names none: ask its worker,
    ``client.on(NAME).snapshots``."""

    def __init__(self, client: "Client") -> None:
        self._client = client
        self._t = client._t

    def list(self) -> SnapshotList:
        """Every snapshot (with several workers: of all of them, asked at once; ``unreachable``
        names the workers that did not answer; none answering raises WorkerUnavailable)."""
        routes = self._client._routes
        if routes is None:
            doc = self._t.drive(_ops.simple("GET", "/v1/snapshots"))
            return SnapshotList(_ops.list_of(doc, "snapshots", "GET /v1/snapshots"))

        def one(t: WorkerTransport) -> Any:
            try:
                doc = t.drive(_ops.simple("GET", "/v1/snapshots"))
                return _ops.list_of(doc, "snapshots", "GET /v1/snapshots")
            except StationError as e:
                return e

        with ThreadPoolExecutor(max_workers=min(16, len(routes))) as pool:
            answers = list(pool.map(one, routes.values()))
        return _snapshots_of(list(routes.values()), answers)

    def _route(self, snapshot_id: str) -> Any:
        return _snapshot_route(self._client._routes, self._client._source, self._t, snapshot_id)

    def get(self, snapshot_id: str) -> Snapshot:
        """:class:`NotFound` for an unknown id (or another tenant's); InvalidArgument, without
        a request, for what has no snapshot id's shape."""
        t = self._route(snapshot_id)
        return t.drive(_ops.simple("GET", _ops.snapshot_path(snapshot_id)))  # type: ignore[no-any-return]

    def delete(self, snapshot_id: str) -> None:
        """Deletes the snapshot and its image; :class:`Conflict` while a workspace runs on
        it."""
        t = self._route(snapshot_id)
        t.drive(_ops.simple("DELETE", _ops.snapshot_path(snapshot_id)))


class Tokens:
    """Bearer tokens of TCP listeners (admin only): each with a ``scope`` (``admin``,
    ``tenant``, ``read``). Tokens are dicts as docs/api.md shows them; the secret (``token``)
    only in what ``create`` answers."""

    def __init__(self, client: "Client") -> None:
        self._client = client

    def create(self, name: str, scope: str, tenant: Optional[str] = None,
               expires_at: Optional[str] = None,
               limits: Optional[Mapping[str, Any]] = None) -> dict[str, Any]:
        """A new token; its secret is in ``token`` of this answer and nowhere else."""
        body = _ops.token_body(name, scope, tenant, expires_at, limits)
        return self._client._t.drive(_ops.simple("POST", "/v1/tokens", body))  # type: ignore[no-any-return]

    def list(self) -> list[dict[str, Any]]:
        """Every token, oldest first, revoked ones too; never a secret."""
        doc = self._client._t.drive(_ops.simple("GET", "/v1/tokens"))
        return _ops.list_of(doc, "tokens", "GET /v1/tokens")

    def get(self, token_id: str) -> dict[str, Any]:
        return self._client._t.drive(_ops.simple("GET", f"/v1/tokens/{seg(token_id)}"))  # type: ignore[no-any-return]

    def delete(self, token_id: str) -> dict[str, Any]:
        """Revokes the token at once (its streams are closed); the token, ``revokedAt`` set."""
        return self._client._t.drive(_ops.simple("DELETE", f"/v1/tokens/{seg(token_id)}"))  # type: ignore[no-any-return]


def discover_workers(url: str, token: Optional[str] = None,
                     timeout: Optional[float] = None) -> list[WorkerConfig]:
    """The workers the worker at ``url`` lists (its ``GET /v1/workers``: its ``--workers``, and
    every registered worker of a ``--fleet``), each at its listed URL; what
    ``workers="discover:URL"`` and ``STATION_WORKERS=discover:URL`` use."""
    with Client(url=url, token=token, timeout=timeout) as one:
        doc = one._t.drive(_ops.simple("GET", "/v1/workers"))
    return workers_of_list(doc, url)


def _endpoint_of(w: WorkerConfig, token: Optional[str]) -> Any:
    if w.url.startswith("unix:"):
        return resolve_endpoint(w.url[5:], None, None, w.token or token)
    return resolve_endpoint(None, w.url, None, w.token or token)


class Client:
    """A station-sandbox controller, or several workers. One controller is the first of:
    ``socket_path``, ``url`` (``http://127.0.0.1:8080``), ``root_dir`` (its ``station.sock``),
    ``$STATION_URL``, ``$STATION_SOCKET``, ``$STATION_ROOT/station.sock``,
    ``/var/lib/station-sandbox/station.sock``. ``token`` (default ``$STATION_TOKEN``) is the
    bearer token a TCP listener needs. ``timeout`` (seconds) bounds every wait for the
    controller, beyond what a call asks the server to wait for.

    Several workers: ``workers={"w1": "http://host1:8080", ...}`` (or a list of
    ``{"name", "url", "token"}``), else ``$STATION_WORKERS``, ``$STATION_WORKERS_FILE`` or the
    default workers file (docs/operations.md); ``workers="discover:http://host1:8080"`` (or
    ``$STATION_WORKERS`` so) takes the list that worker's ``GET /v1/workers`` gives, once, here.
    Every call for a workspace goes to the worker its id names (``w2-...`` is on ``w2``);
    ``workspaces.list()`` asks all at once; ``create`` goes to ``worker=`` or where the
    placement rule puts it (docs/operations.md, "Placement"); a worker that does not answer raises
    :class:`WorkerUnavailable` naming it. Calls that name no workspace (images, ``ready()``,
    ``worker()``) go to one worker: ``client.on("w1")``."""

    def __init__(self, socket_path: Optional[str] = None, url: Optional[str] = None,
                 token: Optional[str] = None, timeout: Optional[float] = None,
                 root_dir: Optional[str] = None, workers: Optional[Union[WorkersArg, str]] = None) -> None:
        found = resolve_workers(workers, socket_path, url, root_dir,
                                lambda at: discover_workers(at, token, timeout))
        if found is None:
            self._setup(Transport(resolve_endpoint(socket_path, url, root_dir, token), timeout))
        else:
            configs, source = found
            routes = {w.name: WorkerTransport(_endpoint_of(w, token), timeout, w.name, w.url)
                      for w in configs}
            self._setup(NoRoute(list(routes)), routes, source)

    def _setup(self, t: Any, routes: Optional[dict[str, WorkerTransport]] = None,
               source: str = "") -> None:
        self._t = t
        self._routes = routes
        self._source = source
        self._on: dict[str, "Client"] = {}
        self.workspaces = Workspaces(self)
        self.images = Images(self)
        self.tokens = Tokens(self)
        self.snapshots = Snapshots(self)

    @property
    def worker_names(self) -> list[str]:
        """The names of this client's workers (several workers only; else empty)."""
        return list(self._routes or ())

    def _transport_of(self, workspace_id: str) -> Any:
        if self._routes is None:
            return self._t
        seg(workspace_id)  # a non-empty string
        if _ops.is_name(workspace_id):
            return self._transport_of_name(workspace_id)
        name = worker_of_id(workspace_id)
        t = self._routes.get(name)
        if t is None:
            raise unknown_worker(name, self._source, workspace_id)
        return t

    def _transport_of_name(self, ws_name: str) -> Any:
        """The worker that has a workspace named ``ws_name`` for the caller: every worker is
        asked; one that does not answer is passed over unless none has it."""
        return _holder(self._routes, self._source, ws_name, self.workspaces.list(name=ws_name))

    def _create_transport(self, worker: Optional[str]) -> Any:
        if self._routes is None:
            if worker is not None:
                raise InvalidArgument(f"worker {worker!r}: this client has one controller, not several workers")
            return self._t
        if worker is None:
            states = self.workers()
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

    def on(self, worker: str) -> "Client":
        """A client of one of this client's workers, by name: for what names no workspace
        (images, ``worker()``, ``ready()``). With one controller, the client itself."""
        if self._routes is None:
            return self
        t = self._routes.get(worker)
        if t is None:
            raise unknown_worker(worker, self._source)
        if worker not in self._on:
            c = Client.__new__(Client)
            c._setup(t)
            self._on[worker] = c
        return self._on[worker]

    def workers(self) -> list[dict[str, Any]]:
        """Each worker's state, in the configured order (one entry with one controller):
        ``name``, ``url``, ``up``, ``error`` (why not up), ``version``, ``capacity``,
        ``workspaces``; asked of all at once, a worker that does not answer within the client's
        timeout (or answers an error) is down."""
        def one(name: str, url: str, t: Any) -> dict[str, Any]:
            try:
                return state_of(name, url, t.drive(_ops.simple("GET", "/v1/worker")))
            except StationError as e:
                err = _unreachable_of(name, url, e)["error"]
                if e.status:
                    err = f"HTTP {e.status}: {e.message}"
                return {"name": name, "url": url, "up": False, "error": err}
        if self._routes is None:
            return [one("", self._t.ep.where, self._t)]
        with ThreadPoolExecutor(max_workers=min(16, len(self._routes))) as pool:
            futures = [pool.submit(one, n, t.url, t) for n, t in self._routes.items()]
            return [f.result() for f in futures]

    @property
    def endpoint(self) -> str:
        """``unix:/path/station.sock`` or the URL (several workers: ``w1=URL,w2=URL``)."""
        if self._routes is not None:
            return ",".join(f"{n}={t.url}" for n, t in self._routes.items())
        return self._t.ep.where  # type: ignore[no-any-return]

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        """Nothing stays open between calls; here for symmetry with AsyncClient."""

    def ready(self, adapter: Optional[str] = None) -> ReadyReport:
        """The worker's ready report; Unavailable whose message names each failing check (that
        matters to ``adapter``, else to the worker's default adapter)."""
        return self._t.drive(_ops.ready(self.endpoint, adapter))

    def worker(self) -> dict[str, Any]:
        """Name, version, adapters, limits."""
        return self._t.drive(_ops.simple("GET", "/v1/worker"))  # type: ignore[no-any-return]

    def worker_usage(self, since: Optional[UsageSince] = None, step: Optional[UsageStep] = None,
                     worker: Optional[str] = None) -> UsageHistory:
        """The worker's totals over time (a tenant's token: its own workspaces' sum), as
        :meth:`Workspace.usage` with ``since`` or ``step``. With several workers, ``worker``
        names which (else InvalidArgument)."""
        c = self.on(worker) if worker is not None else self
        return c._t.drive(_ops.usage_history("/v1/worker/usage", since, step))  # type: ignore[no-any-return]

    def workspace(self, workspace_id: str) -> Workspace:
        return self.workspaces.get(workspace_id)

    def openapi(self) -> dict[str, Any]:
        """The API's OpenAPI 3.1 description, as the controller serves it."""
        return self._t.drive(_ops.simple("GET", "/v1/openapi.json"))  # type: ignore[no-any-return]

    def audit(self, limit: Optional[int] = None, before: Optional[int] = None,
              token_id: Optional[str] = None, tenant: Optional[str] = None,
              workspace: Optional[str] = None) -> dict[str, Any]:
        """The audit log (admin only), newest first: ``{"entries", "nextBefore", "queued"}``;
        pass ``before=nextBefore`` for the next page."""
        return self._t.drive(_ops.simple("GET", _ops.audit_path(limit, before, token_id, tenant,  # type: ignore[no-any-return]
                                                                workspace)))

    def events(self, workspace: Optional[str] = None, types: Optional[Iterable[str]] = None,
               since: Optional[int] = None, retries: int = 5) -> Iterator[dict[str, Any]]:
        """State changes of workspaces, runs, services and terminals as they happen:
        ``{"seq", "type", "change", "id", "workspaceId", "state", "at", ...}``, and
        ``{"type": "gap", ...}`` for events the controller no longer keeps. ``since``: the seq
        after which to begin (0: everything kept; None: from now on). A dropped or silent
        stream is opened again after the last event yielded (none is seen twice); after
        ``retries`` connections in a row without a new event, ConnectionFailed. Breaking out
        of the loop closes the connection."""
        what = "GET /v1/events"
        failed = 0
        while True:
            before = since
            try:
                for ev in self._t.events(_ops.events_path(workspace, types, since)):
                    if not ev.data:
                        continue
                    doc = _ops.event_of(ev.data, what)
                    if since is not None and doc["seq"] <= since:
                        continue
                    since = doc["seq"]
                    yield doc
            except Timeout:
                # Quiet, not broken, if the controller answers (else this raises).
                self._t.drive(_ops.simple("GET", "/v1/worker"))
                continue
            except ConnectionFailed:
                if failed >= retries:
                    raise
            failed = 0 if since != before else failed + 1
            if failed > retries:
                raise ConnectionFailed(0, "connection_failed", f"{what}: the event stream "
                                       f"ended {failed} times without a new event")
            time.sleep(min(0.25 * 2 ** max(failed - 1, 0), 4.0))
