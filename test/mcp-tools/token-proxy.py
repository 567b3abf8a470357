#!/usr/bin/env python3
"""A header-adding proxy on loopback: forwards every request to the controller's /mcp with
`Authorization: Bearer TOKEN` added, the Host header untouched (so the controller's own Host and
Origin checks still judge what the client sent), and streams the answer back as it comes (event
streams included). For the MCP conformance suite, which sends no token: the server is not
weakened for it.

Usage: token-proxy.py LISTEN_PORT UPSTREAM_PORT TOKEN_FILE   (both on 127.0.0.1)"""

import http.client
import http.server
import sys

LISTEN, UPSTREAM, TOKEN_FILE = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
with open(TOKEN_FILE) as f:
    TOKEN = f.read().strip()
HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade",
       "proxy-authorization", "authorization", "content-length"}


class Proxy(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"  # the answer ends when the connection closes

    def forward(self):
        n = int(self.headers.get("Content-Length") or 0)
        if n > 16 * 1024 * 1024:
            self.send_error(413)
            return
        body = self.rfile.read(n) if n else None
        up = http.client.HTTPConnection("127.0.0.1", UPSTREAM, timeout=300)
        up.putrequest(self.command, self.path, skip_host=True, skip_accept_encoding=True)
        for k, v in self.headers.items():
            if k.lower() not in HOP:
                up.putheader(k, v)
        up.putheader("Authorization", "Bearer " + TOKEN)
        if body is not None:
            up.putheader("Content-Length", str(len(body)))
        up.endheaders(body)
        r = up.getresponse()
        self.send_response_only(r.status, r.reason)
        for k, v in r.getheaders():
            if k.lower() not in HOP:
                self.send_header(k, v)
        self.send_header("Connection", "close")
        self.end_headers()
        while True:
            chunk = r.read1(65536)
            if not chunk:
                break
            self.wfile.write(chunk)
            self.wfile.flush()
        up.close()

    do_GET = do_POST = do_DELETE = do_PUT = forward

    def log_message(self, fmt, *args):
        pass


http.server.ThreadingHTTPServer(("127.0.0.1", LISTEN), Proxy).serve_forever()
