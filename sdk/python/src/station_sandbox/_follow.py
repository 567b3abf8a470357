"""Following a run's output or a service's logs over WebSocket, the logic the sync and the async
clients share (no I/O here): which bytes to hand the caller, which gaps to report, and when to
open the stream again from where the caller stands.

A follower that reads more slowly than the run writes (a slow callback) is caught up by the
server from what it still keeps (docs/api.md, "Resuming a stream"), so a ``gap`` message is
always bytes the run did not keep. A connection that breaks is opened again from the first byte
not yet handed over. So the caller gets every kept byte exactly once, and a gap
(:class:`OutputGap`) for exactly the bytes the run did not keep."""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass
from typing import Any, Optional, Union

from .errors import InvalidArgument, ProtocolError, error_from_event

STREAMS = ("stdout", "stderr")
RETRIES = 3
"""Connections in a row that bring nothing new before a follow fails."""


@dataclass(frozen=True)
class OutputGap:
    """``bytes`` bytes of ``stream`` from ``offset`` on that the follower will never get: the
    run (or the service's attempt) did not keep them (the middle of a long output)."""

    stream: str
    offset: int
    bytes: int


Item = Union[tuple[str, bytes, int], OutputGap]
"""What a follow hands over: ``(stream, data, offset)`` or an :class:`OutputGap`."""


class FollowState:
    """One follower's position over its connections. ``from_offset``: bytes before it (per
    stream; an int for both) are not handed over."""

    def __init__(self, from_offset: Union[int, dict[str, int]] = 0) -> None:
        if isinstance(from_offset, int):
            start = {s: from_offset for s in STREAMS}
        else:
            start = {s: int(from_offset.get(s, 0)) for s in STREAMS}
        if any(v < 0 for v in start.values()):
            raise InvalidArgument("from_offset must not be negative")
        self.pos = dict(start)  # handed over (data or gap) up to here
        self.seen = {s: 0 for s in STREAMS}  # the server's bytes accounted for up to here
        self.end: Optional[dict[str, Any]] = None

    def resume_query(self) -> str:
        """The query that opens the stream again where this follower stands."""
        if not any(self.seen.values()):
            return ""
        return f"stdoutOffset={self.seen['stdout']}&stderrOffset={self.seen['stderr']}"

    def path(self, base: str) -> str:
        q = self.resume_query()
        return f"{base}{'&' if '?' in base else '?'}{q}" if q else base

    @property
    def progress(self) -> int:
        return self.seen["stdout"] + self.seen["stderr"]

    def _gap(self, stream: str, offset: int, n: int, out: list[Item]) -> None:
        """Accounts for bytes the run did not keep."""
        start = max(offset, self.seen[stream])
        end = offset + n
        if end <= start:
            return
        self.seen[stream] = end
        start = max(start, self.pos[stream])
        if end > start:
            out.append(OutputGap(stream, start, end - start))
            self.pos[stream] = end

    def data(self, stream: str, offset: int, data: bytes, out: list[Item]) -> None:
        end = offset + len(data)
        if end <= self.seen[stream]:
            return  # sent again after a reconnect
        if offset < self.seen[stream]:
            data, offset = data[self.seen[stream] - offset:], self.seen[stream]
        if offset > self.seen[stream]:
            self._gap(stream, self.seen[stream], offset - self.seen[stream], out)
        self.seen[stream] = end
        if end <= self.pos[stream]:
            return
        if offset < self.pos[stream]:
            data, offset = data[self.pos[stream] - offset:], self.pos[stream]
        out.append((stream, data, offset))
        self.pos[stream] = end

    def binary(self, payload: bytes, what: str) -> list[Item]:
        """A binary message: 1 byte stream, 8 bytes offset, the data."""
        out: list[Item] = []
        if self.end is not None:
            return out
        if len(payload) < 9 or payload[0] not in (1, 2):
            raise ProtocolError(0, "protocol_error", f"{what}: a binary message without its "
                                "9-byte prefix")
        self.data(STREAMS[payload[0] - 1], struct.unpack_from("!Q", payload, 1)[0],
                  payload[9:], out)
        return out

    def text(self, payload: bytes, end_key: str, what: str) -> list[Item]:
        """A text message: ``gap``, ``end`` (the object under ``end_key``) or ``error``."""
        out: list[Item] = []
        if self.end is not None:
            return out
        try:
            m = json.loads(payload.decode("utf-8"))
        except ValueError:
            raise ProtocolError(0, "protocol_error", f"{what}: a text message that is not JSON") from None
        if not isinstance(m, dict):
            raise ProtocolError(0, "protocol_error", f"{what}: a message that is not an object")
        kind = m.get("type")
        if kind == "gap":
            s, off, n = m.get("stream"), m.get("offset"), m.get("bytes")
            if s not in STREAMS or not isinstance(off, int) or not isinstance(n, int) or off < 0 or n < 0:
                raise ProtocolError(0, "protocol_error", f"{what}: a gap without stream, offset and bytes")
            self._gap(s, off, n, out)
        elif kind == "end":
            obj = m.get(end_key)
            if not isinstance(obj, dict):
                raise ProtocolError(0, "protocol_error", f"{what}: an end without {end_key!r}")
            self.end = obj
        elif kind == "error":
            raise error_from_event(m.get("error"), what)
        return out

    def stored(self, parts: list[tuple[str, Optional[bytes], Optional[bytes], int]]) -> list[Item]:
        """What is left of a finished attempt from its stored output: per stream its head, its
        tail and its byte count. The bytes between them were not kept."""
        out: list[Item] = []
        for stream, head, tail, total in parts:
            if head:
                self.data(stream, 0, head, out)
            if tail:
                self.data(stream, total - len(tail), tail, out)
            if total > self.seen[stream]:
                self._gap(stream, self.seen[stream], total - self.seen[stream], out)
        return out


def as_bytes(part: Union[str, bytes, None]) -> Optional[bytes]:
    if part is None:
        return None
    return part.encode("utf-8") if isinstance(part, str) else part
