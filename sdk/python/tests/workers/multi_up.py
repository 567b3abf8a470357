"""One client, three workers (all up): creates on each worker and on the most free, routes
run/get/delete by the id's worker prefix, lists across all; the worker list from the argument,
$STATION_WORKERS and a workers file; unknown workers; hostile and silent workers."""

from __future__ import annotations

import asyncio
import http.server
import os
import sys
import threading

import pytest

sys.path.insert(0, os.path.dirname(__file__))
from _env import NAMES, OPTION, W, WORKERS_FILE  # noqa: E402

from station_sandbox import (AsyncClient, Client, Conflict, InvalidArgument, NotFound,  # noqa: E402
                             WorkerUnavailable, snapshot_worker, worker_of_id)

MAX = {"w1": 4, "w2": 8, "w3": 6}


def only(name: str) -> Client:
    return Client(url=W[name]["url"], token=W[name]["token"])


def test_workers_reports_each_worker_up():
    c = Client(workers=OPTION)
    assert c.worker_names == NAMES
    states = c.workers()
    assert [(s["name"], s["url"], s["up"]) for s in states] == [(n, W[n]["url"], True) for n in NAMES]
    for s in states:
        assert isinstance(s["version"], str)
        assert s["capacity"]["workspaces"]["max"] == MAX[s["name"]]
        assert s["capacity"]["workspaces"]["free"] == MAX[s["name"]] - s["workspaces"]
        mem = s["capacity"]["memoryBytes"]
        assert 0 < mem["available"] <= mem["total"]
        assert s["capacity"]["cpus"] >= 1


def test_create_on_each_worker_and_route_by_id():
    c = Client(workers=OPTION)
    made = []
    try:
        for name in NAMES:
            ws = c.workspaces.create(adapter="host", worker=name)
            made.append(ws)
            assert ws.worker == name and worker_of_id(ws.id) == name and ws.id.startswith(name + "-")
        for ws in made:
            for other in NAMES:
                if other == ws.worker:
                    assert only(other).workspaces.get(ws.id).id == ws.id
                else:
                    with pytest.raises(NotFound):
                        only(other).workspaces.get(ws.id)
            got = c.workspaces.get(ws.id)
            assert got.worker == ws.worker
            run = got.run(f"echo on-{ws.worker}", timeout_ms=30_000)
            assert (run.status, run.stdout) == ("exited", f"on-{ws.worker}\n")
            h = ws.start("echo started")
            assert h.wait().stdout == "started\n"
        listed = c.workspaces.list()
        assert listed.unreachable == []
        direct = [w.id for n in NAMES for w in only(n).workspaces.list()]
        assert [w.id for w in listed] == direct
        for ws in made:
            assert [w.worker for w in listed if w.id == ws.id] == [ws.worker]
    finally:
        for ws in made:
            assert ws.delete() == {"id": ws.id, "state": "deleted"}
    for ws in made:
        with pytest.raises(NotFound):
            c.workspaces.get(ws.id)


def test_create_on_the_most_free_worker():
    c = Client(workers=OPTION)
    made = []
    try:
        first = c.workspaces.create(adapter="host")
        made.append(first)
        assert first.worker == "w2"  # 8 free slots
        for _ in range(3):
            made.append(c.workspaces.create(adapter="host", worker="w2"))
        assert [s["capacity"]["workspaces"]["free"] for s in c.workers()] == [4, 4, 6]
        nxt = c.workspaces.create(adapter="host")
        made.append(nxt)
        assert nxt.worker == "w3"
    finally:
        for ws in made:
            ws.delete()


def test_async_client_routes_and_lists_at_once():
    async def main():
        async with AsyncClient(workers=OPTION) as c:
            assert [s["up"] for s in await c.workers()] == [True, True, True]
            ws = await c.workspaces.create(adapter="host", worker="w3")
            try:
                assert ws.worker == "w3"
                got = await c.workspaces.get(ws.id)
                run = await got.run("echo async", timeout_ms=30_000)
                assert run.stdout == "async\n"
                listed = await c.workspaces.list()
                assert listed.unreachable == [] and ws.id in [w.id for w in listed]
            finally:
                await ws.delete()
            best = await c.workspaces.create(adapter="host")
            try:
                assert best.worker == "w2"
            finally:
                await best.delete()
    asyncio.run(main())


