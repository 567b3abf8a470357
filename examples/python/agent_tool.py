"""A minimal "agent tool" over a station-sandbox workspace, in the shape agent frameworks'
sandbox backends use (mini-swe-agent's environments, LangChain Deep Agents' sandbox backends):

    env = StationEnvironment(workspace)            # or StationEnvironment.create(client, ...)
    env.execute("ls -la")          # {"output": "...", "returncode": 0}
    env.execute("pytest", timeout=600)

``output`` is stdout and stderr together, in the order written (``2>&1``), decoded as UTF-8
(bytes that are not become U+FFFD). A non-zero exit is returned, never raised. A timeout gives
``returncode`` 124 (as coreutils' ``timeout``), a signal 128 + its number, a command that could
not start or was lost 127 / 125; the output then ends with a line saying so. When the output
was longer than ``max_output_bytes``, its head and tail are kept with a marker between them.
"""

from __future__ import annotations

from typing import Any, Optional, TypedDict

from station_sandbox import Client, Run, Workspace


class ExecuteResult(TypedDict):
    output: str
    returncode: int


def _text(part: Any) -> str:
    if part is None:
        return ""
    return part if isinstance(part, str) else part.decode("utf-8", "replace")


def _size(part: Any) -> int:
    return len(part) if isinstance(part, bytes) else len(part.encode("utf-8"))


def result_of(run: Run) -> ExecuteResult:
    """A terminal run as the tool's answer."""
    output = _text(run.stdout)
    if run.stdout_tail is not None:
        missing = run.stdout_bytes - _size(run.stdout) - _size(run.stdout_tail)
        output += f"\n[... {missing} bytes of output left out ...]\n" + _text(run.stdout_tail)
    if run.status == "exited":
        code = run.exit_code if run.exit_code is not None else 1
    elif run.status == "timed_out":
        code = 124
        output += f"\n[timed out after {run.timeout_ms} ms]\n"
    elif run.status in ("killed", "cancelled"):
        code = 128 + (run.signal or 9)
        why = "out of memory" if run.oom_killed else f"signal {run.signal or 9}"
        output += f"\n[{run.status}: {why}]\n"
    elif run.status == "failed_to_start":
        code = 127
        output += f"\n[failed to start: {run.reason}]\n"
    else:  # lost
        code = 125
        output += f"\n[lost: {run.reason}]\n"
    return {"output": output, "returncode": code}


class StationEnvironment:
    """``execute(command, timeout=None)`` in one workspace; ``cwd`` and ``env`` for every
    command; ``timeout`` in seconds (default ``default_timeout``)."""

    def __init__(self, workspace: Workspace, cwd: Optional[str] = None,
                 env: Optional[dict[str, str]] = None, default_timeout: float = 60.0,
                 max_output_bytes: int = 131072) -> None:
        self.workspace = workspace
        self.cwd = cwd
        self.env = env
        self.default_timeout = default_timeout
        self.max_output_bytes = max_output_bytes

    @classmethod
    def create(cls, client: Client, **workspace_options: Any) -> "StationEnvironment":
        """A fresh workspace (``adapter=``, ``image=``, ``network=``, ... as for
        ``client.workspaces.create``)."""
        return cls(client.workspaces.create(**workspace_options))

    def execute(self, command: str, cwd: str = "", *, timeout: Optional[float] = None) -> ExecuteResult:
        """Runs ``command`` with ``/bin/sh`` and returns ``{"output", "returncode"}``."""
        seconds = self.default_timeout if timeout is None else timeout
        run = self.workspace.run(f"{{ {command}\n}} 2>&1", cwd=cwd or self.cwd, env=self.env,
                                 timeout_ms=max(1, int(seconds * 1000)),
                                 max_output_bytes=self.max_output_bytes)
        return result_of(run)

    def close(self) -> None:
        """Deletes the workspace."""
        self.workspace.delete()


def execute(workspace: Workspace, command: str, timeout: Optional[float] = None) -> ExecuteResult:
    """One command in ``workspace``: ``{"output": ..., "returncode": ...}``."""
    return StationEnvironment(workspace).execute(command, timeout=timeout)
