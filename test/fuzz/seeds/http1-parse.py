#!/usr/bin/env python3
"""Writes test/fuzz/corpus/http1-parse/ from a running controller's real answers: the raw bytes
of responses to a list of requests sent over its Unix socket (JSON bodies, errors, 201s, a
chunked stream, HEAD), plus hand-made answers for what the controller never sends (1xx heads,
bodies until close, chunk extensions, trailers). Each file: one settings byte (bit 0: the
request was HEAD), then the bytes.

    seeds/http1-parse.py SOCKET [OUT_DIR]"""
import os
import socket
import sys

sock_path = sys.argv[1]
out = sys.argv[2] if len(sys.argv) > 2 else os.path.join(os.path.dirname(__file__), '..', 'corpus', 'http1-parse')
os.makedirs(out, exist_ok=True)


def exchange(raw, limit=16384):
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(2)
    s.connect(sock_path)
    s.sendall(raw)
    got = b''
    try:
        while len(got) < limit:
            b = s.recv(65536)
            if not b:
                break
            got += b
    except socket.timeout:
        pass
    s.close()
    return got[:limit]


def request(method, path, body=None):
    h = f'{method} {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n'
    if body is not None:
        h += f'Content-Type: application/json\r\nContent-Length: {len(body)}\r\n'
    return h.encode() + b'\r\n' + (body or b'')


def write(name, head, data):
    with open(os.path.join(out, name), 'wb') as f:
        f.write(bytes([1 if head else 0]) + data)


ws = exchange(request('POST', '/v1/workspaces', b'{"adapter":"host"}'))
write('create-201', False, ws)
wid = ws.split(b'"id":"', 1)[1].split(b'"', 1)[0].decode() if b'"id":"' in ws else 'none'
write('ready', False, exchange(request('GET', '/v1/ready')))
write('worker', False, exchange(request('GET', '/v1/worker')))
write('list', False, exchange(request('GET', '/v1/workspaces')))
write('not-found-404', False, exchange(request('GET', '/v1/nothing-here')))
write('method-405', False, exchange(request('PATCH', '/v1/workspaces')))
write('bad-body-400', False, exchange(request('POST', '/v1/workspaces', b'{"adapter":"vm"}')))
write('head', True, exchange(request('HEAD', '/v1/workspaces')))
run = exchange(request('POST', f'/v1/workspaces/{wid}/commands', b'{"command":"echo hello"}'))
write('run-202', False, run)
rid = run.split(b'"id":"', 1)[1].split(b'"', 1)[0].decode() if b'"id":"' in run else 'none'
write('run-wait', False, exchange(request('GET', f'/v1/workspaces/{wid}/commands/{rid}?waitMs=5000')))
write('output-stream', False, exchange(request('GET', f'/v1/workspaces/{wid}/commands/{rid}/output')))
write('delete', False, exchange(request('DELETE', f'/v1/workspaces/{wid}')))
# keep-alive: two answers on one connection
s = request('GET', '/v1/ready').replace(b'Connection: close\r\n', b'')
write('two-answers', False, exchange(s + request('GET', '/v1/worker')))

# What other servers send
write('continue-then-200', False,
      b'HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok')
write('chunked-ext-trailer', False,
      b'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n'
      b'5;ext=1\r\nhello\r\n0\r\nX-Trailer: yes\r\n\r\n')
write('until-close-1.0', False, b'HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\nbody until close')
write('no-content-204', False, b'HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\n')
write('folded-and-dup', False,
      b'HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 3\r\nX-A:  b \r\n\r\nabc')
write('length-and-chunked', False,
      b'HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n')
write('huge-length', False, b'HTTP/1.1 200 OK\r\nContent-Length: 18446744073709551615\r\n\r\nx')
write('bare-lf', False, b'HTTP/1.1 200 OK\nContent-Length: 1\n\nx')