def test_station_workers_env(monkeypatch):
    monkeypatch.setenv("STATION_WORKERS", ",".join(f"{n}=unix:{W[n]['sock']}" for n in NAMES))
    for v in ("STATION_URL", "STATION_SOCKET", "STATION_ROOT", "STATION_WORKERS_FILE"):
        monkeypatch.delenv(v, raising=False)
    c = Client()
    assert c.worker_names == NAMES
    ws = c.workspaces.create(adapter="host", worker="w1")
    try:
        assert ws.worker == "w1"
        assert ws.run("echo env").stdout == "env\n"
        assert ws.id in [w.id for w in c.workspaces.list()]
    finally:
        ws.delete()
    for bad, want in [("w1", "STATION_WORKERS: 'w1' is not NAME=URL"),
                      ("W1=http://127.0.0.1:1", "worker name 'W1' is not 1-32 of [a-z0-9-]"),
                      ("w1=ftp://x", "only http:, https: and unix: are supported"),
                      ("w1=http://127.0.0.1:1,w1=http://127.0.0.1:2", "worker w1 is named twice")]:
        monkeypatch.setenv("STATION_WORKERS", bad)
        with pytest.raises(ValueError) as e:
            Client()
        assert want in str(e.value)


@pytest.mark.skipif(not WORKERS_FILE, reason="no workers file")
def test_workers_file_with_token_files(monkeypatch, tmp_path):
    for v in ("STATION_WORKERS", "STATION_TOKEN", "STATION_URL", "STATION_SOCKET"):
        monkeypatch.delenv(v, raising=False)
    monkeypatch.setenv("STATION_WORKERS_FILE", WORKERS_FILE)
    c = Client()
    assert c.worker_names == NAMES
    ws = c.workspaces.create(adapter="host", worker="w3")
    try:
        assert ws.run("echo file").stdout == "file\n"
    finally:
        ws.delete()
    # a token file others may read is refused, naming it and its mode
    tok = tmp_path / "w1.token"
    tok.write_text(W["w1"]["token"] + "\n")
    tok.chmod(0o640)
    f = tmp_path / "workers"
    f.write_text(f"# comment\n\nw1 {W['w1']['url']} w1.token  # beside the workers file\n")
    monkeypatch.setenv("STATION_WORKERS_FILE", str(f))
    with pytest.raises(ValueError) as e:
        Client()
    assert f"line 3: token file {tok}: mode 0640 lets group or others at it" in str(e.value)
    tok.chmod(0o600)  # positive control
    assert Client().on("w1").worker()["name"] == "w1"


def test_unknown_worker_is_named():
    c = Client(workers=OPTION)
    wid = "w9-" + "a" * 26
    with pytest.raises(NotFound) as e:
        c.workspaces.get(wid)
    assert e.value.message == f"workspace {wid} is on worker w9, which is not in this client's workers"
    with pytest.raises(NotFound) as e:
        c.workspaces.create(worker="w9")
    assert e.value.message == "worker w9 is not in this client's workers"


