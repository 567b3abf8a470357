"""The API's objects as Python objects: snake_case attributes, output decoded (``str`` when it
was UTF-8, the exact ``bytes`` when it was not). ``raw`` keeps the object as the API sent it."""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from typing import Any, Optional, TypedDict, Union

from ._wire import decode_part
from .errors import ProtocolError

__all__ = [
    "Output",
    "Run",
    "Attempt",
    "Service",
    "WorkspaceInfo",
    "TerminalInfo",
    "TERMINAL_RUN_STATES",
    "UsageHistory",
    "UsageSample",
    "ContextInfo",
    "Execution",
    "CellResult",
    "CellError",
]

Output = Union[str, bytes]
"""A stream's output: ``str`` when it was valid UTF-8 (without NUL), else the exact bytes."""

TERMINAL_RUN_STATES = frozenset(
    ["exited", "killed", "timed_out", "cancelled", "failed_to_start", "lost"])


def _obj(doc: Any, what: str) -> dict[str, Any]:
    if not isinstance(doc, dict):
        raise ProtocolError(0, "protocol_error", f"expected {what} object, got {doc!r:.80}")
    return doc


def _opt_int(v: Any) -> Optional[int]:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


class _Outputs:
    """Output fields of a run or an attempt, decoded per ``encoding``."""

    encoding: Optional[str]
    stdout: Output
    stderr: Output
    stdout_tail: Optional[Output]
    stderr_tail: Optional[Output]
    stdout_bytes: int
    stderr_bytes: int
    truncated: bool

    def _decode_outputs(self, d: dict[str, Any]) -> None:
        enc = d.get("encoding")
        self.encoding = enc if isinstance(enc, str) else None
        empty: Output = b"" if enc == "base64" else ""
        self.stdout = decode_part(enc, d.get("stdout")) or empty
        self.stderr = decode_part(enc, d.get("stderr")) or empty
        self.stdout_tail = decode_part(enc, d.get("stdoutTail"))
        self.stderr_tail = decode_part(enc, d.get("stderrTail"))
        self.stdout_bytes = _opt_int(d.get("stdoutBytes")) or 0
        self.stderr_bytes = _opt_int(d.get("stderrBytes")) or 0
        self.truncated = d.get("truncated") is True


