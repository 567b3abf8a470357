"""The blocking client against a real controller, host workspaces: the seed's flow, every
terminal status the tests can provoke, output decoding, live output, reattaching, services,
terminals, files, errors."""

from __future__ import annotations

import os

import pytest

import station_sandbox as ss
from station_sandbox import (BadRequest, Client, Conflict, NotFound, Run, StationError,
                             Unauthorized)

from conftest import SOCKET, TOKEN, URL, until


def test_seed_flow_host(client: Client) -> None:
    report = client.ready(adapter="host")
    assert report["ready"] is True
    assert any(c["name"] == "agent" and c["ok"] for c in report["checks"])
    with client.workspaces.create(adapter="host", env={"GREETING": "hi"}) as ws:
        assert ws.adapter == "host" and ws.state == "ready"
        assert ws.env == {"GREETING": "[redacted]"}
        h = ws.start("sleep 0.2; echo $GREETING && pwd", timeout_ms=10_000)
        assert h.status == "running", "a run id is not success: the handle is running"
        run = h.wait()
        assert isinstance(run, Run)
        assert (run.status, run.exit_code, run.signal) == ("exited", 0, None)
        assert run.stdout == f"hi\n{ws.workdir}\n"
        assert run.stderr == ""
        assert run.stdout_bytes == len(run.stdout.encode())
        assert run.truncated is False and run.oom_killed is False
        assert isinstance(run.duration_ms, int) and isinstance(run.cpu_ms, int)
        assert isinstance(run.peak_memory_bytes, int)
        assert [w.id for w in client.workspaces.list() if w.id == ws.id] == [ws.id]
        wid = ws.id
    with pytest.raises(NotFound) as e:
        client.workspaces.get(wid)
    assert (e.value.status, e.value.code) == (404, "not_found")


def test_nonzero_exit_is_a_result(ws: ss.Workspace) -> None:
    run = ws.run("echo out; echo err >&2; exit 3")
    assert (run.status, run.exit_code, run.signal) == ("exited", 3, None)
    assert (run.stdout, run.stderr) == ("out\n", "err\n")
    assert (run.stdout_bytes, run.stderr_bytes) == (4, 4)
    assert run.ok is False


def test_killed_by_signal(ws: ss.Workspace) -> None:
    run = ws.run("kill -9 $$")
    assert (run.status, run.exit_code, run.signal) == ("killed", None, 9)


def test_timeout_ends_timed_out(ws: ss.Workspace) -> None:
    run = ws.run("echo started; sleep 30", timeout_ms=300)
    assert run.status == "timed_out"
    assert run.exit_code is None
    assert run.stdout == "started\n"


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[-1][0] != "Z"
    except FileNotFoundError:
        return False


def test_cancel_kills_the_tree(ws: ss.Workspace) -> None:
    h = ws.start("sleep 300 & echo $! > bg.pid; setsid sh -c 'sleep 301' & echo $! > daemon.pid; "
                 "touch started; wait", timeout_ms=600_000)
    until("the run's children", lambda: ws.files.exists("started"))
    pids = [int(ws.files.read_text(p)) for p in ("bg.pid", "daemon.pid")]
    # Positive control: the tree is there before the cancel.
    assert all(_alive(p) for p in pids), pids
    run = h.cancel()
    assert run.status == "cancelled"
    until("every process of the run gone", lambda: not any(_alive(p) for p in pids))
    with pytest.raises(Conflict):
        h.cancel()


def test_wait_with_timeout_returns_running(ws: ss.Workspace) -> None:
    h = ws.start("sleep 30")
    run = h.wait(timeout_ms=200)
    assert run.status == "running"
    assert h.cancel().status == "cancelled"


def test_binary_output_is_bytes(ws: ss.Workspace) -> None:
    run = ws.run("printf 'a\\000b\\377'; printf '\\001' >&2")
    assert run.status == "exited"
    assert run.encoding == "base64"
    assert run.stdout == b"a\x00b\xff"
    assert run.stderr == b"\x01"
    assert run.stdout_bytes == 4


