"""What the sync and async clients share below the API: where the controller is, paths and
queries, the server-sent events parser and the RFC 6455 frame codec. No I/O here."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import struct
import urllib.parse
from dataclasses import dataclass
from typing import Any, Mapping, Optional, Union

from .errors import InvalidArgument, ProtocolError

DEFAULT_SOCKET = "/var/lib/station-sandbox/station.sock"
DEFAULT_TIMEOUT = 30.0
"""Seconds a call waits for the controller (beyond any server-side wait it asked for), unless
the client's ``timeout`` or ``$STATION_TIMEOUT_MS`` says otherwise."""

SSE_HEARTBEAT_S = 15.0
"""The server sends a quiet event stream a heartbeat comment this often: a stream silent for
the timeout plus this has a server that stopped."""


def resolve_timeout(timeout: Optional[float]) -> float:
    """``timeout``, else ``$STATION_TIMEOUT_MS`` (a positive integer of milliseconds), else
    DEFAULT_TIMEOUT."""
    if timeout is not None:
        return timeout
    v = os.environ.get("STATION_TIMEOUT_MS", "")
    return int(v) / 1000 if v.isdigit() and int(v) > 0 else DEFAULT_TIMEOUT

MAX_HEADER_BYTES = 64 * 1024
MAX_JSON_BYTES = 64 * 1024 * 1024
"""A JSON answer larger than this is refused rather than held in memory."""

WS_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


def _env(name: str) -> Optional[str]:
    v = os.environ.get(name)
    return v if v else None


@dataclass(frozen=True)
class Endpoint:
    """A controller: its unix socket, or an ``http://``/``https://`` URL, and the token."""

    socket_path: Optional[str]
    scheme: str  # "unix", "http" or "https"
    host: str
    port: int
    base_path: str
    token: Optional[str]

    @property
    def where(self) -> str:
        """``unix:/path/station.sock`` or the URL, for messages."""
        if self.scheme == "unix":
            return f"unix:{self.socket_path}"
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}:{self.port}{self.base_path}"

    @property
    def host_header(self) -> str:
        if self.scheme == "unix":
            return "localhost"
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


def resolve_endpoint(socket_path: Optional[str] = None, url: Optional[str] = None,
                     root_dir: Optional[str] = None, token: Optional[str] = None) -> Endpoint:
    """The controller is the first of (as for the CLI and the TypeScript SDK): ``socket_path``,
    ``url``, ``root_dir`` (its ``station.sock``), ``$STATION_URL``, ``$STATION_SOCKET``,
    ``$STATION_ROOT/station.sock``, ``/var/lib/station-sandbox/station.sock``. The token is
    ``token``, else ``$STATION_TOKEN``."""
    if socket_path is not None and url is not None:
        raise InvalidArgument("give either socket_path or url, not both")
    if socket_path is None and url is None:
        if root_dir is not None:
            socket_path = os.path.join(root_dir, "station.sock")
        elif _env("STATION_URL"):
            url = _env("STATION_URL")
        elif _env("STATION_SOCKET"):
            socket_path = _env("STATION_SOCKET")
        elif _env("STATION_ROOT"):
            socket_path = os.path.join(_env("STATION_ROOT") or "", "station.sock")
        else:
            socket_path = DEFAULT_SOCKET
    tok = token if token else _env("STATION_TOKEN")
    if tok is not None and any(c in tok for c in "\r\n\0"):
        raise InvalidArgument("the token holds a line break or NUL")
    if url is None:
        return Endpoint(socket_path, "unix", "localhost", 0, "", tok)
    if url.startswith("unix:"):
        return Endpoint(url[5:], "unix", "localhost", 0, "", tok)
    u = urllib.parse.urlsplit(url)
    if u.scheme not in ("http", "https") or not u.hostname:
        raise InvalidArgument(f"url {url!r}: want http://HOST:PORT or https://HOST:PORT")
    try:
        port = u.port or (443 if u.scheme == "https" else 80)
    except ValueError as e:
        raise InvalidArgument(f"url {url!r}: {e}") from None
    return Endpoint(None, u.scheme, u.hostname, port, u.path.rstrip("/"), tok)


