"""Code contexts against a real controller, host workspaces (the host's python3-ipykernel and
python3-matplotlib, from scripts/install-deps): state across cells, live output, a typed result
with the image decoded, an error with its traceback, interrupt, restart, delete, list."""

from __future__ import annotations

import asyncio
import struct
import threading
from typing import Any

import pytest

from conftest import SOCKET
from station_sandbox import (AsyncClient, AsyncCodeContext, CellError, Client, CodeContext, Conflict,
                             Execution, NotFound)

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
# bbox_inches None: the inline backend's default ("tight") crops the figure
PLOT = ("%config InlineBackend.print_figure_kwargs = {'bbox_inches': None}\n"
        "import matplotlib.pyplot as plt\n"
        "fig = plt.figure(figsize=(4, 3), dpi=50)\nplt.plot([1, 2, 3])\nplt.show()")


@pytest.fixture(scope="module")
def ctx(ws: Any) -> CodeContext:
    return ws.contexts.create("python")


def test_state_persists_between_cells(ws: Any, ctx: CodeContext) -> None:
    assert (ctx.language, ctx.state) == ("python", "idle")
    first = ctx.execute("x = 41")
    assert isinstance(first, Execution) and first.status == "ok"
    second = ctx.execute("x + 1")
    assert (second.status, second.text, second.error) == ("ok", "42", None)
    assert second.execution_count == first.execution_count + 1
    # the kernel's own numbers beside the exec client's
    assert (second.kernel_cpu_ms, second.kernel_memory_bytes) == (
        second.raw.get("kernelCpuMs"), second.raw.get("kernelMemoryBytes"))
    assert isinstance(second.kernel_memory_bytes, int) and second.kernel_memory_bytes > 0
    assert [c.id for c in ws.contexts.list() if c.id == ctx.id] == [ctx.id]


def test_live_output(ctx: CodeContext) -> None:
    seen: list[str] = []
    errs: list[str] = []
    e = ctx.execute("import sys, time\nprint('a', flush=True)\ntime.sleep(0.3)\n"
                    "print('b')\nprint('oops', file=sys.stderr)",
                    on_stdout=seen.append, on_stderr=errs.append)
    assert e.status == "ok"
    assert "".join(seen) == "a\nb\n" == e.stdout
    assert "".join(errs) == "oops\n" == e.stderr


def test_plot_comes_back_as_png_bytes(ctx: CodeContext) -> None:
    # bbox_inches None: the inline backend's default ("tight") crops the figure
    e = ctx.execute("%config InlineBackend.print_figure_kwargs = {'bbox_inches': None}\n"
                    "import matplotlib.pyplot as plt\n"
                    "fig = plt.figure(figsize=(4, 3), dpi=50)\nplt.plot([1, 2, 3])\nplt.show()")
    assert e.status == "ok", e
    assert len(e.images) == 1
    png = e.images[0]
    assert png[:8] == PNG_SIGNATURE
    width, height = struct.unpack(">II", png[16:24])
    assert (width, height) == (200, 150)


def test_error_is_a_result_with_traceback(ctx: CodeContext) -> None:
    e = ctx.execute("1 / 0")
    assert e.status == "error"
    assert isinstance(e.error, CellError)
    assert e.error.name == "ZeroDivisionError"
    assert any("ZeroDivisionError" in line for line in e.error.traceback)


def test_interrupt_keeps_the_variables(ctx: CodeContext) -> None:
    got: dict[str, Any] = {}
    started = threading.Event()

    def run() -> None:
        got["e"] = ctx.execute("print('looping', flush=True)\nwhile True: pass",
                               on_stdout=lambda s: started.set())
    t = threading.Thread(target=run)
    t.start()
    assert started.wait(30), "the loop never started"
    interrupted = _interrupt_from_another_handle(ctx)
    t.join(30)
    assert not t.is_alive()
    assert interrupted.status == "interrupted"
    assert got["e"].status == "interrupted"
    assert ctx.execute("x").text == "41"


def _interrupt_from_another_handle(ctx: CodeContext) -> Execution:
    # The executing thread holds its own client's connection.
    c = Client(socket_path=SOCKET)
    return c.workspaces.get(ctx.workspace_id).contexts.get(ctx.id).interrupt()


def test_timeout(ctx: CodeContext) -> None:
    e = ctx.execute("while True: pass", timeout_ms=1000)
    assert e.status == "timed_out"
    assert ctx.execute("x").text == "41"


def test_interrupt_when_idle_is_a_conflict(ctx: CodeContext) -> None:
    with pytest.raises(Conflict):
        ctx.interrupt()


def test_restart_forgets_and_delete_removes(ws: Any) -> None:
    c = ws.contexts.create("python")
    assert c.execute("y = 1").status == "ok"
    c.restart()
    assert c.state == "idle"
    e = c.execute("y")
    assert (e.status, e.error.name if e.error else None) == ("error", "NameError")
    c.delete()
    with pytest.raises(NotFound):
        ws.contexts.get(c.id)


def test_async_client_contexts(ws: Any) -> None:
    """AsyncClient's ws.contexts: the same flow as coroutines, a coroutine as on_stdout, an
    interrupt from another task, restart and delete."""

    async def main() -> None:
        aws = await AsyncClient(socket_path=SOCKET).workspaces.get(ws.id)
        c = await aws.contexts.create("python")
        assert isinstance(c, AsyncCodeContext) and (c.language, c.state) == ("python", "idle")
        assert (await c.execute("x = 41")).status == "ok"
        seen: list[str] = []

        async def on_out(s: str) -> None:
            seen.append(s)

        e = await c.execute("print('seen', x)\nx + 1", on_stdout=on_out)
        assert (e.status, e.text, e.stdout, "".join(seen)) == ("ok", "42", "seen 41\n", "seen 41\n")
        e = await c.execute(PLOT)
        assert len(e.images) == 1 and e.images[0][:8] == PNG_SIGNATURE
        assert struct.unpack(">II", e.images[0][16:24]) == (200, 150)
        e = await c.execute("1 / 0")
        assert (e.status, e.error.name if e.error else None) == ("error", "ZeroDivisionError")

        started = asyncio.Event()
        loop = asyncio.create_task(c.execute("print('looping', flush=True)\nwhile True: pass",
                                             on_stdout=lambda s: started.set()))
        await asyncio.wait_for(started.wait(), 30)
        other = await (await AsyncClient(socket_path=SOCKET).workspaces.get(ws.id)).contexts.get(c.id)
        assert (await other.interrupt()).status == "interrupted"
        assert (await asyncio.wait_for(loop, 30)).status == "interrupted"
        assert (await c.execute("x")).text == "41"
        with pytest.raises(Conflict):
            await c.interrupt()
        assert [x.id for x in await aws.contexts.list() if x.id == c.id] == [c.id]

        await c.restart()
        assert c.state == "idle"
        e = await c.execute("x")
        assert (e.status, e.error.name if e.error else None) == ("error", "NameError")
        await c.delete()
        with pytest.raises(NotFound):
            await aws.contexts.get(c.id)

    asyncio.run(main())
