"""Following output with a consumer slower than the command: every byte the run kept reaches
it exactly once, in order, compared byte for byte with the stored run; what the run did not
keep is reported as gaps with exact offsets. The blocking and the asyncio client; a run's
output, ``follow()`` and a service's logs."""

from __future__ import annotations

import asyncio
import time
from typing import Any, Union

import pytest

import station_sandbox as ss
from station_sandbox import AsyncClient, OutputGap

from conftest import SOCKET



def _seq(n: int) -> bytes:
    return "".join(f"{i}\n" for i in range(1, n + 1)).encode()


# Several MB on stdout, then stderr, all kept (maxOutputBytes at its maximum, 8 MiB), faster
# than a consumer that sleeps takes them.
COMMAND = "seq 1 1000000; seq 1 60000 >&2"
EXPECTED = {"stdout": _seq(1_000_000), "stderr": _seq(60_000)}
ALL_KEPT = 8 * 1024 * 1024
# 39 MB: more than the server queues for a follower (16 MiB), and not kept whole (128 KiB head
# and tail per stream): the slow consumer falls behind for real and must be caught up.
BIG = "seq 1 5000000; seq 1 60000 >&2"
BIG_EXPECTED = {"stdout": _seq(5_000_000), "stderr": _seq(60_000)}
TRUNCATING = 256 * 1024


def _b(data: Union[str, bytes]) -> bytes:
    return data.encode("utf-8") if isinstance(data, str) else data


class Seen:
    """What a slow consumer received, per stream: (offset, bytes) pieces and gaps."""

    def __init__(self, delay: float) -> None:
        self.delay = delay
        self.pieces: dict[str, list[tuple[int, bytes]]] = {"stdout": [], "stderr": []}
        self.gaps: list[OutputGap] = []

    def cb(self, stream: str) -> Any:
        def take(data: Union[str, bytes], offset: int) -> None:
            self.pieces[stream].append((offset, _b(data)))
            time.sleep(self.delay)
        return take

    def chunk(self, stream: str, data: bytes, offset: int) -> None:
        self.pieces[stream].append((offset, data))
        time.sleep(self.delay)


def _kept(run: ss.Run, stream: str) -> list[tuple[int, bytes]]:
    """The stored run's bytes of a stream as (offset, bytes): its head, and its tail."""
    head = _b(getattr(run, stream))
    tail = getattr(run, f"{stream}_tail")
    total = getattr(run, f"{stream}_bytes")
    return [(0, head)] + ([(total - len(_b(tail)), _b(tail))] if tail else [])


def _check(seen: Seen, run: ss.Run, expected: dict[str, bytes] = EXPECTED) -> None:
    """In order and without overlap, the pieces and the gaps tile each stream exactly; every
    byte received is the byte the command wrote there; every kept byte was received; no gap
    covers a kept byte."""
    assert run.status == "exited" and run.exit_code == 0, run
    for stream in ("stdout", "stderr"):
        total = getattr(run, f"{stream}_bytes")
        assert total == len(expected[stream]), (stream, total)
        gaps = [(g.offset, g.bytes) for g in seen.gaps if g.stream == stream]
        spans = sorted([(o, len(d), "data") for o, d in seen.pieces[stream]] +
                       [(o, n, "gap") for o, n in gaps])
        at = 0
        for o, n, kind in spans:
            assert o == at, f"{stream}: a {kind} at {o}, expected {at} (spans {spans[:20]}...)"
            at += n
        assert at == total, f"{stream}: received and gaps end at {at}, the stream at {total}"
        for o, d in seen.pieces[stream]:
            assert d == expected[stream][o:o + len(d)], f"{stream}: bytes at {o} differ"
        got = set()
        for o, d in seen.pieces[stream]:
            got.add((o, o + len(d)))
        for o, d in _kept(run, stream):
            covered = sum(min(e, o + len(d)) - max(s, o) for s, e in got if s < o + len(d) and e > o)
            assert covered == len(d), f"{stream}: {len(d) - covered} kept bytes at {o}.. missing"
            assert d == expected[stream][o:o + len(d)]
        for o, n in gaps:
            for ko, kd in _kept(run, stream):
                assert o + n <= ko or o >= ko + len(kd), f"{stream}: gap {o}+{n} covers kept bytes"


def _exact_gaps(run: ss.Run) -> list[OutputGap]:
    """The gaps a follower of the finished run is told of: between each stream's head and tail."""
    out = []
    for stream in ("stdout", "stderr"):
        kept = _kept(run, stream)
        if len(kept) == 2:
            start = len(kept[0][1])
            out.append(OutputGap(stream, start, kept[1][0] - start))
    return out


def test_slow_callback_gets_every_byte(ws: ss.Workspace) -> None:
    seen = Seen(0.01)
    t0 = time.monotonic()
    run = ws.run(COMMAND, max_output_bytes=ALL_KEPT, on_stdout=seen.cb("stdout"),
                 on_stderr=seen.cb("stderr"), on_gap=seen.gaps.append)
    slow = time.monotonic() - t0
    assert seen.gaps == [] and run.gaps == [] and run.truncated is False
    for stream in ("stdout", "stderr"):
        got = b"".join(d for _, d in sorted(seen.pieces[stream]))
        assert got == _b(getattr(run, stream)) == EXPECTED[stream], stream
    _check(seen, run)
    # The consumer was slower than the command: the server's queue did overflow.
    assert len(seen.pieces["stdout"]) * 0.01 < slow


