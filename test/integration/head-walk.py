#!/usr/bin/env python3
# head-walk.py SOCKET OPENAPI.json IDS.json
#
# Sends HEAD to every GET operation of the description, over the controller's unix socket,
# with the path parameters and queries IDS.json gives ("query": per path, for both; "head_query":
# per path, for the HEAD only, such as a long-poll's waitMs), and reads each answer to the end of
# the connection (Connection: close). Prints one JSON line per operation: the path, HEAD's
# status, headers and the bytes after them (none is right), whether the answer ended within the
# bound, and for an operation whose GET ends (not an event stream) GET's status and headers too
# (the pair asked again, at most three times, while they differ).
# Standard library only.
import json
import re
import socket
import sys
import time

BOUND_S = 30


def request(sock_path, method, target):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(BOUND_S)
    s.connect(sock_path)
    s.sendall(("%s %s HTTP/1.1\r\nHost: station\r\nConnection: close\r\n\r\n"
               % (method, target)).encode())
    data, ended, start = b"", True, time.monotonic()
    try:
        while True:
            b = s.recv(65536)
            if not b:
                break
            data += b
            if time.monotonic() - start > BOUND_S:
                ended = False
                break
    except socket.timeout:
        ended = False
    s.close()
    head, _, rest = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1]) if lines and lines[0].startswith("HTTP/") else 0
    headers = {}
    for line in lines[1:]:
        k, _, v = line.partition(":")
        headers[k.strip().lower()] = v.strip()
    return {"status": status, "headers": headers, "rest": len(rest), "ended": ended}


def same_answer(head, get):
    h, g = head["headers"], get["headers"]
    return (head["status"] == get["status"] and h.get("content-type") == g.get("content-type")
            and h.get("content-length") in (None, g.get("content-length")))


def target(path, ids, queries="query"):
    def sub(m):
        name = m.group(1)
        key = name
        if name == "id" and path.startswith("/v1/tokens/"):
            key = "token"
        elif name == "id" and path.startswith("/v1/snapshots/"):
            key = "snapshot"
        elif name == "name":
            key = "service" if "/services/" in path else "secret"
        return ids[key]
    t = re.sub(r"\{([^}]+)\}", sub, path)
    q = ids.get(queries, {}).get(path)
    return t + ("?" + q if q else "")


def main():
    sock_path, spec_path, ids_path = sys.argv[1:4]
    spec = json.load(open(spec_path))
    ids = json.load(open(ids_path))
    for path, item in spec["paths"].items():
        op = item.get("get")
        if not op:
            continue
        ok = op.get("responses", {}).get("200", {})
        if "$ref" in ok:
            ok = spec["components"]["responses"][ok["$ref"].split("/")[-1]]
        stream = "text/event-stream" in ok.get("content", {})
        t, h = target(path, ids), target(path, ids, "head_query")
        # A body that moves (free bytes, CPU time) can change length between the two: the
        # pair is asked again, a few times, before a difference is reported.
        for _ in range(3):
            line = {"path": path, "target": h, "stream": stream,
                    "head": request(sock_path, "HEAD", h)}
            if stream:
                break
            line["get"] = request(sock_path, "GET", t)
            if same_answer(line["head"], line["get"]):
                break
        print(json.dumps(line), flush=True)


main()
