#!/usr/bin/env python3
"""Writes test/fuzz/corpus/preview-http/: what reaches the preview listener and what an app
answers it, by hand: request heads (with bodies, pipelined, malformed the ways
test-preview-smuggling.sh sends them), chunked bodies with extensions and trailers, request
targets with the station's parameter, Cookie, Host and Set-Cookie values. Each file: two 16-bit
cut points and a 16-bit Content-Length (little endian), then the bytes.

    seeds/preview-http.py [OUT_DIR]"""
import os
import struct
import sys

out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), '..', 'corpus', 'preview-http')
os.makedirs(out, exist_ok=True)

seeds = {
    'get': (5, 17, 0, b'GET /?a=1 HTTP/1.1\r\nHost: 3000-abc.preview.localhost:8081\r\nCookie: a=1; station_preview=sp_x\r\n\r\n'),
    'post-length': (10, 40, 5, b'POST /sink HTTP/1.1\r\nHost: a.preview.localhost\r\nContent-Length: 5\r\n\r\nhelloGET / HTTP/1.1\r\n\r\n'),
    'post-chunked': (3, 30, 0, b'POST / HTTP/1.1\r\nHost: a.preview.localhost\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n'),
    'obs-fold': (1, 2, 0, b'GET / HTTP/1.1\r\nHost: a.preview.localhost\r\nX: a\r\n b\r\n\r\n'),
    'bare-lf': (1, 2, 0, b'GET / HTTP/1.1\nHost: a.preview.localhost\n\n'),
    'space-colon': (1, 2, 0, b'GET / HTTP/1.1\r\nHost : a.preview.localhost\r\n\r\n'),
    'chunked': (2, 9, 0, b'5\r\nhello\r\n6\r\n world\r\n0\r\n\r\nGET / HTTP/1.1\r\n\r\n'),
    'chunked-ext-trailer': (4, 20, 0, b'5;a="b c";d\r\nhello\r\n0;x\r\nX-Sum: 1\r\n\r\n'),
    'chunked-long-size': (1, 3, 0, b'000000000000000a\r\n0123456789\r\n0\r\n\r\n'),
    'chunked-overlong': (1, 7, 0, b'3\r\nhello\r\n0\r\n\r\n'),
    'chunked-bare-lf': (1, 2, 0, b'5\nhello\n0\n\n'),
    'length-pipelined': (2, 6, 5, b'helloGET /next HTTP/1.1\r\nHost: a.preview.localhost\r\n\r\n'),
    'target': (0, 0, 0, b'/p?a=1&station_preview_token=sp_abc&b=2'),
    'target-encoded': (0, 0, 0, b'/?station%5Fpreview_token=x&%73tation_preview_token=&z'),
    'cookie': (0, 0, 0, b'station_preview2=x; station_preview=tok; Station_Preview=y'),
    'host': (0, 0, 0, b'3000-ABCDEFGHIJKLMNOPQRSTUVWXYZ.Preview.Localhost.:8081'),
    'host-two-labels': (0, 0, 0, b'a.b.preview.localhost'),
    'set-cookie': (0, 0, 0, b'sid=1; Domain=.preview.localhost; Path=/; HttpOnly'),
    'set-cookie-spaced': (0, 0, 0, b'domain=x;\tDOMAIN = y ; Secure'),
    'response': (7, 30, 2, b'HTTP/1.1 200 OK\r\nContent-Length: 2\r\nSet-Cookie: a=b; domain=x\r\n\r\nok'),
}
for name, (cut1, cut2, length, data) in seeds.items():
    with open(os.path.join(out, name), 'wb') as f:
        f.write(struct.pack('<HHH', cut1, cut2, length) + data)
