#!/usr/bin/env python3
"""An etcd gateway that misbehaves, for test-etcd-client.sh: prints its port, then serves.

  etcd-fake.py hang      accepts, reads the request, never answers
  etcd-fake.py big       a range answered with 65 MiB; a watch: created, one event, then a
                         9 MiB message
  etcd-fake.py foreign   answers naming a key outside the client's prefix (/big/)
"""
import base64
import json
import os
import socket
import sys
import threading


def b64(s):
    return base64.b64encode(s.encode()).decode()


def read_request(conn):
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return None
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
    while len(body) < length:
        chunk = conn.recv(65536)
        if not chunk:
            return None
        body += chunk
    return head.split(b" ")[1].decode()


def answer(conn, body, stream=False):
    if stream:
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                     b"Connection: close\r\n\r\n")
        for part in body:
            conn.sendall(part)
        return
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
                 + str(len(body)).encode() + b"\r\n\r\n")
    conn.sendall(body)


def line(obj):
    return json.dumps(obj).encode() + b"\n"


HEADER = {"revision": "5"}
# made before the port is printed: on a loaded machine making 65 MiB as a request came took
# longer than the client waits for an answer (5 s)
BIG_RANGE = BIG_WATCH = b""
CREATED = line({"result": {"header": HEADER, "created": True}})


def serve(mode, conn):
    try:
        serve_one(mode, conn)
    except OSError:
        pass  # the client hung up: what a bound does


def serve_one(mode, conn):
    with conn:
        path = read_request(conn)
        if path is None:
            return
        if mode == "hang":
            threading.Event().wait()
        if mode == "big" and path == "/v3/kv/range":
            answer(conn, BIG_RANGE)
        elif mode == "big" and path == "/v3/watch":
            event = {"kv": {"key": b64("/big/k"), "mod_revision": "2", "value": b64("v")}}
            answer(conn, [CREATED, line({"result": {"header": HEADER, "events": [event]}}), BIG_WATCH],
                   stream=True)
            threading.Event().wait(30)
        elif mode == "foreign" and path == "/v3/kv/range":
            kv = {"key": b64("/other/k"), "mod_revision": "2", "value": b64("v")}
            answer(conn, json.dumps({"header": HEADER, "kvs": [kv], "count": "1"}).encode())
        elif mode == "foreign" and path == "/v3/watch":
            event = {"kv": {"key": b64("/other/k"), "mod_revision": "2", "value": b64("v")}}
            answer(conn, [CREATED, line({"result": {"header": HEADER, "events": [event]}})],
                   stream=True)
            threading.Event().wait(30)


def main():
    global BIG_RANGE, BIG_WATCH
    mode = sys.argv[1]
    if mode == "big":
        BIG_RANGE = b'{"header":{"revision":"5"},"pad":"' + b"x" * (65 << 20) + b'"}'
        BIG_WATCH = b'{"result":{"pad":"' + b"y" * (9 << 20) + b'"}}\n'
    # gone on its own even when the script that started it was not there to stop it
    threading.Timer(180, os._exit, [0]).start()
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(16)
    print(srv.getsockname()[1], flush=True)
    while True:
        conn, _ = srv.accept()
        threading.Thread(target=serve, args=(mode, conn), daemon=True).start()


if __name__ == "__main__":
    main()
