"""AsyncClient doing the same flow as the blocking client: create, run (a non-zero exit, a
timeout, binary output), follow live, reattach, cancel, a service, a terminal, files."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from station_sandbox import AsyncClient, Conflict, NotFound, Unauthorized

from conftest import SOCKET, TOKEN, URL

GATED = "echo one; while [ ! -e {go} ]; do sleep 0.05; done; echo two >&2; echo three"


async def _flow(client: AsyncClient) -> None:
    report = await client.ready(adapter="host")
    assert report["ready"] is True
    async with await client.workspaces.create(adapter="host") as ws:
        assert ws.state == "ready"
        run = await ws.run("echo hi && pwd", timeout_ms=10_000)
        assert (run.status, run.exit_code, run.stdout) == ("exited", 0, f"hi\n{ws.workdir}\n")

        run = await ws.run("echo out; echo err >&2; exit 3")
        assert (run.status, run.exit_code, run.stdout, run.stderr) == ("exited", 3, "out\n", "err\n")

        run = await ws.run("echo started; sleep 30", timeout_ms=300)
        assert (run.status, run.stdout) == ("timed_out", "started\n")

        run = await ws.run("printf 'a\\000b\\377'")
        assert run.stdout == b"a\x00b\xff"

        run = await ws.run("seq 1000", max_output_bytes=100)
        assert run.truncated and run.stdout_bytes == 3893 and run.stdout_tail.endswith("1000\n")

        # Live output with callbacks, one of them a coroutine.
        out: list[tuple[Any, int]] = []

        async def on_out(data: Any, offset: int) -> None:
            out.append((data, offset))
            if data == "one\n":
                await ws.files.write("go-async", "")

        err: list[tuple[Any, int]] = []
        run = await ws.run(GATED.format(go="go-async"), on_stdout=on_out,
                           on_stderr=lambda d, o: err.append((d, o)))
        assert out == [("one\n", 0), ("three\n", 4)] and err == [("two\n", 0)]
        assert run.status == "exited"

        # Follow and reattach from a second client.
        h = await ws.start(GATED.format(go="go-async2"))
        other = AsyncClient(socket_path=SOCKET)
        h2 = await (await other.workspaces.get(ws.id)).run_handle(h.id)
        chunks = []
        async for chunk in h2.follow():
            chunks.append(chunk)
            if chunk[1] == b"one\n":
                assert (await h2.refresh()).status == "running"
                await ws.files.write("go-async2", "")
        assert chunks == [("stdout", b"one\n", 0), ("stderr", b"two\n", 0), ("stdout", b"three\n", 4)]
        assert (await h.wait()).stdout == "one\nthree\n"

        # Cancel.
        h = await ws.start("sleep 300")
        assert (await h.wait(timeout_ms=100)).status == "running"
        assert (await h.cancel()).status == "cancelled"
        with pytest.raises(Conflict):
            await h.cancel()

        # A service through its restart policy.
        await ws.services.start("flaky", "echo attempt; exit 1", restart="on-failure",
                                max_restarts=1, delay_ms=50)
        svc = await ws.services.wait("flaky", lambda s: s.state == "exhausted")
        assert [a.exit_code for a in svc.attempts] == [1, 1]
        assert [c async for c in ws.services.logs("flaky", attempt=1)] == [("stdout", b"attempt\n", 0)]
        await ws.services.start("web", "echo up; touch .up; exec sleep 60")
        while not await ws.files.exists(".up"):
            await asyncio.sleep(0.05)
        stopped = await ws.services.stop("web")
        assert stopped.state == "stopped"
        assert (await ws.services.get("web")).attempts[0].stdout == "up\n"

        # A terminal: type a command, read its echo and its answer.
        async with await ws.terminals.create(command="/bin/sh") as t:
            await t.send("echo $((6*7))y\n")
            assert (await t.expect("echo $((6*7))y")).endswith(b"echo $((6*7))y")
            await t.expect("42y")
            await t.send("exit 4\n")
            rest = [c async for c in t]
            assert t.exit == {"exitCode": 4, "signal": None, "state": "exited"}, rest

        # Files.
        entry = await ws.files.write("d/x.bin", b"\x00\x01", parents=True)
        assert entry["size"] == 2
        assert await ws.files.read("d/x.bin") == b"\x00\x01"
        assert [e["name"] for e in (await ws.files.list("d"))["entries"]] == ["x.bin"]
        wid = ws.id
    with pytest.raises(NotFound):
        await client.workspaces.get(wid)


def test_async_flow() -> None:
    async def main() -> None:
        async with AsyncClient(socket_path=SOCKET) as client:
            await _flow(client)
    asyncio.run(main())


@pytest.mark.skipif(not URL, reason="no TCP listener (STATION_URL not set)")
def test_async_tcp(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("STATION_TOKEN", raising=False)

    async def main() -> None:
        with pytest.raises(Unauthorized):
            await AsyncClient(url=URL).workspaces.list()
        c = AsyncClient(url=URL, token=TOKEN)
        async with await c.workspaces.create(adapter="host") as ws:
            assert (await ws.run("echo tcp")).stdout == "tcp\n"
            async with await ws.terminals.create(command="/bin/sh") as t:
                await t.send("echo a$((2+2))b\n")
                await t.expect("a4b")
    asyncio.run(main())