def seg(s: str) -> str:
    """A path segment: ids, names and ``sha256:<hex>`` digests."""
    if not isinstance(s, str) or not s:
        raise InvalidArgument(f"expected a non-empty id, got {s!r}")
    return urllib.parse.quote(s, safe=":")


Param = Union[str, int, float, bool, None]


def query(params: Mapping[str, Param]) -> str:
    parts = []
    for k, v in params.items():
        if v is None or v is False:
            continue
        val = "1" if v is True else str(v)
        parts.append(f"{k}={urllib.parse.quote(val, safe='')}")
    return "?" + "&".join(parts) if parts else ""


def file_query(path: Union[str, bytes]) -> str:
    """A file path for a query: any bytes but NUL; the server judges it."""
    if isinstance(path, bytes):
        return urllib.parse.quote_from_bytes(path, safe="")
    if not isinstance(path, str):
        raise InvalidArgument(f"expected a path (str or bytes), got {path!r}")
    return urllib.parse.quote(path, safe="")


def octal_mode(mode: Union[str, int]) -> str:
    """``"0644"`` from ``"0644"``, ``"644"`` or ``0o644``."""
    n = -1
    if isinstance(mode, int) and not isinstance(mode, bool):
        n = mode
    elif isinstance(mode, str) and 1 <= len(mode) <= 4 and all(c in "01234567" for c in mode):
        n = int(mode, 8)
    if not 0 <= n <= 0o7777:
        raise InvalidArgument(f"mode must be permission bits like '0644' or 0o644, not {mode!r}")
    return format(n, "04o")


