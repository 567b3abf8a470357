/* SPDX-License-Identifier: MIT */
/* File sessions' parts that need no agent: the lexical path check (agent/files-path.c), ETAG
 * and INFO encoding and FILE_OPEN parsing (files-info.c), and resolution on a root fd of a
 * temporary directory, both ways (RESOLVE_IN_ROOT, RESOLVE_BENEATH). Every refusal has its
 * positive control beside it. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/files-internal.h"
#include "basic/util.h"
#include "proto/agent-proto.h"

static void expect_ok(const char *prefix, const char *workdir, const char *path, const char *rel,
		      const char *abs)
{
	struct files_path p = { 0 };
	int r = files_path_check(prefix, workdir, (const uint8_t *)path, strlen(path), &p);

	cr_assert_eq(r, 0, "%s: %d", path, r);
	cr_expect_str_eq(p.rel, rel, "%s: rel", path);
	cr_expect_str_eq(p.abs, abs, "%s: abs", path);
	files_path_done(&p);
}

static void expect_err(const char *prefix, const char *workdir, const uint8_t *path, size_t len,
		       int err)
{
	struct files_path p = { 0 };
	int r = files_path_check(prefix, workdir, path, len, &p);

	cr_expect_eq(r, err, "%.*s: %d, want %d", (int)(len > 80 ? 80 : len), path, r, err);
	cr_expect_null(p.rel);
}

#define ERR(prefix, workdir, s, err)                                                               \
	expect_err(prefix, workdir, (const uint8_t *)(s), strlen(s), err)

Test(files_path, refused_before_any_lookup)
{
	static uint8_t long_path[PROTO_MAX_PATH + 1];

	memset(long_path, 'a', sizeof long_path);
	long_path[0] = '/';
	memcpy(long_path, "/r/", 3);
	expect_err("/r", "/r/ws", (const uint8_t *)"", 0, -EINVAL);
	expect_err("/r", "/r/ws", (const uint8_t *)"a\0b", 3, -EINVAL);
	expect_err("/r", "/r/ws", long_path, PROTO_MAX_PATH + 1, -EINVAL);
	/* positive controls: the same shapes, valid */
	expect_ok("/r", "/r/ws", "ab", "ws/ab", "/r/ws/ab");
	struct files_path p = { 0 };
	cr_assert_eq(files_path_check("/r", "/r/ws", long_path, PROTO_MAX_PATH, &p), 0);
	cr_expect_eq(strlen(p.rel), PROTO_MAX_PATH - 3);
	files_path_done(&p);
}

Test(files_path, dotdot_above_the_root_is_exdev)
{
	ERR("/r", "/r/ws", "../..", -EXDEV);
	ERR("/r", "/r/ws", "../../etc/passwd", -EXDEV);
	ERR("/r", "/r/ws", "/r/a/../../b", -EXDEV);
	ERR("/r", "/r/ws", "a/../../../b", -EXDEV);
	ERR("", "/home/node", "/..", -EXDEV);
	ERR("", "/home/node", "../../..", -EXDEV);
	/* positive controls: `..` that stays inside is kept for the kernel to resolve */
	expect_ok("/r", "/r/ws", "..", "ws/..", "/r");
	expect_ok("/r", "/r/ws", "../x", "ws/../x", "/r/x");
	expect_ok("/r", "/r/ws", "/r/a/../b", "a/../b", "/r/b");
	expect_ok("", "/home/node", "../..", "home/node/../..", "/");
}

Test(files_path, absolute_outside_a_host_root_is_exdev)
{
	ERR("/r", "/r/ws", "/etc/passwd", -EXDEV);
	ERR("/r", "/r/ws", "/", -EXDEV);
	ERR("/r", "/r/ws", "/rx/a", -EXDEV);	 /* a prefix of the name, not a component */
	ERR("/r", "/r/ws", "/r/../r/a", -EXDEV); /* no `..` on the way to the root */
	/* positive controls */
	expect_ok("/r", "/r/ws", "/r", ".", "/r");
	expect_ok("/r", "/r/ws", "/r/", ".", "/r");
	expect_ok("/r", "/r/ws", "//r/./a//b/.", "a/b", "/r/a/b");
	expect_ok("/r", "/r/ws", "/r/ws/a.txt", "ws/a.txt", "/r/ws/a.txt");
}

