#!/usr/bin/env python3
"""HTTP/1.1 and WebSocket client of the preview tests (stdlib only, raw sockets: every byte on
the wire is the test's own). Each command connects to 127.0.0.1:PORT and names HOST in the Host
header (a preview host, <label>.preview.localhost), prints facts as key=value lines and exits 0
when the exchange went as the app (test/helpers/preview-app.c) answers, 1 when not, 2 on usage.

  preview-client.py ws PORT HOST [--token T]
      the WebSocket handshake to /ws (Sec-WebSocket-Accept checked), a text, a 70000-byte binary
      and a fragmented message echoed, a ping answered by a pong, the close handshake
  preview-client.py ws-hold PORT HOST SECONDS [--token T]
      the handshake and one echo, then open=1, then waits (SECONDS at most) for the listener
      to end the connection: ended=eof|reset|close-frame|timeout after ms=T
  preview-client.py sse PORT HOST N [--token T]
      GET /sse?n=N: each event's arrival, ms after the response head (event=I ms=T), and
      spread_ms, the time from the first event to the last
  preview-client.py download PORT HOST N [--token T] [--chunked]
      GET /bytes?n=N, every byte compared with the app's pattern as it arrives
  preview-client.py upload PORT HOST N [--token T] [--chunked]
      POST /sink with N bytes of the pattern (Content-Length, or chunked in 1 MiB chunks),
      generated as sent; the app's count and CRC-32 compared with the client's
  preview-client.py flood PORT HOST N [--token T]
      N connections open at once, then GET /bytes?n=4096 on each: served=<200 with the right
      body> refused=<503> bad=<anything else: reset, hang (30 s), other status>
  preview-client.py raw PORT [--wait S] [--shut]
      sends stdin's bytes as they are (--shut: then ends its sending side), then reads until the
      peer closes (or S seconds, default 5): status=<code> per response head seen, closed=1|0
      (reset=1 when it reset), and the bytes as body=<repr>
"""

import base64
import hashlib
import os
import socket
import struct
import sys
import threading
import time
import zlib

BLOCK = 65536
TIMEOUT = 60


class Usage(Exception):
    pass


# The app's pattern: byte i is (i % 251) ^ ((i >> 16) & 0xff); made a 64 KiB block at a time.
_BASE = bytes(i % 251 for i in range(BLOCK + 251))
_XOR = [bytes(b ^ k for b in range(256)) for k in range(256)]


def pattern(offset, n):
    """n bytes of the pattern from offset (offset a multiple of BLOCK, n at most BLOCK)."""
    start = offset % 251
    return _BASE[start:start + n].translate(_XOR[(offset >> 16) & 0xff])


class Conn:
    """A socket with a read buffer and an HTTP/1.1 response reader."""

    def __init__(self, port, timeout=TIMEOUT):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""

    def fill(self):
        data = self.sock.recv(1 << 20)
        if not data:
            raise EOFError("the peer closed the connection")
        self.buf += data

    def line(self):
        while b"\n" not in self.buf:
            if len(self.buf) > 65536:
                raise ValueError("a line over 64 KiB")
            self.fill()
        line, self.buf = self.buf.split(b"\n", 1)
        return line.rstrip(b"\r")

    def exact(self, n):
        while len(self.buf) < n:
            self.fill()
        data, self.buf = self.buf[:n], self.buf[n:]
        return data

    def some(self, most):
        if not self.buf:
            self.fill()
        data, self.buf = self.buf[:most], self.buf[most:]
        return data

    def head(self):
        """(status, {lower-case name: value}, raw head) of the next response."""
        status_line = self.line()
        parts = status_line.split(b" ", 2)
        if len(parts) < 2 or not parts[0].startswith(b"HTTP/1."):
            raise ValueError(f"not a status line: {status_line!r}")
        headers, raw = {}, [status_line]
        while True:
            line = self.line()
            if not line:
                break
            raw.append(line)
            name, _, value = line.partition(b":")
            headers[name.decode().strip().lower()] = value.decode().strip()
        return int(parts[1]), headers, b"\r\n".join(raw)

    def body(self, headers, sink):
        """Reads the body the headers announce, each piece to sink(bytes)."""
        if headers.get("transfer-encoding", "").lower() == "chunked":
            while True:
                size = int(self.line().split(b";")[0], 16)
                if size == 0:
                    while self.line():
                        pass
                    return
                left = size
                while left:
                    piece = self.some(left)
                    sink(piece)
                    left -= len(piece)
                if self.line():
                    raise ValueError("no CRLF after a chunk")
        elif "content-length" in headers:
            left = int(headers["content-length"])
            while left:
                piece = self.some(min(left, 1 << 20))
                sink(piece)
                left -= len(piece)
        else:
            while True:
                try:
                    self.fill()
                except EOFError:
                    break
                sink(self.buf)
                self.buf = b""