def decode_part(encoding: Optional[str], value: Any) -> Union[str, bytes, None]:
    """An output field as the API sends it: ``str`` for utf-8, the exact ``bytes`` for base64."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise ProtocolError(0, "protocol_error", f"an output field that is not a string: {value!r:.80}")
    if encoding == "base64":
        try:
            return base64.b64decode(value, validate=True)
        except ValueError:
            raise ProtocolError(0, "protocol_error", "output marked base64 is not base64") from None
    return value


def loads(body: bytes, what: str) -> Any:
    try:
        return json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise ProtocolError(0, "protocol_error",
                            f"{what}: the answer is not JSON: {body[:200]!r}") from None


# -- server-sent events ------------------------------------------------------------------------


@dataclass
class SseEvent:
    event: str
    data: str


class SseParser:
    """text/event-stream, per the HTML living standard (ids and retry are not used by the API).
    Bounded: a line longer than ``max_line`` bytes is a protocol error."""

    def __init__(self, max_line: int = 16 * 1024 * 1024) -> None:
        self._buf = bytearray()
        self._event = ""
        self._data: list[str] = []
        self._max_line = max_line

    def feed(self, chunk: bytes) -> list[SseEvent]:
        self._buf += chunk
        out: list[SseEvent] = []
        start = 0
        buf = self._buf
        while True:
            nl = buf.find(b"\n", start)
            if nl < 0:
                break
            line = bytes(buf[start:nl])
            start = nl + 1
            if line.endswith(b"\r"):
                line = line[:-1]
            ev = self._line(line)
            if ev is not None:
                out.append(ev)
        del buf[:start]
        if len(buf) > self._max_line:
            raise ProtocolError(0, "protocol_error", "an event stream line over the size limit")
        return out

    def _line(self, raw: bytes) -> Optional[SseEvent]:
        line = raw.decode("utf-8", "replace")
        if line == "":
            ev = None
            if self._data:
                ev = SseEvent(self._event or "message", "\n".join(self._data))
            self._event = ""
            self._data = []
            return ev
        if line.startswith(":"):
            return None
        field, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if field == "event":
            self._event = value
        elif field == "data":
            self._data.append(value)
        return None


def output_event(ev: SseEvent, what: str) -> dict[str, Any]:
    """The JSON of an ``output``/``gap``/``end``/``error`` event."""
    doc = loads(ev.data.encode("utf-8"), what)
    if not isinstance(doc, dict):
        raise ProtocolError(0, "protocol_error", f"{what}: an event that is not an object")
    return doc


def chunk_of(doc: dict[str, Any], what: str) -> tuple[str, bytes, int]:
    stream, data, offset = doc.get("stream"), doc.get("data"), doc.get("offset")
    if stream not in ("stdout", "stderr") or not isinstance(data, str) or not isinstance(
            offset, int) or offset < 0:
        raise ProtocolError(0, "protocol_error", f"{what}: a bad output event")
    try:
        return stream, base64.b64decode(data, validate=True), offset
    except ValueError:
        raise ProtocolError(0, "protocol_error", f"{what}: output data is not base64") from None


class OffsetFilter:
    """Drops bytes already delivered, per stream: output before ``from_offset`` and, after a
    reconnect, what the replay repeats."""

    def __init__(self, from_offset: int = 0) -> None:
        self.seen = {"stdout": from_offset, "stderr": from_offset}

    def take(self, stream: str, data: bytes, offset: int) -> Optional[tuple[bytes, int]]:
        seen = self.seen[stream]
        end = offset + len(data)
        if end <= seen:
            return None
        if offset < seen:
            data, offset = data[seen - offset:], seen
        self.seen[stream] = end
        return data, offset


# -- HTTP/1.1 response head (the async client and WebSocket handshakes) -----------------------


def parse_head(head: bytes, what: str) -> tuple[int, dict[str, str]]:
    """Status and headers (lower-cased names; repeated ones joined with ``, ``)."""
    try:
        text = head.decode("iso-8859-1")
    except UnicodeDecodeError:  # pragma: no cover - latin-1 decodes anything
        raise ProtocolError(0, "protocol_error", f"{what}: a bad answer head") from None
    lines = text.split("\r\n")
    parts = lines[0].split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or not parts[1].isdigit():
        raise ProtocolError(0, "protocol_error", f"{what}: not an HTTP/1.1 answer: {lines[0][:80]!r}")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if not line:
            continue
        name, sep, value = line.partition(":")
        if not sep:
            raise ProtocolError(0, "protocol_error", f"{what}: a bad header line {line[:80]!r}")
        key = name.strip().lower()
        value = value.strip()
        headers[key] = f"{headers[key]}, {value}" if key in headers else value
    return int(parts[1]), headers


def request_head(ep: Endpoint, method: str, path: str, headers: Mapping[str, str]) -> bytes:
    lines = [f"{method} {ep.base_path}{path} HTTP/1.1", f"Host: {ep.host_header}"]
    if ep.token:
        lines.append(f"Authorization: Bearer {ep.token}")
    lines += [f"{k}: {v}" for k, v in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("utf-8")


# -- WebSocket (RFC 6455): the client side ---------------------------------------------------


def ws_key() -> str:
    return base64.b64encode(os.urandom(16)).decode("ascii")


def ws_accept(key: str) -> str:
    return base64.b64encode(hashlib.sha1((key + WS_GUID).encode("ascii")).digest()).decode("ascii")


def ws_headers(key: str) -> dict[str, str]:
    return {
        "Connection": "Upgrade",
        "Upgrade": "websocket",
        "Sec-WebSocket-Version": "13",
        "Sec-WebSocket-Key": key,
        "Sec-WebSocket-Protocol": "station-sandbox",
    }


OP_CONT, OP_TEXT, OP_BINARY, OP_CLOSE, OP_PING, OP_PONG = 0x0, 0x1, 0x2, 0x8, 0x9, 0xA


def ws_frame(opcode: int, payload: bytes) -> bytes:
    """One masked frame (every client frame is masked)."""
    n = len(payload)
    if n < 126:
        head = struct.pack("!BB", 0x80 | opcode, 0x80 | n)
    elif n < 65536:
        head = struct.pack("!BBH", 0x80 | opcode, 0x80 | 126, n)
    else:
        head = struct.pack("!BBQ", 0x80 | opcode, 0x80 | 127, n)
    mask = os.urandom(4)
    if n:
        m = int.from_bytes(mask * ((n + 3) // 4), "big") >> (8 * ((4 - n % 4) % 4))
        masked = (int.from_bytes(payload, "big") ^ m).to_bytes(n, "big")
    else:
        masked = b""
    return head + mask + masked


def ws_close_payload(code: int, reason: str = "") -> bytes:
    return struct.pack("!H", code) + reason.encode("utf-8")[:123]


@dataclass
class WsMessage:
    """A whole message (``text`` or ``binary``), a ``ping`` to answer, or the server's ``close``."""

    kind: str
    data: bytes
    code: Optional[int] = None