Test(files_path, a_container_root_is_slash)
{
	expect_ok("", "/home/node/workspace", "/etc/shadow", "etc/shadow", "/etc/shadow");
	expect_ok("", "/home/node/workspace", "/", ".", "/");
	expect_ok("", "/home/node/workspace", "a.txt", "home/node/workspace/a.txt",
		  "/home/node/workspace/a.txt");
}

Test(files_info, etag_format)
{
	struct stat st = { 0 };
	char etag[FILE_MAX_ETAG + 1];

	st.st_mtim.tv_sec = 1;
	st.st_mtim.tv_nsec = 5;
	st.st_size = 16;
	st.st_ino = 42;
	files_etag(&st, etag);
	cr_expect_str_eq(etag, "3b9aca05-10-2a");
	/* the largest values still fit */
	st.st_mtim.tv_sec = INT64_MAX / 1000000000;
	st.st_size = INT64_MAX;
	st.st_ino = UINT64_MAX;
	files_etag(&st, etag);
	cr_expect_lt(strlen(etag), (size_t)FILE_MAX_ETAG);
	cr_expect_eq(strlen(etag), 16u + 1 + 16 + 1 + 16);
}

/* Decodes an INFO payload built by files_put_info. */
struct decoded {
	uint64_t type, size, mode, mtime, uid, gid;
	char name[64], path[64], link[64], etag[80];
	int n_fields;
};

static void decode(const struct buf *b, size_t start, struct decoded *d)
{
	struct frame f;
	struct frame_iter it;
	const uint8_t *val;
	uint16_t tag;
	size_t len;

	memset(d, 0, sizeof *d);
	cr_assert_gt(frame_parse(b->data + start, b->len - start, PROTO_MAX_PAYLOAD, &f), 0);
	cr_assert_eq(f.type, MSG_FILE_INFO);
	frame_iter_init(&it, &f);
	while (frame_iter_next(&it, &tag, &val, &len) > 0) {
		char *s = tag == TAG_NAME	 ? d->name :
			  tag == TAG_PATH	 ? d->path :
			  tag == TAG_LINK_TARGET ? d->link :
			  tag == TAG_ETAG	 ? d->etag :
						   NULL;
		uint64_t *u = tag == TAG_FILE_TYPE ? &d->type :
			      tag == TAG_SIZE	   ? &d->size :
			      tag == TAG_MODE	   ? &d->mode :
			      tag == TAG_MTIME_NS  ? &d->mtime :
			      tag == TAG_UID	   ? &d->uid :
			      tag == TAG_GID	   ? &d->gid :
						     NULL;

		d->n_fields++;
		if (s) {
			cr_assert_lt(len, 64u);
			memcpy(s, val, len);
		} else {
			cr_assert_not_null(u, "unexpected tag %u", tag);
			cr_assert_eq(frame_val_u64(val, len, u), 0);
		}
	}
}

static size_t put_info(struct buf *b, const char *name, const char *path, const struct stat *st,
		       const char *link)
{
	size_t start;

	cr_assert_eq(frame_begin(b, &start, MSG_FILE_INFO, 0), 0);
	cr_assert_eq(files_put_info(b, name, path, st, link), 0);
	cr_assert_eq(frame_end(b, start), 0);
	return start;
}

