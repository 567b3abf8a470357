"""Usage history (ws.usage(since=, step=), client.worker_usage()): a host workspace running a
CPU loop has typed samples with cpu > 0, the same points GET …/usage gives for the same since
and step; ws.usage() without arguments is still the live usage; the worker's totals; a
malformed since is BadRequest naming it; the async client's the same. The controller samples
every 200 ms (test-sdk-python.sh's --usage-interval-ms)."""

from __future__ import annotations

import asyncio
import json
import time
from datetime import datetime, timedelta, timezone
from typing import Any, Iterator

import pytest

import station_sandbox as ss
from station_sandbox import AsyncClient, Client

from conftest import SOCKET, until


@pytest.fixture(scope="module")
def busy(client: Client) -> Iterator[ss.Workspace]:
    w = client.workspaces.create(adapter="host")
    run = w.start("while :; do :; done")
    try:
        until("15 samples with cpu > 0 (3 s of the loop)",
              lambda: len([s for s in w.usage(since="60s", step=200).samples if s.cpu > 0]) >= 15)
        yield w
    finally:
        run.cancel()
        w.delete()


def api_get(path: str) -> Any:
    """GET path over the unix socket, apart from the SDK: the API's own answer."""
    import http.client
    import socket

    class Conn(http.client.HTTPConnection):
        def connect(self) -> None:
            self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self.sock.connect(SOCKET)

    c = Conn("localhost", timeout=30)
    try:
        c.request("GET", path)
        r = c.getresponse()
        assert r.status == 200, (r.status, r.read())
        return json.loads(r.read())
    finally:
        c.close()


def settled(doc: dict[str, Any], cut: str) -> list[dict[str, Any]]:
    """The points that began before cut: those no later sample changes."""
    return [s for s in doc["samples"] if s["t"] < cut]


def iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, timezone.utc).isoformat(
        timespec="milliseconds").replace("+00:00", "Z")


def test_history_typed_and_as_the_api(busy: ss.Workspace) -> None:
    now = int(time.time() * 1000)
    since = now - 20_000
    h = busy.usage(since=since, step=timedelta(milliseconds=200))
    assert isinstance(h, ss.UsageHistory)
    assert h.workspace_id == busy.id
    assert h.step_ms == 200 and h.interval_ms == 200
    assert all(isinstance(s, ss.UsageSample) for s in h.samples)
    hot = [s for s in h.samples if s.cpu > 0]
    assert len(hot) >= 2, h.samples[-5:]
    assert hot[-1].pids >= 1 and hot[-1].memory_bytes > 0 and hot[-1].span_ms > 0
    api = api_get(f"/v1/workspaces/{busy.id}/usage?since={since}&step=200ms")
    cut = iso(now - 1000)
    assert settled(h.raw, cut) == settled(api, cut)
    assert len(settled(api, cut)) >= 2
    assert h.limits == api["limits"]


def test_since_forms(busy: ss.Workspace) -> None:
    for since in ("30s", timedelta(seconds=30),
                  datetime.now(timezone.utc) - timedelta(seconds=30),
                  datetime.now(timezone.utc).replace(tzinfo=None) - timedelta(seconds=30)):
        h = busy.usage(since=since, step="1s")
        assert h.step_ms == 1000
        first = h.samples[0].t
        assert first >= iso(int(time.time() * 1000) - 32_000), (since, first)
    # step alone: since is the server's default, an hour back
    assert busy.usage(step="1m").step_ms == 60_000


def test_live_usage_unchanged(busy: ss.Workspace) -> None:
    live = busy.usage()
    assert isinstance(live, dict) and live["cpuMs"] > 0 and "sampledAt" in live


def test_bad_since_and_step(busy: ss.Workspace, client: Client) -> None:
    with pytest.raises(ss.BadRequest) as e:
        busy.usage(since="2x")
    assert "since" in str(e.value)
    with pytest.raises(ss.BadRequest) as e:
        client.worker_usage(step="50ms")
    assert "step" in str(e.value)
    with pytest.raises(ss.InvalidArgument):
        busy.usage(since=3600)  # an int is milliseconds since the epoch
    # the control: a well-formed one of each
    assert busy.usage(since="1m", step="500ms").step_ms == 500


def test_worker_usage(busy: ss.Workspace, client: Client) -> None:
    now = int(time.time() * 1000)
    w = client.worker_usage(since=now - 20_000, step="500ms")
    assert isinstance(w, ss.UsageHistory)
    assert w.worker == client.worker()["name"] and w.tenant is None
    assert len([s for s in w.samples if s.cpu > 0]) >= 2
    api = api_get(f"/v1/worker/usage?since={now - 20_000}&step=500ms")
    cut = iso(now - 1000)
    assert settled(w.raw, cut) == settled(api, cut)


def test_async(busy: ss.Workspace) -> None:
    async def go() -> tuple[ss.UsageHistory, ss.UsageHistory, dict[str, Any]]:
        async with AsyncClient(socket_path=SOCKET) as ac:
            aws = await ac.workspace(busy.id)
            return (await aws.usage(since="10s", step=200), await ac.worker_usage(since="10s"),
                    await aws.usage())
    h, w, live = asyncio.run(go())
    assert h.workspace_id == busy.id and any(s.cpu > 0 for s in h.samples)
    assert w.worker and w.samples
    assert "cpuMs" in live
