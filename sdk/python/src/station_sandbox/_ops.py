"""The API's request/answer logic written once, as generators the sync and the async clients
drive: an operation yields a :class:`Req`, is sent the parsed JSON answer, and returns its
result. Loops (waiting until a run is terminal, until a service has stopped) live here too."""

from __future__ import annotations

import base64
import re
import time
import urllib.parse
import uuid
from datetime import datetime, timedelta, timezone
from dataclasses import dataclass, field
from typing import Any, Generator, Iterable, Mapping, Optional, TypeVar, Union

from ._wire import query, seg
from ._follow import as_bytes
from .errors import InvalidArgument, ProtocolError, StationError, Timeout, Unavailable
from .models import CONTEXT_LANGUAGES, Attempt, ReadyReport, Run, Service, UsageHistory

T = TypeVar("T")

NO_BODY = object()
SERVER_WAIT_CAP_MS = 60_000
"""The server's cap on ``waitMs``."""

CONTAINER_CHECKS = frozenset(["runtime", "images", "image", "seccompProfile", "homeSize"])
NETWORK_CHECKS = frozenset(["networkRange", "bridge", "ipForward", "nftables", "resolver",
                            "denialLog"])
INFO_CHECKS = frozenset(["checkpoint"])
"""Checks that never decide ``ready``: ``checkpoint`` says whether memory snapshots work."""


@dataclass
class Req:
    """One JSON request. ``wait_s``: how long the server may hold it on purpose (a long-poll),
    added to the client's timeout. ``accept``: statuses answered as results, not errors."""

    method: str
    path: str
    body: Any = NO_BODY
    wait_s: float = 0.0
    accept: tuple[int, ...] = field(default_factory=tuple)
    timeout_s: Optional[float] = None
    headers: dict[str, str] = field(default_factory=dict)


Op = Generator[Req, Any, T]


def simple(method: str, path: str, body: Any = NO_BODY, **kw: Any) -> Op[Any]:
    return (yield Req(method, path, body, **kw))


def ws_path(ws_id: str, rest: str = "") -> str:
    return f"/v1/workspaces/{seg(ws_id)}{rest}"


# -- code contexts -----------------------------------------------------------------------------

CONTEXT_START_S = 35
"""What a context's create or restart gets on top of the client's timeout: the controller
answers once the new interpreter does, which it waits up to 30 s for (longer than the default
timeout on a loaded machine)."""


def context_path(ws_id: str, context_id: str, rest: str = "") -> str:
    return ws_path(ws_id, f"/contexts/{seg(context_id)}{rest}")


def context_create(ws_id: str, language: str, cwd: Optional[str],
                   env: Optional[Mapping[str, str]]) -> Op[Any]:
    if language not in CONTEXT_LANGUAGES:
        raise InvalidArgument(f"language must be python or javascript, not {language!r}",
                              "language")
    body: dict[str, Any] = {"language": language}
    if cwd is not None:
        body["cwd"] = cwd
    if env is not None:
        body["env"] = dict(env)
    return (yield Req("POST", ws_path(ws_id, "/contexts"), body, wait_s=CONTEXT_START_S))


def context_restart(ws_id: str, context_id: str) -> Op[Any]:
    return (yield Req("POST", context_path(ws_id, context_id, "/restart"),
                      wait_s=CONTEXT_START_S))


def context_execute(ws_id: str, context_id: str, code: str, timeout_ms: Optional[int],
                    live: bool) -> Op[Any]:
    """POST …/execute: long-polled (the server's cap) unless the caller follows it live."""
    if not isinstance(code, str):
        raise InvalidArgument("code must be a string", "code")
    body: dict[str, Any] = {"code": code}
    if timeout_ms is not None:
        body["timeoutMs"] = timeout_ms
    q = "" if live else f"?waitMs={SERVER_WAIT_CAP_MS}"
    return (yield Req("POST", context_path(ws_id, context_id, f"/execute{q}"), body,
                      wait_s=0 if live else SERVER_WAIT_CAP_MS / 1000))


# -- usage history -----------------------------------------------------------------------------

UsageSince = Union[str, int, datetime, timedelta]
"""A usage history's start: an RFC 3339 time or a duration back from now as the API takes it
(``"2026-12-07T07:00:00Z"``, ``"1h"``, ``"90s"``), a ``datetime`` (naive: UTC), a
``timedelta`` back from now, or an ``int`` of milliseconds since the epoch."""
UsageStep = Union[str, int, timedelta]
"""A usage history's step: ``"5s"``, ``"1m"``, a ``timedelta`` or an ``int`` of milliseconds
(100 ms to 24 h)."""


