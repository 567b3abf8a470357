/* SPDX-License-Identifier: MIT */
/* The layer unpacker (src/image/unpack.c) on a hostile layer blob (a tar, plain, gzip or zstd:
 * the unpacker tells from the content), called as layer_unpack() calls it: layer_diff_id()
 * with the byte limit, then layer_unpack_file() into a new directory, under limits small
 * enough for a fuzzer (4 MiB, 4096 entries). fuzz-max-len: 65536
 *
 * Everything happens in a scratch directory on tmpfs (/dev/shm, else $TMPDIR, else /tmp),
 * created at start and removed at exit:
 *   scratch/blob             the input
 *   scratch/sentinel/file    must stay as it is, alone, with one link
 *   scratch/work/layer       the unpacked layer, removed after each input
 * Beyond memory errors, after every input the promises of unpack.c's contract are checked,
 * and a broken one aborts:
 *   - nothing is created, linked or changed outside work/layer (scratch holds only blob,
 *     sentinel and work; the blob and the sentinel file keep one link each and their inode,
 *     mode, owner and size; sentinel holds only file);
 *   - a refused layer leaves nothing behind (work is empty), a refusal has a message naming
 *     the layer;
 *   - an accepted layer holds only directories, regular files, symlinks, FIFOs and 0/0
 *     character devices (overlay whiteouts), all on the same filesystem, all owned by ids
 *     below 65536, with no xattr but user.* (not user.overlay.*) and trusted.overlay.opaque. */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "basic/util.h"
#include "fuzz-harness.h"
#include "image/image-internal.h"

#define LAYER_NAME "sha256:0123456789ab"

static char scratch[PATH_MAX], blob[PATH_MAX], sentinel_dir[PATH_MAX], sentinel[PATH_MAX],
	work[PATH_MAX], dest[PATH_MAX];
static struct stat blob_st, sentinel_st;
static dev_t scratch_dev;

static void scratch_remove(void)
{
	if (scratch[0])
		(void)rm_rf(scratch);
}

