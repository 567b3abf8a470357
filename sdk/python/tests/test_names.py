"""Names and labels: create(name=, labels=) shows them, list(labels=, name=, state=) filters
(a mapping, a list of "k=v" and "k"), update() renames and merges labels (None removes), get()
and every call take the name; with a worker list a name is looked up on every worker, and a
name on two workers is an error naming both (a second worker here: a stub that lists one
workspace of that name); the async client's the same."""

from __future__ import annotations

import asyncio
import json
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Iterator
from urllib.parse import parse_qs, urlsplit

import pytest

import station_sandbox as ss
from station_sandbox import AsyncClient, Client

from conftest import SOCKET


def uniq(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="module")
def named(client: Client) -> Iterator[ss.Workspace]:
    w = client.workspaces.create(adapter="host", name=uniq("web"),
                                 labels={"team": "a", "tier": "front"})
    try:
        yield w
    finally:
        w.delete()


def test_create_shows_name_and_labels(client: Client, named: ss.Workspace) -> None:
    assert named.name and named.name.startswith("web-")
    assert named.labels == {"team": "a", "tier": "front"}
    plain = client.workspaces.create(adapter="host")
    try:
        assert plain.name is None and plain.labels == {}
    finally:
        plain.delete()


def test_get_and_run_by_name(client: Client, named: ss.Workspace) -> None:
    assert named.name is not None
    got = client.workspaces.get(named.name)
    assert got.id == named.id and got.labels == named.labels
    assert got.run("echo hi").stdout == "hi\n"


def test_list_filters(client: Client, named: ss.Workspace) -> None:
    team = uniq("t")
    other = client.workspaces.create(adapter="host", labels={"team": team, "tier": "back"})
    try:
        client.workspaces.update(named.id, labels={"team": team})
        ids = lambda ws: sorted(w.id for w in ws)  # noqa: E731
        assert ids(client.workspaces.list(labels={"team": team})) == sorted([named.id, other.id])
        assert ids(client.workspaces.list(labels={"team": team, "tier": "front"})) == [named.id]
        assert ids(client.workspaces.list(labels=[f"team={team}", "tier=back"])) == [other.id]
        assert ids(client.workspaces.list(labels={"team": team, "tier": None})) == \
            sorted([named.id, other.id])
        assert ids(client.workspaces.list(labels={"team": team, "nope": None})) == []
        assert ids(client.workspaces.list(name=named.name)) == [named.id]
        assert ids(client.workspaces.list(labels={"team": team}, state="ready")) == \
            sorted([named.id, other.id])
        assert ids(client.workspaces.list(labels={"team": team}, state="paused")) == []
        # Positive control: without filters, both and more.
        assert {named.id, other.id} <= {w.id for w in client.workspaces.list()}
        with pytest.raises(ss.BadRequest) as e:
            client.workspaces.list(labels=["Bad Key"])
        assert e.value.field == "label"
    finally:
        other.delete()
        client.workspaces.update(named.id, labels={"team": "a"})


def test_update_renames_and_merges_labels(client: Client) -> None:
    w = client.workspaces.create(adapter="host", labels={"a": "1", "b": "2"})
    try:
        new = uniq("renamed")
        w.update(name=new, labels={"b": None, "c": "3"})
        assert (w.name, w.labels) == (new, {"a": "1", "c": "3"})
        assert client.workspaces.get(new).id == w.id
        got = client.workspaces.update(new, labels={"a": "9"})
        assert (got.name, got.labels) == (new, {"a": "9", "c": "3"})
        w.update(name=None)
        assert w.refresh().name is None and w.labels == {"a": "9", "c": "3"}
        with pytest.raises(ss.NotFound):
            client.workspaces.get(new)
        with pytest.raises(ss.InvalidArgument):
            w.update()
    finally:
        w.delete()


def test_a_taken_name_is_a_conflict(client: Client, named: ss.Workspace) -> None:
    with pytest.raises(ss.Conflict) as e:
        client.workspaces.create(adapter="host", name=named.name)
    assert named.id in str(e.value)


class _Stub(BaseHTTPRequestHandler):
    """A second worker that lists one workspace named as asked, and nothing else."""

    holds: dict[str, str] = {}

    def do_GET(self) -> None:
        u = urlsplit(self.path)
        name = parse_qs(u.query).get("name", [""])[0]
        if u.path != "/v1/workspaces":
            self.send_error(404)
            return
        ws = [{"id": self.holds[name], "worker": "w2", "state": "ready", "name": name, "labels": {}}] \
            if name in self.holds else []
        body = json.dumps({"workspaces": ws}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *a: Any) -> None:
        pass


@pytest.fixture(scope="module")
def stub() -> Iterator[str]:
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Stub)
    th = threading.Thread(target=srv.serve_forever, daemon=True)
    th.start()
    try:
        yield f"http://127.0.0.1:{srv.server_address[1]}"
    finally:
        srv.shutdown()
        srv.server_close()


def test_a_name_across_workers(named: ss.Workspace, stub: str) -> None:
    assert named.name is not None
    c = Client(workers=[{"name": named.worker, "url": "unix:" + SOCKET},
                        {"name": "w2", "url": stub, "token": "x"}])
    # Only the real worker has it: found there, and its calls go there.
    got = c.workspaces.get(named.name)
    assert (got.id, got.worker) == (named.id, named.worker)
    assert c.workspaces.update(named.name, labels={"seen": "yes"}).labels["seen"] == "yes"
    assert [w.id for w in c.workspaces.list(name=named.name)] == [named.id]
    with pytest.raises(ss.NotFound, match="no worker has a workspace named 'nothing-here'"):
        c.workspaces.get("nothing-here")
    # Both have it: an error naming each worker and id, nothing guessed.
    other = "w2-" + "a" * 26
    _Stub.holds[named.name] = other
    try:
        with pytest.raises(ss.InvalidArgument) as e:
            c.workspaces.get(named.name)
        msg = str(e.value)
        assert f"{named.worker} ({named.id})" in msg and f"w2 ({other})" in msg, msg
        assert "several workers" in msg
        # An id still routes by its worker, never asking about names.
        assert c.workspaces.get(named.id).id == named.id

        async def go() -> None:
            a = AsyncClient(workers=[{"name": named.worker, "url": "unix:" + SOCKET},
                                     {"name": "w2", "url": stub, "token": "x"}])
            with pytest.raises(ss.InvalidArgument, match="several workers"):
                await a.workspaces.get(named.name)
            _Stub.holds.clear()
            got = await a.workspaces.get(named.name)
            assert got.id == named.id
            assert [w.id for w in await a.workspaces.list(labels={"seen": "yes"})] == [named.id]
            got = await a.workspaces.update(named.name, labels={"seen": None})
            assert "seen" not in got.labels
        asyncio.run(go())
    finally:
        _Stub.holds.clear()


def test_async_create_with_name_and_labels() -> None:
    async def go() -> None:
        a = AsyncClient(socket_path=SOCKET)
        n = uniq("aio")
        w = await a.workspaces.create(adapter="host", name=n, labels={"k": "v"})
        try:
            assert (w.name, w.labels) == (n, {"k": "v"})
            assert (await a.workspaces.get(n)).id == w.id
            await w.update(labels={"k": None})
            assert w.labels == {}
        finally:
            await w.delete()
    asyncio.run(go())
