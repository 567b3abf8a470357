#!/usr/bin/python3
"""One connection to an event stream of the controller (a run's output, a service's logs) over
its unix socket, read event by event. Standard library only.

    sse-follow.py SOCKET PATH [--last-event-id ID] [--stop-after BYTES] [--out FILE]

Appends the data bytes of every complete stdout `output` event to FILE (stderr's to FILE.err).
With --stop-after the client closes the socket itself once it has BYTES data bytes of this
connection: a dropped connection in the middle of the stream. Prints one JSON line:
{"status", "lastId" (the id of the last complete event), "events": [{"event","id",...}],
"gaps": [...], "bytes": {"stdout","stderr"}, "end": the end event's data or null, "offsets":
the first offset of each stream seen}.
"""

import argparse
import base64
import json
import socket
import sys


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("socket")
    ap.add_argument("path")
    ap.add_argument("--last-event-id")
    ap.add_argument("--stop-after", type=int, default=0)
    ap.add_argument("--out")
    a = ap.parse_args()

    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(120)
    s.connect(a.socket)
    req = "GET %s HTTP/1.0\r\nHost: station\r\nAccept: text/event-stream\r\n" % a.path
    if a.last_event_id is not None:
        req += "Last-Event-ID: %s\r\n" % a.last_event_id
    s.sendall((req + "\r\n").encode())

    buf = b""
    while b"\r\n\r\n" not in buf:
        chunk = s.recv(65536)
        if not chunk:
            break
        buf += chunk
    head, _, buf = buf.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1]) if head.startswith(b"HTTP/") else 0
    result = {"status": status, "lastId": None, "events": [], "gaps": [],
              "bytes": {"stdout": 0, "stderr": 0}, "end": None, "body": None,
              "offsets": {}}
    if status != 200:
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            buf += chunk
        result["body"] = buf.decode(errors="replace")
        print(json.dumps(result))
        return
    files = {}
    if a.out:
        files = {"stdout": open(a.out, "ab"), "stderr": open(a.out + ".err", "ab")}
    got = 0
    done = False
    while not done:
        while b"\n\n" in buf:
            block, _, buf = buf.partition(b"\n\n")
            ev = {"event": "message", "id": None, "data": ""}
            for line in block.decode().split("\n"):
                if line.startswith(":") or not line:
                    continue
                k, _, v = line.partition(":")
                v = v[1:] if v.startswith(" ") else v
                if k == "event":
                    ev["event"] = v
                elif k == "id":
                    ev["id"] = v
                elif k == "data":
                    ev["data"] += v
            if ev["event"] == "message" and not ev["data"]:
                continue  # a comment only
            if ev["id"] is not None:
                result["lastId"] = ev["id"]
            doc = json.loads(ev["data"]) if ev["data"] else None
            rec = {"event": ev["event"], "id": ev["id"]}
            if ev["event"] == "output":
                data = base64.b64decode(doc["data"])
                st = doc["stream"]
                result["offsets"].setdefault(st, doc["offset"])
                result["bytes"][st] += len(data)
                rec.update(stream=st, offset=doc["offset"], n=len(data))
                if st in files:
                    files[st].write(data)
                got += len(data)
            elif ev["event"] == "gap":
                rec.update(doc)
                result["gaps"].append(doc)
            elif ev["event"] in ("end", "error"):
                result["end"] = doc
                result["endEvent"] = ev["event"]
                done = True
            result["events"].append(rec)
            if a.stop_after and got >= a.stop_after:
                done = True
                break
        if done:
            break
        chunk = s.recv(65536)
        if not chunk:
            break
        buf += chunk
    for f in files.values():
        f.close()
    s.close()
    print(json.dumps(result))


if __name__ == "__main__":
    sys.exit(main())
