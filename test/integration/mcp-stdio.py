#!/usr/bin/env python3
"""Drives `station-sandbox mcp` over stdio with JSON-RPC (both protocol revisions) against a
real controller and real container workspaces; prints `ok NAME` / `not ok NAME # why` lines.

Usage: mcp-stdio.py CLI SOCKET IMAGE HOST_WS PREVIEW_PORT
  CLI          the station-sandbox binary
  SOCKET       the controller's unix socket
  IMAGE        a busybox image reference (name@sha256:...) in the controller's store
  HOST_WS      a host workspace made by the test (the MCP server must refuse it by default)
  PREVIEW_PORT the port of the controller's preview listener on 127.0.0.1

Every wait is bounded and waits for a condition, never for time to pass."""

import base64
import http.client
import json
import os
import select
import socket
import subprocess
import sys
import time
import traceback
import urllib.parse

CLI, SOCK, IMAGE, HOST_WS, PREVIEW_PORT = sys.argv[1:6]
MODERN = "2026-07-28"
FAILED = 0


class Fail(Exception):
    pass


def check(cond, what):
    if not cond:
        raise Fail(what)


def eq(want, got, what):
    if want != got:
        raise Fail("%s: expected %r, got %r" % (what, want, got if len(repr(got)) < 600 else repr(got)[:600] + "..."))


class UnixHTTP(http.client.HTTPConnection):
    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(120)
        self.sock.connect(SOCK)


def api(method, path, body=None):
    c = UnixHTTP("station")
    headers = {"Content-Type": "application/json"} if body is not None else {}
    c.request(method, path, json.dumps(body) if body is not None else None, headers)
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, json.loads(data) if data else None


def wait_until(pred, what, timeout=60):
    end = time.monotonic() + timeout
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() > end:
            raise Fail("timed out waiting for " + what)
        time.sleep(0.05)


def pgrep(pattern):
    r = subprocess.run(["pgrep", "-f", pattern], capture_output=True, text=True)
    return [p for p in r.stdout.split() if p]