def request(host, method, target, token=None, extra=b""):
    lines = [f"{method} {target} HTTP/1.1", f"Host: {host}"]
    if token:
        lines.append(f"Authorization: Bearer {token}")
    return ("\r\n".join(lines) + "\r\n").encode() + extra + b"\r\n"


# ---- WebSocket ------------------------------------------------------------------------------

def ws_send(conn, opcode, payload, fin=True):
    mask = os.urandom(4)
    n = len(payload)
    head = bytes([(0x80 if fin else 0) | opcode])
    if n < 126:
        head += bytes([0x80 | n])
    elif n < 65536:
        head += bytes([0x80 | 126]) + struct.pack(">H", n)
    else:
        head += bytes([0x80 | 127]) + struct.pack(">Q", n)
    masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
    conn.sock.sendall(head + mask + masked)


def ws_recv(conn):
    """(fin, opcode, payload) of one server frame, which must be unmasked."""
    b0, b1 = conn.exact(2)
    if b1 & 0x80:
        raise ValueError("a masked server frame")
    n = b1 & 0x7F
    if n == 126:
        n = struct.unpack(">H", conn.exact(2))[0]
    elif n == 127:
        n = struct.unpack(">Q", conn.exact(8))[0]
    return bool(b0 & 0x80), b0 & 0x0F, conn.exact(n)


