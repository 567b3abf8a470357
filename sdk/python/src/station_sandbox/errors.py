"""Errors: every failure of a call is a :class:`StationError`.

An error answer of the controller (``{"error":{"code","message","field"}}``) becomes the
subclass for its status (:class:`NotFound`, :class:`Conflict`, ...). When no answer came at all,
``status`` is 0 and ``code`` says why: ``connection_failed`` (nothing listens there, a refused
or reset connection), ``timeout`` (:class:`Timeout`: the controller did not answer within the
client's timeout; :class:`WorkerTimeout` names the worker) or ``protocol_error`` (an answer that is not the API's). A call this client
refuses before sending it is :class:`InvalidArgument` (status 0, code ``invalid_argument``; also
a ``ValueError``).
"""

from __future__ import annotations

import json
from typing import Any, Optional

__all__ = [
    "StationError",
    "BadRequest",
    "InvalidArgument",
    "Unauthorized",
    "Forbidden",
    "NotFound",
    "Conflict",
    "Paused",
    "PreconditionFailed",
    "PayloadTooLarge",
    "TooManyRequests",
    "Unavailable",
    "ConnectionFailed",
    "Timeout",
    "ProtocolError",
    "WorkerUnavailable",
    "WorkerTimeout",
]


class StationError(Exception):
    """A failed call: ``status`` (HTTP status, 0 when no answer came), ``code``
    (``not_found``, ``invalid_argument``, ... as in docs/api.md), ``message`` and ``field`` (the
    request field at fault, such as ``"timeoutMs"``, else ``None``)."""

    status: int
    code: str
    message: str
    field: Optional[str]

    def __init__(self, status: int, code: str, message: str, field: Optional[str] = None) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.field = field

    def __str__(self) -> str:
        where = f" (field {self.field})" if self.field else ""
        return f"{self.message}{where} [{self.status} {self.code}]"

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(status={self.status!r}, code={self.code!r}, "
                f"message={self.message!r}, field={self.field!r})")


class BadRequest(StationError):
    """400: a request the controller refused; ``field`` names the field at fault."""


class InvalidArgument(BadRequest, ValueError, TypeError):
    """A call this client refuses before asking the controller (status 0, code
    ``invalid_argument``): an empty command, a bad mode, a header value with a line break, a
    malformed workers list, ... Also a ``ValueError`` (and ``TypeError``), as it was before."""

    def __init__(self, message: str, field: Optional[str] = None) -> None:
        super().__init__(0, "invalid_argument", message, field)

    def __str__(self) -> str:
        return self.message  # as the ValueError it was


class Unauthorized(StationError):
    """401: a TCP listener without a valid bearer token."""


class Forbidden(StationError):
    """403: a file operation the sandbox's user may not do."""


class NotFound(StationError):
    """404: an unknown workspace, run, service, terminal, image, file or path."""


class Conflict(StationError):
    """409: the wrong state (the workspace is not ready, the run already finished, ...)."""


class Paused(Conflict):
    """409 with code ``paused``: a command, terminal, file write or service start on a paused
    workspace created without ``auto_resume``. ``ws.resume()`` and try again."""


class PreconditionFailed(StationError):
    """412: a file changed since the etag given as ``if_match``."""


class PayloadTooLarge(StationError):
    """413: a body or a file over the limit."""


class TooManyRequests(StationError):
    """429: a limit of the worker (running commands, workspaces, file operations, ...)."""


class Unavailable(StationError):
    """503: the worker (or the workspace's agent) cannot do it now. From ``ready()``, the
    message names each failing check."""


class ConnectionFailed(StationError):
    """No answer: nothing listens at the endpoint, or the connection broke (status 0): the
    controller closed it before answering, an answer or a stream broke off, a terminal's
    session ended without the terminal's end. The same in :class:`Client` and
    :class:`AsyncClient`."""


class WorkerUnavailable(ConnectionFailed):
    """A worker of a client with several workers did not answer (refused, unreachable): the
    message names it, ``worker`` and ``url`` say which; the other workers keep working."""

    worker: str
    url: str

    def __init__(self, worker: str, url: str, reason: str, message: Optional[str] = None) -> None:
        super().__init__(0, "connection_failed",
                         message or f"worker {worker} ({url}) did not answer: {reason}")
        self.worker = worker
        self.url = url
        self.reason = reason


class Timeout(StationError, TimeoutError):
    """No answer within the client's timeout (status 0, code ``timeout``)."""


class WorkerTimeout(WorkerUnavailable, Timeout):
    """A worker of a client with several workers accepted the connection and did not answer
    within the client's timeout (code ``timeout``): "worker w2 (URL) did not answer within
    2 s". Both a :class:`WorkerUnavailable` and a :class:`Timeout`."""

    def __init__(self, worker: str, url: str, seconds: float) -> None:
        super().__init__(worker, url, f"no answer within {seconds:g} s",
                         f"worker {worker} ({url}) did not answer within {seconds:g} s")
        self.code = "timeout"


class ProtocolError(StationError):
    """An answer that is not what the API sends (status 0 or the HTTP status)."""


_BY_STATUS: dict[int, type[StationError]] = {
    400: BadRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    412: PreconditionFailed,
    413: PayloadTooLarge,
    429: TooManyRequests,
    503: Unavailable,
}

_STATUS_OF_CODE: dict[str, int] = {
    "invalid_argument": 400,
    "unauthorized": 401,
    "forbidden": 403,
    "not_found": 404,
    "conflict": 409,
    "paused": 409,
    "precondition_failed": 412,
    "payload_too_large": 413,
    "range_not_satisfiable": 416,
    "too_many_requests": 429,
    "bad_gateway": 502,
    "unavailable": 503,
    "insufficient_storage": 507,
    "internal": 500,
}


def make_error(status: int, code: str, message: str, field: Optional[str] = None) -> StationError:
    """The StationError subclass for ``status`` (and for 409 ``paused``, :class:`Paused`)."""
    if status == 409 and code == "paused":
        return Paused(status, code, message, field)
    return _BY_STATUS.get(status, StationError)(status, code, message, field)


def error_from_body(status: int, body: bytes, what: str) -> StationError:
    """A StationError from an error answer; tolerates a body that is not the documented shape."""
    try:
        doc: Any = json.loads(body.decode("utf-8"))
        err = doc.get("error") if isinstance(doc, dict) else None
        if isinstance(err, dict) and isinstance(err.get("code"), str) and isinstance(
                err.get("message"), str):
            field = err.get("field") if isinstance(err.get("field"), str) else None
            return make_error(status, err["code"], err["message"], field)
    except (UnicodeDecodeError, ValueError):
        pass
    text = body[:200].decode("utf-8", "replace")
    return make_error(status, "internal" if status >= 500 else "protocol_error",
                      f"{what}: HTTP {status}: {text}")


def error_from_event(err: Any, what: str) -> StationError:
    """A StationError from an ``{"type":"error","error":{...}}`` event of a stream."""
    if not isinstance(err, dict):
        return ProtocolError(0, "protocol_error", f"{what}: an error event without an error")
    code = err.get("code") if isinstance(err.get("code"), str) else "internal"
    message = err.get("message") if isinstance(err.get("message"), str) else f"{what} failed"
    field = err.get("field") if isinstance(err.get("field"), str) else None
    return make_error(_STATUS_OF_CODE.get(code, 500), code, message, field)
