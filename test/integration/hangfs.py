#!/usr/bin/python3
"""A FUSE filesystem with nothing in it, which hangs on demand: every name looked up in it is
not found (ENOENT), except while the file HANG exists: then a lookup gets no answer (HANG-held
is created) until HANG is removed, then ENOENT. A real filesystem that stops answering, as a
dead network share does. Standard library only: it speaks the kernel's FUSE protocol on
/dev/fuse itself (needs root). Usage: hangfs.py MOUNTPOINT HANG READY [OPS]; READY is created
once mounted; it exits when unmounted. OPS (default "lookup") names the requests that hang, of
lookup, opendir, open and getattr: "lookup,opendir" also holds opening the root directory
(which else fails with ENOSYS), as removing a tree beneath the mount point does; "getattr"
holds a stat of the root directory (answered with its attributes once released: attributes
are never cached, so every stat asks)."""
import errno, os, select, struct, subprocess, sys

mnt, hang, ready = sys.argv[1:4]
OPCODES = {"lookup": 1, "getattr": 3, "open": 14, "opendir": 27}
hold = {OPCODES[o] for o in (sys.argv[4] if len(sys.argv) > 4 else "lookup").split(",")}
fd = os.open("/dev/fuse", os.O_RDWR)
subprocess.run(["mount", "-t", "fuse", "-o",
                f"fd={fd},rootmode=40000,user_id=0,group_id=0,allow_other",
                "station-hangfs", mnt], pass_fds=[fd], check=True)
open(ready, "w").close()

IN_HDR = struct.Struct("<IIQQIIII")  # len, opcode, unique, nodeid, uid, gid, pid, padding
OUT_HDR = struct.Struct("<IiQ")      # len, error, unique
INIT, LOOKUP, FORGET, GETATTR, DESTROY, INTERRUPT, BATCH_FORGET = 26, 1, 2, 3, 38, 36, 42

def reply(unique, err=0, body=b""):
    try:
        os.write(fd, OUT_HDR.pack(OUT_HDR.size + len(body), -err, unique) + body)
    except OSError as e:  # the caller is gone (killed while held): nobody to answer
        if e.errno not in (errno.ENOENT, errno.EINTR):
            raise

def root_attr():
    # attr_valid (0: never cached), attr_valid_nsec, dummy, then struct fuse_attr
    attr = struct.pack("<QQQQQQIIIIIIIIII", 1, 0, 0, 0, 0, 0, 0, 0, 0,
                       0o40755, 2, 0, 0, 0, 4096, 0)
    return struct.pack("<QII", 0, 0, 0) + attr

held = []
while True:
    r, _, _ = select.select([fd], [], [], 0.05)
    if held and not os.path.exists(hang):
        for u, o in held:
            if o == GETATTR:
                reply(u, 0, root_attr())
            else:
                reply(u, errno.ENOENT)
        held = []
        os.unlink(hang + "-held")
    if not r:
        continue
    try:
        buf = os.read(fd, 1 << 21)
    except OSError as e:
        if e.errno in (errno.ENODEV,):
            break  # unmounted
        if e.errno in (errno.EINTR, errno.EAGAIN, errno.ENOENT):
            continue
        raise
    _, op, unique, node = IN_HDR.unpack_from(buf)[:4]
    if op == INIT:
        major, minor = struct.unpack_from("<II", buf, IN_HDR.size)
        # major, minor, max_readahead, flags, max_background, congestion_threshold,
        # max_write, time_gran, max_pages, map_alignment, flags2, unused[7]
        reply(unique, 0, struct.pack("<IIIIHHIIHHI7I", 7, min(minor, 31), 0, 0, 16, 12,
                                     65536, 1, 0, 0, 0, *([0] * 7)))
    elif op in (FORGET, BATCH_FORGET, INTERRUPT):
        continue
    elif op == DESTROY:
        reply(unique)
        break
    elif op in hold and os.path.exists(hang) and (op != GETATTR or node == 1):
        held.append((unique, op))
        open(hang + "-held", "w").close()
    elif op == GETATTR and node == 1:
        reply(unique, 0, root_attr())
    elif op == LOOKUP:
        reply(unique, errno.ENOENT)
    else:
        reply(unique, errno.ENOSYS)