class Run(_Outputs):
    """One command. ``status`` is ``running``, then exactly one of ``exited`` (``exit_code``),
    ``killed`` (``signal``; ``oom_killed``), ``timed_out``, ``cancelled``, ``failed_to_start``
    or ``lost`` (``reason``). A non-zero exit is a result: check ``status`` and ``exit_code``.

    Output: per stream the first and the last ``max_output_bytes / 2`` bytes are kept; when a
    stream produced more, ``truncated`` is true, ``stdout`` holds its head and ``stdout_tail``
    its tail; ``stdout_bytes`` counts everything it wrote. ``gaps``: from ``run(...,
    on_stdout=...)``, the :class:`OutputGap` of bytes the run did not keep that the live
    follow met (empty otherwise). ``network``: on a workspace with a network, what it refused
    while the run ran (``{"denied": N, "lastDenied": {...}}``), else None."""

    id: str
    workspace_id: str
    command: str
    cwd: Optional[str]
    env: dict[str, str]
    status: str
    exit_code: Optional[int]
    signal: Optional[int]
    oom_killed: bool
    reason: Optional[str]
    timeout_ms: Optional[int]
    max_output_bytes: Optional[int]
    created_at: Optional[str]
    started_at: Optional[str]
    ended_at: Optional[str]
    duration_ms: Optional[int]
    cpu_ms: Optional[int]
    peak_memory_bytes: Optional[int]
    network: Optional[RunNetwork]
    raw: dict[str, Any]

    def __init__(self, doc: Any) -> None:
        d = _obj(doc, "a run")
        if not isinstance(d.get("id"), str) or not isinstance(d.get("status"), str):
            raise ProtocolError(0, "protocol_error", f"a run without id and status: {d!r:.120}")
        self.raw = d
        self.gaps: list[Any] = []
        self.id = d["id"]
        self.workspace_id = d.get("workspaceId") or ""
        self.command = d.get("command") or ""
        self.cwd = d.get("cwd")
        self.env = d.get("env") or {}
        self.status = d["status"]
        self.exit_code = _opt_int(d.get("exitCode"))
        self.signal = _opt_int(d.get("signal"))
        self.oom_killed = d.get("oomKilled") is True
        self.reason = d.get("reason")
        self.timeout_ms = _opt_int(d.get("timeoutMs"))
        self.max_output_bytes = _opt_int(d.get("maxOutputBytes"))
        self.created_at = d.get("createdAt")
        self.started_at = d.get("startedAt")
        self.ended_at = d.get("endedAt")
        self.duration_ms = _opt_int(d.get("durationMs"))
        self.cpu_ms = _opt_int(d.get("cpuMs"))
        self.peak_memory_bytes = _opt_int(d.get("peakMemoryBytes"))
        net = d.get("network")
        self.network = net if isinstance(net, dict) else None
        self._decode_outputs(d)

    @property
    def done(self) -> bool:
        """The run is terminal (any status but ``running``)."""
        return self.status in TERMINAL_RUN_STATES

    @property
    def ok(self) -> bool:
        """Exited with code 0."""
        return self.status == "exited" and self.exit_code == 0

    def __repr__(self) -> str:
        return (f"Run(id={self.id!r}, status={self.status!r}, exit_code={self.exit_code!r}, "
                f"signal={self.signal!r}, stdout_bytes={self.stdout_bytes}, "
                f"stderr_bytes={self.stderr_bytes}, truncated={self.truncated})")


class Attempt(_Outputs):
    """One attempt of a service. ``state`` is ``ended`` (its result is recorded; output only
    when the service was fetched singly with ``services.get``, in lists only the byte counts)
    or ``running``: the attempt running now, last in ``attempts``, with ``pid`` and
    ``stdout_bytes``/``stderr_bytes`` written so far (``None`` from an agent too old to count
    them) and no end or exit fields. Once it ends, the ended attempt of the same number takes
    its place."""

    number: int
    state: str
    pid: Optional[int]
    started_at: Optional[str]
    ended_at: Optional[str]
    duration_ms: Optional[int]
    exit_code: Optional[int]
    signal: Optional[int]
    end_reason: Optional[str]
    reason: Optional[str]
    daemonized: bool
    output_dropped: bool
    raw: dict[str, Any]

    def __init__(self, doc: Any) -> None:
        d = _obj(doc, "an attempt")
        self.raw = d
        self.number = _opt_int(d.get("number")) or 0
        self.started_at = d.get("startedAt")
        self.ended_at = d.get("endedAt")
        self.duration_ms = _opt_int(d.get("durationMs"))
        self.exit_code = _opt_int(d.get("exitCode"))
        self.signal = _opt_int(d.get("signal"))
        self.end_reason = d.get("endReason")
        self.reason = d.get("reason")
        self.daemonized = d.get("daemonized") is True
        self.output_dropped = d.get("outputDropped") is True
        self._decode_outputs(d)
        # a controller before "state" listed ended attempts only
        self.state = "running" if d.get("state") == "running" else "ended"
        self.pid = _opt_int(d.get("pid"))
        if self.state == "running":
            self.stdout_bytes = _opt_int(d.get("stdoutBytes"))  # type: ignore[assignment]
            self.stderr_bytes = _opt_int(d.get("stderrBytes"))  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (f"Attempt(number={self.number}, state={self.state!r}, "
                f"end_reason={self.end_reason!r}, "
                f"exit_code={self.exit_code!r}, signal={self.signal!r})")


ACTIVE_SERVICE_STATES = frozenset(["starting", "running", "backoff"])