Test(files_info, info_fields)
{
	struct buf b = { 0 };
	struct stat st = { 0 };
	struct decoded d;

	st.st_mode = S_IFREG | 04755;
	st.st_size = 12;
	st.st_mtim.tv_sec = 2;
	st.st_mtim.tv_nsec = 7;
	st.st_uid = 1000;
	st.st_gid = 1001;
	st.st_ino = 9;
	decode(&b, put_info(&b, "a.txt", "/home/a.txt", &st, "ignored"), &d);
	cr_expect_str_eq(d.name, "a.txt");
	cr_expect_str_eq(d.path, "/home/a.txt");
	cr_expect_eq(d.type, FILE_TYPE_FILE);
	cr_expect_eq(d.size, 12u);
	cr_expect_eq(d.mode, 04755u);
	cr_expect_eq(d.mtime, 2000000007u);
	cr_expect_eq(d.uid, 1000u);
	cr_expect_eq(d.gid, 1001u);
	cr_expect_str_eq(d.etag, "77359407-c-9");
	cr_expect_str_eq(d.link, "", "a link target only for symlinks");

	st.st_mode = S_IFLNK | 0777;
	decode(&b, put_info(&b, NULL, NULL, &st, "../t"), &d);
	cr_expect_eq(d.type, FILE_TYPE_SYMLINK);
	cr_expect_str_eq(d.link, "../t");
	cr_expect_str_eq(d.etag, "", "an etag only for regular files");
	cr_expect_str_eq(d.name, "");
	cr_expect_str_eq(d.path, "");

	st.st_mode = S_IFDIR | 0755;
	decode(&b, put_info(&b, NULL, NULL, &st, NULL), &d);
	cr_expect_eq(d.type, FILE_TYPE_DIR);
	cr_expect_eq(d.n_fields, 6);
	cr_expect_eq(files_type(S_IFIFO), FILE_TYPE_FIFO);
	cr_expect_eq(files_type(S_IFCHR), FILE_TYPE_CHAR);
	cr_expect_eq(files_type(S_IFBLK), FILE_TYPE_BLOCK);
	cr_expect_eq(files_type(S_IFSOCK), FILE_TYPE_SOCKET);
	buf_free(&b);
}

/* A FILE_OPEN frame from (tag, u64 or string) pairs. */
static int parse(struct files_request *q, const char **reason, int n, ...)
{
	struct buf b = { 0 };
	struct frame f;
	size_t start;
	va_list ap;
	int r;

	cr_assert_eq(frame_begin(&b, &start, MSG_FILE_OPEN, 0), 0);
	va_start(ap, n);
	for (int i = 0; i < n; i++) {
		int tag = va_arg(ap, int);
		const char *s = va_arg(ap, const char *);
		uint64_t v = va_arg(ap, uint64_t);

		cr_assert_eq(s ? frame_put_str(&b, (uint16_t)tag, s) :
				 frame_put_u64(&b, (uint16_t)tag, v),
			     0);
	}
	va_end(ap);
	cr_assert_eq(frame_end(&b, start), 0);
	cr_assert_gt(frame_parse(b.data, b.len, PROTO_MAX_PAYLOAD, &f), 0);
	r = files_request_parse(&f, q, reason);
	buf_free(&b);
	return r;
}

#define U(tag, v) (int)(tag), (const char *)NULL, (uint64_t)(v)
#define S(tag, s) (int)(tag), (const char *)(s), (uint64_t)0

Test(files_request, fields)
{
	struct files_request q;
	const char *why = NULL;

	cr_expect_eq(parse(&q, &why, 3, U(TAG_FILE_OP, FILE_OP_READ), S(TAG_PATH, "a"),
			   U(TAG_SUFFIX, 10)),
		     0);
	cr_expect(q.has_suffix && q.suffix == 10 && q.path_len == 1);
	cr_expect_eq(parse(&q, &why, 4, U(TAG_FILE_OP, FILE_OP_READ), S(TAG_PATH, "a"),
			   U(TAG_SUFFIX, 10), U(TAG_OFFSET, 1)),
		     -EINVAL);
	cr_expect_eq(parse(&q, &why, 3, U(TAG_FILE_OP, FILE_OP_READ), S(TAG_PATH, "a"),
			   S(TAG_PATH, "b")),
		     -EINVAL, "a repeated field");
	cr_expect_eq(parse(&q, &why, 3, U(TAG_FILE_OP, FILE_OP_READ), S(TAG_PATH, "a"),
			   U(TAG_RUN_ID, 1)),
		     -EINVAL, "a field of another message");
	cr_expect_eq(parse(&q, &why, 2, U(TAG_FILE_OP, FILE_OP_RENAME), S(TAG_PATH, "a")), -EINVAL,
		     "RENAME without PATH2");
	cr_expect_eq(parse(&q, &why, 3, U(TAG_FILE_OP, FILE_OP_RENAME), S(TAG_PATH, "a"),
			   S(TAG_PATH2, "b")),
		     0);
	cr_expect_eq(parse(&q, &why, 2, U(TAG_FILE_OP, 99), S(TAG_PATH, "a")), -EINVAL);
	cr_expect_eq(parse(&q, &why, 3, U(TAG_FILE_OP, FILE_OP_MKDIR), S(TAG_PATH, "a"),
			   U(TAG_MODE, 010000)),
		     -EINVAL);
	cr_expect_eq(parse(&q, &why, 3, U(TAG_FILE_OP, FILE_OP_MKDIR), S(TAG_PATH, "a"),
			   U(TAG_MODE, 07777)),
		     0);
	cr_expect_eq(parse(&q, &why, 3, U(TAG_FILE_OP, FILE_OP_WRITE), S(TAG_PATH, "a"),
			   U(TAG_FILE_FLAGS, 8)),
		     -EINVAL, "an unknown flag");
	cr_expect_eq(parse(&q, &why, 3, U(TAG_FILE_OP, FILE_OP_WRITE), S(TAG_PATH, "a"),
			   S(TAG_IF_MATCH, "1-2-3")),
		     0);
	cr_expect_str_eq(q.if_match, "1-2-3");
}

