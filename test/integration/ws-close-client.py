#!/usr/bin/env python3
# A WebSocket client (standard library only) for test-tokens.sh: opens URL_PATH on
# 127.0.0.1:PORT with a bearer token, writes "open" to OPEN_FILE once the 101 came, then reads
# frames until the server closes, and prints {"close": CODE, "reason": "..."} (CODE 0: the
# connection ended without a close frame).
#
#   ws-close-client.py PORT PATH TOKEN OPEN_FILE
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


def main():
    port, path, token, open_file = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
    s = socket.create_connection(("127.0.0.1", int(port)), timeout=120)
    key = base64.b64encode(os.urandom(16)).decode()
    s.sendall((f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\n"
               f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
               f"Sec-WebSocket-Version: 13\r\nAuthorization: Bearer {token}\r\n\r\n").encode())
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = s.recv(1)
        if not chunk:
            print(json.dumps({"error": "no handshake answer"}))
            return 1
        head += chunk
    status = head.split(b" ", 2)[1].decode()
    if status != "101":
        print(json.dumps({"error": "status " + status}))
        return 1
    with open(open_file, "w") as f:
        f.write("open\n")
    try:
        while True:
            b0, b1 = read_exact(s, 2)
            n = b1 & 0x7F
            if n == 126:
                n = struct.unpack(">H", read_exact(s, 2))[0]
            elif n == 127:
                n = struct.unpack(">Q", read_exact(s, 8))[0]
            payload = read_exact(s, n)
            if b0 & 0x0F == 8:
                code = struct.unpack(">H", payload[:2])[0] if len(payload) >= 2 else 1005
                print(json.dumps({"close": code, "reason": payload[2:].decode("utf-8", "replace")}))
                return 0
    except (EOFError, ConnectionError):
        print(json.dumps({"close": 0, "reason": ""}))
        return 0


sys.exit(main())