class Service:
    """A supervised foreground command. ``state``: ``starting``, ``running``, ``backoff``,
    ``stopped``, ``failed`` or ``exhausted``; ``attempts`` oldest first."""

    id: str
    name: str
    workspace_id: str
    command: str
    cwd: Optional[str]
    env: dict[str, str]
    restart: dict[str, Any]
    stop_signal: Any
    stop_timeout_ms: Optional[int]
    autostart: bool
    state: str
    reason: Optional[str]
    stopping: bool
    restart_count: int
    next_restart_at: Optional[str]
    main_pid: Optional[int]
    current_attempt: Optional[int]
    attempts: list[Attempt]
    raw: dict[str, Any]

    def __init__(self, doc: Any) -> None:
        d = _obj(doc, "a service")
        if not isinstance(d.get("name"), str) or not isinstance(d.get("state"), str):
            raise ProtocolError(0, "protocol_error", f"a service without name and state: {d!r:.120}")
        self.raw = d
        self.id = d.get("id") or ""
        self.name = d["name"]
        self.workspace_id = d.get("workspaceId") or ""
        self.command = d.get("command") or ""
        self.cwd = d.get("cwd")
        self.env = d.get("env") or {}
        self.restart = d.get("restart") or {}
        self.stop_signal = d.get("stopSignal")
        self.stop_timeout_ms = _opt_int(d.get("stopTimeoutMs"))
        self.autostart = d.get("autostart") is True
        self.state = d["state"]
        self.reason = d.get("reason")
        self.stopping = d.get("stopping") is True
        self.restart_count = _opt_int(d.get("restartCount")) or 0
        self.next_restart_at = d.get("nextRestartAt")
        self.main_pid = _opt_int(d.get("mainPid"))
        self.current_attempt = _opt_int(d.get("currentAttempt"))
        self.attempts = [Attempt(a) for a in d.get("attempts") or []]

    @property
    def active(self) -> bool:
        """Running or about to (``starting``, ``running``, ``backoff``) or stopping."""
        return self.state in ACTIVE_SERVICE_STATES or self.stopping

    def __repr__(self) -> str:
        return (f"Service(name={self.name!r}, state={self.state!r}, "
                f"attempts={len(self.attempts)}, reason={self.reason!r})")


class WorkspaceInfo:
    """A workspace as the API describes it. ``home`` and ``workdir`` are the paths commands
    see (inside the container for the container adapter)."""

    id: str
    worker: str
    adapter: str
    state: str
    reason: Optional[str]
    home: str
    workdir: str
    env: dict[str, str]
    cpus: float
    memory_mb: int
    pids_limit: int
    image: Optional[str]
    seccomp_profile: Optional[str]
    seccomp_digest: Optional[str]
    network: Optional[str]
    runtime: Optional[str]
    created_at: Optional[str]
    updated_at: Optional[str]
    paused_at: Optional[str]
    auto_resume: bool
    idle_action: Optional[str]
    name: Optional[str]
    labels: dict[str, str]
    raw: dict[str, Any]

    def _load(self, doc: Any) -> None:
        d = _obj(doc, "a workspace")
        if not isinstance(d.get("id"), str) or not isinstance(d.get("state"), str):
            raise ProtocolError(0, "protocol_error", f"a workspace without id and state: {d!r:.120}")
        self.raw = d
        self.id = d["id"]
        self.worker = d.get("worker") or ""
        self.adapter = d.get("adapter") or ""
        self.state = d["state"]
        self.reason = d.get("reason")
        self.home = d.get("home") or ""
        self.workdir = d.get("workdir") or ""
        self.env = d.get("env") or {}
        self.cpus = d.get("cpus") or 0
        self.memory_mb = _opt_int(d.get("memoryMb")) or 0
        self.pids_limit = _opt_int(d.get("pidsLimit")) or 0
        self.image = d.get("image")
        self.seccomp_profile = d.get("seccompProfile")
        self.seccomp_digest = d.get("seccompDigest")
        self.network = d.get("network")
        self.runtime = d.get("runtime")
        self.created_at = d.get("createdAt")
        self.updated_at = d.get("updatedAt")
        self.paused_at = d.get("pausedAt")
        self.auto_resume = d.get("autoResume") is True
        self.idle_action = d.get("idleAction")
        self.name = d.get("name")
        self.labels = dict(d.get("labels") or {})

    def __repr__(self) -> str:
        return f"{type(self).__name__}(id={self.id!r}, adapter={self.adapter!r}, state={self.state!r})"


