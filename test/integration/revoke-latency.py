#!/usr/bin/env python3
"""How long after a token's revocation on one worker other workers refuse it.

revoke-latency.py --admin-file F --revoke URL --check URL [--check URL ...]
                  (--token SECRET --id ID | --mint URL --rounds N)

One process with a kept-alive connection to each worker, so that what is measured is the
fleet's, not a client's start: each round checks that every --check worker takes the token
(200), then sends DELETE /v1/tokens/ID to --revoke and polls every --check worker in turn
(GET /v1/workspaces) until each answers 401. The time of a round runs from just before the
DELETE is sent to the last worker's first 401, the DELETE's own answer included. With --mint,
each round first mints a read token on that worker. Prints a line per round and a last line
"median M ms, longest L ms over N"; exits 1 (saying why) when a worker did not take the token
before, the DELETE was not answered 200, or a worker still took the token BOUND_S after.
"""
import argparse
import http.client
import json
import sys
import time
import urllib.parse

BOUND_S = 2.0


class Worker:
    def __init__(self, url):
        u = urllib.parse.urlsplit(url)
        self.url = url
        self.conn = http.client.HTTPConnection(u.hostname, u.port, timeout=10)

    def call(self, method, path, token, body=None):
        headers = {"Authorization": "Bearer " + token}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        for attempt in (0, 1):
            try:
                self.conn.request(method, path, body=data, headers=headers)
                resp = self.conn.getresponse()
                payload = resp.read()
                if resp.getheader("Connection", "").lower() == "close":
                    self.conn.close()
                return resp.status, payload
            except (http.client.HTTPException, ConnectionError):
                self.conn.close()  # a kept-alive connection the server closed: once more
                if attempt:
                    raise
        raise AssertionError("unreachable")


def fail(msg):
    print("revoke-latency: " + msg, file=sys.stderr)
    sys.exit(1)


def round_once(admin, revoker, checks, token, token_id):
    for w in checks:
        status, body = w.call("GET", "/v1/workspaces", token)
        deadline = time.monotonic() + 5
        while status != 200 and time.monotonic() < deadline:
            time.sleep(0.01)
            status, body = w.call("GET", "/v1/workspaces", token)
        if status != 200:
            fail("%s answers %d to the token before its revocation: %s" %
                 (w.url, status, body[:200]))
    start = time.monotonic()
    status, body = revoker.call("DELETE", "/v1/tokens/" + token_id, admin)
    answered = time.monotonic()
    if status != 200:
        fail("DELETE /v1/tokens/%s on %s: %d %s" % (token_id, revoker.url, status, body[:200]))
    pending = list(checks)
    refused = {}
    while pending:
        for w in list(pending):
            status, _ = w.call("GET", "/v1/workspaces", token)
            if status == 401:
                refused[w.url] = time.monotonic()
                pending.remove(w)
        if pending and time.monotonic() - start > BOUND_S:
            fail("%s still take the token %.1f s after its revocation" %
                 (", ".join(w.url for w in pending), BOUND_S))
    total = (max(refused.values()) - start) * 1000
    print("revoked in %.1f ms, refused by every worker %.1f ms after it was asked" %
          ((answered - start) * 1000, total))
    return total


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--admin-file", required=True)
    ap.add_argument("--revoke", required=True)
    ap.add_argument("--check", action="append", required=True)
    ap.add_argument("--token")
    ap.add_argument("--id")
    ap.add_argument("--mint")
    ap.add_argument("--rounds", type=int, default=1)
    a = ap.parse_args()
    with open(a.admin_file) as f:
        admin = f.read().strip()
    revoker = Worker(a.revoke)
    checks = [Worker(u) for u in a.check]
    minter = Worker(a.mint) if a.mint else None
    times = []
    for i in range(a.rounds if minter else 1):
        token, token_id = a.token, a.id
        if minter:
            status, body = minter.call("POST", "/v1/tokens", admin,
                                       {"name": "latency-%d" % i, "scope": "read"})
            if status != 201:
                fail("mint on %s: %d %s" % (a.mint, status, body[:200]))
            doc = json.loads(body)
            token, token_id = doc["token"], doc["id"]
        times.append(round_once(admin, revoker, checks, token, token_id))
    times.sort()
    print("median %.0f ms, longest %.0f ms over %d" %
          (times[(len(times) - 1) // 2], times[-1], len(times)))


if __name__ == "__main__":
    main()
