"""Pause and resume, snapshots and fork (ws.pause(), ws.resume(), ws.snapshot(), ws.fork(),
client.snapshots, create(snapshot=, auto_resume=, idle_action=)) on container workspaces of the
busybox image: a command on a paused workspace raises Paused (a Conflict) and runs after
resume; auto_resume lets it through; a workspace made from a snapshot has the files as they
were; forks are independent; arguments refused before any request (a request to the dead
socket would raise ConnectionFailed: the control); with a worker list, snapshots are routed by
their ids, which name their worker (sdk/python/tests/workers/ has several workers)."""

from __future__ import annotations

import asyncio
from typing import Iterator

import pytest

import station_sandbox as ss
from station_sandbox import AsyncClient, Client

from conftest import SECCOMP, SOCKET


@pytest.fixture(scope="module")
def cws(client: Client, image: str) -> Iterator[ss.Workspace]:
    """A container workspace with a file in HOME and one under /etc."""
    w = client.workspaces.create(adapter="container", image=image, seccomp_profile=SECCOMP)
    try:
        r = w.run("echo base > state.txt && echo etc-base > /etc/py-snap")
        assert r.exit_code == 0, r.stderr
        yield w
    finally:
        try:
            w.delete()
        except ss.StationError:
            pass


def cat(w: ss.Workspace, path: str) -> str:
    r = w.run(f"cat {path}")
    assert r.exit_code == 0, r.stderr
    return str(r.stdout)


def test_arguments_refused_before_a_request() -> None:
    dead = Client(socket_path="/nonexistent/station.sock")
    w = ss.Workspace(dead, {"id": "w-1", "state": "ready"})
    for bad in (0, 101, True, "2", 2.0):
        with pytest.raises(ss.InvalidArgument) as e:
            w.fork(bad)  # type: ignore[arg-type]
        assert e.value.field == "count"
    for name in ("", "x" * 129, "a\nb"):
        with pytest.raises(ss.InvalidArgument) as e:
            w.snapshot(name=name)
        assert e.value.field == "name"
    with pytest.raises(ss.InvalidArgument):
        w.snapshot(memory="yes")  # type: ignore[arg-type]
    with pytest.raises(ss.InvalidArgument) as e:
        dead.workspaces.create(idle_action="sleep")
    assert e.value.field == "idleAction"
    with pytest.raises(ss.InvalidArgument):
        dead.workspaces.create(snapshot="s-1", image="busybox@sha256:" + "0" * 64)
    with pytest.raises(ss.InvalidArgument):
        dead.workspaces.create(auto_resume="yes")  # type: ignore[arg-type]
    with pytest.raises(ss.InvalidArgument):
        dead.snapshots.get("")
    # The controls: well formed, they are sent (and find nothing listening).
    for call in (lambda: w.fork(100), lambda: w.snapshot(name="n", memory=False), w.pause,
                 lambda: dead.workspaces.create(snapshot="s-1", auto_resume=True,
                                                idle_action="pause"),
                 dead.snapshots.list):
        with pytest.raises(ss.ConnectionFailed):
            call()


def test_paused_is_a_conflict_of_its_own() -> None:
    e = ss.errors.make_error(409, "paused", "workspace w-1 is paused")
    assert isinstance(e, ss.Paused) and isinstance(e, ss.Conflict)
    assert type(ss.errors.make_error(409, "conflict", "x")) is ss.Conflict
    assert isinstance(ss.errors.error_from_event({"code": "paused", "message": "m"}, "x"), ss.Paused)


def test_pause_and_resume(cws: ss.Workspace) -> None:
    assert cws.pause() is cws
    assert cws.state == "paused" and cws.paused_at
    assert cws.pause().state == "paused"  # nothing to do
    with pytest.raises(ss.Paused) as e:
        cws.run("true")
    assert e.value.status == 409 and "paused" in e.value.message
    assert cws.files.read_text("state.txt") == "base\n"  # reads go on while paused
    assert cws.resume().state == "ready" and cws.paused_at is None
    assert cws.run("echo after").stdout == "after\n"  # the control


def test_auto_resume(client: Client, image: str) -> None:
    with client.workspaces.create(adapter="container", image=image, seccomp_profile=SECCOMP,
                                  auto_resume=True, idle_action="pause",
                                  idle_timeout_ms=600_000) as w:
        assert (w.auto_resume, w.idle_action) == (True, "pause")
        assert w.pause().state == "paused"
        assert w.run("echo woke").stdout == "woke\n"
        assert w.refresh().state == "ready"


def test_snapshot_and_create_from_it(client: Client, cws: ss.Workspace) -> None:
    s = cws.snapshot(name="base")
    try:
        assert ss.snapshot_worker(s["id"]) == cws.worker and s["workspaceId"] == cws.id
        assert (s["name"], s["memory"]) == ("base", False)
        assert isinstance(s["sizeBytes"], int) and isinstance(s["pausedMs"], int)
        assert isinstance(s["durable"], bool)
        assert client.snapshots.get(s["id"])["id"] == s["id"]
        assert s["id"] in [x["id"] for x in client.snapshots.list()]
        assert cws.run("echo later > state.txt").exit_code == 0
        with client.workspaces.create(snapshot=s["id"], seccomp_profile=SECCOMP) as w:
            assert cat(w, "state.txt") == "base\n"
            assert cat(w, "/etc/py-snap") == "etc-base\n"
            with pytest.raises(ss.Conflict):
                client.snapshots.delete(s["id"])  # a workspace runs on it
    finally:
        assert client.snapshots.delete(s["id"]) is None
    with pytest.raises(ss.NotFound):
        client.snapshots.get(s["id"])