class TerminalInfo:
    """A terminal as the API describes it. ``state``: ``starting``, ``running``, ``exited``,
    ``closed`` (force-closed), ``failed`` or ``lost``."""

    id: str
    command: Optional[str]
    cols: int
    rows: int
    state: str
    reason: Optional[str]
    pid: Optional[int]
    exit_code: Optional[int]
    signal: Optional[int]
    output_bytes: int
    raw: dict[str, Any]

    def _load(self, doc: Any) -> None:
        d = _obj(doc, "a terminal")
        if not isinstance(d.get("id"), str) or not isinstance(d.get("state"), str):
            raise ProtocolError(0, "protocol_error", f"a terminal without id and state: {d!r:.120}")
        self.raw = d
        self.id = d["id"]
        self.command = d.get("command")
        self.cols = _opt_int(d.get("cols")) or 0
        self.rows = _opt_int(d.get("rows")) or 0
        self.state = d["state"]
        self.reason = d.get("reason")
        self.pid = _opt_int(d.get("pid"))
        self.exit_code = _opt_int(d.get("exitCode"))
        self.signal = _opt_int(d.get("signal"))
        self.output_bytes = _opt_int(d.get("outputBytes")) or 0

    def __init__(self, doc: Any) -> None:
        self._load(doc)

    def __repr__(self) -> str:
        return f"TerminalInfo(id={self.id!r}, state={self.state!r}, exit_code={self.exit_code!r})"


class ReadyCheck(TypedDict):
    name: str
    ok: bool
    message: str


class ReadyReport(TypedDict, total=False):
    ready: bool
    defaultAdapter: str
    adapters: list[str]
    checks: list[ReadyCheck]


class Image(TypedDict, total=False):
    digest: str
    name: Optional[str]
    reference: str
    size: int
    layers: int
    config: dict[str, Any]
    usedBy: list[str]
    createdAt: str


class FileEntry(TypedDict, total=False):
    name: str
    path: str
    type: str
    size: int
    mode: str
    mtime: str
    uid: int
    gid: int
    etag: Optional[str]
    linkTarget: Optional[str]


class FileList(TypedDict):
    path: str
    entries: list[FileEntry]
    truncated: bool


class Secret(TypedDict, total=False):
    name: str
    host: Optional[str]
    username: str
    expiresAt: Optional[str]
    expired: bool
    createdAt: str
    updatedAt: str


class Snapshot(TypedDict, total=False):
    """A workspace's HOME and root filesystem changes kept as an image of the worker's store
    (``ws.snapshot()``, ``client.snapshots``): ``workspaceId`` it was taken of, ``name``,
    ``sizeBytes``, ``baseImage`` (the workspace's image) and ``image`` (the snapshot's own),
    ``memory`` (processes too), ``pausedMs`` (how long the workspace was paused for it),
    ``durable`` (its image fsync()ed: false in a create's answer until then)."""
    id: str
    workspaceId: str
    name: Optional[str]
    createdAt: str
    sizeBytes: int
    baseImage: Optional[str]
    image: Optional[str]
    memory: bool
    pausedMs: int
    durable: bool


class PortExposure(TypedDict, total=False):
    """A port of a workspace opened through the controller's preview listener
    (``ws.ports.expose()``, ``ws.ports.list()["exposed"]``): ``url`` (``host`` its one DNS
    label of its own under the preview domain), ``access`` ``"token"`` or ``"public"``,
    ``expiresAt``, ``createdAt``. A token exposure's ``token`` is in expose's answer only (send
    ``Authorization: Bearer TOKEN``), and ``openUrl`` beside it: the link a browser opens once
    (the preview sets its cookie and redirects to ``url``)."""
    port: int
    host: str
    url: str
    access: str
    token: str
    openUrl: str
    expiresAt: str
    createdAt: str