def test_snapshot_on_w2_listed_created_from_and_deleted_without_a_worker():
    c = Client(workers=OPTION)
    ws = c.workspaces.create(adapter="host", worker="w2")
    made = [ws]
    try:
        assert ws.run("echo from-w2 >~/kept.txt").exit_code == 0
        s = ws.snapshot(name="py-w2")
        assert snapshot_worker(s["id"]) == "w2" and s["worker"] == "w2"
        listed = c.snapshots.list()
        assert listed.unreachable == []
        assert [x["worker"] for x in listed if x["id"] == s["id"]] == ["w2"]
        direct = sorted(x["id"] for n in NAMES for x in only(n).snapshots.list())
        assert sorted(x["id"] for x in listed) == direct
        assert c.snapshots.get(s["id"])["workspaceId"] == ws.id
        with pytest.raises(NotFound) as e:  # w1 does not keep it, and says who does
            only("w1").snapshots.get(s["id"])
        assert "kept by worker w2" in str(e.value)
        with pytest.raises(InvalidArgument) as ie:
            c.workspaces.create(snapshot=s["id"], worker="w1")
        assert ie.value.field == "worker"
        made.append(c.workspaces.create(snapshot=s["id"]))
        assert made[-1].worker == "w2"
        assert made[-1].run("cat ~/kept.txt").stdout == "from-w2\n"
        with pytest.raises(Conflict):  # a workspace runs on it
            c.snapshots.delete(s["id"])
        made.pop().delete()
        c.snapshots.delete(s["id"])
        with pytest.raises(NotFound):
            c.snapshots.get(s["id"])
        assert s["id"] not in [x["id"] for x in c.snapshots.list()]
        with pytest.raises(InvalidArgument):
            c.snapshots.get("s-nope")  # no request: no snapshot id
        with pytest.raises(InvalidArgument) as ie:  # the older shape names no worker
            c.snapshots.delete("s-abcdefghijklmnopqrstuvwxyz")
        assert "client.on(NAME)" in str(ie.value)
    finally:
        for w in made:
            w.delete()


def test_async_snapshots_route_by_id():
    async def main():
        c = AsyncClient(workers=OPTION)
        ws = await c.workspaces.create(adapter="host", worker="w3")
        try:
            s = await ws.snapshot()
            assert s["id"].startswith("s-w3-")
            assert s["id"] in [x["id"] for x in await c.snapshots.list()]
            assert (await c.snapshots.get(s["id"]))["worker"] == "w3"
            await c.snapshots.delete(s["id"])
            with pytest.raises(NotFound):
                await c.snapshots.get(s["id"])
        finally:
            await ws.delete()
    asyncio.run(main())


def test_calls_without_a_workspace_need_on():
    c = Client(workers=OPTION)
    with pytest.raises(ValueError) as e:
        c.images.list()
    assert "GET /v1/images: this client has several workers (w1, w2, w3)" in str(e.value)
    assert isinstance(c.on("w1").images.list(), list)
    assert c.on("w3").worker()["name"] == "w3"


class _Fake(http.server.BaseHTTPRequestHandler):
    mode = ""

    def log_message(self, *a):
        pass

    def do_GET(self):
        if self.mode == "silent":
            threading.Event().wait(5)
            return
        if self.mode == "garbage":
            body, status = b"{not json", 200
        elif self.mode == "error":
            body, status = b'{"error":{"code":"internal","message":"boom"}}', 500
        else:  # liar: says it is w1, with room for everyone
            body = (b'{"name":"w1","version":"x","workspaces":0,"limits":{"maxWorkspaces":100000}}'
                    if self.path == "/v1/worker" else b'{"workspaces":"nope"}')
            status = 200
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        try:
            self.wfile.write(body)
        except OSError:
            pass


def test_hostile_and_silent_workers_are_marked_and_skipped():
    servers = {}
    for mode in ("garbage", "error", "liar", "silent"):
        handler = type(f"Fake_{mode}", (_Fake,), {"mode": mode})
        srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        srv.daemon_threads = True
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        servers[mode] = srv
    try:
        workers = OPTION + [{"name": m, "url": f"http://127.0.0.1:{s.server_address[1]}", "token": "t"}
                            for m, s in servers.items()]
        c = Client(workers=workers, timeout=1.0)
        down = {s["name"]: s["error"] for s in c.workers() if not s["up"]}
        assert sorted(down) == ["error", "garbage", "liar", "silent"]
        assert "answers as worker 'w1', not liar" in down["liar"]
        assert "HTTP 500: boom" in down["error"]
        assert "within 1 s" in down["silent"]
        listed = c.workspaces.list()
        assert sorted(u["worker"] for u in listed.unreachable) == ["error", "garbage", "liar", "silent"]
        ws = c.workspaces.create(adapter="host")
        try:
            assert ws.worker == "w2"
        finally:
            ws.delete()
    finally:
        for s in servers.values():
            s.shutdown()
            s.server_close()
