#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The outside world of the network tests: the services of hosts that live in a network namespace
the test made (test/integration/net-world.sh starts this inside it). Standard library only.

usage: net-world.py serve [--dns ADDR:PORT --zone FILE --dns-log FILE [--dns-wire-log FILE]
                          [--dns-slow-ms MS]]
                          [--http ADDR:PORT:ROLE]... [--git-root DIR] [--git-token-file FILE]
                          [--registry-root DIR]
                          [--http-log FILE] [--echo ADDR:PORT]... [--udp-sink ADDR:PORT
                          --udp-log FILE] [--https ADDR:PORT:ROLE --tls-cert FILE --tls-key FILE]...
                          [--proxy ADDR:PORT --proxy-log FILE]... --ready FILE
       net-world.py registry DIR NAME VERSION BASE_URL MESSAGE

serve runs every service in one process (threads) until SIGTERM:
  dns       an authoritative responder: A/AAAA records from FILE ("name A addr [ttl]", "name
            AAAA addr [ttl]", one a line, re-read for each query; a "$TTL n" line sets the TTL of
            the records that name none, 60 s without one), NXDOMAIN for a name it does not have,
            NOERROR without answers for a type the name lacks; each query is logged to the log
            file as "PEER NAME TYPE RCODE". What else the message held goes to the wire log
            (default: dns-wire.log beside the log), one line a datagram: "PEER NAME qd=N an=N
            ns=N ar=N flags=0xHHHH edns=SIZE|none do=0|1 opts=CODE,...|none" (NAME "-" when
            the question cannot be read). A name under slow.example.test is answered after
            --dns-slow-ms (default 2000), the other queries meanwhile at once.
  http      ROLE git: git's smart HTTP (git http-backend) for the repositories in --git-root;
            a repository whose name starts with "private" answers only requests with HTTP
            basic auth of user x-access-token and the token in --git-token-file (read per
            request), 401 with a Basic challenge otherwise (the token is never logged);
            ROLE registry: an npm registry serving <root>/<name>.json at /<name> and the tarballs
            at /<name>/-/<file>; ROLE other (or any other word): answers 200 "ROLE host=<Host
            header>". Each request is logged as "ROLE LOCAL PEER METHOD PATH HOST STATUS".
  echo      TCP: sends "peer <address>\\n" (the address the connection came from) and closes.
  udp-sink  records each datagram as "PEER LENGTH DATA" (DATA: its first 64 bytes, escaped).
  https     ADDR:PORT:ROLE as http, over TLS with the certificate --tls-cert and key --tls-key.
  proxy     an HTTP proxy: CONNECT HOST:PORT tunnels, absolute-URI requests are forwarded;
            names are looked up in the --zone file; each request logged to --proxy-log as
            "PEER METHOD TARGET STATUS".
ADDR is an IPv4 address or an IPv6 one in brackets.

