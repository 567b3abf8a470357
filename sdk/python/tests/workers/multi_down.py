"""Three workers, w2 stopped: lists name it and carry w1's and w3's workspaces, calls on a w2
id raise WorkerUnavailable naming w2, creates skip it; w1 and w3 are still served."""

from __future__ import annotations

import asyncio
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))
from _env import OPTION, W  # noqa: E402

from station_sandbox import AsyncClient, Client, WorkerUnavailable  # noqa: E402

IDS = {i[:2]: i for i in os.environ.get("STATION_TEST_IDS", "").split(",") if i}
if sorted(IDS) != ["w1", "w2", "w3"]:
    raise RuntimeError("STATION_TEST_IDS (an id on each of w1, w2, w3) not set")


def is_w2_down(e: WorkerUnavailable) -> None:
    assert e.worker == "w2"
    assert e.url == W["w2"]["url"]
    assert e.message == f"worker w2 ({W['w2']['url']}) did not answer: connection refused"


def test_list_names_w2_and_has_w1_and_w3():
    c = Client(workers=OPTION)
    listed = c.workspaces.list()
    assert listed.unreachable == [{"worker": "w2", "url": W["w2"]["url"], "error": "connection refused"}]
    ids = [w.id for w in listed]
    assert IDS["w1"] in ids and IDS["w3"] in ids and IDS["w2"] not in ids
    states = c.workers()
    assert [(s["name"], s["up"]) for s in states] == [("w1", True), ("w2", False), ("w3", True)]
    assert states[1]["error"] == "connection refused"


def test_calls_on_a_w2_id_raise_worker_unavailable():
    c = Client(workers=OPTION)
    with pytest.raises(WorkerUnavailable) as e:
        c.workspaces.get(IDS["w2"])
    is_w2_down(e.value)
    ws = c.workspaces.get(IDS["w1"])
    # a workspace object of w2 (as a list made before w2 stopped would hold)
    from station_sandbox import Workspace
    w2 = Workspace(c, {"id": IDS["w2"], "worker": "w2", "state": "ready"})
    for call in (lambda: w2.run("true"), lambda: w2.refresh(), lambda: w2.files.read("x"),
                 lambda: w2.delete(), lambda: c.workspaces.create(worker="w2")):
        with pytest.raises(WorkerUnavailable) as e:
            call()
        is_w2_down(e.value)
    assert ws.worker == "w1"


def test_w1_and_w3_still_served_and_creates_skip_w2():
    c = Client(workers=OPTION)
    for wid in (IDS["w1"], IDS["w3"]):
        assert c.workspaces.get(wid).run("echo still").stdout == "still\n"
    ws = c.workspaces.create(adapter="host")  # w2 has the most free slots but is down
    try:
        assert ws.worker == "w3"
    finally:
        ws.delete()


def test_async_client_with_w2_down():
    async def main():
        async with AsyncClient(workers=OPTION) as c:
            listed = await c.workspaces.list()
            assert [u["worker"] for u in listed.unreachable] == ["w2"]
            with pytest.raises(WorkerUnavailable) as e:
                await c.workspaces.get(IDS["w2"])
            is_w2_down(e.value)
            run = await (await c.workspaces.get(IDS["w3"])).run("echo async")
            assert run.stdout == "async\n"
    asyncio.run(main())


def test_no_worker_answering_is_an_error_naming_them():
    c = Client(workers=[OPTION[1]])
    with pytest.raises(WorkerUnavailable) as e:
        c.workspaces.list()
    assert e.value.worker == "w2"
    assert e.value.message == f"no worker answered: w2 ({W['w2']['url']}): connection refused"
    with pytest.raises(WorkerUnavailable):
        c.workspaces.create()