class ListeningPort(TypedDict, total=False):
    """A TCP socket listening in the workspace's network: ``address`` it is bound to, ``pid``
    as the workspace sees it (None when no process of the workspace holds it), ``command``."""
    port: int
    address: str
    proto: str
    pid: Optional[int]
    command: str


class PortList(TypedDict):
    """``ws.ports.list()``: the exposures (without tokens) and the listening sockets."""
    exposed: list[PortExposure]
    listening: list[ListeningPort]


class Denial(TypedDict, total=False):
    """A destination the network refused: ``address``, ``port`` (0 when the protocol has none)
    and ``proto``; for a refused DNS query the resolver's address, port 53, ``udp`` and the
    ``name`` asked; ``class`` the ``--network-allow`` class that blocks the address for every
    workspace, when one does."""
    address: str
    port: int
    proto: str
    name: str


class LastDenial(Denial, total=False):
    at: str


class RefusedDestination(Denial, total=False):
    """One of the last 100 refused destinations (``Network["refused"]``): ``count`` logged
    denials of it, ``firstAt`` and ``lastAt``."""
    count: int
    firstAt: str
    lastAt: str


class RunNetwork(TypedDict, total=False):
    """``Run.network``: ``denied`` packets dropped plus DNS queries refused while the run ran,
    ``lastDenied`` the last one logged in that time (absent when none was)."""
    denied: int
    lastDenied: LastDenial


class Network(TypedDict, total=False):
    mode: str
    address: str
    gateway: str
    egress: dict[str, Any]
    counters: dict[str, int]
    refused: list[RefusedDestination]


class UsageSample:
    """One point of a usage history: the ``step`` starting at ``t`` (RFC 3339, UTC). ``cpu``:
    the cores used over it (CPU time / ``span_ms``, the time its samples cover);
    ``memory_bytes`` the memory in use averaged over it (less inactive file cache),
    ``memory_max_bytes`` its largest sample; ``pids`` the most processes and threads;
    ``rx_bytes`` / ``tx_bytes`` what the workspace received and sent within it."""

    t: str
    cpu: float
    memory_bytes: int
    memory_max_bytes: int
    pids: int
    rx_bytes: int
    tx_bytes: int
    span_ms: int
    raw: dict[str, Any]

    def __init__(self, doc: Any) -> None:
        d = _obj(doc, "a usage sample")
        cpu = d.get("cpu")
        if not isinstance(d.get("t"), str) or not isinstance(cpu, (int, float)) or isinstance(cpu, bool):
            raise ProtocolError(0, "protocol_error", f"a usage sample without t and cpu: {d!r:.120}")
        self.raw = d
        self.t = d["t"]
        self.cpu = float(cpu)
        self.memory_bytes = _opt_int(d.get("memoryBytes")) or 0
        self.memory_max_bytes = _opt_int(d.get("memoryMaxBytes")) or 0
        self.pids = _opt_int(d.get("pids")) or 0
        self.rx_bytes = _opt_int(d.get("rxBytes")) or 0
        self.tx_bytes = _opt_int(d.get("txBytes")) or 0
        self.span_ms = _opt_int(d.get("spanMs")) or 0

    def __repr__(self) -> str:
        return (f"UsageSample(t={self.t!r}, cpu={self.cpu:.3f}, memory_bytes={self.memory_bytes}, "
                f"pids={self.pids}, rx_bytes={self.rx_bytes}, tx_bytes={self.tx_bytes})")