class Mcp:
    """One `station-sandbox mcp` process."""

    def __init__(self, *args):
        self.err = open(os.path.join(os.environ.get("TMP", "/tmp"), "mcp-stderr.log"), "ab")
        self.p = subprocess.Popen([CLI, "--socket", SOCK, "mcp", *args], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=self.err)
        self.buf = b""
        self.next_id = 1
        self.notes = []
        self.modern = False

    def send_raw(self, data):
        self.p.stdin.write(data)
        self.p.stdin.flush()

    def send(self, msg):
        self.send_raw(json.dumps(msg).encode() + b"\n")

    def recv(self, timeout=120):
        end = time.monotonic() + timeout
        while b"\n" not in self.buf:
            left = end - time.monotonic()
            if left <= 0:
                raise Fail("no message from the server within %d s" % timeout)
            r, _, _ = select.select([self.p.stdout], [], [], left)
            if r:
                chunk = os.read(self.p.stdout.fileno(), 1 << 20)
                if not chunk:
                    raise Fail("the server closed its output")
                self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        try:
            return json.loads(line)
        except ValueError:
            raise Fail("not JSON on stdout: %r" % line[:200])

    def meta(self, params):
        if self.modern:
            m = params.setdefault("_meta", {})
            m.setdefault("io.modelcontextprotocol/protocolVersion", MODERN)
            m.setdefault("io.modelcontextprotocol/clientCapabilities", {})
        return params

    def start(self, method, params=None):
        rid = self.next_id
        self.next_id += 1
        msg = {"jsonrpc": "2.0", "id": rid, "method": method}
        msg["params"] = self.meta(dict(params or {}))
        self.send(msg)
        return rid

    def wait(self, rid, timeout=120):
        while True:
            m = self.recv(timeout)
            if m.get("id") == rid and "method" not in m:
                return m
            if "method" in m:
                self.notes.append(m)
            else:
                raise Fail("unexpected message %r while waiting for %r" % (m, rid))

    def request(self, method, params=None, timeout=120):
        return self.wait(self.start(method, params), timeout)

    def call(self, tool, args=None, meta=None, timeout=120):
        params = {"name": tool, "arguments": args or {}}
        if meta:
            params["_meta"] = meta
        r = self.request("tools/call", params, timeout)
        check("result" in r, "tools/call %s: %r" % (tool, r))
        return r["result"]

    def ok(self, tool, args=None, **kw):
        res = self.call(tool, args, **kw)
        check(res.get("isError") is False, "%s failed: %s" % (tool, json.dumps(res)[:500]))
        sc = res["structuredContent"]
        eq(sc, json.loads(res["content"][0]["text"]), tool + ": text block is the structured JSON")
        return sc

    def tool_error(self, tool, args):
        res = self.call(tool, args)
        check(res.get("isError") is True, "%s should fail: %s" % (tool, json.dumps(res)[:300]))
        return res["content"][0]["text"]

    def initialize(self):
        r = self.request("initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                                        "clientInfo": {"name": "test", "version": "1"}})
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return r

    def close(self):
        try:
            self.p.stdin.close()
        except BrokenPipeError:
            pass
        try:
            return self.p.wait(60)
        finally:
            self.err.close()


TESTS = []


def test(fn):
    TESTS.append(fn)
    return fn


STATE = {}
TOOLS = {"workspace_create", "workspace_list", "workspace_get", "workspace_delete",
         "workspace_restart", "exec", "run_wait", "run_cancel", "run_output", "service_start",
         "service_list", "service_logs", "service_stop", "file_read", "file_write", "file_list",
         "port_expose", "port_list", "port_revoke", "workspace_pause", "workspace_resume",
         "workspace_fork", "snapshot_create", "workspace_usage", "code_execute"}


@test
def legacy_initialize_and_tools_list(m):
    r = m.initialize()
    res = r["result"]
    eq("2025-11-25", res["protocolVersion"], "negotiated version")
    eq({"listChanged": False}, res["capabilities"]["tools"], "tools capability")
    eq("station-sandbox", res["serverInfo"]["name"], "serverInfo.name")
    tools = m.request("tools/list")["result"]["tools"]
    eq(TOOLS, {t["name"] for t in tools}, "tool names")
    by = {t["name"]: t for t in tools}
    for t in tools:
        eq("object", t["inputSchema"]["type"], t["name"] + " inputSchema")
        eq("object", t["outputSchema"]["type"], t["name"] + " outputSchema")
    for n in ("workspace_list", "workspace_get", "service_logs", "file_read", "run_output", "file_list",
              "port_list", "workspace_usage"):
        eq(True, by[n]["annotations"]["readOnlyHint"], n + " readOnlyHint")
    eq(False, by["port_expose"]["annotations"]["readOnlyHint"], "port_expose is not read-only")
    eq(["workspaceId", "port"], by["port_expose"]["inputSchema"]["required"], "port_expose required")
    for n in ("workspace_delete", "run_cancel", "service_stop", "port_revoke"):
        eq(True, by[n]["annotations"]["destructiveHint"], n + " destructiveHint")
    eq(False, by["exec"]["annotations"]["readOnlyHint"], "exec is not read-only")
    check("adapter" not in by["workspace_create"]["inputSchema"]["properties"],
          "the adapter is not offered without --adapters host")
    eq(["command"], by["exec"]["inputSchema"]["required"], "exec required")
    for n in ("workspace_pause", "workspace_resume", "workspace_fork", "snapshot_create"):
        eq(["workspaceId"], by[n]["inputSchema"]["required"], n + " required")
        eq(False, by[n]["annotations"]["readOnlyHint"], n + " is not read-only")
    eq(True, by["workspace_pause"]["annotations"]["idempotentHint"], "pause is idempotent")
    eq({"type": "integer", "minimum": 1, "maximum": 100},
       {k: v for k, v in by["workspace_fork"]["inputSchema"]["properties"]["count"].items()
        if k != "description"}, "fork count schema")
    check("snapshot" in by["workspace_create"]["inputSchema"]["properties"],
          "workspace_create takes a snapshot")
    eq({}, m.request("ping")["result"], "ping")


@test
def modern_discover_and_meta(m):
    m.modern = True
    r = m.request("server/discover")["result"]
    check(MODERN in r["supportedVersions"] and "2025-11-25" in r["supportedVersions"],
          "supportedVersions: %r" % r["supportedVersions"])
    eq("complete", r["resultType"], "resultType")
    eq({"listChanged": False}, r["capabilities"]["tools"], "capabilities")
    tools = m.request("tools/list")["result"]
    eq(TOOLS, {t["name"] for t in tools["tools"]}, "tool names without a handshake")
    bad = m.request("tools/list", {"_meta": {"io.modelcontextprotocol/protocolVersion": "2099-01-01",
                                             "io.modelcontextprotocol/clientCapabilities": {}}})
    eq(-32022, bad["error"]["code"], "unsupported version code")
    eq("2099-01-01", bad["error"]["data"]["requested"], "data.requested")
    check(MODERN in bad["error"]["data"]["supported"], "data.supported")
    m.modern = False  # this request sets its own _meta
    nocap = m.request("tools/list", {"_meta": {"io.modelcontextprotocol/protocolVersion": MODERN}})
    m.modern = True
    eq(-32602, nocap["error"]["code"], "missing clientCapabilities")
    check("clientCapabilities" in nocap["error"]["message"], "message names the field")


@test
def workspace_tools(m):
    m.modern = True
    ws = m.ok("workspace_create", {"image": IMAGE, "env": {"GREETING": "hi"}, "memoryMb": 256})
    eq("ready", ws["state"], "state")
    eq("container", ws["adapter"], "adapter")
    eq(256, ws["memoryMb"], "memoryMb")
    STATE["ws"] = ws["id"]
    eq(ws["id"], m.ok("workspace_get", {"workspaceId": ws["id"]})["id"], "get")
    ids = [w["id"] for w in m.ok("workspace_list")["workspaces"]]
    check(ws["id"] in ids, "listed")
    check(HOST_WS not in ids, "the host workspace is not listed by a container-only server")
    eq("ready", m.ok("workspace_restart", {"workspaceId": ws["id"]})["state"], "restart")


@test
def workspace_usage(m):
    ws = STATE["ws"]

    def sampled():
        r = m.ok("workspace_usage", {"workspaceId": ws, "since": "10m", "step": "1s"})
        if len(r["samples"]) < 2:
            time.sleep(0.5)
            return None
        return r
    # The controller samples every 5 s: two points come within 10 s.
    r = wait_until(sampled, "two usage points", 60)
    eq(ws, r["workspaceId"], "workspaceId")
    eq(1000, r["stepMs"], "stepMs: the step asked")
    eq(256 * 1024 * 1024, r["limits"]["memoryBytes"], "the memory limit")
    keys = {"t", "cpu", "memoryBytes", "memoryMaxBytes", "pids", "rxBytes", "txBytes", "spanMs"}
    check(all(keys <= set(p) for p in r["samples"]), "every point's fields: %r" % r["samples"][0])
    check(all(p["memoryBytes"] > 0 for p in r["samples"]), "memory in use in every point")
    # The API's own answer has the same points (the newest may have grown since).
    status, direct = api("GET", "/v1/workspaces/%s/usage?since=10m&step=1s" % ws)
    eq(200, status, "the API's history")
    tool_t = [p["t"] for p in r["samples"][:-1]]
    eq(r["samples"][:-1], [p for p in direct["samples"] if p["t"] in tool_t], "the API's points")
    # Without since and step: the last hour, a point per sampling interval.
    eq(5000, m.ok("workspace_usage", {"workspaceId": ws})["stepMs"], "the default step")
    msg = m.tool_error("workspace_usage", {"workspaceId": ws, "step": "2x"})
    check(msg.startswith("step '2x'"), "a bad step is named: %r" % msg)
    msg = m.tool_error("workspace_usage", {"workspaceId": ws, "since": "yesterday"})
    check(msg.startswith("since 'yesterday'"), "a bad since is named: %r" % msg)
    msg = m.tool_error("workspace_usage", {"workspaceId": ws, "window": "1h"})
    check("unknown argument 'window'" in msg, "an unknown argument: %r" % msg)
    msg = m.tool_error("workspace_usage", {"workspaceId": HOST_WS})
    check("host adapter" in msg, "a workspace of an adapter not offered: %r" % msg)


@test
def exec_result(m):
    ws = STATE["ws"]
    r = m.ok("exec", {"workspaceId": ws, "command": "echo out; echo err >&2; echo $GREETING; exit 3"})
    eq("exited", r["status"], "status")
    eq(3, r["exitCode"], "exitCode (a normal result)")
    eq("out\nhi\n", r["stdout"]["head"], "stdout")
    eq("err\n", r["stderr"]["head"], "stderr")
    eq(False, r["stdout"]["truncated"], "truncated")
    eq(7, r["stdout"]["bytes"], "bytes")
    eq(None, r["more"], "nothing more to read")
    r = m.ok("exec", {"workspaceId": ws, "command": 'cat; echo "$FOO"; pwd', "stdin": "in\n",
                      "env": {"FOO": "bar"}, "cwd": "/tmp"})
    eq("in\nbar\n/tmp\n", r["stdout"]["head"], "stdin, env, cwd")
    r = m.ok("exec", {"workspaceId": ws, "command": "sleep 30", "timeoutMs": 200})
    eq("timed_out", r["status"], "timeoutMs")
    # Without workspaceId: a new container workspace, named in the result for later calls.
    r = m.ok("exec", {"command": "echo fresh"})
    eq("fresh\n", r["stdout"]["head"], "exec in a new workspace")
    check(r["workspaceId"] != ws, "a new workspace")
    eq("container", m.ok("workspace_get", {"workspaceId": r["workspaceId"]})["adapter"], "its adapter")
    eq("deleted", m.ok("workspace_delete", {"workspaceId": r["workspaceId"]})["state"], "deleted")


def touch_via_api(ws, path):
    st, body = api("POST", "/v1/workspaces/%s/commands?waitMs=30000" % ws, {"command": "touch " + path})
    eq(201, st, "touch through the API")


@test
def exec_handle_then_run_wait(m):
    ws = STATE["ws"]
    cmd = "echo started; while [ ! -e /tmp/go1 ]; do usleep 20000; done; echo finished"
    r = m.ok("exec", {"workspaceId": ws, "command": cmd, "waitMs": 300})
    eq("running", r["status"], "status after waitMs")
    run = r["runId"]
    check(run.startswith("r-"), "runId %r" % run)
    check("run_wait" in r["more"], "the result says how to go on: %r" % r["more"])
    r2 = m.ok("run_wait", {"runId": run, "waitMs": 100})
    eq("running", r2["status"], "still running")
    touch_via_api(ws, "/tmp/go1")
    r3 = m.ok("run_wait", {"runId": run, "waitMs": 120000})
    eq("exited", r3["status"], "status after run_wait")
    eq("started\nfinished\n", r3["stdout"]["head"], "output")
    # A server that did not start the run finds it by its id alone.
    other = Mcp()
    try:
        eq("exited", other.ok("run_wait", {"runId": run})["status"], "another server's run_wait")
    finally:
        other.close()


@test
def progress_notifications(m):
    ws = STATE["ws"]
    cmd = "echo started; while [ ! -e /tmp/go2 ]; do usleep 20000; done; echo done"
    rid = m.start("tools/call", {"name": "exec", "arguments": {"workspaceId": ws, "command": cmd,
                                                               "waitMs": 120000},
                                 "_meta": {"progressToken": "tok-1"}})
    note = m.recv(120)
    eq("notifications/progress", note.get("method"), "first message is a progress notification")
    eq("tok-1", note["params"]["progressToken"], "progressToken")
    check(note["params"]["progress"] >= 8, "progress counts bytes: %r" % note["params"])
    touch_via_api(ws, "/tmp/go2")
    r = m.wait(rid)
    eq("exited", r["result"]["structuredContent"]["status"], "status")
    eq("started\ndone\n", r["result"]["structuredContent"]["stdout"]["head"], "output")


@test
def cancel_notification_kills_tree(m):
    ws = STATE["ws"]
    rid = m.start("tools/call", {"name": "exec", "arguments": {
        "workspaceId": ws, "command": "sleep 1000.4242 & (sleep 1000.4243 &) ; sleep 1000.4244", "waitMs": 120000}})
    wait_until(lambda: len(pgrep("sleep 1000.424")) == 3, "the three sleeps to run")
    m.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": rid, "reason": "test"}})
    pong = m.start("ping")
    r = m.wait(pong)  # raises on a response to the cancelled request
    eq({}, r["result"], "ping after the cancel")
    wait_until(lambda: not pgrep("sleep 1000.424"), "every process of the run to be gone")
    st, body = api("GET", "/v1/workspaces/%s/commands?limit=1" % ws)
    eq("cancelled", body["commands"][0]["status"], "the run's status")


@test
def huge_output_head_tail_and_run_output(m):
    ws = STATE["ws"]
    total = 5000000
    r = m.ok("exec", {"workspaceId": ws, "command": "yes 0123456789 | head -c %d" % total,
                      "maxOutputBytes": 1048576})
    out = r["stdout"]
    eq(total, out["bytes"], "bytes")
    eq(True, out["truncated"], "truncated")
    pat = b"0123456789\n"

    def expect(off, n):
        return bytes(pat[(off + i) % 11] for i in range(n)).decode()
    eq(expect(0, out["headBytes"]), out["head"], "head")
    eq(expect(total - out["tailBytes"], out["tailBytes"]), out["tail"], "tail")
    check(out["headBytes"] + out["tailBytes"] <= 16384, "shown bytes bounded")
    eq(total - out["headBytes"] - out["tailBytes"], out["omittedBytes"], "omittedBytes")
    check("run_output" in r["more"], "more: %r" % r["more"])
    check(len(json.dumps(r)) < 64 * 1024, "result size bounded")
    ro = m.ok("run_output", {"runId": r["runId"], "offset": out["headBytes"], "maxBytes": 100})
    eq(expect(out["headBytes"], 100), ro["data"], "run_output data")
    eq(out["headBytes"] + 100, ro["next"], "next")
    tail = m.ok("run_output", {"workspaceId": ws, "runId": r["runId"], "offset": total - 11, "maxBytes": 1000})
    eq(expect(total - 11, 11), tail["data"], "the last bytes")
    eq(None, tail["next"], "end")
    msg = m.tool_error("run_output", {"runId": r["runId"], "offset": 600000})
    check("not kept" in msg, "a part not kept is named: %r" % msg)


@test
def binary_output_base64(m):
    r = m.ok("exec", {"workspaceId": STATE["ws"], "command": r"printf '\000\001\377abc'"})
    out = r["stdout"]
    eq("base64", out["encoding"], "encoding")
    eq(b"\x00\x01\xffabc", base64.b64decode(out["head"]), "bytes")
    eq(6, out["headBytes"], "length")
    eq(6, out["bytes"], "bytes")


@test
def files(m):
    ws = STATE["ws"]
    e = m.ok("file_write", {"workspaceId": ws, "path": "notes/a.txt", "content": "hello\n", "parents": True})
    eq("file", e["type"], "written entry")
    r = m.ok("file_read", {"workspaceId": ws, "path": "notes/a.txt"})
    eq("hello\n", r["content"], "read back")
    eq(True, r["eof"], "eof")
    m.ok("file_write", {"workspaceId": ws, "path": "notes/b.bin", "encoding": "base64",
                        "content": base64.b64encode(b"\x00\xfe\xff").decode()})
    r = m.ok("file_read", {"workspaceId": ws, "path": "notes/b.bin"})
    eq("base64", r["encoding"], "binary file encoding")
    eq(b"\x00\xfe\xff", base64.b64decode(r["content"]), "binary content")
    names = [x["name"] for x in m.ok("file_list", {"workspaceId": ws, "path": "notes"})["entries"]]
    eq(["a.txt", "b.bin"], names, "listing")
    r = m.ok("exec", {"workspaceId": ws, "command": "cat notes/a.txt"})
    eq("hello\n", r["stdout"]["head"], "the command sees the file")
    msg = m.tool_error("file_read", {"workspaceId": ws, "path": "notes/missing"})
    check("missing" in msg, "names the path: %r" % msg)


@test
def services(m):
    ws = STATE["ws"]
    s = m.ok("service_start", {"workspaceId": ws, "name": "web", "command": "echo up; exec sleep 1000.5151"})
    eq("web", s["name"], "name")
    eq(["web"], [x["name"] for x in m.ok("service_list", {"workspaceId": ws})["services"]], "listed")
    logs = wait_until(lambda: (lambda l: l if l["stdout"]["head"] == "up\n" else None)(
        m.ok("service_logs", {"workspaceId": ws, "name": "web", "waitMs": 200})), "the service's output")
    eq("web", logs["name"], "logs name")
    m.ok("service_stop", {"workspaceId": ws, "name": "web"})
    wait_until(lambda: m.ok("service_list", {"workspaceId": ws})["services"][0]["state"] == "stopped",
               "the service to stop")


def preview_get(url, token=None):
    """GET url through the controller's preview listener (its Host header the URL's host):
    (status, body)."""
    u = urllib.parse.urlsplit(url)
    c = http.client.HTTPConnection("127.0.0.1", int(PREVIEW_PORT), timeout=30)
    try:
        h = {"Host": u.netloc}
        if token:
            h["Authorization"] = "Bearer " + token
        c.request("GET", u.path or "/", headers=h)
        r = c.getresponse()
        return r.status, r.read()
    finally:
        c.close()


@test
def ports(m):
    ws = STATE["ws"]  # a container workspace with network none
    m.ok("service_start", {"workspaceId": ws, "name": "www", "command":
                           "mkdir -p www && echo hello-preview > www/index.html && "
                           "exec busybox httpd -f -p 127.0.0.1:3000 -h www"})
    wait_until(lambda: 3000 in [x["port"] for x in m.ok("port_list", {"workspaceId": ws})["listening"]],
               "httpd listening on 3000 in port_list")
    e = m.ok("port_expose", {"workspaceId": ws, "port": 3000, "expiresInMs": 600000})
    eq(3000, e["port"], "port")
    eq("token", e["access"], "token access by default")
    check(len(e.get("token", "")) >= 16, "a token: %r" % e)
    eq(e["url"] + "?station_preview_token=" + urllib.parse.quote(e["token"], safe=""), e["openUrl"], "openUrl")
    # The URL answers with the token, 401 without (its positive control the line after).
    eq(401, preview_get(e["url"])[0], "no token")
    eq((200, b"hello-preview\n"), preview_get(e["url"], e["token"]), "through the preview with the token")
    listed = m.ok("port_list", {"workspaceId": ws})
    eq([3000], [x["port"] for x in listed["exposed"]], "exposed listed")
    check("token" not in listed["exposed"][0], "a list shows no token")
    msg = m.tool_error("port_expose", {"workspaceId": ws, "port": 3000})
    check("exposed" in msg, "a second expose of the port is refused: %r" % msg)
    msg = m.tool_error("port_expose", {"workspaceId": ws})
    check("'port'" in msg, "port is required: %r" % msg)
    msg = m.tool_error("port_expose", {"workspaceId": ws, "port": 70000})
    check("'port'" in msg, "a port out of range is named: %r" % msg)
    eq({"port": 3000, "revoked": True}, m.ok("port_revoke", {"workspaceId": ws, "port": 3000}), "revoke")
    eq(404, preview_get(e["url"], e["token"])[0], "a revoked URL is 404")
    m.tool_error("port_revoke", {"workspaceId": ws, "port": 3000})
    p = m.ok("port_expose", {"workspaceId": ws, "port": 3000, "public": True})
    eq("public", p["access"], "public access")
    check("token" not in p and "openUrl" not in p, "a public exposure has no token: %r" % p)
    eq((200, b"hello-preview\n"), preview_get(p["url"]), "public: no token needed")
    m.ok("port_revoke", {"workspaceId": ws, "port": 3000})
    m.ok("service_stop", {"workspaceId": ws, "name": "www"})


@test
def pause_snapshot_fork(m):
    src = m.ok("workspace_create", {"image": IMAGE})["id"]
    made, snaps = [src], []
    try:
        m.ok("file_write", {"workspaceId": src, "path": "state.txt", "content": "before\n"})
        p = m.ok("workspace_pause", {"workspaceId": src})
        eq("paused", p["state"], "pause")
        eq("paused", m.ok("workspace_pause", {"workspaceId": src})["state"], "pause again")
        msg = m.tool_error("exec", {"workspaceId": src, "command": "true"})
        check("paused" in msg, "exec on a paused workspace names why: %r" % msg)
        eq("before\n", m.ok("file_read", {"workspaceId": src, "path": "state.txt"})["content"],
           "files are read while paused")
        eq("ready", m.ok("workspace_resume", {"workspaceId": src})["state"], "resume")
        eq("", m.ok("exec", {"workspaceId": src, "command": "true"})["stdout"]["head"],
           "exec after resume (the control)")
        snap = m.ok("snapshot_create", {"workspaceId": src, "name": "before"})
        check(snap["id"].startswith("s-"), "snapshot id: %r" % snap)
        snaps.append(snap["id"])
        eq(src, snap["workspaceId"], "snapshot workspaceId")
        eq("before", snap["name"], "snapshot name")
        m.ok("file_write", {"workspaceId": src, "path": "state.txt", "content": "after\n"})
        w = m.ok("workspace_create", {"snapshot": snap["id"]})
        made.append(w["id"])
        eq("before\n", m.ok("exec", {"workspaceId": w["id"], "command": "cat state.txt"})["stdout"]["head"],
           "a workspace from the snapshot has the file as it was")
        f = m.ok("workspace_fork", {"workspaceId": src, "count": 2})
        ids = [x["id"] for x in f["workspaces"]]
        made.extend(ids)
        snaps.append(f["snapshot"])
        eq(2, len(ids), "two forks")
        check(f["snapshot"].startswith("s-"), "fork's snapshot: %r" % f)
        m.ok("file_write", {"workspaceId": ids[0], "path": "state.txt", "content": "fork0\n"})
        eq("after\n", m.ok("file_read", {"workspaceId": ids[1], "path": "state.txt"})["content"],
           "a write in one fork is not in the other")
        eq("after\n", m.ok("file_read", {"workspaceId": src, "path": "state.txt"})["content"],
           "nor in the source")
        for bad in (0, 101):
            msg = m.tool_error("workspace_fork", {"workspaceId": src, "count": bad})
            check("'count'" in msg, "count %d refused by name: %r" % (bad, msg))
        msg = m.tool_error("snapshot_create", {"workspaceId": src, "memory": "yes"})
        check("'memory'" in msg, "memory must be a boolean: %r" % msg)
        msg = m.tool_error("workspace_pause", {"workspaceId": HOST_WS})
        check("host adapter" in msg, "a host workspace is refused by a container-only server: %r" % msg)
    finally:
        for ws in made:
            api("DELETE", "/v1/workspaces/" + ws)
        for sid in snaps:
            api("DELETE", "/v1/snapshots/" + sid)


@test
def jsonrpc_errors(m):
    m.send_raw(b"{not json\n")
    r = m.recv()
    eq(-32700, r["error"]["code"], "parse error")
    eq(None, r["id"], "parse error id")
    m.send({"jsonrpc": "2.0", "id": 77})
    eq(-32600, m.wait(77)["error"]["code"], "invalid request")
    m.send([{"jsonrpc": "2.0", "id": 78, "method": "ping"}])
    eq(-32600, m.recv()["error"]["code"], "a batch")
    eq(-32601, m.request("no/such/method")["error"]["code"], "unknown method")
    r = m.request("tools/call", {"name": "no_such_tool", "arguments": {}})
    eq(-32602, r["error"]["code"], "unknown tool")
    msg = m.tool_error("exec", {"workspaceId": STATE["ws"]})
    check("'command'" in msg, "a missing argument is named: %r" % msg)
    before = len(m.ok("workspace_list")["workspaces"])
    m.tool_error("exec", {"command": "true", "timeoutMs": -1})
    eq(before, len(m.ok("workspace_list")["workspaces"]), "a bad call creates no workspace")
    msg = m.tool_error("exec", {"workspaceId": STATE["ws"], "command": "true", "timeoutMs": "x"})
    check("'timeoutMs'" in msg, "a bad argument is named: %r" % msg)
    msg = m.tool_error("exec", {"workspaceId": STATE["ws"], "command": "true", "bogus": 1})
    check("'bogus'" in msg, "an unknown argument is named: %r" % msg)
    msg = m.tool_error("exec", {"workspaceId": "test-nosuchworkspace", "command": "true"})
    check("not found" in msg, "unknown workspace: %r" % msg)
    eq({}, m.request("ping")["result"], "still serving")


@test
def operator_limits(m):
    msg = m.tool_error("exec", {"workspaceId": HOST_WS, "command": "true"})
    check("host adapter" in msg, "a host workspace is refused by default: %r" % msg)
    msg = m.tool_error("workspace_create", {"adapter": "host"})
    check("not offered" in msg, "no host workspaces by default: %r" % msg)
    msg = m.tool_error("workspace_create", {"image": IMAGE, "network": "bridge"})
    check("not allowed" in msg, "network bridge refused by default: %r" % msg)
    limited = Mcp("--no-delete", "--max-memory-mb", "512", "--adapters", "container,host")
    try:
        limited.initialize()
        names = {t["name"] for t in limited.request("tools/list")["result"]["tools"]}
        eq(TOOLS - {"workspace_delete"}, names, "--no-delete hides workspace_delete")
        r = limited.request("tools/call", {"name": "workspace_delete", "arguments": {"workspaceId": STATE["ws"]}})
        eq(-32602, r["error"]["code"], "workspace_delete refused")
        msg = limited.tool_error("workspace_create", {"image": IMAGE, "memoryMb": 1024})
        check("'memoryMb'" in msg, "above the maximum: %r" % msg)
        # Positive control: the operator allowed host.
        r = limited.ok("exec", {"workspaceId": HOST_WS, "command": "echo host"})
        eq("host\n", r["stdout"]["head"], "host allowed by --adapters")
        # A host snapshot decides the adapter of a create that names none (a host snapshot
        # holds HOME only); the container-only server refuses it as the host adapter.
        snap = limited.ok("snapshot_create", {"workspaceId": HOST_WS})
        try:
            eq("host", snap.get("adapter"), "a host workspace's snapshot")
            msg = m.tool_error("workspace_create", {"snapshot": snap["id"]})
            check("not offered" in msg, "host snapshot on a container-only server: %r" % msg)
            w = limited.ok("workspace_create", {"snapshot": snap["id"]})
            try:
                eq("host", w["adapter"], "a create from a host snapshot naming no adapter")
            finally:
                api("DELETE", "/v1/workspaces/" + w["id"])
        finally:
            api("DELETE", "/v1/snapshots/" + snap["id"])
    finally:
        limited.close()


@test
def workspace_delete(m):
    r = m.ok("workspace_delete", {"workspaceId": STATE["ws"]})
    eq("deleted", r["state"], "state")
    msg = m.tool_error("workspace_get", {"workspaceId": STATE["ws"]})
    check("not found" in msg, "gone: %r" % msg)


def main():
    global FAILED
    m = Mcp("--image", IMAGE)
    for fn in TESTS:
        name = "mcp stdio: " + fn.__name__.replace("_", " ")
        m.modern = fn.__name__ not in ("legacy_initialize_and_tools_list", "jsonrpc_errors", "operator_limits")
        try:
            if fn.__name__ != "legacy_initialize_and_tools_list" and m.p.poll() is not None:
                raise Fail("the server exited (status %r)" % m.p.returncode)
            fn(m)
            print("ok " + name, flush=True)
        except Exception as e:  # noqa: BLE001
            FAILED += 1
            why = str(e) if isinstance(e, Fail) else traceback.format_exc().replace("\n", " | ")
            print("not ok %s # %s" % (name, why.replace("\n", " ")), flush=True)
            if not isinstance(e, Fail) or "server" in str(e):
                m.close()
                m = Mcp("--image", IMAGE)
                m.initialize()
    # Ends when its input closes, after answering what it read.
    try:
        m.send({"jsonrpc": "2.0", "id": 999, "method": "ping"})
        m.p.stdin.close()
        r = m.recv(60)
        eq(999, r.get("id"), "the last request is answered")
        eq(0, m.p.wait(60), "exit status")
        print("ok mcp stdio: exits when stdin closes", flush=True)
    except Exception as e:  # noqa: BLE001
        FAILED += 1
        print("not ok mcp stdio: exits when stdin closes # %s" % e, flush=True)
    return 1 if FAILED else 0


if __name__ == "__main__":
    sys.exit(main())
