/* SPDX-License-Identifier: MIT */
/* The import of an OCI image layout from a tar (src/image/oci-layout.c,
 * image_import_layout_fd()): the tar's oci-layout, index.json and blobs/sha256/<hex> entries,
 * fuzz-max-len: 65536
 * the index pick, the manifest and config, the blobs' digests and the layers' unpacking, into a
 * real store in a scratch directory on tmpfs (/dev/shm, else $TMPDIR, else /tmp) that the
 * harness creates at start and removes at exit, with limits small enough for a fuzzer (4 MiB a
 * layer, 8 MiB an image, 4096 entries). Beyond memory errors:
 *   - a failed import leaves nothing behind: the store's blobs, layers and index are empty,
 *     and the refusal has a message;
 *   - an imported image has a valid digest and config digest, and layer dirs inside the
 *     store's layers/; removing it empties the store again;
 *   - nothing is created beside the store (the scratch dir holds only the input and the
 *     store, a sentinel file keeps its single link). */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "basic/util.h"
#include "fuzz-harness.h"
#include "image/image-internal.h"

static char scratch[PATH_MAX], input[PATH_MAX], root[PATH_MAX], layers[PATH_MAX],
	sentinel[PATH_MAX];
static struct image_store *store;

static void scratch_remove(void)
{
	image_store_close(store);
	store = NULL;
	if (scratch[0])
		(void)rm_rf(scratch);
}

int LLVMFuzzerInitialize(int *argc, char ***argv);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	const struct image_limits lim = {
		.max_layer_bytes = 4u << 20,
		.max_image_bytes = 8u << 20,
		.max_image_entries = 4096,
	};
	const char *base = getenv("TMPDIR");
	struct station_error e = {};
	struct stat st;
	int fd;

	if (stat("/dev/shm", &st) == 0 && S_ISDIR(st.st_mode) && access("/dev/shm", W_OK) == 0)
		base = "/dev/shm";
	else if (!base || !*base)
		base = "/tmp";
	FUZZ_CHECK(snprintf(scratch, sizeof scratch, "%s/fuzz-layout-XXXXXX", base) <
		   (int)sizeof scratch);
	FUZZ_CHECK(mkdtemp(scratch));
	atexit(scratch_remove);
	FUZZ_CHECK(snprintf(input, sizeof input, "%s/input.tar", scratch) < (int)sizeof input);
	FUZZ_CHECK(snprintf(root, sizeof root, "%s/root", scratch) < (int)sizeof root);
	FUZZ_CHECK(snprintf(layers, sizeof layers, "%s/root/images/layers/", scratch) <
		   (int)sizeof layers);
	FUZZ_CHECK(snprintf(sentinel, sizeof sentinel, "%s/sentinel", scratch) <
		   (int)sizeof sentinel);
	fd = open(sentinel, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	FUZZ_CHECK(fd >= 0 && close(fd) == 0);
	FUZZ_CHECK(mkdir(root, 0700) == 0);
	FUZZ_CHECK(image_store_open(root, &store, &e) == 0);
	image_store_set_limits(store, &lim);
	return 0;
}

static void check_empty(const char *sub)
{
	char path[PATH_MAX + 32];
	DIR *d;
	struct dirent *de;

	snprintf(path, sizeof path, "%s/images/%s", root, sub);
	d = opendir(path);
	FUZZ_CHECK(d);
	while ((de = readdir(d)))
		FUZZ_CHECK(!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."));
	closedir(d);
}

static void check_store_empty(void)
{
	struct stat st;
	DIR *d = opendir(scratch);
	struct dirent *de;

	check_empty("blobs/sha256");
	check_empty("layers");
	check_empty("index");
	FUZZ_CHECK(d);
	while ((de = readdir(d)))
		FUZZ_CHECK(!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..") ||
			   !strcmp(de->d_name, "input.tar") || !strcmp(de->d_name, "root") ||
			   !strcmp(de->d_name, "sentinel"));
	closedir(d);
	FUZZ_CHECK(lstat(sentinel, &st) == 0 && S_ISREG(st.st_mode) && st.st_nlink == 1 &&
		   st.st_size == 0);
	FUZZ_CHECK(lstat(input, &st) == 0 && S_ISREG(st.st_mode) && st.st_nlink == 1);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct station_error e = {};
	struct image *img = NULL;
	int fd, r;

	if (size > (1u << 20))
		return 0;
	fd = open(input, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	FUZZ_CHECK(fd >= 0);
	FUZZ_CHECK(size == 0 || write(fd, data, size) == (ssize_t)size);
	FUZZ_CHECK(close(fd) == 0);

	fd = open(input, O_RDONLY | O_CLOEXEC);
	FUZZ_CHECK(fd >= 0);
	r = image_import_layout_fd(store, fd, "input.tar", "fuzz", &img, &e);
	close(fd);
	if (getenv("FUZZ_VERBOSE"))
		fprintf(stderr, "layout: %d %s\n", r, e.message);
	if (r == 0) {
		struct station_error re = {};
		struct stat st;

		FUZZ_CHECK(image_digest_is_valid(img->digest));
		FUZZ_CHECK(image_digest_is_valid(img->config_digest));
		FUZZ_CHECK(!img->index_digest[0] || image_digest_is_valid(img->index_digest));
		FUZZ_CHECK(img->config.os && strcmp(img->config.os, "linux") == 0);
		for (size_t i = 0; i < img->n_layers; i++) {
			FUZZ_CHECK(strncmp(img->layers[i], layers, strlen(layers)) == 0);
			FUZZ_CHECK(!strchr(img->layers[i] + strlen(layers), '/'));
			FUZZ_CHECK(lstat(img->layers[i], &st) == 0 && S_ISDIR(st.st_mode));
		}
		FUZZ_CHECK(image_remove(store, img->digest, &re) == 0);
		image_free(img);
	} else {
		FUZZ_CHECK(r < 0);
		if (r != -ENOMEM)
			fuzz_check_error(&e);
	}
	check_store_empty();
	return 0;
}