class UsageHistory:
    """A workspace's usage over time (``workspace_id``, ``limits``: ``{"cpus", "memoryBytes",
    "pidsLimit"}``, each None when unlimited) or a worker's totals (``worker``, ``tenant``):
    ``samples`` oldest first, one per ``step_ms`` that had samples; the controller samples
    every ``interval_ms`` (docs/api.md, "Usage history")."""

    workspace_id: Optional[str]
    worker: Optional[str]
    tenant: Optional[str]
    step_ms: int
    interval_ms: int
    limits: Optional[dict[str, Any]]
    samples: list[UsageSample]
    raw: dict[str, Any]

    def __init__(self, doc: Any) -> None:
        d = _obj(doc, "a usage history")
        if not isinstance(d.get("samples"), list) or _opt_int(d.get("stepMs")) is None:
            raise ProtocolError(0, "protocol_error", f"a usage history without samples and stepMs: {d!r:.120}")
        self.raw = d
        self.workspace_id = d.get("workspaceId")
        self.worker = d.get("worker")
        self.tenant = d.get("tenant")
        self.step_ms = d["stepMs"]
        self.interval_ms = _opt_int(d.get("intervalMs")) or 0
        self.limits = d.get("limits") if isinstance(d.get("limits"), dict) else None
        self.samples = [UsageSample(s) for s in d["samples"]]

    def __repr__(self) -> str:
        who = f"workspace_id={self.workspace_id!r}" if self.workspace_id else f"worker={self.worker!r}"
        return f"UsageHistory({who}, step_ms={self.step_ms}, samples={len(self.samples)})"


CONTEXT_LANGUAGES = ("python", "javascript")


@dataclass
class ContextInfo:
    """A code context: a stateful interpreter (a Jupyter kernel) in a workspace, what one cell
    defines the next sees. ``state`` is ``idle``, ``busy`` or ``dead`` (``reason`` says why,
    an OOM kill say, until ``restart()``)."""

    id: str
    workspace_id: str
    language: str
    state: str
    reason: Optional[str]
    cwd: Optional[str]
    execution_count: int
    created_at: Optional[str]
    cpu_ms: Optional[int]
    memory_bytes: Optional[int]
    raw: dict[str, Any] = field(repr=False)

    @classmethod
    def from_doc(cls, doc: Any) -> "ContextInfo":
        d = _obj(doc, "a context")
        if not isinstance(d.get("id"), str) or not isinstance(d.get("state"), str):
            raise ProtocolError(0, "protocol_error", f"a context without id and state: {d!r:.120}")
        return cls(id=d["id"], workspace_id=d.get("workspaceId") or "",
                   language=d.get("language") or "", state=d["state"], reason=d.get("reason"),
                   cwd=d.get("cwd"), execution_count=_opt_int(d.get("executionCount")) or 0,
                   created_at=d.get("createdAt"), cpu_ms=_opt_int(d.get("cpuMs")),
                   memory_bytes=_opt_int(d.get("memoryBytes")), raw=d)


@dataclass
class CellResult:
    """One display or execute result of a cell: ``data`` its MIME bundle as sent (binary types
    base64); ``text`` its ``text/plain``, ``html`` its ``text/html`` (untrusted: the cell made
    it), ``png`` the decoded bytes of its ``image/png``; ``truncated`` when the controller cut
    a value that was too large."""

    type: str
    data: dict[str, Any]
    truncated: bool
    text: Optional[str]
    html: Optional[str]
    png: Optional[bytes] = field(repr=False)

    @classmethod
    def from_doc(cls, doc: Any) -> "CellResult":
        d = _obj(doc, "a cell result")
        data = d.get("data") if isinstance(d.get("data"), dict) else {}
        png = data.get("image/png")
        try:
            png_bytes = base64.b64decode(png) if isinstance(png, str) else None
        except ValueError:
            raise ProtocolError(0, "protocol_error", "a cell result's image/png is not base64") from None
        text, html = data.get("text/plain"), data.get("text/html")
        return cls(type=d.get("type") or "", data=data, truncated=d.get("truncated") is True,
                   text=text if isinstance(text, str) else None,
                   html=html if isinstance(html, str) else None, png=png_bytes)