class WsParser:
    """Unmasked frames in, whole messages out. The server is not trusted: a masked frame, RSV
    bits, an unknown opcode, a bad control frame or fragment sequence raise ProtocolError with
    close code 1002; a message over ``max_message`` (judged from the header) 1009."""

    def __init__(self, max_message: int = 16 * 1024 * 1024) -> None:
        self._buf = bytearray()
        self._frag_op = 0
        self._frags: list[bytes] = []
        self._frag_len = 0
        self._max = max_message

    @staticmethod
    def _fail(code: int, why: str) -> ProtocolError:
        e = ProtocolError(0, "protocol_error", f"the server broke the WebSocket protocol: {why}")
        e.close_code = code  # type: ignore[attr-defined]
        return e

    def feed(self, chunk: bytes) -> list[WsMessage]:
        self._buf += chunk
        out: list[WsMessage] = []
        while True:
            b = self._buf
            if len(b) < 2:
                return out
            fin, opcode = b[0] & 0x80, b[0] & 0x0F
            control = opcode & 0x8
            n, off = b[1] & 0x7F, 2
            if b[0] & 0x70:
                raise self._fail(1002, "reserved bits set")
            if opcode not in (OP_CONT, OP_TEXT, OP_BINARY, OP_CLOSE, OP_PING, OP_PONG):
                raise self._fail(1002, "unknown opcode")
            if b[1] & 0x80:
                raise self._fail(1002, "a masked frame from the server")
            if control and (not fin or n > 125):
                raise self._fail(1002, "a bad control frame")
            if opcode == OP_CONT and not self._frag_op:
                raise self._fail(1002, "a continuation without a message")
            if opcode in (OP_TEXT, OP_BINARY) and self._frag_op:
                raise self._fail(1002, "a new message inside a fragmented one")
            if n == 126:
                if len(b) < 4:
                    return out
                n, off = struct.unpack_from("!H", b, 2)[0], 4
            elif n == 127:
                if len(b) < 10:
                    return out
                n, off = struct.unpack_from("!Q", b, 2)[0], 10
            if not control and n > self._max - (self._frag_len if opcode == OP_CONT else 0):
                raise self._fail(1009, "a message over the size limit")
            if len(b) < off + n:
                return out
            payload = bytes(b[off:off + n])
            del b[:off + n]
            msg = self._frame(bool(fin), opcode, payload)
            if msg is not None:
                out.append(msg)
                if msg.kind == "close":
                    return out

    def _frame(self, fin: bool, opcode: int, payload: bytes) -> Optional[WsMessage]:
        if opcode == OP_PING:
            return WsMessage("ping", payload)
        if opcode == OP_PONG:
            return None
        if opcode == OP_CLOSE:
            code = struct.unpack_from("!H", payload)[0] if len(payload) >= 2 else None
            return WsMessage("close", payload[2:], code)
        if opcode == OP_CONT:
            self._frags.append(payload)
            self._frag_len += len(payload)
            if not fin:
                return None
            op, whole = self._frag_op, b"".join(self._frags)
            self._frag_op, self._frags, self._frag_len = 0, [], 0
            return WsMessage("text" if op == OP_TEXT else "binary", whole)
        if not fin:
            self._frag_op, self._frags, self._frag_len = opcode, [payload], len(payload)
            return None
        return WsMessage("text" if opcode == OP_TEXT else "binary", payload)


