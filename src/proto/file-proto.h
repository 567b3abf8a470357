/* SPDX-License-Identifier: MIT */
#pragma once

/* File sessions between the controller and the agent (docs/agent-protocol.md, "Files").
 *
 * Every file operation has a connection of its own to the agent's socket. Its first frame is
 * FILE_OPEN (not HELLO): SECRET and VERSION as in HELLO, then FILE_OP, PATH and the
 * operation's fields. The agent checks the secret in constant time, then hands the connection
 * to a child, the file worker, which drops to the sandbox's user (--user) with no
 * supplementary groups, serves this one operation with blocking I/O and exits. The main
 * connection and the agent's loop never wait on a file. At most FILE_MAX_SESSIONS workers live
 * at once; beyond that FILE_OPEN is answered FILE_ERROR EBUSY.
 *
 * Paths. PATH is what the client gave: absolute in the sandbox's view, or relative to the
 * workspace's workdir. Refused before any lookup, FILE_ERROR EINVAL: empty, a NUL, longer than
 * PROTO_MAX_PATH. Refused with EXDEV ("escapes"): a path whose `..` components climb above the
 * root (counted lexically on the absolute form). The root is the agent's own "/" in a
 * container (every path, and every symlink met on the way, resolves inside the container:
 * openat2 RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS on an fd of "/"), and the --files-root
 * directory for a host workspace (the workspace's HOME: an absolute PATH must name it or lie
 * beneath it; resolution is openat2 RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS on its fd, so a
 * symlink out of it, absolute or by `..`, is EXDEV). The last component of STAT, LIST, DELETE
 * and RENAME is not followed (lstat semantics; DELETE of a symlink removes the link). READ and
 * WRITE follow it within the root, open with O_NOFOLLOW on the final fd walk and O_NONBLOCK,
 * and refuse anything but a regular file after fstat on the opened fd with ENXIO ("not a
 * regular file": a FIFO, a device, a socket), so no open blocks and no device is touched.
 *
 * Operations, and what the agent sends back (any of them may end early with FILE_ERROR, which
 * is always the last frame; the controller treats every frame as hostile and bounds it):
 *   STAT    PATH                         -> INFO, END
 *   LIST    PATH                         -> INFO (the directory itself), INFO per entry (NAME
 *                                           set; sorted by name; at most FILE_MAX_ENTRIES),
 *                                           END (TRUNCATED 1 when more were left out)
 *   READ    PATH, OFFSET?, LENGTH?, SUFFIX?, MAX_BYTES?
 *                                        -> INFO (the file, before reading), DATA*, END
 *           MAX_BYTES: the whole file (or the range) larger than it is EFBIG before any DATA.
 *           An OFFSET at or past the end gives no DATA (the controller answers 416).
 *   WRITE   PATH, MODE?, FLAGS(PARENTS, EXCLUSIVE)?, IF_MATCH?
 *           then the controller sends DATA* and END (an empty file is just END)
 *                                        -> INFO (the new file), END (FLAGS(CREATED) when
 *                                           the target did not exist before: 201, not 200)
 *           Atomic: a temporary file beside the target (O_EXCL, 0600), the data, fsync,
 *           fchmod to MODE (absent: the replaced file's mode, or 0644), then renameat over
 *           the target; readers see the old or the new file, never a part. PARENTS makes
 *           missing directories (0755) first. EXCLUSIVE: EEXIST if the target exists.
 *           IF_MATCH: ESTALE when the target's ETAG differs (or it is gone) at rename time.
 *           A target that is a directory: EISDIR; a FIFO, device or socket: ENXIO.
 *           A client that goes away before END: the temporary file is removed, the target
 *           untouched.
 *   MKDIR   PATH, MODE?, FLAGS(PARENTS)? -> INFO, END      (EEXIST unless PARENTS and a dir)
 *   RENAME  PATH, PATH2, FLAGS(EXCLUSIVE)?, IF_MATCH?
 *                                        -> INFO (PATH2 now), END   (renameat2, NOREPLACE
 *                                           with EXCLUSIVE; both ends resolved as above)
 *   DELETE  PATH, FLAGS(RECURSIVE)?, IF_MATCH?
 *                                        -> END   (a directory without RECURSIVE must be
 *                                           empty: ENOTEMPTY; RECURSIVE walks with fds,
 *                                           never follows a symlink, stays on one filesystem)
 *   WATCH   PATH, FLAGS(RECURSIVE)?      -> INFO (the directory), then EVENT* until the
 *           controller closes the connection. inotify; RECURSIVE watches subdirectories as
 *           they appear (at most FILE_MAX_WATCHES directories: beyond, an OVERFLOW event).
 *           EVENT: FILE_EVENT, PATH (relative to the watched directory), PATH2 (a move's new
 *           path), FILE_TYPE (DIR for directories, else FILE). A move within the watch is one
 *           MOVED; a move out is DELETED, in is CREATED. IN_Q_OVERFLOW, or a client too slow
 *           to take events, gives one OVERFLOW (events were lost: re-list). The watched
 *           directory itself removed or moved away: DELETED with PATH "" and the session ends
 *           with END.
 *
 * INFO fields: NAME (LIST entries only), FILE_TYPE, SIZE, MODE (07777), MTIME_NS, UID, GID,
 * LINK_TARGET (symlinks: the target as stored, at most PROTO_MAX_PATH), ETAG (regular files:
 * "<mtime ns hex>-<size hex>-<ino hex>", at most 64 bytes). Every path sent back (PATH in INFO
 * of WRITE/MKDIR/RENAME) is the absolute path in the sandbox's view.
 *
 * FILE_ERROR: ERRNO (a positive Linux errno), PATH (which path the error is about, when there
 * are two), REASON (a short text for the log, at most 256 bytes, never shown as is). */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define FILE_MAX_SESSIONS 32	     /* file workers alive at once, per agent */
