#!/usr/bin/env python3
"""The seed's flow in Python: a container workspace on a prebuilt image pinned by digest, a
reviewed seccomp profile, no network, limits; a command whose result is checked (a run id is
not success); a foreground service under a restart policy, stopped deliberately.

    STATION_SOCKET=/var/lib/station-sandbox/station.sock \\
    STATION_IMAGE=registry.example/tools@sha256:YOUR_VERIFIED_DIGEST \\
    python3 seed_flow.py ["node --version && pwd"] ["node server.js"]

The controller is found as the CLI finds it ($STATION_URL + $STATION_TOKEN for TCP,
$STATION_SOCKET, $STATION_ROOT). $STATION_SECCOMP_PROFILE: a profile name or path the worker
allows (default "default").
"""

import os
import sys

from station_sandbox import Client, StationError

COMMAND = sys.argv[1] if len(sys.argv) > 1 else "node --version && pwd"
SERVICE = sys.argv[2] if len(sys.argv) > 2 else (
    "node -e \"require('http').createServer((q, s) => s.end('ok')).listen(8080)\"")


def main() -> int:
    client = Client(timeout=30)
    client.ready(adapter="container")  # Unavailable naming every failing check
    workspace = client.workspaces.create(
        adapter="container",
        image=os.environ["STATION_IMAGE"],
        seccomp_profile=os.environ.get("STATION_SECCOMP_PROFILE", "default"),
        network="none",
        cpus=1, memory_mb=1024, pids_limit=128,
    )
    # Keep workspace.id in trusted application state: later requests need it.
    print("workspace", workspace.id, workspace.home, workspace.workdir)
    try:
        handle = workspace.start(COMMAND, timeout_ms=10_000)
        print("started", handle.id, handle.status)  # "running": not success yet
        run = handle.wait()
        print(f"{run.status} {run.exit_code} {run.stdout!r} truncated={run.truncated}")
        if not run.ok:
            print("stderr:", run.stderr, file=sys.stderr)

        service = workspace.services.start(
            "agent-gateway", SERVICE,  # foreground: no & and no daemonizing
            restart="on-failure", max_restarts=5, delay_ms=1000,
        )
        workspace.services.wait(service.name, lambda s: s.state == "running")
        stopped = workspace.services.stop(service.name)  # returns once it has stopped
        print(f"service {stopped.name} {stopped.state}; attempts: "
              f"{[(a.number, a.end_reason) for a in stopped.attempts]}")
    finally:
        workspace.delete()
    return 0 if run.ok else 1


if __name__ == "__main__":
    try:
        sys.exit(main())
    except StationError as e:
        print(f"station-sandbox: {e}", file=sys.stderr)
        sys.exit(1)