def test_slow_callback_truncated_run_reports_gaps(ws: ss.Workspace) -> None:
    seen = Seen(0.01)
    run = ws.run(BIG, max_output_bytes=TRUNCATING, on_stdout=seen.cb("stdout"),
                 on_stderr=seen.cb("stderr"), on_gap=seen.gaps.append)
    assert run.truncated is True
    assert run.gaps == seen.gaps and seen.gaps, "a truncated run followed slowly has gaps"
    _check(seen, run, BIG_EXPECTED)


def test_follow_of_a_finished_truncated_run_exact_gap(ws: ss.Workspace) -> None:
    h = ws.start(COMMAND, max_output_bytes=TRUNCATING)
    run = h.wait()
    seen = Seen(0.0)
    it = h.follow(on_gap=seen.gaps.append)
    for stream, data, offset in it:
        seen.chunk(stream, data, offset)
    assert it.gaps == seen.gaps == h.gaps == _exact_gaps(run)
    # 128 KiB head and tail; the head's last line cut mid-line is fine: the bytes are ASCII.
    assert seen.gaps[0] == OutputGap("stdout", TRUNCATING // 2,
                                     len(EXPECTED["stdout"]) - TRUNCATING), seen.gaps
    _check(seen, run)
    assert h.run.status == "exited"


def test_follow_slow_loop_gets_every_byte(ws: ss.Workspace) -> None:
    h = ws.start(COMMAND, max_output_bytes=ALL_KEPT)
    seen = Seen(0.01)
    for stream, data, offset in h.follow(on_gap=seen.gaps.append):
        seen.chunk(stream, data, offset)
    assert seen.gaps == []
    _check(seen, h.run)


def test_async_slow_callback_gets_every_byte(ws: ss.Workspace) -> None:
    async def main() -> None:
        aws = await AsyncClient(socket_path=SOCKET).workspaces.get(ws.id)
        seen = Seen(0.0)

        def cb(stream: str) -> Any:
            async def take(data: Union[str, bytes], offset: int) -> None:
                seen.pieces[stream].append((offset, _b(data)))
                await asyncio.sleep(0.01)
            return take
        run = await aws.run(COMMAND, max_output_bytes=ALL_KEPT, on_stdout=cb("stdout"),
                            on_stderr=seen.cb("stderr"), on_gap=seen.gaps.append)
        assert seen.gaps == []
        _check(seen, run)

        seen = Seen(0.01)
        run = await aws.run(BIG, max_output_bytes=TRUNCATING, on_stdout=seen.cb("stdout"),
                            on_stderr=seen.cb("stderr"), on_gap=seen.gaps.append)
        assert run.truncated and run.gaps == seen.gaps and seen.gaps
        _check(seen, run, BIG_EXPECTED)

        h = await aws.start(COMMAND, max_output_bytes=TRUNCATING)
        run = await h.wait()
        seen = Seen(0.0)
        it = h.follow()
        async for stream, data, offset in it:
            seen.chunk(stream, data, offset)
        seen.gaps = it.gaps
        assert it.gaps == _exact_gaps(run)
        _check(seen, run)
    asyncio.run(main())


SERVICE = f"{COMMAND}; sleep 0.5"


def _attempt_run(svc: ss.Service, number: int) -> ss.Run:
    """An ended attempt's stored output as a Run-shaped object for _check."""
    a = [x for x in svc.attempts if x.number == number][0]
    doc = {"id": "attempt", "status": "exited", "exitCode": 0, **{
        k: v for k, v in a.raw.items() if k in ("stdout", "stderr", "stdoutTail", "stderrTail",
                                                "stdoutBytes", "stderrBytes", "encoding",
                                                "truncated")}}
    return ss.Run(doc)


def test_service_logs_follow_slow_loop(ws: ss.Workspace) -> None:
    ws.services.start("burst", SERVICE)
    seen = Seen(0.01)
    it = ws.services.logs("burst", follow=True, on_gap=seen.gaps.append)
    for stream, data, offset in it:
        seen.chunk(stream, data, offset)
    svc = ws.services.wait("burst", lambda s: not s.active)
    assert it.gaps == seen.gaps
    _check(seen, _attempt_run(svc, 1))
    ws.services.delete("burst")


def test_async_service_logs_follow_slow_loop(ws: ss.Workspace) -> None:
    async def main() -> None:
        aws = await AsyncClient(socket_path=SOCKET).workspaces.get(ws.id)
        await aws.services.start("aburst", SERVICE)
        seen = Seen(0.01)
        it = aws.services.logs("aburst", follow=True, on_gap=seen.gaps.append)
        async for stream, data, offset in it:
            seen.chunk(stream, data, offset)
        svc = await aws.services.wait("aburst", lambda s: not s.active)
        _check(seen, _attempt_run(svc, 1))
        await aws.services.delete("aburst")
    asyncio.run(main())


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_follow_a_service_right_after_start(ws: ss.Workspace, kind: str) -> None:
    # Ten times: each follower started at once sees the attempt's first line, then the rest.
    firsts = []
    for i in range(10):
        name = f"quick-{kind}-{i}"
        cmd = "echo first-line; sleep 0.2; echo second-line"
        if kind == "sync":
            ws.services.start(name, cmd)
            got = b"".join(d for _, d, _ in ws.services.logs(name, follow=True))
        else:
            async def main() -> bytes:
                aws = await AsyncClient(socket_path=SOCKET).workspaces.get(ws.id)
                await aws.services.start(name, cmd)
                return b"".join([d async for _, d, _ in aws.services.logs(name, follow=True)])
            got = asyncio.run(main())
        firsts.append(got)
        ws.services.delete(name)
    assert firsts == [b"first-line\nsecond-line\n"] * 10, firsts
