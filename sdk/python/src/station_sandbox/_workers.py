"""Several workers behind one client: the worker list (the ``workers`` argument,
``$STATION_WORKERS`` or a workers file, shared with the CLI: docs/operations.md), the worker a
workspace id names, and where a create goes (the placement rule: docs/operations.md,
"Placement")."""

from __future__ import annotations

import os
import re
import stat
import urllib.parse
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Optional, Sequence, Union

from .errors import InvalidArgument, NotFound

NAME_RE = re.compile(r"[a-z0-9-]{1,32}")
MAX_FILE_BYTES = 256 * 1024
"""A workers file larger than this is refused (as by the CLI)."""
MAX_TOKEN_BYTES = 4096
_TOKEN_RE = re.compile(r"[\x21-\x7e]+")

WorkersArg = Union[Mapping[str, str], Sequence[Any]]
"""``{"w1": "http://host1:8080", ...}`` or ``[{"name", "url", "token"}, ...]`` (or
``(name, url[, token])`` tuples)."""


@dataclass(frozen=True)
class WorkerConfig:
    name: str
    url: str
    token: Optional[str] = None


def worker_of_id(workspace_id: str) -> str:
    """The worker a workspace id names: everything before its last ``-`` (``w2-abc...`` is on
    ``w2``)."""
    head, dash, _ = workspace_id.rpartition("-")
    return head if dash and head else workspace_id


_SNAPSHOT_RE = re.compile(r"s-(?:([a-z0-9-]{1,32})-)?[a-z2-7]{26}")


def snapshot_worker(snapshot_id: Any) -> Optional[str]:
    """The worker a snapshot id names: ``s-w2-<26 of [a-z2-7]>`` is on ``w2``; ``s-<26>``, as
    snapshots were named before their ids carried a worker, names none (None).
    InvalidArgument naming anything else."""
    m = _SNAPSHOT_RE.fullmatch(snapshot_id) if isinstance(snapshot_id, str) else None
    if m is None:
        raise InvalidArgument(f"invalid snapshot id {snapshot_id!r} (want s-WORKER-… as "
                              "snapshot create gives it)", "snapshot")
    return m.group(1)


def _check(name: Any, url: Any, token: Any, where: str) -> WorkerConfig:
    if not isinstance(name, str) or not NAME_RE.fullmatch(name):
        raise InvalidArgument(f"{where}: worker name {name!r} is not 1-32 of [a-z0-9-]")
    if not isinstance(url, str) or not url:
        raise InvalidArgument(f"{where}: worker {name} has no url")
    if url.startswith("unix:"):
        if not url[5:].startswith("/"):
            raise InvalidArgument(f"{where}: worker {name}: {url} is not unix:/absolute/path")
    else:
        u = urllib.parse.urlsplit(url)
        if u.scheme not in ("http", "https"):
            raise InvalidArgument(f"{where}: worker {name}: {url}: only http:, https: and unix: are supported")
        if not u.hostname:
            raise InvalidArgument(f"{where}: worker {name}: {url!r} is not a URL")
    if token is not None and (not isinstance(token, str) or any(c in token for c in "\r\n\0")):
        raise InvalidArgument(f"{where}: worker {name}: the token must be a string without line breaks")
    return WorkerConfig(name, url, token)


def _check_list(workers: list[WorkerConfig], where: str) -> list[WorkerConfig]:
    if not workers:
        raise InvalidArgument(f"{where}: no workers")
    seen: set[str] = set()
    for w in workers:
        if w.name in seen:
            raise InvalidArgument(f"{where}: worker {w.name} is named twice")
        seen.add(w.name)
    return workers


def parse_workers_env(value: str, where: str = "STATION_WORKERS") -> list[WorkerConfig]:
    """``w1=http://host1:8080,w2=http://host2:8080``."""
    out = []
    for item in (s.strip() for s in value.split(",")):
        if not item:
            continue
        name, eq, url = item.partition("=")
        if not eq:
            raise InvalidArgument(f"{where}: {item!r} is not NAME=URL")
        out.append(_check(name.strip(), url.strip(), None, where))
    return _check_list(out, where)


