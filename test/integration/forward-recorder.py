#!/usr/bin/python3
"""A worker that records what reaches it: each request's head, as bytes, one JSON line in LOG.

    forward-recorder.py PORT LOG

Every request is answered 200 with {"recorded":N} and the connection closed. The first line of
LOG is {"listening":true} once the socket listens."""
import json
import socket
import sys
import threading


def serve(conn, log, lock, counter):
    conn.settimeout(30)
    data = b""
    try:
        while b"\r\n\r\n" not in data and len(data) < 65536:
            chunk = conn.recv(4096)
            if not chunk:
                break
            data += chunk
    except OSError:
        pass
    head = data.split(b"\r\n\r\n", 1)[0]
    with lock:
        counter[0] += 1
        n = counter[0]
        with open(log, "a") as f:
            f.write(json.dumps({"head": head.decode("latin-1")}) + "\n")
    body = json.dumps({"recorded": n}).encode()
    try:
        conn.sendall(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n"
            + b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body
        )
    except OSError:
        pass
    conn.close()


def main():
    port, log = int(sys.argv[1]), sys.argv[2]
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", port))
    s.listen(64)
    with open(log, "a") as f:
        f.write(json.dumps({"listening": True}) + "\n")
    lock, counter = threading.Lock(), [0]
    while True:
        conn, _ = s.accept()
        threading.Thread(target=serve, args=(conn, log, lock, counter), daemon=True).start()


if __name__ == "__main__":
    main()