int LLVMFuzzerInitialize(int *argc, char ***argv);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	const char *base = getenv("TMPDIR");
	struct stat st;
	int fd;

	if (stat("/dev/shm", &st) == 0 && S_ISDIR(st.st_mode) && access("/dev/shm", W_OK) == 0)
		base = "/dev/shm";
	else if (!base || !*base)
		base = "/tmp";
	FUZZ_CHECK(snprintf(scratch, sizeof scratch, "%s/fuzz-unpack-XXXXXX", base) <
		   (int)sizeof scratch);
	FUZZ_CHECK(mkdtemp(scratch));
	atexit(scratch_remove);
	FUZZ_CHECK(snprintf(blob, sizeof blob, "%s/blob", scratch) < (int)sizeof blob);
	FUZZ_CHECK(snprintf(sentinel_dir, sizeof sentinel_dir, "%s/sentinel", scratch) <
		   (int)sizeof sentinel_dir);
	FUZZ_CHECK(snprintf(sentinel, sizeof sentinel, "%s/sentinel/file", scratch) <
		   (int)sizeof sentinel);
	FUZZ_CHECK(snprintf(work, sizeof work, "%s/work", scratch) < (int)sizeof work);
	FUZZ_CHECK(snprintf(dest, sizeof dest, "%s/work/layer", scratch) < (int)sizeof dest);
	FUZZ_CHECK(mkdir(sentinel_dir, 0755) == 0 && mkdir(work, 0755) == 0);
	fd = open(sentinel, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	FUZZ_CHECK(fd >= 0 && write(fd, "sentinel\n", 9) == 9 && close(fd) == 0);
	FUZZ_CHECK(stat(sentinel, &sentinel_st) == 0);
	fd = open(blob, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	FUZZ_CHECK(fd >= 0 && close(fd) == 0);
	FUZZ_CHECK(stat(scratch, &st) == 0);
	scratch_dev = st.st_dev;
	return 0;
}

/* The names in dir, sorted, as "a,b,c". */
static void dir_names(const char *dir, char *buf, size_t size)
{
	struct dirent **ents;
	int n = scandir(dir, &ents, NULL, alphasort);
	size_t len = 0;

	FUZZ_CHECK(n >= 0);
	buf[0] = '\0';
	for (int i = 0; i < n; i++) {
		if (strcmp(ents[i]->d_name, ".") && strcmp(ents[i]->d_name, "..") && len < size)
			len += snprintf(buf + len, size - len, "%s%s", len ? "," : "",
					ents[i]->d_name);
		free(ents[i]);
	}
	free(ents);
}

static bool same_file(const struct stat *a, const struct stat *b)
{
	return a->st_ino == b->st_ino && a->st_dev == b->st_dev && a->st_mode == b->st_mode &&
	       a->st_uid == b->st_uid && a->st_gid == b->st_gid && a->st_size == b->st_size &&
	       a->st_nlink == 1 && b->st_nlink == 1;
}

static void check_outside(bool unpacked)
{
	char names[256];
	struct stat st;

	dir_names(scratch, names, sizeof names);
	FUZZ_CHECK(strcmp(names, "blob,sentinel,work") == 0);
	dir_names(sentinel_dir, names, sizeof names);
	FUZZ_CHECK(strcmp(names, "file") == 0);
	FUZZ_CHECK(lstat(sentinel, &st) == 0 && same_file(&st, &sentinel_st));
	FUZZ_CHECK(st.st_mtim.tv_sec == sentinel_st.st_mtim.tv_sec &&
		   st.st_mtim.tv_nsec == sentinel_st.st_mtim.tv_nsec);
	FUZZ_CHECK(lstat(blob, &st) == 0 && same_file(&st, &blob_st));
	dir_names(work, names, sizeof names);
	FUZZ_CHECK(strcmp(names, unpacked ? "layer" : "") == 0);
}

static void check_xattrs(const char *path)
{
	char list[4096], value[8];
	ssize_t n = llistxattr(path, list, sizeof list);

	if (n < 0) {
		FUZZ_CHECK(errno == ENOTSUP);
		return;
	}
	for (char *name = list; name < list + n; name += strlen(name) + 1) {
		if (strcmp(name, "trusted.overlay.opaque") == 0) {
			ssize_t k = lgetxattr(path, name, value, sizeof value);
			FUZZ_CHECK(k == 1 && value[0] == 'y');
			continue;
		}
		FUZZ_CHECK(strncmp(name, "user.", 5) == 0);
		FUZZ_CHECK(strncmp(name, "user.overlay.", 13) != 0);
	}
}

static int check_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	FUZZ_CHECK(flag != FTW_NS && flag != FTW_DNR);
	FUZZ_CHECK(st->st_dev == scratch_dev);
	FUZZ_CHECK(st->st_uid < LAYER_ID_RANGE && st->st_gid < LAYER_ID_RANGE);
	switch (st->st_mode & S_IFMT) {
	case S_IFDIR:
	case S_IFREG:
	case S_IFLNK:
	case S_IFIFO:
		break;
	case S_IFCHR:
		FUZZ_CHECK(major(st->st_rdev) == 0 && minor(st->st_rdev) == 0);
		break;
	default:
		FUZZ_CHECK(!"a block device or a socket in a layer");
	}
	check_xattrs(path);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const struct layer_limits lim = {
		.max_bytes = 4u << 20,
		.max_entries = 4096,
		.bytes_what = "the harness's byte limit",
		.entries_what = "the harness's entry limit",
	};
	struct station_error e = {};
	char diff_id[IMAGE_DIGEST_MAX];
	uint64_t tar_size = 0, entries = 0;
	int fd, r;

	if (size > (1u << 20))
		return 0;
	fd = open(blob, O_WRONLY | O_TRUNC | O_CLOEXEC);
	FUZZ_CHECK(fd >= 0);
	FUZZ_CHECK(size == 0 || write(fd, data, size) == (ssize_t)size);
	FUZZ_CHECK(close(fd) == 0);
	FUZZ_CHECK(stat(blob, &blob_st) == 0);

	r = layer_diff_id(blob, LAYER_NAME, lim.max_bytes, diff_id, &tar_size, &e);
	if (r == 0) {
		FUZZ_CHECK(image_digest_is_valid(diff_id));
		FUZZ_CHECK(tar_size <= lim.max_bytes);
		r = layer_unpack_file(blob, dest, LAYER_NAME, &lim, &entries, &e);
		if (r == 0) {
			FUZZ_CHECK(entries <= lim.max_entries);
			check_outside(true);
			FUZZ_CHECK(nftw(dest, check_entry, 16, FTW_PHYS) == 0);
			FUZZ_CHECK(rm_rf(dest) >= 0);
		} else {
			FUZZ_CHECK(r < 0);
			fuzz_check_error(&e);
			FUZZ_CHECK(strstr(e.message, LAYER_NAME));
		}
	} else if (r != -EFBIG) {
		FUZZ_CHECK(r == -EBADMSG);
		fuzz_check_error(&e);
	}
	if (getenv("FUZZ_VERBOSE"))
		fprintf(stderr, "unpack: %d %s\n", r, e.message);
	check_outside(false);
	return 0;
}
