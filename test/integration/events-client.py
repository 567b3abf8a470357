#!/usr/bin/python3
"""One connection to GET /v1/events of the controller over its unix socket. Standard library
only.

    events-client.py SOCKET PATH [--last-event-id ID] [--count N] [--until TYPE:ID:STATE]
                     [--pause-file FILE] [--rcvbuf BYTES] [--timeout S] [--token T]

SOCKET is a unix socket's path, or tcp:PORT for 127.0.0.1:PORT (with --token: its bearer).

Reads events until N events (gaps included) came (then the client closes the socket itself),
or until an event of TYPE about ID in STATE came, or the timeout. With --pause-file it reads
next to nothing (1 KiB every 10 s) after sending the request until FILE exists (a client that
does not keep up), with a small receive buffer (--rcvbuf). Prints one JSON line: {"status","body","lastId","events":[the
events' data, a gap's with "event":"gap"]}.
"""

import argparse
import json
import os
import socket
import sys
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("socket")
    ap.add_argument("path")
    ap.add_argument("--last-event-id")
    ap.add_argument("--count", type=int, default=0)
    ap.add_argument("--until")
    ap.add_argument("--pause-file")
    ap.add_argument("--rcvbuf", type=int, default=0)
    ap.add_argument("--timeout", type=float, default=60)
    ap.add_argument("--token")
    a = ap.parse_args()

    tcp = a.socket.startswith("tcp:")
    s = socket.socket(socket.AF_INET if tcp else socket.AF_UNIX, socket.SOCK_STREAM)
    if a.rcvbuf:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, a.rcvbuf)
    s.settimeout(a.timeout)
    s.connect(("127.0.0.1", int(a.socket[4:])) if tcp else a.socket)
    req = "GET %s HTTP/1.0\r\nHost: station\r\n" % a.path
    if a.token:
        req += "Authorization: Bearer %s\r\n" % a.token
    if a.last_event_id is not None:
        req += "Last-Event-ID: %s\r\n" % a.last_event_id
    s.sendall((req + "\r\n").encode())
    result = {"status": 0, "body": None, "lastId": None, "events": []}
    buf = b""
    if a.pause_file:
        # A trickle (1 KiB every 10 s) so that the server sees the connection alive, not idle.
        end = time.monotonic() + a.timeout
        last = 0
        while not os.path.exists(a.pause_file) and time.monotonic() < end:
            if time.monotonic() - last >= 10:
                buf += s.recv(1024)
                last = time.monotonic()
            time.sleep(0.05)
    try:
        while b"\r\n\r\n" not in buf:
            chunk = s.recv(65536)
            if not chunk:
                break
            buf += chunk
        head, _, buf = buf.partition(b"\r\n\r\n")
        if head.startswith(b"HTTP/"):
            result["status"] = int(head.split(b" ", 2)[1])
        if result["status"] != 200:
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                buf += chunk
            result["body"] = buf.decode(errors="replace")
            print(json.dumps(result))
            return
        until = a.until.split(":", 2) if a.until else None
        done = False
        while not done:
            while b"\n\n" in buf and not done:
                block, _, buf = buf.partition(b"\n\n")
                ev, eid, data = "message", None, ""
                for line in block.decode().split("\n"):
                    if not line or line.startswith(":"):
                        continue
                    k, _, v = line.partition(":")
                    v = v[1:] if v.startswith(" ") else v
                    if k == "event":
                        ev = v
                    elif k == "id":
                        eid = v
                    elif k == "data":
                        data += v
                if not data:
                    continue
                doc = json.loads(data)
                if ev != "message":
                    doc["event"] = ev
                result["events"].append(doc)
                if eid is not None:
                    result["lastId"] = eid
                if a.count and len(result["events"]) >= a.count:
                    done = True
                if until and doc.get("type") == until[0] and doc.get("id") == until[1] \
                        and doc.get("state") == until[2]:
                    done = True
            if done:
                break
            chunk = s.recv(65536)
            if not chunk:
                break
            buf += chunk
    except socket.timeout:
        result["timeout"] = True
    s.close()
    print(json.dumps(result))


if __name__ == "__main__":
    sys.exit(main())