def _duration_text(what: str, d: timedelta) -> str:
    ms = int(d / timedelta(milliseconds=1))
    if ms < 0:
        raise InvalidArgument(f"{what} {d!r}: a duration must not be negative")
    return f"{ms // 1000}s" if ms % 1000 == 0 else f"{ms}ms"


def usage_since_text(since: UsageSince) -> str:
    if isinstance(since, bool):
        raise InvalidArgument(f"since {since!r}: not a time")
    if isinstance(since, datetime):
        at = since if since.tzinfo else since.replace(tzinfo=timezone.utc)
        return at.astimezone(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    if isinstance(since, timedelta):
        return _duration_text("since", since)
    if isinstance(since, int):
        if since < 10 ** 12:
            raise InvalidArgument(f"since {since}: an int is milliseconds since the epoch "
                                  f"(a duration is a timedelta or a string such as '1h')")
        return str(since)
    if isinstance(since, str):
        return since
    raise InvalidArgument(f"since {since!r}: want a str, datetime, timedelta or int")


def usage_step_text(step: UsageStep) -> str:
    if isinstance(step, bool):
        raise InvalidArgument(f"step {step!r}: not a duration")
    if isinstance(step, timedelta):
        return _duration_text("step", step)
    if isinstance(step, int):
        return f"{step}ms"
    if isinstance(step, str):
        return step
    raise InvalidArgument(f"step {step!r}: want a str, timedelta or int of milliseconds")


def usage_history(path: str, since: Optional[UsageSince], step: Optional[UsageStep]) -> Op[UsageHistory]:
    """GET path?since=&step= (since an hour back when neither is given: without both the
    workspace's path answers its use now). A malformed one is the server's BadRequest naming it."""
    q = {"since": "1h" if since is None and step is None else None}
    if since is not None:
        q["since"] = usage_since_text(since)
    if step is not None:
        q["step"] = usage_step_text(step)
    return UsageHistory((yield Req("GET", path + query(q))))


def defined(**kw: Any) -> dict[str, Any]:
    return {k: v for k, v in kw.items() if v is not None}


# -- worker ------------------------------------------------------------------------------------


def ready(where: str, adapter: Optional[str]) -> Op[ReadyReport]:
    """The ready report; Unavailable naming each failing check that matters (to ``adapter``, or
    to the worker's default adapter when None)."""
    report = yield Req("GET", "/v1/ready", accept=(503,))
    if not isinstance(report, dict) or not isinstance(report.get("checks"), list):
        raise ProtocolError(0, "protocol_error", f"GET /v1/ready: not a ready report: {report!r:.120}")
    kind = adapter or report.get("defaultAdapter")
    failing = []
    for c in report["checks"]:
        if not isinstance(c, dict) or c.get("ok") is True:
            continue
        name = str(c.get("name"))
        if kind == "host" and name in CONTAINER_CHECKS:
            continue
        if name in NETWORK_CHECKS:
            continue  # they matter only to bridge and restricted workspaces
        if name in INFO_CHECKS:
            continue  # memory snapshots only: their refusal names it
        failing.append(f"{name}: {c.get('message')}")
    if adapter is not None and adapter not in (report.get("adapters") or []):
        failing.append(f"adapters: the worker does not allow {adapter!r} workspaces "
                       f"(it allows {', '.join(report.get('adapters') or []) or 'none'})")
    if failing or (adapter is None and report.get("ready") is not True):
        why = "; ".join(failing) or "the worker says it is not ready"
        raise Unavailable(503, "unavailable",
                          f"worker at {where} is not ready for {kind} workspaces: {why}")
    return report  # type: ignore[no-any-return]


# -- creates: an Idempotency-Key, retried with it -------------------------------------------


def idempotency_key(key: Optional[str]) -> str:
    """``key``, checked (1-255 printable ASCII), else a random one for this call."""
    if key is None:
        return str(uuid.uuid4())
    if not isinstance(key, str) or not 1 <= len(key) <= 255 or any(not " " <= c <= "~" for c in key):
        raise InvalidArgument(f"idempotency_key must be 1-255 printable ASCII characters, not {key!r}",
                              "Idempotency-Key")
    return key


def create(path: str, body: Any, key: Optional[str], retries: int = 2,
           timeout_s: Optional[float] = None, wait_s: float = 0.0) -> Op[Any]:
    """A POST that makes an object, with an ``Idempotency-Key`` (``key``, else a random one):
    after no answer (the connection broke, a timeout) or ``in_progress`` it is sent again with
    the same key, at most ``retries`` times, and never makes a second object (docs/api.md,
    "Idempotency keys")."""
    h = {"Idempotency-Key": idempotency_key(key)}
    if not isinstance(retries, int) or not 0 <= retries <= 10:
        raise InvalidArgument(f"retries must be an integer from 0 to 10, not {retries!r}")
    for attempt in range(retries + 1):
        try:
            return (yield Req("POST", path, body, wait_s=wait_s, timeout_s=timeout_s, headers=h))
        except StationError as e:
            busy = e.code == "in_progress"
            if attempt >= retries or not (busy or e.code in ("connection_failed", "timeout")):
                raise
        yield Req("SLEEP", "", 1.0 if busy else 0.25 * 2 ** attempt)
    raise AssertionError("unreachable")


# -- workspaces --------------------------------------------------------------------------------


IDLE_ACTIONS = ("stop", "pause")


def create_body(adapter: Optional[str], image: Optional[str], env: Optional[Mapping[str, str]],
                cpus: Optional[float], memory_mb: Optional[int], pids_limit: Optional[int],
                network: Optional[str], seccomp_profile: Optional[str],
                egress: Optional[Mapping[str, Any]],
                idle_timeout_ms: Optional[int] = None, snapshot: Optional[str] = None,
                auto_resume: Optional[bool] = None,
                idle_action: Optional[str] = None, name: Optional[str] = None,
                labels: Optional[Mapping[str, str]] = None) -> dict[str, Any]:
    if snapshot is not None:
        seg(snapshot)
        if image is not None:
            raise InvalidArgument("snapshot and image are exclusive (a snapshot has its image)",
                                  "snapshot")
    if auto_resume is not None and not isinstance(auto_resume, bool):
        raise InvalidArgument(f"auto_resume must be True or False, not {auto_resume!r}", "autoResume")
    if idle_action is not None and idle_action not in IDLE_ACTIONS:
        raise InvalidArgument(f"idle_action must be 'stop' or 'pause', not {idle_action!r}",
                              "idleAction")
    return defined(adapter=adapter, image=image, env=dict(env) if env is not None else None,
                   cpus=cpus, memoryMb=memory_mb, pidsLimit=pids_limit, network=network,
                   seccompProfile=seccomp_profile,
                   egress=dict(egress) if egress is not None else None,
                   idleTimeoutMs=idle_timeout_ms, snapshot=snapshot,
                   autoResume=auto_resume or None, idleAction=idle_action, name=name,
                   labels=dict(labels) if labels is not None else None)


# A workspace id is WORKER-<26 of [a-z2-7]>; anything else of a name's characters is a name
# (docs/api.md, "Names and labels"): the shape alone tells them apart, on every worker.
_ID_TAIL = re.compile(r"[a-z2-7]{26}")
_NAME = re.compile(r"[a-z0-9][a-z0-9._-]{0,62}")


def is_name(ws: str) -> bool:
    """Whether ``ws`` is a workspace name rather than an id."""
    head, dash, tail = ws.rpartition("-")
    if dash and head and _ID_TAIL.fullmatch(tail):
        return False
    return _NAME.fullmatch(ws) is not None


def list_path(labels: Union[Mapping[str, Optional[str]], Iterable[str], None],
              name: Optional[str], state: Optional[str]) -> str:
    """GET /v1/workspaces with its filters: ``labels`` a mapping (a value of None: the key is
    set, whatever its value) or strings ``"k=v"`` / ``"k"``; all must hold."""
    q: list[tuple[str, str]] = []
    if isinstance(labels, Mapping):
        q += [("label", k if v is None else f"{k}={v}") for k, v in labels.items()]
    elif labels is not None:
        if isinstance(labels, str):
            raise InvalidArgument("labels: a mapping or a list of 'key=value' / 'key', not a str",
                                  "labels")
        q += [("label", str(x)) for x in labels]
    if name is not None:
        q.append(("name", name))
    if state is not None:
        q.append(("state", state))
    return "/v1/workspaces" + ("?" + urllib.parse.urlencode(q, safe="=/") if q else "")


class _Unset:
    def __repr__(self) -> str:
        return "UNSET"


UNSET: Any = _Unset()


def update_body(name: Any, labels: Optional[Mapping[str, Optional[str]]]) -> dict[str, Any]:
    """PATCH /v1/workspaces/{id}'s JSON merge patch: ``name`` a str, None (removes it) or
    UNSET (unchanged); ``labels`` merged into the workspace's (a value of None removes that
    key, the others stay)."""
    body: dict[str, Any] = {}
    if name is not UNSET:
        body["name"] = name
    if labels is not None:
        body["labels"] = dict(labels)
    if not body:
        raise InvalidArgument("nothing to update: give name= or labels=", "name")
    return body


def list_of(doc: Any, key: str, what: str) -> list[Any]:
    if not isinstance(doc, dict) or not isinstance(doc.get(key), list):
        raise ProtocolError(0, "protocol_error", f"{what}: no {key!r} list in the answer")
    return doc[key]  # type: ignore[no-any-return]


# -- commands ----------------------------------------------------------------------------------


def command_body(command: str, cwd: Optional[str], env: Optional[Mapping[str, str]],
                 stdin: Union[str, bytes, None], timeout_ms: Optional[int],
                 max_output_bytes: Optional[int]) -> dict[str, Any]:
    if not isinstance(command, str) or not command:
        raise InvalidArgument("command must be a non-empty string")
    body = defined(command=command, cwd=cwd, env=dict(env) if env is not None else None,
                   timeoutMs=timeout_ms, maxOutputBytes=max_output_bytes)
    if isinstance(stdin, str):
        body["stdin"] = stdin
    elif isinstance(stdin, (bytes, bytearray, memoryview)):
        body["stdin"] = base64.b64encode(bytes(stdin)).decode("ascii")
        body["stdinEncoding"] = "base64"
    elif stdin is not None:
        raise InvalidArgument(f"stdin must be str or bytes, not {type(stdin).__name__}")
    return body


def start(ws_id: str, body: dict[str, Any], wait_ms: Optional[int] = None,
          key: Optional[str] = None, retries: int = 2) -> Op[Run]:
    q = query({"waitMs": wait_ms})
    doc = yield from create(ws_path(ws_id, f"/commands{q}"), body, key, retries,
                            wait_s=(wait_ms or 0) / 1000)
    return Run(doc)


def get_run(ws_id: str, run_id: str, wait_ms: Optional[int] = None) -> Op[Run]:
    q = query({"waitMs": wait_ms})
    doc = yield Req("GET", ws_path(ws_id, f"/commands/{seg(run_id)}{q}"),
                    wait_s=(wait_ms or 0) / 1000)
    return Run(doc)


def wait_run(ws_id: str, run_id: str, timeout_ms: Optional[int] = None,
             first: Optional[Run] = None) -> Op[Run]:
    """Long-polls until the run is terminal; after ``timeout_ms`` returns it as it is (still
    ``running``)."""
    deadline = None if timeout_ms is None else time.monotonic() + timeout_ms / 1000
    run = first
    while run is None or not run.done:
        left_ms = SERVER_WAIT_CAP_MS if deadline is None else int(
            (deadline - time.monotonic()) * 1000)
        if run is not None and left_ms <= 0:
            break
        wait = max(0, min(SERVER_WAIT_CAP_MS, left_ms))
        run = yield from get_run(ws_id, run_id, wait or None)
    return run


def run(ws_id: str, body: dict[str, Any], key: Optional[str] = None) -> Op[Run]:
    """Starts a command and waits until it is terminal."""
    first = yield from start(ws_id, body, SERVER_WAIT_CAP_MS, key)
    return (yield from wait_run(ws_id, first.id, None, first))


CANCEL_TIMEOUT_S = 5.0
"""A cancel's own deadline beyond the 10 s the server may hold it, whatever the client's timeout:
a worker that does not answer it is named soon."""


def cancel(ws_id: str, run_id: str) -> Op[Run]:
    doc = yield Req("POST", ws_path(ws_id, f"/commands/{seg(run_id)}/cancel"), wait_s=10,
                    timeout_s=CANCEL_TIMEOUT_S)
    return Run(doc)


# -- services ----------------------------------------------------------------------------------


def service_body(name: str, command: str, restart: Union[str, Mapping[str, Any], None],
                 max_restarts: Optional[int], delay_ms: Optional[int],
                 backoff: Optional[Mapping[str, Any]], cwd: Optional[str],
                 env: Optional[Mapping[str, str]], stop_signal: Union[str, int, None],
                 stop_timeout_ms: Optional[int], autostart: Optional[bool]) -> dict[str, Any]:
    policy: dict[str, Any] = {}
    if isinstance(restart, str):
        policy["policy"] = restart
    elif restart is not None:
        policy.update(restart)
    policy.update(defined(maxRestarts=max_restarts, delayMs=delay_ms,
                          backoff=dict(backoff) if backoff is not None else None))
    return defined(name=name, command=command, cwd=cwd,
                   env=dict(env) if env is not None else None, restart=policy or None,
                   stopSignal=stop_signal, stopTimeoutMs=stop_timeout_ms, autostart=autostart)


def svc_path(ws_id: str, name: str, rest: str = "") -> str:
    return ws_path(ws_id, f"/services/{seg(name)}{rest}")


POLL_S = 0.05


def stop_service(ws_id: str, name: str, timeout_s: float) -> Op[Service]:
    """Stops and waits (polling, bounded by ``timeout_s``) until the attempt has ended."""
    svc = Service((yield Req("POST", svc_path(ws_id, name, "/stop"))))
    deadline = time.monotonic() + timeout_s
    while svc.stopping or svc.state in ("starting", "running"):
        if time.monotonic() > deadline:
            raise StationError(0, "timeout", f"service {name!r} did not stop within "
                               f"{timeout_s:g} s (state {svc.state}, stopping {svc.stopping})")
        yield Req("SLEEP", "", POLL_S)
        svc = Service((yield Req("GET", svc_path(ws_id, name))))
    return svc


def wait_attempt(ws_id: str, name: str, timeout_s: float) -> Op[Service]:
    """The service once it has an attempt (a service just started is ``starting`` without one
    for a moment: its logs' follow would show the previous attempt's, or nothing)."""
    deadline = time.monotonic() + timeout_s
    svc = Service((yield Req("GET", svc_path(ws_id, name))))
    while svc.state == "starting" and not svc.current_attempt:
        if time.monotonic() > deadline:
            raise Timeout(0, "timeout", f"service {name!r} did not begin an attempt within "
                          f"{timeout_s:g} s")
        yield Req("SLEEP", "", POLL_S)
        svc = Service((yield Req("GET", svc_path(ws_id, name))))
    return svc


def attempt_parts(a: Attempt) -> list[tuple[str, Optional[bytes], Optional[bytes], int]]:
    """A finished attempt's stored output, per stream: head, tail and byte count."""
    return [(s, as_bytes(head), as_bytes(tail), total or 0)
            for s, head, tail, total in (("stdout", a.stdout, a.stdout_tail, a.stdout_bytes),
                                         ("stderr", a.stderr, a.stderr_tail, a.stderr_bytes))]


# -- previews (docs/api.md, "Previews") --------------------------------------------------------

PREVIEW_MAX_EXPIRES_MS = 30 * 24 * 3600 * 1000
"""The longest ``expiresInMs`` the server takes (30 days; its default is 24 hours)."""


def port_number(port: Any) -> int:
    if not isinstance(port, int) or isinstance(port, bool) or not 1 <= port <= 65535:
        raise InvalidArgument(f"port must be an integer from 1 to 65535, not {port!r}", "port")
    return port


def with_open_url(exposure: Any) -> Any:
    """A token exposure with ``openUrl``: its ``url`` with ``?station_preview_token=TOKEN``, the
    link a browser opens once (the preview sets its cookie and redirects to ``url``)."""
    if isinstance(exposure, dict) and isinstance(exposure.get("token"), str) and \
            isinstance(exposure.get("url"), str) and "openUrl" not in exposure:
        exposure["openUrl"] = exposure["url"] + query({"station_preview_token": exposure["token"]})
    return exposure


def port_expose(ws_id: str, port: int, public: bool, expires_in_ms: Optional[int]) -> Op[Any]:
    """POST …/ports: the exposure, with its token (token access: shown this once) and openUrl."""
    if not isinstance(public, bool):
        raise InvalidArgument(f"public must be True or False, not {public!r}", "public")
    body: dict[str, Any] = {"port": port_number(port), "access": "public" if public else "token"}
    if expires_in_ms is not None:
        if not isinstance(expires_in_ms, int) or isinstance(expires_in_ms, bool) or \
                not 1 <= expires_in_ms <= PREVIEW_MAX_EXPIRES_MS:
            raise InvalidArgument(f"expires_in_ms must be an integer from 1 to "
                                  f"{PREVIEW_MAX_EXPIRES_MS} (30 days), not {expires_in_ms!r}",
                                  "expiresInMs")
        body["expiresInMs"] = expires_in_ms
    return with_open_url((yield Req("POST", ws_path(ws_id, "/ports"), body)))


def port_list(ws_id: str) -> Op[Any]:
    doc = yield Req("GET", ws_path(ws_id, "/ports"))
    list_of(doc, "exposed", "GET ports")
    list_of(doc, "listening", "GET ports")
    return doc


def port_revoke(ws_id: str, port: int) -> Op[None]:
    yield Req("DELETE", ws_path(ws_id, f"/ports/{port_number(port)}"))
    return None


# -- pause, snapshots, fork (docs/api.md, "Pause and resume", "Snapshots and fork") ------------

FORK_MAX = 100
SNAPSHOT_NAME_MAX = 128
SNAPSHOT_TIMEOUT_S = 600.0
"""A snapshot reads the workspace's changed files: more than the client's usual timeout."""


def snapshot_create(ws_id: str, name: Optional[str], memory: bool) -> Op[Any]:
    """POST …/snapshots: the snapshot."""
    if name is not None and (not isinstance(name, str) or not 1 <= len(name) <= SNAPSHOT_NAME_MAX
                             or any(c < " " or c == "\x7f" for c in name)):
        raise InvalidArgument(f"name must be 1 to {SNAPSHOT_NAME_MAX} characters without control "
                              f"characters, not {name!r:.160}", "name")
    if not isinstance(memory, bool):
        raise InvalidArgument(f"memory must be True or False, not {memory!r}", "memory")
    body = defined(name=name, memory=memory)
    return (yield Req("POST", ws_path(ws_id, "/snapshots"), body, timeout_s=SNAPSHOT_TIMEOUT_S))


def snapshot_path(snapshot_id: str) -> str:
    return f"/v1/snapshots/{seg(snapshot_id)}"


def fork(ws_id: str, count: int) -> Op[Any]:
    """POST …/fork: ``{"workspaces":[…],"snapshot","pausedMs"}``."""
    if not isinstance(count, int) or isinstance(count, bool) or not 1 <= count <= FORK_MAX:
        raise InvalidArgument(f"count must be an integer from 1 to {FORK_MAX}, not {count!r}", "count")
    doc = yield Req("POST", ws_path(ws_id, "/fork"), {"count": count},
                    timeout_s=SNAPSHOT_TIMEOUT_S + 10 * count)
    list_of(doc, "workspaces", "POST fork")
    return doc


# -- events, tokens, audit ---------------------------------------------------------------------


def events_path(workspace: Optional[str], types: Optional[Any], since: Optional[int]) -> str:
    if types is not None and not isinstance(types, str):
        types = ",".join(types)
    return "/v1/events" + query({"since": since, "workspace": workspace, "types": types})


def event_of(data: str, what: str) -> dict[str, Any]:
    """An event's JSON (``{"seq", "type", ...}``; a gap is ``{"type": "gap", "seq", ...}``)."""
    from ._wire import loads
    doc = loads(data.encode("utf-8"), what)
    if not isinstance(doc, dict) or not isinstance(doc.get("seq"), int) or not isinstance(
            doc.get("type"), str):
        raise ProtocolError(0, "protocol_error", f"{what}: an event without seq and type")
    return doc


def token_body(name: str, scope: str, tenant: Optional[str], expires_at: Optional[str],
               limits: Optional[Mapping[str, Any]]) -> dict[str, Any]:
    return defined(name=name, scope=scope, tenant=tenant, expiresAt=expires_at,
                   limits=dict(limits) if limits is not None else None)


def audit_path(limit: Optional[int], before: Optional[int], token_id: Optional[str],
               tenant: Optional[str], workspace: Optional[str]) -> str:
    return "/v1/audit" + query({"limit": limit, "before": before, "tokenId": token_id,
                                "tenant": tenant, "workspace": workspace})