#define FILE_MAX_CHUNK (256u * 1024) /* DATA payload */
#define FILE_MAX_ENTRIES 10000	     /* one LIST */
#define FILE_MAX_WATCHES 8192	     /* directories in one recursive WATCH */
#define FILE_MAX_NAME 255	     /* NAME */
#define FILE_MAX_ETAG 64
#define FILE_MAX_REASON 256
#define FILE_OPEN_MAX_PAYLOAD (3u * 4096 + 1024) /* FILE_OPEN: two paths and small fields */

enum file_op {
	FILE_OP_STAT = 1,
	FILE_OP_LIST = 2,
	FILE_OP_READ = 3,
	FILE_OP_WRITE = 4,
	FILE_OP_MKDIR = 5,
	FILE_OP_RENAME = 6,
	FILE_OP_DELETE = 7,
	FILE_OP_WATCH = 8,
};

enum file_flag {
	FILE_F_PARENTS = 1u << 0,
	FILE_F_RECURSIVE = 1u << 1,
	FILE_F_EXCLUSIVE = 1u << 2,
	FILE_F_CREATED = 1u << 3, /* A->C, in WRITE's END: the target did not exist before */
};

enum file_type {
	FILE_TYPE_FILE = 1,
	FILE_TYPE_DIR = 2,
	FILE_TYPE_SYMLINK = 3,
	FILE_TYPE_FIFO = 4,
	FILE_TYPE_SOCKET = 5,
	FILE_TYPE_CHAR = 6,
	FILE_TYPE_BLOCK = 7,
};

enum file_event {
	FILE_EVENT_CREATED = 1,
	FILE_EVENT_MODIFIED = 2, /* written and closed, or attributes changed */
	FILE_EVENT_DELETED = 3,
	FILE_EVENT_MOVED = 4,
	FILE_EVENT_OVERFLOW = 5,
};

/* Names as the API spells them ("file", "dir", "symlink", "fifo", "socket", "char", "block";
 * "created", "modified", "deleted", "moved", "overflow"); NULL for an unknown value. */
const char *file_type_to_string(uint64_t t);
const char *file_event_to_string(uint64_t e);
