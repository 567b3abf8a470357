#!/usr/bin/python3
"""A follower of a run's output or a service's logs over the controller's unix socket, as an
event stream (sse) or a WebSocket (ws), that can be made slow; and the comparison of what it
received with the stored run or attempt. Standard library only.

    slow-follow.py follow SOCKET PATH --mode sse|ws --out PREFIX [--stall-ms N]
                   [--sleep-ms N] [--read-bytes N] [--rcvbuf N] [--go-file FILE]
    slow-follow.py parse-sse FILE --out PREFIX
    slow-follow.py compare PREFIX STORED.json [--exact]

follow reads the stream to its end. --rcvbuf shrinks the socket's receive buffer; after the
first output chunk it creates --go-file (a run waiting for it then writes), sleeps --stall-ms
once, then reads --read-bytes at a time with --sleep-ms between reads. It writes PREFIX.json:
{"status", "chunks": {"stdout": [[offset, length]…], "stderr": …}, "gaps": [{stream, offset,
bytes}…], "end": the end message's object or null, "error": an error message or null}, and
the chunks' bytes in order to PREFIX.stdout and PREFIX.stderr. parse-sse does the same for an
event stream another client (curl -N) saved to FILE.

compare checks those against STORED.json (a run, or an attempt, as GET returns it: stdout,
stdoutTail, stdoutBytes, encoding, the same for stderr) and prints one JSON line:
{"ok", "problems": […], per stream {"kept", "keptDelivered", "keptLost", "delivered",
"gapBytes", "gaps"}}. Every stream must be covered from 0 to its byte count by chunks and gaps
that follow each other, every kept byte delivered and equal to the stored one, and no gap may
cover a kept byte. With --exact (a finished run's replay) nothing but the kept bytes may come.
"""

import argparse
import base64
import json
import socket
import sys
import time

STREAMS = ("stdout", "stderr")


class Reader:
    def __init__(self, recv, a):
        self.recv = recv
        self.a = a
        self.buf = b""
        self.eof = False
        self.slow = False

    def more(self):
        if self.eof:
            return False
        if self.slow and self.a.sleep_ms:
            time.sleep(self.a.sleep_ms / 1000)
        chunk = self.recv(self.a.read_bytes)
        if not chunk:
            self.eof = True
            return False
        self.buf += chunk
        return True

    def need(self, n):
        while len(self.buf) < n:
            if not self.more():
                raise EOFError("the connection ended in the middle of a message")
        out, self.buf = self.buf[:n], self.buf[n:]
        return out


class Result:
    def __init__(self, a):
        self.a = a
        self.doc = {"status": 0, "chunks": {s: [] for s in STREAMS}, "gaps": [], "end": None,
                    "error": None}
        self.files = {s: open(a.out + "." + s, "wb") for s in STREAMS}
        self.started = False

    def output(self, reader, stream, offset, data):
        self.doc["chunks"][stream].append([offset, len(data)])
        self.files[stream].write(data)
        if not self.started:
            self.started = True
            if self.a.go_file:
                open(self.a.go_file, "w").close()
            if self.a.stall_ms:
                time.sleep(self.a.stall_ms / 1000)
            reader.slow = True

    def gap(self, g):
        self.doc["gaps"].append({"stream": g["stream"], "offset": g["offset"],
                                 "bytes": g["bytes"]})

    def close(self):
        for f in self.files.values():
            f.close()
        with open(self.a.out + ".json", "w") as f:
            json.dump(self.doc, f)


def read_head(reader):
    while b"\r\n\r\n" not in reader.buf:
        if not reader.more():
            break
    head, _, reader.buf = reader.buf.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]) if head.startswith(b"HTTP/") else 0


def follow_sse(reader, res):
    while True:
        while b"\n\n" not in reader.buf:
            if not reader.more():
                res.doc["error"] = "the stream ended without an end event"
                return
        block, _, reader.buf = reader.buf.partition(b"\n\n")
        event, data = "message", ""
        for line in block.decode().split("\n"):
            if not line or line.startswith(":"):
                continue
            k, _, v = line.partition(":")
            v = v[1:] if v.startswith(" ") else v
            if k == "event":
                event = v
            elif k == "data":
                data += v
        if event == "output":
            d = json.loads(data)
            res.output(reader, d["stream"], d["offset"], base64.b64decode(d["data"]))
        elif event == "gap":
            res.gap(json.loads(data))
        elif event == "end":
            res.doc["end"] = json.loads(data)
            return
        elif event == "error":
            res.doc["error"] = data
            return


def follow_ws(reader, res):
    while True:
        h = reader.need(2)
        op, n = h[0] & 0x0F, h[1] & 0x7F
        if n == 126:
            n = int.from_bytes(reader.need(2), "big")
        elif n == 127:
            n = int.from_bytes(reader.need(8), "big")
        payload = reader.need(n)
        if op == 2:
            stream = STREAMS[payload[0] - 1]
            res.output(reader, stream, int.from_bytes(payload[1:9], "big"), payload[9:])
        elif op == 1:
            m = json.loads(payload)
            if m["type"] == "gap":
                res.gap(m)
            elif m["type"] == "end":
                res.doc["end"] = m.get("run") or m.get("service")
            elif m["type"] == "error":
                res.doc["error"] = json.dumps(m)
        elif op == 8:
            if res.doc["end"] is None and res.doc["error"] is None:
                res.doc["error"] = "closed without an end message"
            return


