"""A dead controller gives an error within the client's timeout, never a hang: a unix socket
nobody answers (listening, never accepting), a TCP listener that accepts and says nothing,
a closed port, a socket path with nothing behind it. Positive control: the live controller
answers the same calls."""

from __future__ import annotations

import asyncio
import os
import socket
import tempfile
import time
from typing import Any, Callable, Iterator

import pytest

from station_sandbox import AsyncClient, Client, ConnectionFailed, StationError, Timeout

from conftest import SOCKET

TIMEOUT = 1.0
BOUND = 30.0  # a generous bound: only a hang fails it


@pytest.fixture
def mute_unix() -> Iterator[str]:
    d = tempfile.mkdtemp(prefix="station-py-")
    path = os.path.join(d, "mute.sock")
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(path)
    s.listen(16)  # never accepted, never answered
    yield path
    s.close()
    os.unlink(path)
    os.rmdir(d)


@pytest.fixture
def mute_tcp() -> Iterator[str]:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(16)  # the kernel completes the handshake; nobody reads or answers
    yield f"http://127.0.0.1:{s.getsockname()[1]}"
    s.close()


@pytest.fixture
def closed_port() -> str:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return f"http://127.0.0.1:{port}"


def _within(fn: Callable[[], Any], kind: type[StationError]) -> StationError:
    t0 = time.monotonic()
    with pytest.raises(kind) as e:
        fn()
    assert time.monotonic() - t0 < BOUND
    assert e.value.status == 0
    return e.value


def test_live_controller_answers() -> None:
    assert Client(socket_path=SOCKET, timeout=TIMEOUT).ready()["ready"] is True


def test_unix_socket_nobody_answers(mute_unix: str) -> None:
    c = Client(socket_path=mute_unix, timeout=TIMEOUT)
    e = _within(c.ready, Timeout)
    assert e.code == "timeout" and mute_unix in e.message
    _within(lambda: c.workspaces.list(), Timeout)
    _within(lambda: c.workspaces.create(adapter="host", timeout=TIMEOUT), Timeout)
    assert isinstance(e, TimeoutError)


def test_tcp_listener_says_nothing(mute_tcp: str) -> None:
    c = Client(url=mute_tcp, token="x", timeout=TIMEOUT)
    _within(c.ready, Timeout)


def test_closed_port(closed_port: str) -> None:
    e = _within(Client(url=closed_port, timeout=TIMEOUT).ready, ConnectionFailed)
    assert e.code == "connection_failed" and closed_port in e.message


def test_no_socket_file() -> None:
    e = _within(Client(socket_path="/nonexistent/station.sock", timeout=TIMEOUT).ready,
                ConnectionFailed)
    assert "/nonexistent/station.sock" in e.message


def test_async_dead_controllers(mute_unix: str, mute_tcp: str, closed_port: str) -> None:
    async def check(c: AsyncClient, kind: type[StationError]) -> None:
        t0 = time.monotonic()
        with pytest.raises(kind):
            await c.ready()
        assert time.monotonic() - t0 < BOUND

    async def main() -> None:
        assert (await AsyncClient(socket_path=SOCKET, timeout=TIMEOUT).ready())["ready"] is True
        await check(AsyncClient(socket_path=mute_unix, timeout=TIMEOUT), Timeout)
        await check(AsyncClient(url=mute_tcp, timeout=TIMEOUT), Timeout)
        await check(AsyncClient(url=closed_port, timeout=TIMEOUT), ConnectionFailed)
        await check(AsyncClient(socket_path="/nonexistent/x.sock", timeout=TIMEOUT), ConnectionFailed)
    asyncio.run(main())