def cmd_ws(port, host, token):
    conn = Conn(port)
    key = base64.b64encode(os.urandom(16)).decode()
    extra = (f"Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
             "Sec-WebSocket-Version: 13\r\n").encode()
    conn.sock.sendall(request(host, "GET", "/ws", token, extra))
    status, headers, _ = conn.head()
    print(f"status={status}")
    if status != 101:
        return 1
    want = base64.b64encode(hashlib.sha1(
        (key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").encode()).digest()).decode()
    if headers.get("sec-websocket-accept") != want:
        print(f"accept={headers.get('sec-websocket-accept')} want={want}")
        return 1
    checks = []
    ws_send(conn, 1, b"hello")
    fin, op, data = ws_recv(conn)
    print(f"text={data.decode(errors='replace')} opcode={op} fin={int(fin)}")
    checks.append((fin, op, data) == (True, 1, b"hello"))
    big = os.urandom(70000)
    ws_send(conn, 2, big)
    fin, op, data = ws_recv(conn)
    checks.append((fin, op, data) == (True, 2, big))
    print(f"binary={'echoed' if checks[-1] else 'differs'} bytes={len(data)}")
    ws_send(conn, 1, b"frag", fin=False)
    ws_send(conn, 0, b"ment")
    parts = [ws_recv(conn), ws_recv(conn)]
    checks.append(parts == [(False, 1, b"frag"), (True, 0, b"ment")])
    print(f"fragments={'echoed' if checks[-1] else parts}")
    ws_send(conn, 9, b"ping!")
    fin, op, data = ws_recv(conn)
    checks.append((op, data) == (10, b"ping!"))
    print(f"pong={'ok' if checks[-1] else (op, data)}")
    ws_send(conn, 8, struct.pack(">H", 1000))
    fin, op, data = ws_recv(conn)
    code = struct.unpack(">H", data[:2])[0] if op == 8 and len(data) >= 2 else None
    checks.append(code == 1000)
    print(f"close={code}")
    return 0 if all(checks) else 1


def cmd_ws_hold(port, host, seconds, token):
    conn = Conn(port)
    key = base64.b64encode(os.urandom(16)).decode()
    extra = (f"Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
             "Sec-WebSocket-Version: 13\r\n").encode()
    conn.sock.sendall(request(host, "GET", "/ws", token, extra))
    status, _, _ = conn.head()
    if status != 101:
        print(f"status={status}")
        return 1
    ws_send(conn, 1, b"hold")
    if ws_recv(conn)[2] != b"hold":
        return 1
    print("open=1", flush=True)
    t0 = time.monotonic()
    conn.sock.settimeout(seconds)
    try:
        _, op, _ = ws_recv(conn)
        how = "close-frame" if op == 8 else f"frame-{op}"
    except EOFError:
        how = "eof"
    except ConnectionResetError:
        how = "reset"
    except socket.timeout:
        how = "timeout"
    print(f"ended={how} ms={(time.monotonic() - t0) * 1000:.0f}")
    return 0 if how != "timeout" else 1


# ---- SSE, bytes, sink -----------------------------------------------------------------------

def cmd_sse(port, host, n, token):
    conn = Conn(port)
    conn.sock.sendall(request(host, "GET", f"/sse?n={n}", token))
    status, headers, _ = conn.head()
    t0 = time.monotonic()
    print(f"status={status} type={headers.get('content-type')}")
    if status != 200:
        return 1
    pending, times = b"", []

    def take(piece):
        nonlocal pending
        pending += piece
        while b"\n\n" in pending:
            event, pending = pending.split(b"\n\n", 1)
            ms = (time.monotonic() - t0) * 1000
            times.append(ms)
            print(f"event={event.decode(errors='replace')!r} ms={ms:.0f}", flush=True)

    conn.body(headers, take)
    print(f"events={len(times)}")
    if times:
        print(f"spread_ms={times[-1] - times[0]:.0f}")
    return 0 if len(times) == n else 1


def cmd_download(port, host, n, token, chunked):
    conn = Conn(port)
    target = f"/bytes?n={n}" + ("&chunked=1" if chunked else "")
    conn.sock.sendall(request(host, "GET", target, token))
    t0 = time.monotonic()
    status, headers, _ = conn.head()
    print(f"status={status} framing={'chunked' if 'transfer-encoding' in headers else 'length'}")
    if status != 200:
        return 1
    got, first_bad = 0, None
    pending = bytearray()

    def take(piece):
        nonlocal got, first_bad
        pending.extend(piece)
        usable = len(pending) - len(pending) % BLOCK
        with memoryview(pending) as view:
            for i in range(0, usable, BLOCK):
                if first_bad is None and view[i:i + BLOCK].tobytes() != pattern(got, BLOCK):
                    first_bad = got
                got += BLOCK
        del pending[:usable]

    conn.body(headers, take)
    if pending:
        if first_bad is None and bytes(pending) != pattern(got, len(pending)):
            first_bad = got
        got += len(pending)
    secs = time.monotonic() - t0
    print(f"bytes={got} match={int(first_bad is None and got == n)} seconds={secs:.2f}")
    if first_bad is not None:
        print(f"first_bad_block_at={first_bad}")
    return 0 if first_bad is None and got == n else 1


def cmd_upload(port, host, n, token, chunked):
    conn = Conn(port)
    framing = b"Transfer-Encoding: chunked\r\n" if chunked else f"Content-Length: {n}\r\n".encode()
    conn.sock.sendall(request(host, "POST", "/sink", token, framing))
    t0 = time.monotonic()
    crc, at, out = 0, 0, []
    while at < n:
        piece = pattern(at, min(BLOCK, n - at))
        crc = zlib.crc32(piece, crc)
        out.append(piece)
        at += len(piece)
        if len(out) == 16 or at == n:
            data = b"".join(out)
            out = []
            conn.sock.sendall(b"%x\r\n%s\r\n" % (len(data), data) if chunked else data)
    if chunked:
        conn.sock.sendall(b"0\r\n\r\n")
    status, headers, _ = conn.head()
    answer = []
    conn.body(headers, answer.append)
    secs = time.monotonic() - t0
    said = b"".join(answer).decode(errors="replace").strip()
    want = f"bytes={n} crc32={crc:08x}"
    print(f"status={status} app={said!r} sent={want!r} seconds={secs:.2f}")
    return 0 if status == 200 and said == want else 1


# ---- Many connections -----------------------------------------------------------------------

def cmd_flood(port, host, n, token):
    body_want = pattern(0, 4096)
    results = [None] * n
    barrier = threading.Barrier(n, timeout=60)

    def one(i):
        conn = None
        try:
            conn = Conn(port, timeout=30)
            try:
                barrier.wait()
            except threading.BrokenBarrierError:
                pass
            conn.sock.sendall(request(host, "GET", "/bytes?n=4096", token))
            status, headers, _ = conn.head()
            got = []
            conn.body(headers, got.append)
            body = b"".join(got)
            if status == 200 and body == body_want:
                results[i] = "served"
            elif status == 503:
                results[i] = "refused"
            else:
                results[i] = f"status {status} with {len(body)} bytes"
        except Exception as e:  # noqa: BLE001 -- every failure is counted and shown
            results[i] = f"{type(e).__name__}: {e}"
            try:
                barrier.abort()
            except Exception:  # noqa: BLE001
                pass
        finally:
            if conn:
                conn.sock.close()

    t0 = time.monotonic()
    threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    served = results.count("served")
    refused = results.count("refused")
    bad = [r for r in results if r not in ("served", "refused")]
    print(f"served={served} refused={refused} bad={len(bad)} seconds={time.monotonic() - t0:.2f}")
    for r in sorted(set(bad))[:10]:
        print(f"bad_example={r!r} count={bad.count(r)}")
    return 0 if not bad else 1


def cmd_raw(port, wait, shut):
    conn = Conn(port, timeout=wait)
    conn.sock.sendall(sys.stdin.buffer.read())
    if shut:
        conn.sock.shutdown(socket.SHUT_WR)
    data, closed, end = b"", 0, time.monotonic() + wait
    while time.monotonic() < end:
        conn.sock.settimeout(max(0.01, end - time.monotonic()))
        try:
            piece = conn.sock.recv(65536)
        except socket.timeout:
            break
        except ConnectionResetError:
            closed = 1
            print("reset=1")
            break
        if not piece:
            closed = 1
            break
        data += piece
    for line in data.split(b"\n"):
        if line.startswith(b"HTTP/1.") and line[8:9] == b" ":
            print(f"status={line[9:12].decode()}")
    print(f"closed={closed}")
    print(f"body={data!r}")
    return 0


def main(argv):
    args = list(argv)
    token, chunked, wait, shut = None, False, 5.0, False
    if "--token" in args:
        i = args.index("--token")
        token = args[i + 1]
        del args[i:i + 2]
    if "--chunked" in args:
        args.remove("--chunked")
        chunked = True
    if "--shut" in args:
        args.remove("--shut")
        shut = True
    if "--wait" in args:
        i = args.index("--wait")
        wait = float(args[i + 1])
        del args[i:i + 2]
    if len(args) < 2:
        raise Usage()
    cmd, port = args[0], int(args[1])
    if cmd == "raw" and len(args) == 2:
        return cmd_raw(port, wait, shut)
    if cmd == "ws" and len(args) == 3:
        return cmd_ws(port, args[2], token)
    if len(args) != 4:
        raise Usage()
    host, n = args[2], int(args[3])
    if cmd == "ws-hold":
        return cmd_ws_hold(port, host, n, token)
    if cmd == "sse":
        return cmd_sse(port, host, n, token)
    if cmd == "download":
        return cmd_download(port, host, n, token, chunked)
    if cmd == "upload":
        return cmd_upload(port, host, n, token, chunked)
    if cmd == "flood":
        return cmd_flood(port, host, n, token)
    raise Usage()


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except Usage:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    except (OSError, EOFError, ValueError) as e:
        print(f"error={type(e).__name__}: {e}")
        sys.exit(1)
