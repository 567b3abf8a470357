/* SPDX-License-Identifier: MIT */
#pragma once

/* Fixtures for the image tests: temporary dirs, the busybox layout built by
 * test/helpers/make-busybox-image, layer tars written with libarchive, and directory counts
 * for "nothing left behind". */

#include <archive.h>
#include <archive_entry.h>
#include <criterion/criterion.h>
#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include "basic/cleanup.h"
#include "basic/util.h"

#define MAKE_BUSYBOX_IMAGE SOURCE_ROOT "/test/helpers/make-busybox-image"

static inline void tmpdir_make(char *buf, size_t size, const char *prefix)
{
	snprintf(buf, size, "/tmp/%s-XXXXXX", prefix);
	cr_assert_not_null(mkdtemp(buf));
}

/* Runs cmd through the shell and returns the first line it prints that starts with key,
 * minus the key and a space ("manifest sha256:…"). */
static inline void run_capture(const char *cmd, const char *key, char *ret, size_t size)
{
	FILE *p = popen(cmd, "r");
	char line[512];

	ret[0] = '\0';
	cr_assert_not_null(p, "popen %s", cmd);
	while (fgets(line, sizeof line, p)) {
		line[strcspn(line, "\n")] = '\0';
		if (strncmp(line, key, strlen(key)) == 0 && line[strlen(key)] == ' ' && !ret[0])
			snprintf(ret, size, "%s", line + strlen(key) + 1);
	}
	cr_assert_eq(pclose(p), 0, "command failed: %s", cmd);
}

/* Builds the busybox layout in dir (and dir.tar when tar), with options (may be ""); the
 * manifest digest goes to manifest, the index digest (with --index) to index. */
static inline void busybox_layout(const char *dir, bool tar, const char *options, char *manifest,
				  char *index)
{
	char cmd[PATH_MAX * 3];

	snprintf(cmd, sizeof cmd, "%s '%s' %s%s%s %s", MAKE_BUSYBOX_IMAGE, dir,
		 tar ? "--tar '" : "", tar ? dir : "", tar ? ".tar'" : "", options);
	run_capture(cmd, "manifest", manifest, 80);
	if (index)
		run_capture(cmd, "index", index, 80);
}

/* Entries in dir, "." and ".." not counted; -1 when dir is missing. */
static inline int dir_count(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	int n = 0;

	if (!d)
		return -1;
	while ((de = readdir(d)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			n++;
	closedir(d);
	return n;
}

/* One entry of a test layer. type: 'f' file, 'd' dir, 'l' symlink, 'h' hard link, 'c' char
 * device, 'b' block device, 'p' fifo. data: file content or link target. */
struct tar_entry {
	const char *path;
	char type;
	const char *data;
	mode_t mode;
	const char *xattr; /* name of an xattr to set to "1" (or xattr_value), or NULL */
	unsigned uid, gid;
	const void *xattr_value; /* xattr_len bytes */
	size_t xattr_len;
	size_t zeros; /* 'f' without data: this many zero bytes */
};

static inline void tar_write(const char *path, const struct tar_entry *ents, size_t n, bool gzip)
{
	struct archive *a = archive_write_new();

	cr_assert_not_null(a);
	cr_assert_eq(archive_write_set_format_pax(a), ARCHIVE_OK);
	if (gzip)
		cr_assert_eq(archive_write_add_filter_gzip(a), ARCHIVE_OK);
	cr_assert_eq(archive_write_open_filename(a, path), ARCHIVE_OK);
	for (size_t i = 0; i < n; i++) {
		struct archive_entry *e = archive_entry_new();
		const struct tar_entry *t = &ents[i];
		size_t len = t->type == 'f' && t->data ? strlen(t->data) :
			     t->type == 'f'	       ? t->zeros :
							 0;
		mode_t type = t->type == 'd' ? AE_IFDIR :
			      t->type == 'l' ? AE_IFLNK :
			      t->type == 'c' ? AE_IFCHR :
			      t->type == 'b' ? AE_IFBLK :
			      t->type == 'p' ? AE_IFIFO :
					       AE_IFREG;

		archive_entry_set_pathname(e, t->path);
		archive_entry_set_filetype(e, type);
		archive_entry_set_perm(e, t->mode ? t->mode : (t->type == 'd' ? 0755 : 0644));
		archive_entry_set_mtime(e, 1700000000, 0);
		if (t->type == 'l')
			archive_entry_set_symlink(e, t->data);
		if (t->type == 'h')
			archive_entry_set_hardlink(e, t->data);
		if (t->type == 'c' || t->type == 'b')
			archive_entry_set_rdev(e, makedev(1, 3));
		if (t->xattr)
			archive_entry_xattr_add_entry(e, t->xattr, t->xattr_value ?: "1",
						      t->xattr_value ? t->xattr_len : 1);
		archive_entry_set_uid(e, t->uid);
		archive_entry_set_gid(e, t->gid);
		archive_entry_set_size(e, len);
		cr_assert_eq(archive_write_header(a, e), ARCHIVE_OK, "%s: %s", t->path,
			     archive_error_string(a));
		if (len && t->data) {
			cr_assert_eq(archive_write_data(a, t->data, len), (la_ssize_t)len);
		} else if (len) {
			static const char zero[65536];

			for (size_t done = 0; done < len;) {
				size_t k = len - done < sizeof zero ? len - done : sizeof zero;

				cr_assert_eq(archive_write_data(a, zero, k), (la_ssize_t)k);
				done += k;
			}
		}
		archive_entry_free(e);
	}
	cr_assert_eq(archive_write_close(a), ARCHIVE_OK);
	archive_write_free(a);
}

static inline void file_flip_byte(const char *path, off_t offset)
{
	FILE *f = fopen(path, "r+");
	int c;

	cr_assert_not_null(f, "%s", path);
	cr_assert_eq(fseeko(f, offset, SEEK_SET), 0);
	c = fgetc(f);
	cr_assert_eq(fseeko(f, offset, SEEK_SET), 0);
	fputc(c ^ 0xff, f);
	fclose(f);
}