def test_fork(client: Client, cws: ss.Workspace) -> None:
    forks = cws.fork(2)
    try:
        assert len(forks) == 2 and all(isinstance(f, ss.Workspace) for f in forks)
        assert {f.state for f in forks} == {"ready"}
        a, b = forks
        want = cat(cws, "state.txt")
        assert cat(a, "state.txt") == want and cat(b, "/etc/py-snap") == "etc-base\n"
        assert a.run("echo mine > state.txt").exit_code == 0
        assert cat(b, "state.txt") == want, "a write in one fork is not in the other"
        assert cat(cws, "state.txt") == want, "nor in the source"
    finally:
        for f in forks:
            f.delete()


def test_async(cws: ss.Workspace) -> None:
    async def main() -> None:
        async with AsyncClient(socket_path=SOCKET) as client:
            w = await client.workspaces.get(cws.id)
            assert (await w.pause()).state == "paused"
            with pytest.raises(ss.Paused):
                await w.run("true")
            assert (await w.resume()).state == "ready"
            s = await w.snapshot(name="async")
            try:
                assert (await client.snapshots.get(s["id"]))["name"] == "async"
                assert s["id"] in [x["id"] for x in await client.snapshots.list()]
                import io
                buf = io.BytesIO()
                n = await client.images.export(str(s["image"]), buf)
                assert n == len(buf.getvalue()) and buf.getvalue()[257:262] == b"ustar"
            finally:
                await client.snapshots.delete(s["id"])
            forks = await w.fork(1)
            assert len(forks) == 1 and isinstance(forks[0], ss.AsyncWorkspace)
            await forks[0].delete()
    asyncio.run(main())


def test_several_workers(cws: ss.Workspace) -> None:
    c = Client(workers={cws.worker: "unix:" + SOCKET})
    s = c.workspace(cws.id).snapshot()  # routed by the workspace's id
    assert ss.snapshot_worker(s["id"]) == cws.worker
    listed = c.snapshots.list()  # every worker's
    assert listed.unreachable == [] and s["id"] in [x["id"] for x in listed]
    assert c.snapshots.get(s["id"])["worker"] == cws.worker  # routed by the snapshot's id
    c.snapshots.delete(s["id"])
    with pytest.raises(ss.InvalidArgument) as e:
        c.workspaces.create(snapshot="s-1")  # no snapshot id: refused without a request
    assert e.value.field == "snapshot"
    forks = c.workspace(cws.id).fork(1)  # routed by the workspace's id
    assert forks[0].id.startswith(cws.worker + "-")
    forks[0].delete()


def _ready_with(checks: list[dict[str, object]], adapter: str) -> object:
    op = ss._ops.ready("unix:/x", adapter)
    next(op)
    try:
        op.send({"ready": True, "adapters": ["host", "container"], "checks": checks})
    except StopIteration as e:
        return e.value
    raise AssertionError("ready() asked twice")


def test_ready_ignores_the_checkpoint_check() -> None:
    # checkpoint never decides ready (docs/api.md): a worker that cannot take memory snapshots
    # still makes workspaces.
    cp = {"name": "checkpoint", "ok": False, "message": "criu: 'criu check' fails"}
    for adapter in ("host", "container"):
        assert _ready_with([cp], adapter)["checks"] == [cp]  # type: ignore[index]
    # The control: a check that matters still fails it.
    with pytest.raises(ss.Unavailable) as e:
        _ready_with([cp, {"name": "runtime", "ok": False, "message": "no runc"}], "container")
    assert "runtime: no runc" in e.value.message and "checkpoint" not in e.value.message


def test_a_snapshots_image_exports_as_an_oci_layout(client: Client, cws: ss.Workspace) -> None:
    """client.images.export() streams the snapshot's image as an OCI image layout tar: its
    index names the image's manifest, whose blob and every layer are in it; an unknown
    digest is NotFound (the control: the snapshot's own exports)."""
    import hashlib
    import io
    import json as _json
    import tarfile

    snap = cws.snapshot(name="py-export")
    try:
        buf = io.BytesIO()
        n = client.images.export(str(snap["image"]), buf)
        assert n == len(buf.getvalue()) and n > 0
        with tarfile.open(fileobj=io.BytesIO(buf.getvalue())) as t:
            names = set(t.getnames())
            assert {"oci-layout", "index.json"} <= names
            index = _json.loads(t.extractfile("index.json").read())  # type: ignore[union-attr]
            manifest_digest = index["manifests"][0]["digest"]
            assert manifest_digest == str(snap["image"]).split("@")[-1]
            raw = t.extractfile("blobs/sha256/" + manifest_digest[7:]).read()  # type: ignore[union-attr]
            assert "sha256:" + hashlib.sha256(raw).hexdigest() == manifest_digest
            manifest = _json.loads(raw)
            for layer in manifest["layers"]:
                assert "blobs/sha256/" + layer["digest"][7:] in names
        with pytest.raises(ss.NotFound):
            client.images.export("sha256:" + "0" * 64, io.BytesIO())
    finally:
        client.snapshots.delete(str(snap["id"]))