registry writes into DIR a package NAME@VERSION whose index.js exports message() returning
MESSAGE: the tarball <DIR>/NAME-VERSION.tgz (made here, deterministic) and the packument
<DIR>/NAME.json with dist.tarball BASE_URL/NAME/-/NAME-VERSION.tgz, dist.shasum (sha1) and
dist.integrity (sha512), and prints {"resolved", "integrity", "shasum"} for a package-lock.
"""
import argparse
import base64
import gzip
import hashlib
import hmac
import io
import json
import os
import signal
import socket
import socketserver
import struct
import subprocess
import ssl
import sys
import tarfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MAX_BODY = 16 << 20
MTIME = 1700000000
_log_lock = threading.Lock()


def log_line(path, line):
    if not path:
        return
    with _log_lock, open(path, "a", encoding="utf-8") as f:
        f.write(line + "\n")


def parse_addr(s):
    """ADDR:PORT[:ROLE] -> (family, host, port, rest)."""
    if s.startswith("["):
        host, _, tail = s[1:].partition("]")
        tail = tail.lstrip(":")
        fam = socket.AF_INET6
    else:
        host, _, tail = s.partition(":")
        fam = socket.AF_INET
    port, _, rest = tail.partition(":")
    return fam, host, int(port), rest


# ---------------------------------------------------------------------------------------------
# DNS

TYPES = {1: "A", 28: "AAAA", 5: "CNAME", 15: "MX", 16: "TXT", 2: "NS", 6: "SOA", 12: "PTR",
         33: "SRV", 65: "HTTPS", 255: "ANY"}


DEFAULT_TTL = 60


def read_zone(path):
    """{name: [(kind, addr, ttl)]}: "name A|AAAA addr [ttl]" lines; a "$TTL n" line (the last one
    wins) is the TTL of every record that names none, DEFAULT_TTL without one."""
    zone, default, records = {}, DEFAULT_TTL, []
    try:
        with open(path, encoding="utf-8") as f:
            for line in f:
                p = line.split()
                if len(p) == 2 and p[0] == "$TTL" and p[1].isdigit():
                    default = int(p[1])
                elif len(p) in (3, 4) and p[1] in ("A", "AAAA"):
                    records.append((p, int(p[3]) if len(p) == 4 and p[3].isdigit() else None))
    except OSError:
        pass
    for p, ttl in records:
        zone.setdefault(p[0].lower().rstrip("."), []).append(
            (p[1], p[2], default if ttl is None else ttl))
    return zone


def dns_answer(query, zone):
    """The response to one query datagram; None when it is not worth an answer."""
    if len(query) < 12 or len(query) > 512:
        return None, None, None
    qid, flags, qd = struct.unpack("!HHH", query[:6])
    if flags & 0x8000 or qd != 1:
        return None, None, None
    labels, i = [], 12
    while True:
        if i >= len(query):
            return None, None, None
        n = query[i]
        if n == 0:
            i += 1
            break
        if n & 0xC0 or i + 1 + n > len(query) or n > 63:
            return None, None, None
        labels.append(query[i + 1:i + 1 + n].decode("ascii", "replace"))
        i += 1 + n
        if sum(len(x) + 1 for x in labels) > 255:
            return None, None, None
    if i + 4 > len(query):
        return None, None, None
    qtype, qclass = struct.unpack("!HH", query[i:i + 4])
    question = query[12:i + 4]
    name = ".".join(labels).lower()
    records = zone.get(name)
    answers = []
    if records is None:
        rcode = 3  # NXDOMAIN
    else:
        rcode = 0
        for kind, addr, ttl in records:
            if (kind == "A" and qtype in (1, 255)) or (kind == "AAAA" and qtype in (28, 255)):
                fam = socket.AF_INET if kind == "A" else socket.AF_INET6
                data = socket.inet_pton(fam, addr)
                answers.append(struct.pack("!HHHIH", 0xC00C, 1 if kind == "A" else 28, 1, ttl,
                                           len(data)) + data)
    rflags = 0x8000 | 0x0400 | (flags & 0x0100) | rcode  # QR, AA, RD copied
    head = struct.pack("!HHHHHH", qid, rflags, 1, len(answers), 0, 0)
    rname = {0: "NOERROR", 3: "NXDOMAIN"}[rcode]
    return head + question + b"".join(answers), name, f"{TYPES.get(qtype, qtype)} {rname}"


def dns_skip_name(msg, i):
    """The offset just past the name at i (labels or a pointer); None when it runs off."""
    while i < len(msg):
        n = msg[i]
        if n & 0xC0 == 0xC0:
            return i + 2 if i + 2 <= len(msg) else None
        if n == 0:
            return i + 1
        i += 1 + n
    return None


def dns_wire(msg):
    """What a query holds beyond its question, for the wire log: counts, flags and EDNS."""
    if len(msg) < 12:
        return "- short"
    _, flags, qd, an, ns, ar = struct.unpack("!HHHHHH", msg[:12])
    name, i = "-", 12
    edns, do, opts = "none", 0, []
    for k in range(qd + an + ns + ar):
        start = i
        i = dns_skip_name(msg, i)
        if i is None:
            break
        if k == 0 and qd:
            labels, j = [], start
            while msg[j] and not msg[j] & 0xC0:
                labels.append(msg[j + 1:j + 1 + msg[j]].decode("ascii", "replace"))
                j += 1 + msg[j]
            name = ".".join(labels).lower() or "."
        if k < qd:
            i += 4
            continue
        if i + 10 > len(msg):
            break
        rtype, rclass, ttl, rdlen = struct.unpack("!HHIH", msg[i:i + 10])
        rdata = msg[i + 10:i + 10 + rdlen]
        i += 10 + rdlen
        if rtype == 41 and k >= qd + an + ns:
            edns, do = str(rclass), (ttl >> 15) & 1
            j = 0
            while j + 4 <= len(rdata):
                code, olen = struct.unpack("!HH", rdata[j:j + 4])
                opts.append(str(code))
                j += 4 + olen
    return (f"{name} qd={qd} an={an} ns={ns} ar={ar} flags=0x{flags:04x} edns={edns} do={do} "
            f"opts={','.join(opts) or 'none'}")


def dns_is_slow(name):
    return name == "slow.example.test" or (name or "").endswith(".slow.example.test")


def serve_dns(addr, zone_path, log_path, wire_log=None, slow_ms=2000):
    fam, host, port, _ = parse_addr(addr)
    sock = socket.socket(fam, socket.SOCK_DGRAM)
    sock.bind((host, port))
    if log_path and not wire_log:
        wire_log = os.path.join(os.path.dirname(log_path), "dns-wire.log")

    def answer(resp, name, what, peer):
        log_line(log_path, f"{peer[0]} {name} {what}")
        sock.sendto(resp, peer)

    def loop():
        while True:
            data, peer = sock.recvfrom(4096)
            log_line(wire_log, f"{peer[0]} {dns_wire(data)}")
            resp, name, what = dns_answer(data, read_zone(zone_path))
            if resp is None:
                log_line(log_path, f"{peer[0]} - malformed")
                continue
            if dns_is_slow(name):
                threading.Timer(slow_ms / 1000, answer, (resp, name, what, peer)).start()
                continue
            answer(resp, name, what, peer)

    threading.Thread(target=loop, daemon=True).start()


# ---------------------------------------------------------------------------------------------
# HTTP

class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True


def make_http(addr, args, tls=None):
    fam, host, port, role = parse_addr(addr)
    role = role or "other"

    class Handler(BaseHTTPRequestHandler):
        server_version = "net-world"
        timeout = 30

        def log_message(self, fmt, *a):
            pass

        def answer(self, status, body, ctype="text/plain"):
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)
            self.logged(status)

        def logged(self, status):
            log_line(args.http_log, f"{role} {host} {self.client_address[0]} {self.command} "
                     f"{self.path[:200]} {self.headers.get('Host', '-')[:100]} {status}")

        def body(self):
            if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                out = b""
                while True:
                    size = int(self.rfile.readline(64).strip().split(b";")[0] or b"0", 16)
                    if size == 0:
                        self.rfile.readline(64)
                        return out
                    out += self.rfile.read(size)
                    self.rfile.readline(64)
                    if len(out) > MAX_BODY:
                        raise ValueError("body too large")
            n = int(self.headers.get("Content-Length") or 0)
            if n > MAX_BODY:
                raise ValueError("body too large")
            return self.rfile.read(n) if n else b""

        def do_GET(self):
            self.handle_any()

        def do_POST(self):
            self.handle_any()

        def do_HEAD(self):
            self.handle_any()

        def handle_any(self):
            try:
                if role == "git":
                    self.git()
                elif role == "registry":
                    self.registry()
                else:
                    text = f"{role} host={self.headers.get('Host', '-')[:100]}\n"
                    self.answer(200, text.encode())
            except (ValueError, OSError) as e:
                self.answer(400, f"{e}\n".encode())

        def registry(self):
            path = self.path.split("?", 1)[0].lstrip("/")
            parts = path.split("/")
            root = args.registry_root
            if len(parts) == 1 and parts[0] and "." not in parts[0]:
                f = os.path.join(root, parts[0] + ".json")
                ctype = "application/json"
            elif len(parts) == 3 and parts[1] == "-" and parts[2].endswith(".tgz") \
                    and "/" not in parts[2] and not parts[2].startswith("."):
                f = os.path.join(root, parts[2])
                ctype = "application/octet-stream"
            else:
                f = None
            if f and os.path.isfile(f):
                with open(f, "rb") as fh:
                    self.answer(200, fh.read(), ctype)
            else:
                self.answer(404, b'{"error":"Not found"}', "application/json")

        def git_authorized(self, path):
            if not path.lstrip("/").startswith("private"):
                return True
            try:
                with open(args.git_token_file, encoding="utf-8") as f:
                    token = f.read().strip()
            except (OSError, TypeError):
                return False
            want = base64.b64encode(f"x-access-token:{token}".encode()).decode()
            got = self.headers.get("Authorization", "")
            return bool(token) and hmac.compare_digest(got.encode(), f"Basic {want}".encode())

        def git(self):
            path, _, query = self.path.partition("?")
            if not self.git_authorized(path):
                if self.command == "POST":
                    self.body()
                self.send_response(401)
                self.send_header("WWW-Authenticate", 'Basic realm="git"')
                self.send_header("Content-Length", "0")
                self.end_headers()
                self.logged(401)
                return
            env = {
                "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
                "GIT_PROJECT_ROOT": args.git_root,
                "GIT_HTTP_EXPORT_ALL": "1",
                "REQUEST_METHOD": self.command,
                "PATH_INFO": path,
                "QUERY_STRING": query,
                "REMOTE_ADDR": self.client_address[0],
                "CONTENT_TYPE": self.headers.get("Content-Type", ""),
                "GATEWAY_INTERFACE": "CGI/1.1",
                "SERVER_PROTOCOL": "HTTP/1.0",
            }
            if self.headers.get("Content-Encoding"):
                env["HTTP_CONTENT_ENCODING"] = self.headers["Content-Encoding"]
            if self.headers.get("Git-Protocol"):
                env["GIT_PROTOCOL"] = self.headers["Git-Protocol"]
            data = self.body() if self.command == "POST" else b""
            env["CONTENT_LENGTH"] = str(len(data))
            p = subprocess.run(["git", "http-backend"], input=data, env=env,
                               capture_output=True, timeout=60, check=False)
            head, _, body = p.stdout.partition(b"\r\n\r\n")
            if not _:
                head, _, body = p.stdout.partition(b"\n\n")
            status, headers = 200, []
            for line in head.decode("latin-1").splitlines():
                k, _, v = line.partition(":")
                if k.lower() == "status":
                    status = int(v.split()[0])
                elif k:
                    headers.append((k, v.strip()))
            self.send_response(status)
            for k, v in headers:
                if k.lower() != "content-length":
                    self.send_header(k, v)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            self.logged(status)

    Server.address_family = fam
    srv = Server((host, port), Handler)
    if tls:
        srv.socket = tls.wrap_socket(srv.socket, server_side=True)
    threading.Thread(target=srv.serve_forever, daemon=True).start()


# ---------------------------------------------------------------------------------------------
# HTTPS and the HTTP proxy

def make_https(addr, args):
    """ADDR:PORT:ROLE as --http, over TLS with --tls-cert and --tls-key."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(args.tls_cert, args.tls_key)
    make_http(addr, args, tls=ctx)


