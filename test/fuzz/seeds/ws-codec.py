#!/usr/bin/env python3
"""Writes test/fuzz/corpus/ws-codec/: the frames the API's WebSocket endpoints carry (the
dashboard's terminal input and resize messages, the server's output and gap messages, pings,
closes), masked as a client sends them (settings byte 0: server role) and unmasked as a server
sends them (settings byte 1: client role). Each file: one settings byte, then the stream."""
import os
import struct
import sys

out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), '..', 'corpus', 'ws-codec')
os.makedirs(out, exist_ok=True)
KEY = b'\x37\xfa\x21\x3d'  # RFC 6455 5.7's example key


def frame(op, payload, fin=True, key=None):
    b = bytes([(0x80 if fin else 0) | op])
    m = 0x80 if key else 0
    n = len(payload)
    if n < 126:
        b += bytes([m | n])
    elif n < 65536:
        b += bytes([m | 126]) + struct.pack('>H', n)
    else:
        b += bytes([m | 127]) + struct.pack('>Q', n)
    if key:
        b += key + bytes(c ^ key[i % 4] for i, c in enumerate(payload))
    else:
        b += payload
    return b


def write(name, settings, stream):
    with open(os.path.join(out, name), 'wb') as f:
        f.write(bytes([settings]) + stream)


for role, key, tag in ((0, KEY, 'from-client'), (1, None, 'from-server')):
    write(f'{tag}-hello', role, frame(1, b'Hello', key=key))
    write(f'{tag}-resize', role, frame(1, b'{"type":"resize","cols":120,"rows":40}', key=key))
    write(f'{tag}-terminal-input', role, frame(2, b'ls -la\r', key=key) + frame(2, b'\x1b[A\x03', key=key))
    write(f'{tag}-gap', role, frame(1, b'{"type":"gap","stream":"stdout","offset":0,"bytes":4096}', key=key))
    write(f'{tag}-fragmented-utf8', role,
          frame(1, b'\xe2\x82', fin=False, key=key) + frame(9, b'p', key=key) + frame(0, b'\xac!', key=key))
    write(f'{tag}-ping-pong', role, frame(9, b'ping', key=key) + frame(10, b'', key=key))
    write(f'{tag}-close', role, frame(8, struct.pack('>H', 1000) + b'bye', key=key))
    write(f'{tag}-close-empty', role, frame(8, b'', key=key))
    write(f'{tag}-len16', role, frame(2, bytes(range(256)) * 2, key=key))
    write(f'{tag}-len64', role, frame(2, b'x' * 65536, key=key)[:200])
    write(f'{tag}-bad-utf8', role, frame(1, b'ok\xff', key=key))
    write(f'{tag}-output-then-close', role,
          frame(2, b'total 0\n', key=key) + frame(8, struct.pack('>H', 1001), key=key) + frame(1, b'after', key=key))
# small limits: a frame over max_frame (settings 2-3: 125-byte limits; 4-5: 16/64; 6-7: 64/16)
write('from-client-too-big', 4, frame(2, b'y' * 40, key=KEY))
write('from-server-message-too-big', 7, frame(2, b'z' * 10, fin=False) + frame(0, b'z' * 10))
write('from-client-unmasked', 0, frame(1, b'Hello'))
write('from-server-masked', 1, frame(1, b'Hello', key=KEY))