class ChunkedDecoder:
    """``Transfer-Encoding: chunked``, incrementally: ``feed`` returns the body bytes so far;
    ``done`` once the last chunk (and its trailers) arrived. Bounded: a chunk-size line or a
    trailer line over 4 KiB is a protocol error."""

    def __init__(self) -> None:
        self._buf = bytearray()
        self._left = 0  # bytes of the current chunk still to come
        self._state = "size"  # size | data | crlf | trailer | done
        self.done = False

    def feed(self, chunk: bytes) -> bytes:
        self._buf += chunk
        out = bytearray()
        while self._buf and not self.done:
            if self._state == "data":
                n = min(self._left, len(self._buf))
                out += self._buf[:n]
                del self._buf[:n]
                self._left -= n
                if self._left == 0:
                    self._state = "crlf"
                continue
            nl = self._buf.find(b"\n")
            if nl < 0:
                if len(self._buf) > 4096:
                    raise ProtocolError(0, "protocol_error", "a chunked body line over 4 KiB")
                break
            line = bytes(self._buf[:nl]).rstrip(b"\r")
            del self._buf[:nl + 1]
            if self._state == "crlf":
                if line:
                    raise ProtocolError(0, "protocol_error", "a chunk not followed by CRLF")
                self._state = "size"
            elif self._state == "size":
                size = line.split(b";", 1)[0].strip()
                try:
                    self._left = int(size, 16)
                except ValueError:
                    raise ProtocolError(0, "protocol_error", f"a bad chunk size {size[:20]!r}") from None
                if self._left < 0:
                    raise ProtocolError(0, "protocol_error", "a negative chunk size")
                self._state = "trailer" if self._left == 0 else "data"
            elif self._state == "trailer" and not line:
                self.done = True
        return bytes(out)


class TextStream:
    """Live output of one stream for callbacks: ``str`` while it is valid UTF-8 (a character
    split across chunks is held back until its last byte came, and its offset is that of its
    first byte), the raw ``bytes`` from the first invalid sequence on. Bytes held back that
    cannot be completed (a gap follows them, or the stream ends) are handed over as ``bytes``:
    every byte reaches the callback."""

    def __init__(self) -> None:
        self._held = b""
        self._next = 0  # the offset just past what was delivered or held
        self._binary = False

    def flush(self) -> list[tuple[Union[str, bytes], int]]:
        """What is held back, as bytes (at the end of the stream)."""
        held, self._held = self._held, b""
        return [(held, self._next - len(held))] if held else []

    def feed(self, data: bytes, offset: int) -> list[tuple[Union[str, bytes], int]]:
        out = self.flush() if offset != self._next else []  # a gap: the held cannot complete
        start = offset - len(self._held)
        whole = self._held + data
        self._next = offset + len(data)
        if self._binary:
            self._held = b""
            return out + [(whole, start)]
        cut = len(whole)
        # Hold back an incomplete character at the end (at most 3 bytes of one).
        for back in range(1, min(4, len(whole)) + 1):
            b = whole[-back]
            if b & 0xC0 == 0x80:
                continue
            need = 2 if b & 0xE0 == 0xC0 else 3 if b & 0xF0 == 0xE0 else 4 if b & 0xF8 == 0xF0 else 1
            if need > back:
                cut = len(whole) - back
            break
        try:
            text = whole[:cut].decode("utf-8")
        except UnicodeDecodeError:
            self._binary = True
            self._held = b""
            return out + [(whole, start)]
        self._held = whole[cut:]
        return out + [(text, start)] if text else out
