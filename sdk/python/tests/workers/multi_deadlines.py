"""Deadlines (README, "Deadlines") against test/integration/hang-worker.py, run by
test/integration/test-sdk-deadlines.sh (STATION_TEST_URL, STATION_TEST_TOKEN: a real
controller, worker "test"; STATION_TEST_WS: a workspace on it; STATION_TEST_HANG_*: the hang
workers' URLs). A worker that accepts and never answers makes each call fail within the
client's timeout (2 s here) with a WorkerTimeout naming it; the real controller with the same
timeout answers, long-polls held longer than it and a quiet event stream included."""

from __future__ import annotations

import os
import threading
import time

import pytest

from station_sandbox import Client, Timeout, WorkerTimeout, WorkerUnavailable, Workspace

URL = os.environ.get("STATION_TEST_URL", "")
TOKEN = os.environ.get("STATION_TEST_TOKEN", "")
WS = os.environ.get("STATION_TEST_WS", "")
HANG = {m: os.environ.get("STATION_TEST_HANG_" + m.upper().replace("-", "_"), "")
        for m in ("silent", "stall-body", "start-only", "quiet-stream")}
if not (URL and TOKEN and WS and all(HANG.values())):
    raise RuntimeError("STATION_TEST_URL/TOKEN/WS/HANG_* not set: run test/integration/test-sdk-deadlines.sh")

HUNG_ID = "w2-aaaaaaaaaaaaaaaaaaaaaaaaaa"


def fleet(mode: str, timeout: float | None = 2.0) -> Client:
    return Client(workers=[{"name": "test", "url": URL, "token": TOKEN},
                           {"name": "w2", "url": HANG[mode], "token": "x"}], timeout=timeout)


def hung(mode: str, call, seconds: str, within: float) -> None:
    started = time.monotonic()
    with pytest.raises(WorkerTimeout) as e:
        call()
    took = time.monotonic() - started
    assert isinstance(e.value, WorkerUnavailable) and isinstance(e.value, Timeout)
    assert e.value.code == "timeout" and e.value.worker == "w2"
    assert e.value.message == f"worker w2 ({HANG[mode]}) did not answer within {seconds} s"
    assert took < within, f"{took:.1f} s"


@pytest.mark.parametrize("mode", ["silent", "stall-body"])
def test_calls_on_a_hung_worker_name_it(mode):
    c = fleet(mode)
    w2 = Workspace(c, {"id": HUNG_ID, "worker": "w2", "state": "ready"})
    hung(mode, lambda: c.workspaces.get(HUNG_ID), "2", 10)
    hung(mode, lambda: w2.refresh(), "2", 10)


@pytest.mark.parametrize("mode", ["silent", "stall-body"])
def test_list_names_the_hung_worker(mode):
    c = fleet(mode)
    started = time.monotonic()
    listed = c.workspaces.list()
    assert time.monotonic() - started < 10
    assert WS in [w.id for w in listed]
    assert [u["worker"] for u in listed.unreachable] == ["w2"]


def test_start_only_cancel_has_its_own_deadline():
    c = fleet("start-only")
    w2 = Workspace(c, {"id": HUNG_ID, "worker": "w2", "state": "ready"})
    h = w2.start("sleep 100")
    assert h.id == "r1"
    # the cancel: the 10 s the server may hold it plus its own 5 s, whatever the timeout
    hung("start-only", h.cancel, "15", 25)


def test_quiet_stream_past_the_timeout_and_heartbeat_fails():
    c = fleet("quiet-stream")
    w2 = Workspace(c, {"id": HUNG_ID, "worker": "w2", "state": "ready"})
    started = time.monotonic()
    hung("quiet-stream", lambda: list(w2.files.watch("/")), "17", 30)
    assert time.monotonic() - started >= 16.9


def test_station_timeout_ms_from_the_environment(monkeypatch):
    monkeypatch.setenv("STATION_TIMEOUT_MS", "1500")
    c = fleet("silent", timeout=None)
    started = time.monotonic()
    hung("silent", lambda: c.workspaces.get(HUNG_ID), "1.5", 10)
    assert time.monotonic() - started >= 1.4


# Positive controls: the real controller, the same 2 s timeout.

def test_control_real_worker_and_long_poll():
    c = fleet("silent")
    assert c.workspaces.get(WS).id == WS
    started = time.monotonic()
    r = c.workspaces.get(WS).run("sleep 3")
    assert r.exit_code == 0
    assert time.monotonic() - started >= 3


def test_control_quiet_stream_stays_open():
    c = Client(url=URL, token=TOKEN, timeout=2.0)
    ws = c.workspaces.get(WS)
    seen: list[BaseException] = []

    def watch() -> None:
        try:
            for _ in ws.files.watch("."):
                pass
        except BaseException as e:  # noqa: BLE001 - reported below
            seen.append(e)

    t = threading.Thread(target=watch, daemon=True)
    t.start()
    t.join(20)
    assert t.is_alive(), f"the stream ended within 20 s: {seen}"
