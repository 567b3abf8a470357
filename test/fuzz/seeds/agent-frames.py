#!/usr/bin/env python3
"""Splits the agent protocol's real traffic into seed inputs: reads an strace log of a
controller and its agents (strace -f -xx -s 1000000 -e trace=read,recvfrom,recvmsg), joins
what each process read from each descriptor, and keeps the streams made of whole frames
(docs/agent-protocol.md: 16-byte header, version 1). A stream the controller read from an
agent's link (it begins with HELLO_OK) seeds the agentlink corpus, cut into runs of a few
frames; what an agent read (HELLO or FILE_OPEN first, then requests) seeds agent-requests
(selector byte 0: the session stream), and the start block on the agent's secret fd too
(selector 1). What the controller read back in file sessions (INFO, DATA, EVENT, END, ERROR)
seeds file-replies, one session per file, its operation's byte first as the harness reads
it (guessed from the frames: DATA means READ, a lone END DELETE). The agent's secret in them becomes the harness's fixed one; a few credential
requests as git writes them are added (selectors 2, 3).

    seeds/agent-frames.py STRACE_LOG CORPUS_DIR"""
import hashlib
import os
import re
import struct
import sys

log, corpus = sys.argv[1], sys.argv[2]
HELLO, HELLO_OK, AGENT_START, FILE_OPEN = 1, 2, 3, 60
CONTROLLER_READS = {2, 11, 12, 13, 30, 41, 42, 46, 48, 53, 54, 55, 61, 62, 63, 64, 65, 70, 81}

streams = {}
seq = {}
pending = {}
call = re.compile(r'^(\d+)\s+(read|recvfrom|recvmsg)\((\d+),(.*)$')
resumed = re.compile(r'^(\d+)\s+<\.\.\. (read|recvfrom|recvmsg) resumed>(.*)$')
for line in open(log, encoding='latin-1'):
    m = call.match(line)
    if m:
        pid, fd, rest = m.group(1), m.group(3), m.group(4)
        if rest.endswith('<unfinished ...>\n'):
            pending[pid] = fd
            continue
    else:
        m = resumed.match(line)
        if not m or m.group(1) not in pending:
            continue
        pid, rest = m.group(1), m.group(3)
        fd = pending.pop(pid)
    r = re.search(r'\) = (\d+)', rest)
    if not r or int(r.group(1)) == 0:
        continue
    data = b''.join(bytes.fromhex(s.replace('\\x', '')) for s in re.findall(r'"((?:\\x[0-9a-f]{2})+)"', rest))
    data = data[:int(r.group(1))]
    # a descriptor number is reused: a read that begins a session begins a new stream
    if len(data) >= 16 and struct.unpack_from('<HH', data, 4) in ((HELLO, 1), (FILE_OPEN, 1), (HELLO_OK, 1), (AGENT_START, 1)):
        seq[(pid, fd)] = seq.get((pid, fd), 0) + 1
    streams.setdefault((pid, fd, seq.get((pid, fd), 0)), bytearray()).extend(data)


def frames(b):
    out, off = [], 0
    while off + 16 <= len(b):
        n, t, v = struct.unpack_from('<IHH', b, off)
        if v != 1 or off + 16 + n > len(b) or n > 32 << 20:
            break
        out.append(bytes(b[off:off + 16 + n]))
        off += 16 + n
    return out, off == len(b)


def write(sub, data):
    d = os.path.join(corpus, sub)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, hashlib.sha1(data).hexdigest()[:16]), 'wb') as f:
        f.write(data)


# the secret of each start block, to be replaced by the harness's
FUZZ_SECRET = b'station-fuzz-secret-0123456789ab'
secrets = set()
for b in streams.values():
    fs, _ = frames(b)
    if len(fs) == 1 and struct.unpack_from('<H', fs[0], 4)[0] == AGENT_START:
        f = fs[0]
        off = 16
        while off + 6 <= len(f):
            tag, n = struct.unpack_from('<HI', f, off)
            if tag == 1 and n == len(FUZZ_SECRET):
                secrets.add(bytes(f[off + 6:off + 6 + n]))
            off += 6 + n


def fix(data):
    for s in secrets:
        data = data.replace(s, FUZZ_SECRET)
    return data


for key, b in streams.items():
    fs, whole = frames(b)
    if not fs:
        continue
    first = struct.unpack_from('<H', fs[0], 4)[0]
    if first == AGENT_START and len(fs) == 1:
        write('agent-requests', b'\x01' + fix(fs[0]))
    elif first in (61, 62, 63, 64, 65):
        session = []
        for f in fs:
            session.append(f)
            t = struct.unpack_from('<H', f, 4)[0]
            if t in (63, 64):
                types = [struct.unpack_from('<H', x, 4)[0] for x in session]
                if 62 in types or types == [64]:
                    ops = [3]  # READ
                elif types == [63]:
                    ops = [7]  # DELETE
                else:
                    ops = [1, 4, 5, 6]  # STAT, WRITE, MKDIR, RENAME: INFO then END
                for op in ops:
                    write('file-replies', bytes([op - 1]) + b''.join(session))
                session = []
    elif first == HELLO_OK or first in CONTROLLER_READS:
        for i in range(0, len(fs), 4):
            write('agentlink', b''.join(fs[i:i + 4]))
    elif first in (HELLO, FILE_OPEN):
        # a session: HELLO/FILE_OPEN and what followed, in runs of at most 8 frames after it
        head, rest = fs[0], fs[1:]
        write('agent-requests', b'\x00' + fix(head))
        for i in range(0, len(rest), 8):
            write('agent-requests', b'\x00' + fix(head + b''.join(rest[i:i + 8])))

for eof, req in ((2, b'get\nprotocol=https\nhost=github.com\npath=org/repo.git\n\n'),
                 (3, b'get\nprotocol=https\nhost=example.com\nusername=bot\n'),
                 (2, b'store\nprotocol=https\nhost=github.com\nusername=x\npassword=y\n\n'),
                 (3, b'erase\nprotocol=http\nhost=127.0.0.1:8080\nwwwauth[]=Basic realm="x"\n')):
    write('agent-requests', bytes([eof]) + req)