def test_truncation_keeps_head_and_tail(ws: ss.Workspace) -> None:
    run = ws.run("printf 'H%.0s' $(seq 40); head -c 920 /dev/zero | tr '\\0' m; "
                 "printf 'T%.0s' $(seq 40)", max_output_bytes=64)
    assert run.status == "exited"
    assert run.truncated is True
    assert run.stdout_bytes == 1000
    assert run.stdout == "H" * 32
    assert run.stdout_tail == "T" * 32
    assert run.stderr_tail is None


def test_stdin_cwd_env(ws: ss.Workspace) -> None:
    assert ws.run("cat", stdin="héllo").stdout == "héllo"
    assert ws.run("cat", stdin=b"\x00\xff\x01").stdout == b"\x00\xff\x01"
    ws.files.mkdir("sub/dir", parents=True)
    run = ws.run("pwd; echo $K", cwd="sub/dir", env={"K": "v"})
    assert run.stdout == f"{ws.workdir}/sub/dir\nv\n"


GATED = "echo one; while [ ! -e {go} ]; do sleep 0.05; done; echo two >&2; echo three"


def test_follow_output_live(ws: ss.Workspace) -> None:
    h = ws.start(GATED.format(go="go-follow"))
    seen = []
    for stream, data, offset in h.follow():
        seen.append((stream, data, offset))
        if data == b"one\n":
            # Live: the run is still running when its first line arrives.
            assert h.refresh().status == "running"
            ws.files.write("go-follow", "")
    assert seen == [("stdout", b"one\n", 0), ("stderr", b"two\n", 0), ("stdout", b"three\n", 4)]
    assert h.run.status == "exited" and h.run.stdout == "one\nthree\n"


def test_run_with_callbacks(ws: ss.Workspace) -> None:
    out: list[tuple[object, int]] = []
    err: list[tuple[object, int]] = []

    def on_out(data: object, offset: int) -> None:
        out.append((data, offset))
        if data == "one\n":
            ws.files.write("go-cb", "")

    run = ws.run(GATED.format(go="go-cb"), on_stdout=on_out,
                 on_stderr=lambda d, o: err.append((d, o)))
    assert out == [("one\n", 0), ("three\n", 4)]
    assert err == [("two\n", 0)]
    assert (run.status, run.exit_code, run.stdout, run.stderr) == ("exited", 0, "one\nthree\n", "two\n")
    split: list[tuple[object, int]] = []
    ws.run("printf 'x\\303'; sleep 0.3; printf '\\251\\n'", on_stdout=lambda d, o: split.append((d, o)))
    # One chunk or two (as the agent read them); never half a character, never bytes.
    assert split in ([("x\u00e9\n", 0)], [("x", 0), ("\u00e9\n", 1)]), split
    bin_chunks: list[tuple[object, int]] = []
    ws.run("printf '\\377\\376'", on_stdout=lambda d, o: bin_chunks.append((d, o)))
    assert bin_chunks == [(b"\xff\xfe", 0)]


def test_reattach_from_a_second_client(ws: ss.Workspace) -> None:
    h = ws.start(GATED.format(go="go-re"))
    other = Client(socket_path=SOCKET)
    ws2 = other.workspaces.get(ws.id)
    h2 = ws2.run_handle(h.id)
    assert h2.id == h.id and h2.status == "running"
    it = h2.follow(from_offset=2)
    assert next(it) == ("stdout", b"e\n", 2)
    ws.files.write("go-re", "")
    rest = list(it)
    assert rest == [("stderr", b"o\n", 2), ("stdout", b"three\n", 4)]
    assert h2.run.status == "exited"
    assert h.wait().stdout == "one\nthree\n"


