"""Container workspaces: the busybox test image imported through the SDK, the repository's
seccomp profile, no network, limits; the seed's flow, a non-zero exit, a cancel that kills the
tree (seen from inside), a service, a terminal, files; the seed example as a user runs it."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

import station_sandbox as ss
from station_sandbox import BadRequest, Client

from conftest import SECCOMP, SOCKET, until


@pytest.fixture(scope="module")
def cws(client: Client, image: str) -> ss.Workspace:
    w = client.workspaces.create(adapter="container", image=image, seccomp_profile=SECCOMP,
                                 network="none", cpus=1, memory_mb=1024, pids_limit=128)
    yield w
    try:
        w.delete()
    except ss.StationError:
        pass


def test_container_seed_flow(client: Client, cws: ss.Workspace, image: str) -> None:
    report = client.ready(adapter="container")
    assert any(c["name"] == "runtime" and c["ok"] for c in report["checks"])
    assert (cws.adapter, cws.image, cws.network) == ("container", image, "none")
    assert (cws.cpus, cws.memory_mb, cws.pids_limit) == (1, 1024, 128)
    assert cws.seccomp_profile == SECCOMP and cws.seccomp_digest.startswith("sha256:")
    assert (cws.home, cws.workdir) == ("/home/node", "/home/node/workspace")
    assert cws.get_network() == {"mode": "none"}
    with pytest.raises(ss.Conflict):
        cws.set_egress({"allow": [{"domain": "github.com"}]})  # only a restricted workspace
    h = cws.start("echo hi && pwd", timeout_ms=10_000)
    assert h.status == "running"
    run = h.wait()
    assert (run.status, run.exit_code, run.stdout, run.truncated) == (
        "exited", 0, "hi\n/home/node/workspace\n", False)


def test_container_nonzero_exit_and_binary(cws: ss.Workspace) -> None:
    run = cws.run("echo nope >&2; exit 7")
    assert (run.status, run.exit_code, run.stderr) == ("exited", 7, "nope\n")
    run = cws.run("printf '\\377\\000'")
    assert run.stdout == b"\xff\x00"


def test_container_cancel_kills_the_tree(cws: ss.Workspace) -> None:
    h = cws.start("sleep 300 & echo $! > bg.pid; setsid sleep 301 & echo $! > daemon.pid; "
                  "touch started; wait", timeout_ms=600_000)
    until("the run's children", lambda: cws.files.exists("started"))
    probe = "kill -0 $(cat bg.pid) && kill -0 $(cat daemon.pid)"
    assert cws.run(probe).exit_code == 0  # positive control: both alive
    assert h.cancel().status == "cancelled"
    gone = "! kill -0 $(cat bg.pid) 2>/dev/null && ! kill -0 $(cat daemon.pid) 2>/dev/null"
    until("both processes gone", lambda: cws.run(gone).exit_code == 0)


def test_container_timeout(cws: ss.Workspace) -> None:
    run = cws.run("echo started; sleep 30", timeout_ms=300)
    assert (run.status, run.stdout) == ("timed_out", "started\n")


def test_container_service_terminal_files(cws: ss.Workspace) -> None:
    cws.services.start("gw", "echo up; touch .up; exec sleep 60", restart="on-failure",
                       max_restarts=5, delay_ms=1000)
    until("the service's marker", lambda: cws.files.exists(".up"))
    stopped = cws.services.stop("gw")
    assert stopped.state == "stopped"
    assert cws.services.get("gw").attempts[0].stdout == "up\n"
    with cws.terminals.create(command="/bin/sh") as t:
        t.send("echo $((6*7))z; pwd\n")
        t.expect("42z")
        t.expect("/home/node/workspace")
    entry = cws.files.write("notes.txt", "héllo\n")
    assert entry["path"] == "/home/node/workspace/notes.txt"
    assert cws.run("cat notes.txt").stdout == "héllo\n"
    assert cws.files.read_text("/home/node/workspace/notes.txt") == "héllo\n"


def test_container_bad_image_is_bad_request(client: Client, image: str) -> None:
    with pytest.raises(BadRequest) as e:
        client.workspaces.create(adapter="container", image="busybox@sha256:" + "1" * 64)
    assert e.value.field == "image"


def test_seed_example_runs(image: str) -> None:
    examples = os.environ.get("STATION_EXAMPLES", "")
    if not examples:
        pytest.skip("STATION_EXAMPLES not set")
    env = dict(os.environ, STATION_SOCKET=SOCKET, STATION_IMAGE=image,
               STATION_SECCOMP_PROFILE=SECCOMP)
    # busybox has no node: the command and the service are given as arguments.
    argv = [sys.executable, os.path.join(examples, "seed_flow.py"), "echo hi && pwd",
            "echo up; exec sleep 60"]
    p = subprocess.run(argv, env=env,
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    assert "exited 0 'hi\\n/home/node/workspace\\n' truncated=False" in p.stdout, p.stdout
    assert "service agent-gateway stopped; attempts: [(1, 'stopped')]" in p.stdout, p.stdout
