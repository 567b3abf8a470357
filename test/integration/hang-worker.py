#!/usr/bin/python3
"""A worker that hangs: listens on loopback, accepts every connection and reads what is sent,
and never answers (--mode silent), or answers a request's head and then never sends the body
it announced (--mode stall-body), or answers the start of a command (POST …/commands) with a
running run and nothing else (--mode start-only: the follow and the cancel hang), or answers
every request as an event stream that begins and then stays silent, without the server's
heartbeat (--mode quiet-stream). Prints its port on stdout once it listens; runs until killed.
For test-client-deadlines.sh and the SDKs' deadline tests (test-sdk-deadlines.sh)."""

import argparse
import socket
import threading

STALL_HEAD = (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
              b"Content-Length: 1000\r\n\r\n{\"workspaces\":")


RUN = b'{"id":"r1","status":"running","command":"sleep 100"}'

STREAM_HEAD = (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
               b"Cache-Control: no-store\r\n\r\n: stream\n\n")


def serve(conn: socket.socket, mode: str) -> None:
    buf = b""
    answered = False
    with conn:
        while True:
            try:
                data = conn.recv(65536)
            except OSError:
                return
            if not data:
                return
            buf += data
            if answered or b"\r\n\r\n" not in buf:
                continue
            line = buf.split(b"\r\n", 1)[0]
            if mode == "stall-body":
                conn.sendall(STALL_HEAD)
                answered = True
            elif mode == "quiet-stream":
                conn.sendall(STREAM_HEAD)
                answered = True
            elif mode == "start-only" and line.startswith(b"POST ") and b"/commands" in line \
                    and b"/cancel" not in line:
                conn.sendall(b"HTTP/1.1 201 Created\r\nContent-Type: application/json\r\n"
                             b"Content-Length: %d\r\n\r\n%s" % (len(RUN), RUN))
                answered = True


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", choices=["silent", "stall-body", "start-only", "quiet-stream"], default="silent")
    ap.add_argument("--port", type=int, default=0)
    args = ap.parse_args()
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", args.port))
    s.listen(64)
    print(s.getsockname()[1], flush=True)
    while True:
        conn, _ = s.accept()
        threading.Thread(target=serve, args=(conn, args.mode), daemon=True).start()


if __name__ == "__main__":
    main()
