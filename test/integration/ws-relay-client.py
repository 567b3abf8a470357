#!/usr/bin/env python3
"""A WebSocket client (standard library only) for test-dashboard-workers.sh.

    ws-relay-client.py PORT PATH [--token T] [--subprotocol-token T] [--send TEXT]
                       [--until TEXT] [--ready-file FILE] [--timeout S]

Opens PATH on 127.0.0.1:PORT; the token goes as "Authorization: Bearer" (--token) or as the
"bearer.<token>" subprotocol next to "station-sandbox", as a browser sends it
(--subprotocol-token). Once the 101 came it writes FILE (--ready-file), sends TEXT as a binary
message (--send: keystrokes), then reads messages: with --until, until the payloads received
hold TEXT (then it closes with 1000 itself); else until the server closes or the connection
ends.
Prints one JSON line: {"status", "body" (an answer other than 101), "protocol" (the selected
subprotocol), "data" (the payloads received, text and binary, as UTF-8 with replacements),
"texts" (the text messages), "close" (the server's close code; 0: the connection ended
without one; null: this side closed), "found" (--until was seen)}.
"""

import argparse
import base64
import json
import os
import socket
import struct
import sys


def read_exact(s, n):
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise EOFError
        buf += chunk
    return buf


def frame(opcode, payload):
    mask = os.urandom(4)
    n = len(payload)
    if n < 126:
        head = struct.pack(">BB", 0x80 | opcode, 0x80 | n)
    elif n < 65536:
        head = struct.pack(">BBH", 0x80 | opcode, 0x80 | 126, n)
    else:
        head = struct.pack(">BBQ", 0x80 | opcode, 0x80 | 127, n)
    return head + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("port", type=int)
    ap.add_argument("path")
    ap.add_argument("--token")
    ap.add_argument("--subprotocol-token")
    ap.add_argument("--send")
    ap.add_argument("--until")
    ap.add_argument("--ready-file")
    ap.add_argument("--timeout", type=float, default=120)
    a = ap.parse_args()

    out = {"status": 0, "body": None, "protocol": None, "data": "", "texts": [],
           "close": 0, "found": False}
    s = socket.create_connection(("127.0.0.1", a.port), timeout=a.timeout)
    key = base64.b64encode(os.urandom(16)).decode()
    req = (f"GET {a.path} HTTP/1.1\r\nHost: 127.0.0.1:{a.port}\r\nUpgrade: websocket\r\n"
           f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n"
           f"Origin: http://127.0.0.1:{a.port}\r\n")
    if a.token:
        req += f"Authorization: Bearer {a.token}\r\n"
    if a.subprotocol_token:
        req += f"Sec-WebSocket-Protocol: station-sandbox, bearer.{a.subprotocol_token}\r\n"
    s.sendall((req + "\r\n").encode())
    buf = b""
    while b"\r\n\r\n" not in buf:
        chunk = s.recv(65536)
        if not chunk:
            out["error"] = "no answer to the handshake"
            print(json.dumps(out))
            return 1
        buf += chunk
    head, _, rest = buf.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    out["status"] = int(lines[0].split(" ", 2)[1])
    headers = {}
    for line in lines[1:]:
        k, _, v = line.partition(":")
        headers[k.strip().lower()] = v.strip()
    if out["status"] != 101:
        n = int(headers.get("content-length", "0"))
        while len(rest) < n:
            chunk = s.recv(65536)
            if not chunk:
                break
            rest += chunk
        out["body"] = rest[:n].decode("utf-8", "replace")
        print(json.dumps(out))
        return 0
    want = base64.b64encode(__import__("hashlib").sha1(
        (key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").encode()).digest()).decode()
    if headers.get("sec-websocket-accept") != want:
        out["error"] = "wrong Sec-WebSocket-Accept: " + headers.get("sec-websocket-accept", "")
        print(json.dumps(out))
        return 1
    out["protocol"] = headers.get("sec-websocket-protocol")
    if a.ready_file:
        with open(a.ready_file, "w") as f:
            f.write("open\n")
    if a.send is not None:
        s.sendall(frame(2, a.send.encode()))

    class Conn:
        pending = rest

    def read(n):
        if len(Conn.pending) >= n:
            d, Conn.pending = Conn.pending[:n], Conn.pending[n:]
            return d
        d, Conn.pending = Conn.pending, b""
        return d + read_exact(s, n - len(d))

    data = b""
    try:
        while True:
            b0, b1 = read(2)
            n = b1 & 0x7F
            if n == 126:
                n = struct.unpack(">H", read(2))[0]
            elif n == 127:
                n = struct.unpack(">Q", read(8))[0]
            if b1 & 0x80:
                out["error"] = "a masked frame from the server"
                break
            payload = read(n)
            op = b0 & 0x0F
            if op == 8:
                out["close"] = struct.unpack(">H", payload[:2])[0] if len(payload) >= 2 else 1005
                break
            if op == 9:
                s.sendall(frame(10, payload))
                continue
            if op == 1:
                out["texts"].append(payload.decode("utf-8", "replace"))
            if op in (0, 1, 2):
                data += payload
            if a.until and a.until.encode() in data:
                out["found"] = True
                out["close"] = None
                s.sendall(frame(8, struct.pack(">H", 1000)))
                break
    except (EOFError, ConnectionError, socket.timeout) as e:
        out["close"] = 0
        if isinstance(e, socket.timeout):
            out["error"] = "timed out"
    out["data"] = data.decode("utf-8", "replace")
    print(json.dumps(out))
    return 0


sys.exit(main())
