"""Where the controller under test is: the variables test/integration/test-sdk-python.sh sets.

STATION_SOCKET             its unix socket (required)
STATION_URL, STATION_TOKEN a TCP listener and its admin token (TCP tests skip without them)
STATION_TEST_IMAGE_LAYOUT  an OCI layout of the busybox test image (container tests skip
                           without it; STATION_TEST_CONTAINER_SKIP says why)
STATION_TEST_SECCOMP       the seccomp profile for container workspaces
STATION_PREVIEW            the controller's preview listener, HOST:PORT (the preview tests
                           skip without it)
"""

from __future__ import annotations

import os
import time
from typing import Any, Callable, Iterator, Optional, TypeVar

import pytest

from station_sandbox import Client

SOCKET = os.environ.get("STATION_SOCKET", "")
URL = os.environ.get("STATION_URL", "")
TOKEN = os.environ.get("STATION_TOKEN", "")
IMAGE_LAYOUT = os.environ.get("STATION_TEST_IMAGE_LAYOUT", "")
SECCOMP = os.environ.get("STATION_TEST_SECCOMP", "")
PREVIEW = os.environ.get("STATION_PREVIEW", "")
CONTAINER_SKIP = (os.environ.get("STATION_TEST_CONTAINER_SKIP")
                  or "no container test image (STATION_TEST_IMAGE_LAYOUT not set)")

T = TypeVar("T")


def pytest_configure(config: Any) -> None:
    if not SOCKET:
        raise pytest.UsageError("STATION_SOCKET is not set: run test/integration/test-sdk-python.sh")


def until(what: str, fn: Callable[[], Optional[T]], seconds: float = 30.0) -> T:
    """Polls ``fn`` every 50 ms until it returns something truthy; fails after ``seconds``."""
    end = time.monotonic() + seconds
    while True:
        got = fn()
        if got:
            return got
        if time.monotonic() > end:
            pytest.fail(f"timed out after {seconds} s waiting for {what}")
        time.sleep(0.05)


@pytest.fixture(scope="session")
def client() -> Client:
    return Client(socket_path=SOCKET)


@pytest.fixture(scope="module")
def ws(client: Client) -> Iterator[Any]:
    w = client.workspaces.create(adapter="host")
    yield w
    try:
        w.delete()
    except Exception:
        pass


@pytest.fixture(scope="session")
def image(client: Client) -> str:
    if not IMAGE_LAYOUT:
        pytest.skip(CONTAINER_SKIP)
    img = client.images.import_path(IMAGE_LAYOUT, name="busybox")
    return f"busybox@{img['digest']}"
