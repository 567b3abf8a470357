#!/usr/bin/python3
# SPDX-License-Identifier: MIT
# bench/code-context.py: the code context rows of `make bench` (bench/run's "code" group).
#
#   code-context.py bare --out FILE --runs N --starts N
#       a bare jupyter_client baseline: N starts of a python3 ipykernel with KernelManager
#       (start_kernel → wait_for_ready), and N round trips of the cell `1+1` with a
#       BlockingKernelClient (execute → its execute_reply) to one of them
#   code-context.py api --socket SOCK --workspace ID --out FILE --runs N --starts N
#                       [--language python|javascript] [--suffix S]
#       the same through the API: N context creates (POST …/contexts → 201, the kernel answered)
#       and N cells `1+1` (POST …/contexts/{cid}/execute?waitMs=60000 → status ok, result 2)
#
# Rows (one JSON line each, as bench-report.c reads them): code.start.bare, code.rtt.bare,
# code.start[S], code.rtt[S]; times in ms. Stdlib only, but for jupyter_client in `bare`
# (Debian's python3-jupyter-client, which python3-ipykernel pulls in).
import argparse
import http.client
import json
import os
import socket
import sys
import time


def emit(out, row_id, values, extra=None):
    v = sorted(values)
    n = len(v)
    row = {"id": row_id, "unit": "ms", "n": n, "median": v[n // 2],
           "p99": v[max(0, (n * 99 + 99) // 100 - 1)], "min": v[0], "max": v[-1],
           "mean": sum(v) / n}
    if extra:
        row["extra"] = extra
    with open(out, "a") as f:
        f.write(json.dumps(row) + "\n")
    print("bench: %s: median %.2f ms over %d" % (row_id, row["median"], n), file=sys.stderr)


def ms_since(t0):
    return (time.perf_counter() - t0) * 1000.0


# ---- bare jupyter_client -------------------------------------------------------------------


def bare(args):
    from jupyter_client.manager import KernelManager

    os.environ.setdefault("PYDEVD_DISABLE_FILE_VALIDATION", "1")  # debugpy's warning on stderr

    starts = []
    for i in range(args.starts + 1):
        km = KernelManager(kernel_name="python3")
        t0 = time.perf_counter()
        km.start_kernel()
        kc = km.client()
        kc.start_channels()
        kc.wait_for_ready(timeout=60)
        took = ms_since(t0)
        if i > 0:  # the first start warms the page cache
            starts.append(took)
        if i < args.starts:
            kc.stop_channels()
            km.shutdown_kernel(now=True)
    emit(args.out, "code.start.bare", starts)

    rtts = []
    for i in range(args.runs + 10):
        t0 = time.perf_counter()
        reply = kc.execute_interactive("1+1", timeout=60, output_hook=lambda msg: None)
        took = ms_since(t0)
        if reply["content"]["status"] != "ok":
            sys.exit("bench: code.rtt.bare: 1+1 answered %s" % reply["content"])
        if i >= 10:
            rtts.append(took)
    emit(args.out, "code.rtt.bare", rtts)
    kc.stop_channels()
    km.shutdown_kernel(now=True)


# ---- the API -------------------------------------------------------------------------------


class UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path):
        super().__init__("station", timeout=120)
        self.unix_path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(120)
        self.sock.connect(self.unix_path)


class Api:
    def __init__(self, path):
        self.conn = UnixHTTPConnection(path)  # one keep-alive connection, as an SDK holds

    def call(self, method, url, body=None):
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Content-Type": "application/json"} if data is not None else {}
        self.conn.request(method, url, body=data, headers=headers)
        r = self.conn.getresponse()
        raw = r.read()
        try:
            return r.status, json.loads(raw) if raw else None
        except ValueError:
            return r.status, raw.decode("utf-8", "replace")


def api(args):
    a = Api(args.socket)
    base = "/v1/workspaces/%s/contexts" % args.workspace
    suffix = args.suffix
    expected = {"python": "2", "javascript": "2"}[args.language]

    starts = []
    for i in range(args.starts + 1):
        t0 = time.perf_counter()
        status, ctx = a.call("POST", base, {"language": args.language})
        took = ms_since(t0)
        if status != 201:
            sys.exit("bench: code.start%s: POST %s: HTTP %s %s" % (suffix, base, status, ctx))
        if i > 0:
            starts.append(took)
        if i < args.starts:
            status, body = a.call("DELETE", "%s/%s" % (base, ctx["id"]))
            if status != 204:
                sys.exit("bench: DELETE context: HTTP %s %s" % (status, body))
    emit(args.out, "code.start" + suffix, starts)

    url = "%s/%s/execute?waitMs=60000" % (base, ctx["id"])
    rtts = []
    for i in range(args.runs + 10):
        t0 = time.perf_counter()
        status, ex = a.call("POST", url, {"code": "1+1"})
        took = ms_since(t0)
        text = None
        if status == 201 and ex.get("results"):
            text = ex["results"][0].get("data", {}).get("text/plain")
        if status != 201 or ex.get("status") != "ok" or text != expected:
            sys.exit("bench: code.rtt%s: 1+1 answered HTTP %s %s" % (suffix, status, ex))
        if i >= 10:
            rtts.append(took)
    emit(args.out, "code.rtt" + suffix, rtts)
    a.call("DELETE", "%s/%s" % (base, ctx["id"]))


def main():
    p = argparse.ArgumentParser(prog="code-context.py")
    p.add_argument("mode", choices=["bare", "api"])
    p.add_argument("--out", required=True)
    p.add_argument("--runs", type=int, default=200)
    p.add_argument("--starts", type=int, default=10)
    p.add_argument("--socket")
    p.add_argument("--workspace")
    p.add_argument("--language", default="python", choices=["python", "javascript"])
    p.add_argument("--suffix", default="")
    args = p.parse_args()
    if args.mode == "bare":
        bare(args)
    else:
        if not args.socket or not args.workspace:
            p.error("api needs --socket and --workspace")
        api(args)


if __name__ == "__main__":
    main()
