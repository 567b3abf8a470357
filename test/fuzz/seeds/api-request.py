#!/usr/bin/env python3
"""Writes test/fuzz/corpus/api-request/ from the test suite's own requests: every JSON body the
integration and security scripts send (paired with the validators of fuzz-api-request.c that
its fields point to) and every API path they use (with $VARIABLES made ids). Each file: one
selector byte (see the harness), then the bytes."""
import hashlib
import os
import re
import sys

here = os.path.dirname(os.path.abspath(__file__))
root = os.path.normpath(os.path.join(here, '..', '..', '..'))
out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, '..', 'corpus', 'api-request')
os.makedirs(out, exist_ok=True)

scripts = []
for d in ('test/integration', 'test/security'):
    for f in sorted(os.listdir(os.path.join(root, d))):
        if f.endswith('.sh'):
            scripts.append(open(os.path.join(root, d, f), encoding='utf-8', errors='replace').read())
text = '\n'.join(scripts)


def write(selector, data):
    blob = bytes([selector]) + data
    name = hashlib.sha1(blob).hexdigest()[:16]
    with open(os.path.join(out, name), 'wb') as f:
        f.write(blob)


# selectors: 14 secret body, 0 workspace, 1 network, 2 command, 3 service, 4 terminal, 5/6 resize, 7 image,
# 8 mkdir, 9 rename, 10 env, 11 egress rules
bodies = sorted(set(re.findall(r"'(\{\"[^']*\})'", text)))
for b in bodies:
    if '[redacted]' in b:
        continue
    keys = set(re.findall(r'"([A-Za-z]+)"\s*:', b))
    sel = set()
    if keys & {'adapter', 'cpus', 'memoryMb', 'pidsLimit', 'image', 'network', 'seccompProfile'}:
        sel.add(0)
    if 'egress' in keys or 'allow' in keys:
        sel |= {1, 11, 0}
    if 'command' in keys:
        sel |= {4} if 'cols' in keys else {2}
        if 'name' in keys:
            sel = {3}
    if keys == {'cols', 'rows'}:
        sel |= {5, 6}
    if 'path' in keys or 'reference' in keys:
        sel |= {7, 8}
    if 'from' in keys:
        sel.add(9)
    if 'env' in keys:
        sel.add(10)
    if 'value' in keys or 'expiresAt' in keys or 'username' in keys:
        sel.add(14)
    for s in sorted(sel):
        write(s, b.encode())

paths = sorted(set(re.findall(r'(/v1/[A-Za-z0-9_./${}?=&:-]*)', text)))
for p in paths:
    p = re.sub(r'\$\{?[A-Za-z_0-9]+\}?', 'w-0123abcd', p).rstrip('.:')
    path, _, query = p.partition('?')
    for method in ('GET', 'POST', 'DELETE', 'PUT'):
        write(12, method.encode() + b'\0' + path.encode())
    for kv in filter(None, query.split('&')):
        k, _, v = kv.partition('=')
        write(13, k.encode() + b'\0' + v.encode() + b'\0application/json; charset=utf-8')
write(13, b'mode\x000644\x00Application/JSON')
# secrets as the tests put them (their values come from shell variables there)
for body in (b'{"value":"ghp_abc123","host":"GitHub.com:443","username":"x-access-token",'
             b'"expiresAt":"2099-01-02T02:04:05.000Z"}',
             b'{"value":"tok","host":"git.example.com","expiresAt":null}',
             b'{"value":"a\\nb"}', b'{"value":"x","host":"-bad-.com"}'):
    write(14, body)
for name in (b'gh', b'a.unscoped_1', b'TOKEN_A', b'-x', b'../x', b'a' * 64):
    write(15, name)
write(13, b'limit\x00-\x00text/plain')