def follow(a):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    if a.rcvbuf:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, a.rcvbuf)
    s.settimeout(300)
    s.connect(a.socket)
    # HTTP/1.0 for the event stream: no chunked encoding to take apart
    req = "GET %s HTTP/1.%d\r\nHost: station\r\n" % (a.path, a.mode == "ws")
    if a.mode == "ws":
        req += ("Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"
                "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n")
    else:
        req += "Accept: text/event-stream\r\n"
    s.sendall((req + "\r\n").encode())
    reader = Reader(s.recv, a)
    res = Result(a)
    res.doc["status"] = read_head(reader)
    try:
        if res.doc["status"] == 101:
            follow_ws(reader, res)
        elif res.doc["status"] == 200:
            follow_sse(reader, res)
        else:
            res.doc["error"] = "status %d" % res.doc["status"]
    except (EOFError, OSError, ValueError) as e:
        res.doc["error"] = str(e)
    res.close()


def parse_sse(a):
    a.go_file, a.stall_ms, a.sleep_ms, a.read_bytes = None, 0, 0, 1 << 20
    res = Result(a)
    with open(a.file, "rb") as f:
        follow_sse(Reader(f.read, a), res)
    res.doc["status"] = 200
    res.close()


def stored_parts(doc, stream):
    """(total, [(start, bytes)…]): the kept parts of a stream as the store has them."""
    def raw(v):
        if v is None:
            return b""
        return base64.b64decode(v) if doc.get("encoding") == "base64" else v.encode()
    total = doc[stream + "Bytes"]
    head = raw(doc.get(stream))
    parts = [(0, head)]
    if doc.get(stream + "Tail") is not None:
        tail = raw(doc.get(stream + "Tail"))
        parts.append((total - len(tail), tail))
    return total, parts


def compare_stream(meta, prefix, doc, stream, exact, problems):
    total, parts = stored_parts(doc, stream)
    with open(prefix + "." + stream, "rb") as f:
        data = f.read()
    events = []
    pos = 0
    for off, n in meta["chunks"][stream]:
        events.append((off, n, "chunk", pos))
        pos += n
    gaps = [g for g in meta["gaps"] if g["stream"] == stream]
    # chunks and gaps in the order they came cannot be told apart here: sort by offset
    for g in gaps:
        events.append((g["offset"], g["bytes"], "gap", 0))
    events.sort(key=lambda e: (e[0], e[2] == "chunk"))
    nxt = 0
    for off, n, kind, _ in events:
        if off != nxt:
            problems.append("%s: %s at %d, expected %d" % (stream, kind, off, nxt))
            nxt = max(nxt, off)
        nxt = max(nxt, off + n)
    if nxt != total:
        problems.append("%s: covered up to %d of %d bytes" % (stream, nxt, total))
    delivered = bytearray(total)
    have = bytearray(total)
    for off, n, kind, p in events:
        if kind == "chunk":
            end = min(off + n, total)
            delivered[off:end] = data[p:p + end - off]
            have[off:end] = b"\1" * (end - off)
    kept = kept_ok = 0
    kept_mask = bytearray(total)
    for start, b in parts:
        kept += len(b)
        kept_mask[start:start + len(b)] = b"\1" * len(b)
        seg_have = have[start:start + len(b)]
        seg = bytes(delivered[start:start + len(b)])
        if seg_have.count(1) == len(b) and seg == b:
            kept_ok += len(b)
        else:
            ok = sum(1 for i in range(len(b)) if seg_have[i] and seg[i] == b[i])
            kept_ok += ok
            problems.append("%s: %d of the %d kept bytes at %d not delivered exactly" %
                            (stream, len(b) - ok, len(b), start))
    for g in gaps:
        inside = kept_mask[g["offset"]:g["offset"] + g["bytes"]].count(1)
        if inside:
            problems.append("%s: the gap at %d (%d bytes) covers %d kept bytes" %
                            (stream, g["offset"], g["bytes"], inside))
    n_delivered = sum(c[1] for c in meta["chunks"][stream])
    if exact and n_delivered != kept:
        problems.append("%s: %d bytes delivered, %d kept" % (stream, n_delivered, kept))
    return {"total": total, "kept": kept, "keptDelivered": kept_ok, "keptLost": kept - kept_ok,
            "delivered": n_delivered, "gapBytes": sum(g["bytes"] for g in gaps),
            "gaps": [[g["offset"], g["bytes"]] for g in gaps]}


def compare(a):
    with open(a.prefix + ".json") as f:
        meta = json.load(f)
    with open(a.stored) as f:
        doc = json.load(f)
    problems = []
    if meta["error"]:
        problems.append("follow: " + meta["error"])
    out = {s: compare_stream(meta, a.prefix, doc, s, a.exact, problems) for s in STREAMS}
    out["ok"] = not problems
    out["problems"] = problems[:20]
    print(json.dumps(out))


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    f = sub.add_parser("follow")
    f.add_argument("socket")
    f.add_argument("path")
    f.add_argument("--mode", choices=("sse", "ws"), required=True)
    f.add_argument("--out", required=True)
    f.add_argument("--stall-ms", type=int, default=0)
    f.add_argument("--sleep-ms", type=float, default=0)
    f.add_argument("--read-bytes", type=int, default=65536)
    f.add_argument("--rcvbuf", type=int, default=0)
    f.add_argument("--go-file")
    p = sub.add_parser("parse-sse")
    p.add_argument("file")
    p.add_argument("--out", required=True)
    c = sub.add_parser("compare")
    c.add_argument("prefix")
    c.add_argument("stored")
    c.add_argument("--exact", action="store_true")
    a = ap.parse_args()
    {"follow": follow, "parse-sse": parse_sse, "compare": compare}[a.cmd](a)


if __name__ == "__main__":
    sys.exit(main())
