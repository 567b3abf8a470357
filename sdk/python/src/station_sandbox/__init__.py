"""station-sandbox: the Python client of a station-sandbox controller.

>>> from station_sandbox import Client
>>> with Client() as client:
...     client.ready()
...     with client.workspaces.create(adapter="container", image=IMAGE) as ws:
...         run = ws.run("echo hi && pwd", timeout_ms=10_000)
...         print(run.status, run.exit_code, run.stdout)
"""

from ._follow import OutputGap
from .aio import (AsyncClient, AsyncCodeContext, AsyncContexts, AsyncFiles, AsyncOutputStream,
                  AsyncPorts, AsyncRunHandle, AsyncServices, AsyncSnapshots, AsyncTerminal,
                  AsyncTerminals, AsyncWorkspace)
from .client import (READ_MAX_BYTES, Client, CodeContext, Contexts, Files, GapCallback, Images, OutputStream,
                     OutputCallback, Ports, RunHandle, Secrets, Services, SnapshotList, Snapshots, Terminal,
                     Terminals, Tokens, Workspace, WorkspaceList)
from ._workers import WorkerConfig, snapshot_worker, worker_of_id
from .errors import (BadRequest, Conflict, ConnectionFailed, Forbidden, InvalidArgument, NotFound,
                     Paused, PayloadTooLarge, PreconditionFailed, ProtocolError, StationError, Timeout,
                     TooManyRequests, Unauthorized, Unavailable, WorkerTimeout, WorkerUnavailable)
from .models import (Attempt, Denial, FileEntry, FileList, Image, ListeningPort, Network, Output,
                     PortExposure, PortList, ReadyReport, RefusedDestination, Run, RunNetwork,
                     Secret, Service, Snapshot, TerminalInfo, UsageHistory, UsageSample,
                     WorkspaceInfo, ContextInfo, Execution, CellResult, CellError)

__version__ = "0.1.0"

__all__ = [
    "AsyncClient", "AsyncCodeContext", "AsyncContexts", "AsyncFiles", "AsyncOutputStream", "AsyncPorts", "AsyncRunHandle", "AsyncServices", "AsyncSnapshots", "AsyncTerminal",
    "AsyncTerminals", "AsyncWorkspace", "Attempt", "BadRequest", "CellError", "CellResult",
    "Client", "CodeContext", "Conflict", "ContextInfo", "Contexts", "Execution",
    "ConnectionFailed", "Denial", "FileEntry", "FileList", "Files", "Forbidden", "GapCallback", "Image", "Images", "InvalidArgument",
    "ListeningPort", "Network", "NotFound", "Output", "Paused", "OutputCallback", "OutputGap", "OutputStream", "PayloadTooLarge", "PortExposure", "PortList", "Ports", "PreconditionFailed",
    "ProtocolError", "READ_MAX_BYTES", "ReadyReport", "RefusedDestination", "Run", "RunHandle", "RunNetwork", "Secret", "Secrets",
    "Service", "Services", "Snapshot", "SnapshotList", "Snapshots", "StationError", "Terminal", "TerminalInfo", "Terminals", "Timeout",
    "Tokens", "TooManyRequests", "Unauthorized", "Unavailable", "UsageHistory", "UsageSample", "WorkerConfig", "WorkerTimeout",
    "WorkerUnavailable",
    "Workspace", "WorkspaceInfo", "WorkspaceList", "snapshot_worker", "worker_of_id",
]