def _read_small(path: str, what: str, limit: int = MAX_FILE_BYTES) -> tuple[str, os.stat_result]:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as e:
        raise InvalidArgument(f"{what} {path}: {e.strerror or e}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise InvalidArgument(f"{what} {path}: not a regular file")
        data = b""
        while True:
            c = os.read(fd, limit + 1 - len(data))
            if not c:
                break
            data += c
            if len(data) > limit:
                raise InvalidArgument(f"{what} {path}: larger than {limit} bytes")
        try:
            return data.decode("utf-8"), st
        except UnicodeDecodeError:
            raise InvalidArgument(f"{what} {path}: not UTF-8 text") from None
    finally:
        os.close(fd)


def read_token_file(path: str) -> str:
    """A worker's token file (as the CLI reads it): a regular file owned by this user or root
    that neither group nor others may read or write (mode 0600 or stricter), holding one token
    of printable ASCII without spaces (a final newline is dropped)."""
    text, st = _read_small(path, "token file", MAX_TOKEN_BYTES)
    if st.st_uid not in (os.geteuid(), 0):
        raise InvalidArgument(f"token file {path}: owned by uid {st.st_uid}, not by you or root")
    if st.st_mode & 0o077:
        raise InvalidArgument(f"token file {path}: mode {stat.S_IMODE(st.st_mode):04o} lets group or "
                         f"others at it (chmod 600 {path})")
    token = text[:-1] if text.endswith("\n") else text
    token = token[:-1] if token.endswith("\r") else token
    if not _TOKEN_RE.fullmatch(token):
        raise InvalidArgument(f"token file {path}: not one token of printable ASCII without spaces")
    return token


def _token_path(p: str, workers_file: str) -> str:
    """``~/`` is $HOME; a relative path is beside the workers file."""
    if p.startswith("~/"):
        return os.path.join(os.path.expanduser("~"), p[2:])
    return p if os.path.isabs(p) else os.path.join(os.path.dirname(workers_file) or ".", p)


def read_workers_file(path: str) -> list[WorkerConfig]:
    """``NAME URL [TOKEN-FILE]`` per line; ``#`` comments and blank lines are ignored."""
    text, _ = _read_small(path, "workers file")
    out = []
    for i, raw in enumerate(text.split("\n"), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        where = f"workers file {path}, line {i}"
        parts = line.split()
        if len(parts) not in (2, 3):
            raise InvalidArgument(f"{where}: want NAME URL [TOKEN-FILE]")
        token = None
        if len(parts) == 3:
            try:
                token = read_token_file(_token_path(parts[2], path))
            except ValueError as e:
                raise InvalidArgument(f"{where}: {e}") from None
        out.append(_check(parts[0], parts[1], token, where))
    return _check_list(out, f"workers file {path}")


def default_workers_file() -> str:
    """``~/.config/station-sandbox/workers`` (as for the CLI)."""
    return os.path.join(os.path.expanduser("~"), ".config", "station-sandbox", "workers")


def _env(name: str) -> Optional[str]:
    v = os.environ.get(name)
    return v if v else None


DISCOVER = "discover:"
"""``discover:URL`` (``workers`` or ``$STATION_WORKERS``): the workers that worker lists."""


def workers_of_list(doc: Any, url: str) -> list[WorkerConfig]:
    """The workers of a ``GET /v1/workers`` answer, each at its listed URL (the worker asked at
    ``url`` when it lists itself without one), checked as any list is."""
    where = f"discover:{url}"
    items = doc.get("workers") if isinstance(doc, dict) else None
    if not isinstance(items, list):
        raise InvalidArgument(f"{where}: GET /v1/workers answered without \"workers\"")
    out = []
    for w in items:
        if not isinstance(w, dict):
            raise InvalidArgument(f"{where}: a listed worker is not an object")
        at = w.get("url") or (url if w.get("self") is True else None)
        out.append(_check(w.get("name"), at, None, where))
    return _check_list(out, where)


def resolve_workers(workers: Optional[Union[WorkersArg, str]], socket_path: Optional[str],
                    url: Optional[str], root_dir: Optional[str],
                    discover: Optional[Callable[[str], list[WorkerConfig]]] = None,
                    ) -> Optional[tuple[list[WorkerConfig], str]]:
    """The worker list and where it came from, or None for one controller. The first that
    applies: ``workers``; none when ``socket_path``, ``url`` or ``root_dir`` is given;
    ``$STATION_WORKERS``; ``$STATION_WORKERS_FILE``; the default workers file when it exists and
    none of ``$STATION_URL``, ``$STATION_SOCKET``, ``$STATION_ROOT`` is set. ``discover:URL``
    (as ``workers`` or ``$STATION_WORKERS``) is ``discover(URL)``'s list."""
    single = socket_path is not None or url is not None or root_dir is not None
    if isinstance(workers, str) and workers.startswith(DISCOVER) and not single and discover:
        return discover(workers[len(DISCOVER):]), workers
    if workers is not None:
        if single:
            raise InvalidArgument("give either workers or socket_path/url/root_dir, not both")
        out: list[WorkerConfig] = []
        if isinstance(workers, Mapping):
            out = [_check(n, u, None, "workers") for n, u in workers.items()]
        elif isinstance(workers, (list, tuple)):
            for w in workers:
                if isinstance(w, WorkerConfig):
                    out.append(_check(w.name, w.url, w.token, "workers"))
                elif isinstance(w, Mapping):
                    out.append(_check(w.get("name"), w.get("url"), w.get("token"), "workers"))
                elif isinstance(w, (list, tuple)) and len(w) in (2, 3):
                    out.append(_check(w[0], w[1], w[2] if len(w) == 3 else None, "workers"))
                else:
                    raise InvalidArgument(f"workers: {w!r} is not {{name, url, token}}")
        else:
            raise InvalidArgument("workers: want a mapping of name to URL or a list of {name, url, token}")
        return _check_list(out, "workers"), "this client's workers"
    if single:
        return None
    env = _env("STATION_WORKERS")
    if env and env.startswith(DISCOVER) and discover:
        return discover(env[len(DISCOVER):]), f"STATION_WORKERS={env}"
    if env:
        return parse_workers_env(env), "STATION_WORKERS"
    path = _env("STATION_WORKERS_FILE")
    if path:
        return read_workers_file(path), f"the workers file {path}"
    if _env("STATION_URL") or _env("STATION_SOCKET") or _env("STATION_ROOT"):
        return None
    path = default_workers_file()
    if not os.path.lexists(path):
        return None
    return read_workers_file(path), f"the workers file {path}"


def unknown_worker(name: str, source: str, workspace_id: Optional[str] = None) -> NotFound:
    if workspace_id is not None:
        msg = f"workspace {workspace_id} is on worker {name}, which is not in {source}"
    else:
        msg = f"worker {name} is not in {source}"
    return NotFound(404, "not_found", msg)


def state_of(name: str, url: str, info: Any) -> dict[str, Any]:
    """A worker's state from its ``GET /v1/worker``; capacity from ``limits`` for a worker that
    reports none. A worker that answers under another name is down (its ids would not route)."""
    if not isinstance(info, dict):
        return {"name": name, "url": url, "up": False, "error": "GET /v1/worker: not an object"}
    if name and info.get("name") != name:
        return {"name": name, "url": url, "up": False,
                "error": f"answers as worker {str(info.get('name'))!r}, not {name}"}
    cap = info.get("capacity")
    limits = info.get("limits")
    used = info.get("workspaces")
    if not isinstance(cap, dict) and isinstance(limits, dict) and isinstance(
            limits.get("maxWorkspaces"), int) and isinstance(used, int):
        cap = {"workspaces": {"max": limits["maxWorkspaces"], "used": used,
                              "free": max(0, limits["maxWorkspaces"] - used)}}
    tenant = info.get("tenant")
    caller = info.get("caller")
    return {"name": info.get("name"), "url": url, "up": True, "error": None,
            "version": info.get("version"), "capacity": cap if isinstance(cap, dict) else None,
            "workspaces": used, "tenant": tenant if isinstance(tenant, str) and tenant else None,
            "caller": caller if isinstance(caller, dict) else None}


def _num(d: Any, *keys: str) -> float:
    for k in keys:
        if not isinstance(d, dict):
            return -1
        d = d.get(k)
    return d if isinstance(d, (int, float)) and not isinstance(d, bool) else -1


def _own(s: dict[str, Any]) -> bool:
    """The worker is private to the caller's own tenant."""
    caller = s.get("caller") or {}
    return bool(s.get("tenant")) and s.get("tenant") == caller.get("tenant")


def skip_reason(s: dict[str, Any]) -> Optional[str]:
    """Why a worker takes no create (``down``, ``private to another tenant``, ``full``), or None
    (docs/operations.md, "Placement")."""
    if not s.get("up"):
        return "down"
    caller = s.get("caller") or {}
    if s.get("tenant") and caller.get("scope") != "admin" and not _own(s):
        return "private to another tenant"
    if _num(s.get("capacity"), "workspaces", "free") <= 0:
        return "full"
    return None


def place(states: Sequence[dict[str, Any]]) -> tuple[Optional[dict[str, Any]], str]:
    """The placement rule: among the workers that answered, have room and are not private to
    another tenant, the caller's own private worker first, then the most free workspaces, then
    the most available memory, then the first in order. Returns (the worker, "") or (None, why
    each was skipped: ``worker w1 (URL) did not answer: ...; worker w2 is full``)."""
    best = None
    for i, s in enumerate(states):
        if skip_reason(s) is not None:
            continue
        key = (_own(s), _num(s.get("capacity"), "workspaces", "free"),
               _num(s.get("capacity"), "memoryBytes", "available"), -i)
        if best is None or key > best[0]:
            best = (key, s)
    if best is not None:
        return best[1], ""
    why = []
    for s in states:
        r = skip_reason(s)
        if r == "down":
            why.append(f"worker {s['name']} ({s['url']}) did not answer: {s.get('error')}")
        else:
            why.append(f"worker {s['name']} is {r}")
    return None, "; ".join(why)


def reason_of(e: BaseException) -> str:
    """Why a call got no answer, short: ``connection refused``."""
    ctx = e.__context__ if e.__cause__ is None else e.__cause__
    if isinstance(ctx, OSError) and (ctx.errno or ctx.strerror):
        r = os.strerror(ctx.errno) if ctx.errno else str(ctx.strerror)
        return r[:1].lower() + r[1:]
    return str(getattr(e, "message", e))
