#!/usr/bin/env python3
"""POST /mcp (Streamable HTTP) of a controller started with --mcp: Origin and Host checks
(403, with positive controls), the token (401), GET and DELETE 405, JSON and event-stream
answers, a closed response stream or a notifications/cancelled cancelling the run its exec
started, the Mcp-Session-Id of initialize. Prints `ok NAME` /
`not ok NAME # why` lines.

Usage: mcp-http.py PORT TOKEN SOCKET IMAGE"""

import http.client
import json
import os
import socket
import subprocess
import sys
import time
import traceback

PORT, TOKEN, SOCK, IMAGE = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
FAILED = 0
STATE = {}


class Fail(Exception):
    pass


def eq(want, got, what):
    if want != got:
        raise Fail("%s: expected %r, got %r" % (what, want, got if len(repr(got)) < 500 else repr(got)[:500]))


def check(cond, what):
    if not cond:
        raise Fail(what)


def wait_until(pred, what, timeout=60):
    end = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > end:
            raise Fail("timed out waiting for " + what)
        time.sleep(0.05)


def pgrep(pattern):
    r = subprocess.run(["pgrep", "-f", pattern], capture_output=True, text=True)
    return r.stdout.split()


def post(body, token=True, headers=None, method="POST"):
    c = http.client.HTTPConnection("127.0.0.1", int(PORT), timeout=120)
    h = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    if token:
        h["Authorization"] = "Bearer " + TOKEN
    h.update(headers or {})
    c.request(method, "/mcp", json.dumps(body) if body is not None else None, h)
    r = c.getresponse()
    data = r.read()
    c.close()
    return r, data


def api_get(path):
    c = http.client.HTTPConnection("127.0.0.1", int(PORT), timeout=120)
    c.request("GET", path, headers={"Authorization": "Bearer " + TOKEN})
    r = c.getresponse()
    data = r.read()
    c.close()
    eq(200, r.status, "GET %s (%s)" % (path, data[:200]))
    return json.loads(data)


def rpc(method, params=None, rid=1, **kw):
    r, data = post({"jsonrpc": "2.0", "id": rid, "method": method, "params": params or {}}, **kw)
    eq(200, r.status, "status of %s (%s)" % (method, data[:200]))
    if r.getheader("Content-Type") == "text/event-stream":  # the last event is the answer
        return [json.loads(line[6:]) for line in data.decode().split("\n") if line.startswith("data: ")][-1]
    eq("application/json", r.getheader("Content-Type"), "content type")
    return json.loads(data)


TESTS = []


def test(fn):
    TESTS.append(fn)
    return fn


INIT = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}


@test
def token_required(_):
    r, data = post({"jsonrpc": "2.0", "id": 1, "method": "ping"}, token=False)
    eq(401, r.status, "without a token")
    eq("Bearer", r.getheader("WWW-Authenticate"), "WWW-Authenticate")
    r, _ = post({"jsonrpc": "2.0", "id": 1, "method": "ping"}, headers={"Authorization": "Bearer sst_wrong"})
    eq(401, r.status, "a wrong token")
    eq({}, rpc("ping")["result"], "positive control: the token")


@test
def origin_and_host_checked(_):
    ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    r, _ = post(ping, headers={"Origin": "http://evil.example"})
    eq(403, r.status, "a foreign Origin")
    r, _ = post(ping, headers={"Origin": "http://127.0.0.1.evil.example:%s" % PORT})
    eq(403, r.status, "a foreign Origin starting like ours")
    r, _ = post(ping, headers={"Host": "evil.example:%s" % PORT})
    eq(403, r.status, "a foreign Host (DNS rebinding)")
    r, _ = post(ping, token=False, headers={"Host": "evil.example"})
    eq(403, r.status, "a foreign Host is refused before the token")
    eq({}, rpc("ping", headers={"Origin": "http://localhost:%s" % PORT})["result"], "our Origin")
    eq({}, rpc("ping", headers={"Host": "localhost:%s" % PORT})["result"], "a loopback Host")
    # --mcp-allow-host sandbox.example: that name too, and no name that merely contains it.
    eq({}, rpc("ping", headers={"Host": "sandbox.example:%s" % PORT,
                                "Origin": "https://sandbox.example"})["result"], "an allowed name")
    r, _ = post(ping, headers={"Host": "sandbox.example.evil:%s" % PORT})
    eq(403, r.status, "a name that starts like an allowed one")


@test
def get_and_delete_405(_):
    for m in ("GET", "DELETE"):
        r, _ = post(None, method=m)
        eq(405, r.status, m)
        eq("POST", r.getheader("Allow"), m + " Allow")