def test_service_through_its_restart_policy(ws: ss.Workspace) -> None:
    svc = ws.services.start("flaky", "echo attempt; exit 1", restart="on-failure",
                            max_restarts=2, delay_ms=50)
    assert svc.name == "flaky"
    done = ws.services.wait("flaky", lambda s: s.state == "exhausted")
    assert [a.number for a in done.attempts] == [1, 2, 3]
    assert all(a.exit_code == 1 and a.end_reason == "exited" for a in done.attempts)
    assert done.attempts[0].stdout == "attempt\n"
    assert list(ws.services.logs("flaky", attempt=2)) == [("stdout", b"attempt\n", 0)]
    assert list(ws.services.logs("flaky")) == [("stdout", b"attempt\n", 0)]
    assert [s.name for s in ws.services.list()] == ["flaky"]
    assert ws.services.delete("flaky") == {"name": "flaky", "deleted": True}


def test_service_stop_returns_when_stopped(ws: ss.Workspace) -> None:
    ws.services.start("web", "echo up; touch .up; exec sleep 60", restart="always")
    until("the service's marker", lambda: ws.files.exists(".up"))
    logs = ws.services.logs("web", follow=True)
    assert next(logs) == ("stdout", b"up\n", 0)
    # The running attempt is listed, last, with the bytes it wrote so far.
    live = ws.services.wait("web", lambda s: s.attempts[-1:] != [] and
                            s.attempts[-1].stdout_bytes == 3)
    (a,) = live.attempts
    assert (a.number, a.state, a.stdout_bytes, a.stderr_bytes) == (1, "running", 3, 0)
    assert a.pid == live.main_pid and a.end_reason is None and a.ended_at is None
    stopped = ws.services.stop("web")
    assert stopped.state == "stopped" and not stopped.stopping
    assert list(logs) == []  # the followed attempt ended
    svc = ws.services.get("web")
    assert len(svc.attempts) == 1
    assert svc.attempts[0].end_reason == "stopped"
    assert svc.attempts[0].state == "ended" and svc.attempts[0].stdout_bytes == 3
    assert svc.attempts[0].stdout == "up\n"
    again = ws.services.restart("web")
    assert again.state in ("starting", "running")
    two = ws.services.wait("web", lambda s: s.current_attempt == 2 and s.state == "running")
    assert [(x.number, x.state) for x in two.attempts] == [(1, "ended"), (2, "running")]
    ws.services.delete("web")


def test_terminal_typing_and_echo(ws: ss.Workspace) -> None:
    with ws.terminals.create(cols=100, rows=30, command="/bin/sh") as t:
        assert t.state == "running"
        t.send("echo $((6*7))x\n")
        echo = t.expect("echo $((6*7))x")  # the PTY echoes what was typed
        assert echo.endswith(b"echo $((6*7))x")
        assert t.expect("42x").endswith(b"42x")  # the shell's answer
        t.resize(120, 40)
        t.send("stty size\n")
        t.expect("40 120")
        tid = t.id
    # Detached: the terminal keeps running; attach again and see the scrollback.
    assert ws.terminals.get(tid).state == "running"
    with ws.terminals.attach(tid) as t2:
        t2.expect("42x")
        t2.send("exit 5\n")
        rest = b"".join(t2)
        assert t2.exit == {"exitCode": 5, "signal": None, "state": "exited"}, rest
    assert ws.terminals.get(tid).exit_code == 5


def test_terminal_kill(ws: ss.Workspace) -> None:
    t = ws.terminals.create(command="sleep 600")
    info = t.kill()
    assert (info.state, info.signal) == ("closed", 9)


def test_files_round_trip(ws: ss.Workspace) -> None:
    data = bytes(range(256)) * 1000
    entry = ws.files.write("dir/blob.bin", data, parents=True, mode="0600")
    assert entry["type"] == "file" and entry["size"] == len(data) and entry["mode"] == "0600"
    assert ws.files.read("dir/blob.bin") == data
    assert ws.files.read("dir/blob.bin", start=10, end=19) == data[10:20]
    assert [e["name"] for e in ws.files.list("dir")["entries"]] == ["blob.bin"]
    ws.files.write("dir/chunks.txt", iter([b"a" * 70000, b"b" * 5]))
    assert ws.files.read_text("dir/chunks.txt") == "a" * 70000 + "bbbbb"
    assert ws.files.rename("dir/chunks.txt", "dir/moved.txt")["name"] == "moved.txt"
    with pytest.raises(ss.PreconditionFailed):
        ws.files.write("dir/moved.txt", "x", if_match='"nope"')
    with pytest.raises(ss.PayloadTooLarge):
        ws.files.read("dir/blob.bin", max_bytes=100)
    with pytest.raises(Conflict):
        ws.files.remove("dir")
    assert ws.files.remove("dir", recursive=True)["deleted"] is True
    with pytest.raises(NotFound) as e:
        ws.files.stat("dir")
    assert e.value.field == "path"


