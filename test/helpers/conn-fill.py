#!/usr/bin/env python3
"""Fills a controller's connection table over its unix socket.

conn-fill.py SOCKET MAX: opens idle connections one at a time (they send nothing), each
followed by a probe (GET /v1/ready on a connection of its own, read to the end), until a probe
is answered 503 or MAX idle connections are open. Prints "held N" (the idle connections open
when the table was found full, or "held N notfull" after MAX), then the probe's whole answer,
then a line "end", and keeps the connections until its stdin closes.
"""
import socket
import sys


def connect(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(60)
    s.connect(path)
    return s


def probe(path):
    s = connect(path)
    s.sendall(b"GET /v1/ready HTTP/1.1\r\nHost: station\r\nConnection: close\r\n\r\n")
    data = b""
    while True:
        d = s.recv(65536)
        if not d:
            break
        data += d
    s.close()
    return data


def main():
    path, most = sys.argv[1], int(sys.argv[2])
    held = []
    answer = b""
    full = False
    while len(held) < most:
        held.append(connect(path))
        answer = probe(path)
        if answer.startswith(b"HTTP/1.1 503"):
            full = True
            break
    print("held %d%s" % (len(held), "" if full else " notfull"))
    print(answer.decode("utf-8", "replace"))
    print("end", flush=True)
    sys.stdin.read()


main()