@test
def initialize_and_notification(_):
    res = rpc("initialize", INIT)["result"]
    eq("2025-11-25", res["protocolVersion"], "protocolVersion")
    r, data = post({"jsonrpc": "2.0", "method": "notifications/initialized"})
    eq(202, r.status, "a notification")
    eq(b"", data, "no body")
    names = {t["name"] for t in rpc("tools/list")["result"]["tools"]}
    check("exec" in names and "workspace_create" in names, "tools: %r" % names)
    modern = rpc("server/discover", {"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                                               "io.modelcontextprotocol/clientCapabilities": {}}})
    check("2026-07-28" in modern["result"]["supportedVersions"], "server/discover")
    # A body with line breaks (pretty-printed JSON) is one message all the same.
    c = http.client.HTTPConnection("127.0.0.1", int(PORT), timeout=120)
    c.request("POST", "/mcp", json.dumps({"jsonrpc": "2.0", "id": 5, "method": "ping"}, indent=2),
              {"Content-Type": "application/json", "Authorization": "Bearer " + TOKEN})
    r = c.getresponse()
    eq({"jsonrpc": "2.0", "id": 5, "result": {}}, json.loads(r.read()), "a pretty-printed request")
    c.close()
    r, data = post(None, headers={"Content-Length": "0"})
    eq(400, r.status, "an empty body")
    eq(-32700, json.loads(data)["error"]["code"], "parse error")


@test
def exec_event_stream(_):
    ws = rpc("tools/call", {"name": "workspace_create", "arguments": {"image": IMAGE}})
    ws = ws["result"]["structuredContent"]["id"]
    STATE["ws"] = ws
    r, data = post({"jsonrpc": "2.0", "id": 9, "method": "tools/call",
                    "params": {"name": "exec", "arguments": {"workspaceId": ws, "command": "echo one; echo two"},
                               "_meta": {"progressToken": "p"}}})
    eq(200, r.status, "status")
    eq("text/event-stream", r.getheader("Content-Type"), "an event stream")
    events = [json.loads(line[6:]) for line in data.decode().split("\n") if line.startswith("data: ")]
    check(len(events) >= 2, "progress, then the result: %r" % events)
    eq("notifications/progress", events[0]["method"], "first event")
    eq(9, events[-1]["id"], "last event is the response")
    eq("one\ntwo\n", events[-1]["result"]["structuredContent"]["stdout"]["head"], "output")


@test
def closed_stream_cancels_run(_):
    ws = STATE["ws"]
    # this run's own durations: another test beside it on the machine finds other sleeps
    mark = "sleep 1000.6%06d" % (os.getpid() % 1000000)
    body = json.dumps({"jsonrpc": "2.0", "id": 10, "method": "tools/call",
                       "params": {"name": "exec", "arguments": {
                           "workspaceId": ws, "command": "%s2 & %s3" % (mark, mark), "waitMs": 120000}}})
    s = socket.create_connection(("127.0.0.1", int(PORT)), timeout=60)
    s.sendall(("POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:%s\r\nAuthorization: Bearer %s\r\n"
               "Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"
               "Content-Length: %d\r\n\r\n%s" % (PORT, TOKEN, len(body), body)).encode())
    wait_until(lambda: len(pgrep(mark)) == 2, "the command to run")
    s.close()
    wait_until(lambda: not pgrep(mark), "the run's processes to be killed")
    # Cancelled, not ended by its own timeout (the worker's default, 60 s), which would also
    # kill the processes: the MCP server must have seen the SIGTERM of its request's end.
    runs = [run for run in api_get("/v1/workspaces/%s/commands" % ws)["commands"]
            if run.get("command", "").startswith(mark)]
    eq(["cancelled"], [run["status"] for run in runs], "the run's status")
    res = rpc("tools/call", {"name": "exec", "arguments": {"workspaceId": ws, "command": "true"}})
    eq("exited", res["result"]["structuredContent"]["status"], "the workspace still serves")


@test
def cancel_notification_cancels_run(_):
    """notifications/cancelled in a POST of its own, from a client with no Mcp-Session-Id (the
    one request of this token with that id): the run is cancelled, the stream ends unanswered."""
    ws = STATE["ws"]
    mark = "sleep 1000.7%06d" % (os.getpid() % 1000000)
    rid = "cancel-me-%d" % os.getpid()
    body = json.dumps({"jsonrpc": "2.0", "id": rid, "method": "tools/call",
                       "params": {"name": "exec", "arguments": {
                           "workspaceId": ws, "command": mark + "1", "waitMs": 120000}}})
    s = socket.create_connection(("127.0.0.1", int(PORT)), timeout=60)
    s.sendall(("POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:%s\r\nAuthorization: Bearer %s\r\n"
               "Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"
               "Connection: close\r\nContent-Length: %d\r\n\r\n%s" % (PORT, TOKEN, len(body), body)).encode())
    wait_until(lambda: len(pgrep(mark)) == 1, "the command to run")
    # A cancel naming another id cancels nothing (positive control below).
    r, _ = post({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": rid + "x"}})
    eq(202, r.status, "a cancel naming nothing")
    r, _ = post({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": rid}})
    eq(202, r.status, "the cancel")
    wait_until(lambda: not pgrep(mark), "the run's processes to be killed")
    runs = [run for run in api_get("/v1/workspaces/%s/commands" % ws)["commands"]
            if run.get("command", "").startswith(mark)]
    eq(["cancelled"], [run["status"] for run in runs], "the run's status")
    data = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
    s.close()
    check(b" 200 " in data.split(b"\r\n", 1)[0], "the request's answer: %r" % data[:200])
    check(b'"id":"%s"' % rid.encode() not in data, "the cancelled request is not answered: %r" % data[-300:])


@test
def initialize_gives_session(_):
    r, data = post({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INIT})
    eq(200, r.status, "initialize")
    sid = r.getheader("Mcp-Session-Id") or ""
    check(len(sid) == 32 and all(ch in "0123456789abcdef" for ch in sid), "Mcp-Session-Id: %r" % sid)
    r2, _ = post({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INIT})
    check(r2.getheader("Mcp-Session-Id") not in (None, sid), "another initialize, another id")
    eq(None, post({"jsonrpc": "2.0", "id": 2, "method": "ping"})[0].getheader("Mcp-Session-Id"),
       "no Mcp-Session-Id but on initialize")


def main():
    global FAILED
    for fn in TESTS:
        name = "mcp http: " + fn.__name__.replace("_", " ")
        try:
            fn(None)
            print("ok " + name, flush=True)
        except Exception as e:  # noqa: BLE001
            FAILED += 1
            why = str(e) if isinstance(e, Fail) else traceback.format_exc().replace("\n", " | ")
            print("not ok %s # %s" % (name, why), flush=True)
    return 1 if FAILED else 0


if __name__ == "__main__":
    sys.exit(main())