@dataclass
class CellError:
    """What a cell raised: ``name`` (``ZeroDivisionError``), ``value`` and the ``traceback``
    lines (with the kernel's terminal colours)."""

    name: str
    value: str
    traceback: list[str]


@dataclass
class Execution:
    """One cell. ``status`` is ``running``, then one of ``ok``, ``error`` (``error`` says what
    was raised; an OOM-killed kernel is ``OOMKilled``), ``timed_out`` or ``interrupted``: the
    context keeps its variables after each. ``stdout``/``stderr`` as a run's (head, and
    ``stdout_tail`` when longer than kept; ``*_bytes`` count all); ``results`` the display and
    execute results in order."""

    id: str
    context_id: str
    run_id: Optional[str]
    status: str
    execution_count: Optional[int]
    stdout: Output
    stderr: Output
    stdout_tail: Optional[Output]
    stderr_tail: Optional[Output]
    stdout_bytes: int
    stderr_bytes: int
    truncated: bool
    results: list[CellResult]
    error: Optional[CellError]
    created_at: Optional[str]
    ended_at: Optional[str]
    duration_ms: Optional[int]
    cpu_ms: Optional[int]  # the cell's exec client's run, not the kernel's
    peak_memory_bytes: Optional[int]
    kernel_cpu_ms: Optional[int]  # the kernel's CPU time during the cell
    kernel_memory_bytes: Optional[int]  # the kernel's memory in use at the cell's end
    raw: dict[str, Any] = field(repr=False)

    @property
    def done(self) -> bool:
        return self.status != "running"

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def text(self) -> Optional[str]:
        """The ``text/plain`` of the last execute result (the cell's value), if any."""
        for r in reversed(self.results):
            if r.type == "execute_result":
                return r.text
        return None

    @property
    def images(self) -> list[bytes]:
        """The PNG bytes of every result that has one, in order."""
        return [r.png for r in self.results if r.png is not None]

    @classmethod
    def from_doc(cls, doc: Any) -> "Execution":
        d = _obj(doc, "an execution")
        if not isinstance(d.get("id"), str) or not isinstance(d.get("status"), str):
            raise ProtocolError(0, "protocol_error", f"an execution without id and status: {d!r:.120}")
        enc = d.get("encoding")
        empty: Output = b"" if enc == "base64" else ""
        err = d.get("error")
        error = None
        if isinstance(err, dict):
            tb = err.get("traceback")
            error = CellError(name=str(err.get("name") or ""), value=str(err.get("value") or ""),
                              traceback=[str(x) for x in tb] if isinstance(tb, list) else [])
        results = d.get("results") if isinstance(d.get("results"), list) else []
        return cls(id=d["id"], context_id=d.get("contextId") or "", run_id=d.get("runId"),
                   status=d["status"], execution_count=_opt_int(d.get("executionCount")),
                   stdout=decode_part(enc, d.get("stdout")) or empty,
                   stderr=decode_part(enc, d.get("stderr")) or empty,
                   stdout_tail=decode_part(enc, d.get("stdoutTail")),
                   stderr_tail=decode_part(enc, d.get("stderrTail")),
                   stdout_bytes=_opt_int(d.get("stdoutBytes")) or 0,
                   stderr_bytes=_opt_int(d.get("stderrBytes")) or 0,
                   truncated=d.get("truncated") is True,
                   results=[CellResult.from_doc(r) for r in results], error=error,
                   created_at=d.get("createdAt"), ended_at=d.get("endedAt"),
                   duration_ms=_opt_int(d.get("durationMs")), cpu_ms=_opt_int(d.get("cpuMs")),
                   peak_memory_bytes=_opt_int(d.get("peakMemoryBytes")),
                   kernel_cpu_ms=_opt_int(d.get("kernelCpuMs")),
                   kernel_memory_bytes=_opt_int(d.get("kernelMemoryBytes")), raw=d)