def test_errors_name_the_field(ws: ss.Workspace, client: Client) -> None:
    with pytest.raises(BadRequest) as e:
        ws.run("true", timeout_ms=0)
    assert (e.value.status, e.value.code, e.value.field) == (400, "invalid_argument", "timeoutMs")
    with pytest.raises(NotFound):
        ws.run_handle("r-" + "a" * 26)
    with pytest.raises(BadRequest) as e2:
        client.workspaces.create(adapter="host", image="busybox@sha256:" + "1" * 64)
    assert e2.value.field == "image"
    assert isinstance(e2.value, StationError)


def test_runs_list_and_worker(ws: ss.Workspace, client: Client) -> None:
    r = ws.run("echo listed")
    assert r.id in [x.id for x in ws.runs(limit=1000)]
    assert client.worker()["name"] == "test"


@pytest.mark.skipif(not URL, reason="no TCP listener (STATION_URL not set)")
def test_tcp_with_and_without_token(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("STATION_TOKEN", raising=False)
    with pytest.raises(Unauthorized) as e:
        Client(url=URL).workspaces.list()
    assert e.value.status == 401
    c = Client(url=URL, token=TOKEN)
    assert c.ready()["ready"] is True
    with c.workspaces.create(adapter="host") as w:
        assert w.run("echo tcp").stdout == "tcp\n"
        with w.terminals.create(command="/bin/sh") as t:
            t.send("echo over$((1+1))tcp\n")
            t.expect("over2tcp")
        h = w.start("echo a; echo b >&2")
        assert sorted(s for s, _, _ in h.follow()) == ["stderr", "stdout"]


def test_discovery_order(monkeypatch: pytest.MonkeyPatch, tmp_path: os.PathLike[str]) -> None:
    for v in ("STATION_URL", "STATION_SOCKET", "STATION_ROOT", "STATION_TOKEN"):
        monkeypatch.delenv(v, raising=False)
    assert Client().endpoint == "unix:/var/lib/station-sandbox/station.sock"
    monkeypatch.setenv("STATION_ROOT", "/r")
    assert Client().endpoint == "unix:/r/station.sock"
    monkeypatch.setenv("STATION_SOCKET", "/s.sock")
    assert Client().endpoint == "unix:/s.sock"
    monkeypatch.setenv("STATION_URL", "http://127.0.0.1:9")
    assert Client().endpoint == "http://127.0.0.1:9"
    assert Client(root_dir="/x").endpoint == "unix:/x/station.sock"
    assert Client(socket_path="/y.sock", root_dir="/x").endpoint == "unix:/y.sock"
    assert Client(url="http://[::1]:8080").endpoint == "http://[::1]:8080"
    with pytest.raises(ValueError):
        Client(socket_path="/a", url="http://b")
    with pytest.raises(ValueError):
        Client(url="ftp://x")
    # The real one, found through the environment alone.
    monkeypatch.delenv("STATION_URL")
    monkeypatch.setenv("STATION_SOCKET", SOCKET)
    assert Client().ready()["ready"] is True


def test_follow_outlives_the_client_timeout(ws: ss.Workspace) -> None:
    # A run silent for longer than the client's timeout: following re-opens the stream once the
    # controller answered a probe, and no byte is repeated.
    short = Client(socket_path=SOCKET, timeout=0.5)
    h = short.workspaces.get(ws.id).start("echo a; sleep 2; echo b")
    assert list(h.follow()) == [("stdout", b"a\n", 0), ("stdout", b"b\n", 2)]
    assert h.run.status == "exited" and h.run.stdout == "a\nb\n"
    # Without any output at all, for more than four timeouts.
    h = short.workspaces.get(ws.id).start("sleep 3")
    assert list(h.follow()) == []
    assert h.run.status == "exited" and h.run.exit_code == 0


def test_async_follow_outlives_the_client_timeout(ws: ss.Workspace) -> None:
    import asyncio

    async def main() -> None:
        short = await ss.AsyncClient(socket_path=SOCKET, timeout=0.5).workspaces.get(ws.id)
        h = await short.start("sleep 3; echo done")
        assert [c async for c in h.follow()] == [("stdout", b"done\n", 0)]
        assert h.run.status == "exited"
    asyncio.run(main())


def test_service_logs_follow_a_silent_service(ws: ss.Workspace) -> None:
    # Silent for longer than the client's timeout: the stream is re-opened, nothing repeated.
    short = Client(socket_path=SOCKET, timeout=0.5).workspaces.get(ws.id)
    short.services.start("quiet", "echo a; sleep 2; echo b")
    short.services.wait("quiet", lambda s: s.state == "running")
    assert list(short.services.logs("quiet", follow=True)) == [("stdout", b"a\n", 0), ("stdout", b"b\n", 2)]
    ws.services.delete("quiet")


def test_restart_secrets_usage(client: Client) -> None:
    with client.workspaces.create(adapter="host") as w:
        w.files.write("kept.txt", "still here")
        h = w.start("sleep 60")
        w.restart()
        assert w.state == "ready"
        assert h.wait().status == "lost"
        assert w.run("cat kept.txt").stdout == "still here"
        s = w.secrets.set("gh", "tok-value", host="github.com")
        assert (s["name"], s["host"], s["username"]) == ("gh", "github.com", "x-access-token")
        assert "value" not in s and "tok-value" not in repr(w.secrets.list())
        assert [x["name"] for x in w.secrets.list()] == ["gh"]
        assert w.secrets.delete("gh")["deleted"] is True
        with pytest.raises(NotFound):
            w.secrets.get("gh")
        u = w.usage()
        assert isinstance(u["cpuMs"], int) and isinstance(u["memoryBytes"], int)


def test_files_watch(ws: ss.Workspace) -> None:
    d = f"{ws.workdir}/watched"
    ws.files.mkdir(d)
    seen = []
    for e in ws.files.watch(d, recursive=True):
        seen.append("ready" if e["type"] == "ready" else
                    f"{e['type']} {e['kind']} {e['path']}" + (f" -> {e['to']}" if e.get("to") else ""))
        if e["type"] == "ready":
            ws.files.mkdir(f"{d}/sub")
            ws.files.rename(f"{d}/sub", f"{d}/sub2")
            ws.files.remove(d, recursive=True)  # ends the stream
        assert len(seen) < 20, seen
    assert seen[:3] == ["ready", f"created dir {d}/sub", f"moved dir {d}/sub -> {d}/sub2"]
    assert seen[-1] == f"deleted dir {d}"
    with pytest.raises(NotFound):
        next(ws.files.watch("no-such-dir"))


def test_reattach_from_another_process(ws: ss.Workspace) -> None:
    import json
    import subprocess
    import sys
    h = ws.start(GATED.format(go="go-proc"))
    code = ("import json, sys; from station_sandbox import Client\n"
            "h = Client(socket_path=sys.argv[1]).workspaces.get(sys.argv[2]).run_handle(sys.argv[3])\n"
            "for s, d, o in h.follow():\n"
            "    print(json.dumps([s, d.decode(), o]), flush=True)\n"
            "print(json.dumps([h.run.status, h.run.exit_code, h.run.stdout]), flush=True)\n")
    p = subprocess.Popen([sys.executable, "-c", code, SOCKET, ws.id, h.id],
                         stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout is not None
        assert json.loads(p.stdout.readline()) == ["stdout", "one\n", 0]
        ws.files.write("go-proc", "")
        out, _ = p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert [json.loads(line) for line in out.splitlines()] == [
        ["stderr", "two\n", 0], ["stdout", "three\n", 4], ["exited", 0, "one\nthree\n"]]
    assert p.returncode == 0