/* A temporary tree: <tmp>/etc/passwd says "inside"; links to /etc/passwd (absolute) and to
 * ../../../../etc/passwd (relative, climbing). */
static char tmp[] = "/tmp/test-agent-files-XXXXXX";

static void make_tree(void)
{
	char p[256];
	int fd;

	cr_assert_not_null(mkdtemp(tmp));
	snprintf(p, sizeof p, "%s/etc", tmp);
	cr_assert_eq(mkdir(p, 0755), 0);
	snprintf(p, sizeof p, "%s/etc/passwd", tmp);
	fd = open(p, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	cr_assert_geq(fd, 0);
	cr_assert_eq(write(fd, "inside\n", 7), 7);
	close(fd);
	snprintf(p, sizeof p, "%s/abs", tmp);
	cr_assert_eq(symlink("/etc/passwd", p), 0);
	snprintf(p, sizeof p, "%s/rel", tmp);
	cr_assert_eq(symlink("../../../../etc/passwd", p), 0);
	snprintf(p, sizeof p, "%s/good", tmp);
	cr_assert_eq(symlink("etc/passwd", p), 0);
}

static void remove_tree(void)
{
	(void)rm_rf(tmp);
}

/* Follows rel's final symlink under root and reads what it leads to (-errno on failure). */
static int read_through(enum files_resolve how, const char *rel, char *out, size_t size)
{
	struct files_root root = { .how = how, .prefix = "", .workdir = "/" };
	char name[FILE_MAX_NAME + 1];
	int dirfd, fd, r;
	ssize_t n;

	root.fd = open(tmp, O_PATH | O_DIRECTORY | O_CLOEXEC);
	cr_assert_geq(root.fd, 0);
	r = files_lookup_follow(&root, rel, &dirfd, name);
	close(root.fd);
	if (r < 0)
		return r;
	fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	close(dirfd);
	if (fd < 0)
		return -errno;
	n = read(fd, out, size - 1);
	close(fd);
	out[n > 0 ? n : 0] = 0;
	return 0;
}

Test(files_resolve, an_absolute_symlink_stays_in_the_root, .init = make_tree, .fini = remove_tree)
{
	char buf[64];

	cr_assert_eq(read_through(FILES_IN_ROOT, "abs", buf, sizeof buf), 0);
	cr_expect_str_eq(buf, "inside\n", "the root's /etc/passwd, not the host's");
	cr_assert_eq(read_through(FILES_IN_ROOT, "rel", buf, sizeof buf), 0);
	cr_expect_str_eq(buf, "inside\n", "`..` stops at the root");
	/* the same links beneath a host root lead out of it: refused */
	cr_expect_eq(read_through(FILES_BENEATH, "abs", buf, sizeof buf), -EXDEV);
	cr_expect_eq(read_through(FILES_BENEATH, "rel", buf, sizeof buf), -EXDEV);
	/* positive control: a link that stays beneath */
	cr_assert_eq(read_through(FILES_BENEATH, "good", buf, sizeof buf), 0);
	cr_expect_str_eq(buf, "inside\n");
}

Test(files_resolve, a_symlink_loop_ends, .init = make_tree, .fini = remove_tree)
{
	char p[256], buf[64];

	snprintf(p, sizeof p, "%s/loop", tmp);
	cr_assert_eq(symlink("loop", p), 0);
	cr_expect_eq(read_through(FILES_IN_ROOT, "loop", buf, sizeof buf), -ELOOP);
	cr_expect_eq(read_through(FILES_IN_ROOT, "good", buf, sizeof buf), 0);
}