def proxy_resolve(name, zone_path):
    try:
        socket.inet_aton(name)
        return name
    except OSError:
        pass
    try:
        with open(zone_path or "/nonexistent", encoding="utf-8") as f:
            for line in f:
                p = line.split()
                if len(p) >= 3 and p[1] == "A" and p[0].lower().rstrip(".") == name.lower():
                    return p[2]
    except OSError:
        pass
    return None


def pipe(a, b):
    try:
        while True:
            data = a.recv(65536)
            if not data:
                break
            b.sendall(data)
    except OSError:
        pass
    for s in (a, b):
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


def serve_proxy(addr, args):
    """An HTTP proxy: CONNECT HOST:PORT (tunnelled) and absolute-URI requests (forwarded with
    Connection: close); names from the zone. Logged as "PEER METHOD TARGET STATUS"."""
    fam, host, port, _ = parse_addr(addr)

    class Handler(socketserver.StreamRequestHandler):
        def handle(self):
            head = self.rfile.readline(8192).decode("latin-1")
            lines = []
            while True:
                line = self.rfile.readline(8192).decode("latin-1")
                if line in ("\r\n", "\n", ""):
                    break
                lines.append(line)
            parts = head.split()
            if len(parts) != 3:
                return
            method, target, _ = parts
            if method == "CONNECT":
                name, _, p = target.rpartition(":")
                path = None
            else:
                rest = target.split("://", 1)[-1]
                hostport, _, path = rest.partition("/")
                name, _, p = hostport.partition(":")
                p = p or "80"
                path = "/" + path
            address = proxy_resolve(name, args.zone)
            status = 502
            try:
                if not address:
                    raise OSError("unknown host")
                up = socket.create_connection((address, int(p)), timeout=10)
                status = 200
            except (OSError, ValueError):
                self.wfile.write(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")
            log_line(args.proxy_log, f"{self.client_address[0]} {method} {target[:200]} {status}")
            if status != 200:
                return
            if method == "CONNECT":
                self.wfile.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
            else:
                kept = [x for x in lines if not x.lower().startswith(("proxy-", "connection:"))]
                up.sendall((f"{method} {path} HTTP/1.1\r\n" + "".join(kept) +
                            "Connection: close\r\n\r\n").encode("latin-1"))
                n = int(next((x.split(":", 1)[1] for x in lines
                              if x.lower().startswith("content-length:")), "0").strip() or 0)
                if n:
                    up.sendall(self.rfile.read(min(n, MAX_BODY)))
            up.settimeout(None)
            t = threading.Thread(target=pipe, args=(up, self.connection), daemon=True)
            t.start()
            pipe(self.connection, up)
            t.join(30)

    class Srv(socketserver.ThreadingTCPServer):
        daemon_threads = True
        allow_reuse_address = True
        address_family = fam

    srv = Srv((host, port), Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()


# ---------------------------------------------------------------------------------------------
# TCP echo ("who are you") and UDP sink

def serve_echo(addr):
    fam, host, port, _ = parse_addr(addr)

    class Handler(socketserver.BaseRequestHandler):
        def handle(self):
            self.request.settimeout(5)
            try:
                self.request.sendall(f"peer {self.client_address[0]}\n".encode())
            except OSError:
                pass

    class Srv(socketserver.ThreadingTCPServer):
        daemon_threads = True
        allow_reuse_address = True
        address_family = fam

    srv = Srv((host, port), Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()


def serve_udp_sink(addr, log_path):
    fam, host, port, _ = parse_addr(addr)
    sock = socket.socket(fam, socket.SOCK_DGRAM)
    sock.bind((host, port))

    def loop():
        while True:
            data, peer = sock.recvfrom(65535)
            shown = data[:64].decode("ascii", "backslashreplace").replace("\n", "\\n")
            log_line(log_path, f"{peer[0]} {len(data)} {shown}")

    threading.Thread(target=loop, daemon=True).start()


def serve(args):
    if args.dns:
        serve_dns(args.dns, args.zone, args.dns_log, args.dns_wire_log, args.dns_slow_ms)
    for h in args.http:
        make_http(h, args)
    for h in args.https:
        make_https(h, args)
    for p in args.proxy:
        serve_proxy(p, args)
    for e in args.echo:
        serve_echo(e)
    if args.udp_sink:
        serve_udp_sink(args.udp_sink, args.udp_log)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    with open(args.ready, "w", encoding="utf-8") as f:
        f.write(f"{os.getpid()}\n")
    while not stop.wait(3600):
        pass


# ---------------------------------------------------------------------------------------------
# The registry's package

def tar_entry(tf, name, data, mode=0o644):
    ti = tarfile.TarInfo(name)
    ti.mtime, ti.mode, ti.size = MTIME, mode, len(data)
    ti.uname = ti.gname = ""
    tf.addfile(ti, io.BytesIO(data))


def make_registry(a):
    os.makedirs(a.dir, exist_ok=True)
    pkg = {"name": a.name, "version": a.version, "main": "index.js", "license": "MIT",
           "description": "a package of the test registry"}
    index = ("'use strict';\nexports.message = function () { return %s; };\n"
             % json.dumps(a.message)).encode()
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.USTAR_FORMAT) as tf:
        tar_entry(tf, "package/package.json", (json.dumps(pkg, indent=2) + "\n").encode())
        tar_entry(tf, "package/index.js", index)
    gz = io.BytesIO()
    with gzip.GzipFile(fileobj=gz, mode="wb", mtime=0, filename="") as g:
        g.write(raw.getvalue())
    tgz = gz.getvalue()
    fname = f"{a.name}-{a.version}.tgz"
    with open(os.path.join(a.dir, fname), "wb") as f:
        f.write(tgz)
    integrity = "sha512-" + base64.b64encode(hashlib.sha512(tgz).digest()).decode()
    shasum = hashlib.sha1(tgz).hexdigest()
    version = dict(pkg, _id=f"{a.name}@{a.version}",
                   dist={"tarball": f"{a.base_url.rstrip('/')}/{a.name}/-/{fname}",
                         "shasum": shasum, "integrity": integrity})
    doc = {"_id": a.name, "name": a.name, "dist-tags": {"latest": a.version},
           "versions": {a.version: version},
           "time": {a.version: "2023-11-14T22:13:20.000Z"}}
    with open(os.path.join(a.dir, a.name + ".json"), "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=2)
    print(json.dumps({"resolved": version["dist"]["tarball"], "integrity": integrity,
                      "shasum": shasum}))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("serve")
    s.add_argument("--dns")
    s.add_argument("--zone")
    s.add_argument("--dns-log")
    s.add_argument("--dns-wire-log")
    s.add_argument("--dns-slow-ms", type=int, default=2000)
    s.add_argument("--http", action="append", default=[])
    s.add_argument("--git-root", default="/nonexistent")
    s.add_argument("--git-token-file")
    s.add_argument("--registry-root", default="/nonexistent")
    s.add_argument("--http-log")
    s.add_argument("--echo", action="append", default=[])
    s.add_argument("--udp-sink")
    s.add_argument("--udp-log")
    s.add_argument("--https", action="append", default=[])
    s.add_argument("--tls-cert")
    s.add_argument("--tls-key")
    s.add_argument("--proxy", action="append", default=[])
    s.add_argument("--proxy-log")
    s.add_argument("--ready", required=True)
    r = sub.add_parser("registry")
    for k in ("dir", "name", "version", "base_url", "message"):
        r.add_argument(k)
    a = p.parse_args()
    if a.cmd == "serve":
        serve(a)
    else:
        make_registry(a)


if __name__ == "__main__":
    sys.exit(main())
