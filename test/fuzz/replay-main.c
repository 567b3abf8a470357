/* SPDX-License-Identifier: MIT */
/* A main() for a fuzz harness without libFuzzer: every file given, and every file of every
 * directory given (not recursive, dot files skipped), is read and passed once to
 * LLVMFuzzerTestOneInput(). Registered as a test per harness (test/fuzz/meson.build) so that
 * `make test` and `make test-asan` replay the corpus and the regression inputs.
 *
 *   replay-NAME [--optional=DIR]... PATH...
 *
 * A PATH that does not exist is an error; an --optional directory may be missing (the
 * regression directory of a harness that never crashed). Other options (the test runner adds
 * --verbose) are ignored. Exits 0 after at least one input, 1 on an unreadable path or none. */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fuzz.h"

/* Inputs larger than this are not fuzz inputs. */
#define REPLAY_MAX_INPUT (16u * 1024 * 1024)

__attribute__((weak)) int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	return 0;
}

static int replay_file(int dirfd, const char *name, const char *shown, unsigned *count)
{
	int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0) {
		fprintf(stderr, "replay: %s: %s\n", shown, strerror(errno));
		return -1;
	}
	struct stat st;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size > REPLAY_MAX_INPUT) {
		fprintf(stderr, "replay: %s: not a regular file of at most %u bytes\n", shown,
			REPLAY_MAX_INPUT);
		close(fd);
		return -1;
	}
	size_t size = (size_t)st.st_size;
	/* Exactly size bytes on the heap, so that ASan sees a read past the input's end. */
	uint8_t *data = malloc(size ? size : 1);
	if (!data) {
		close(fd);
		return -1;
	}
	size_t got = 0;
	while (got < size) {
		ssize_t r = read(fd, data + got, size - got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			fprintf(stderr, "replay: %s: short read\n", shown);
			free(data);
			close(fd);
			return -1;
		}
		got += (size_t)r;
	}
	close(fd);
	LLVMFuzzerTestOneInput(data, size);
	free(data);
	(*count)++;
	return 0;
}

static int names_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int replay_dir(const char *path, unsigned *count)
{
	DIR *d = opendir(path);
	if (!d) {
		fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
		return -1;
	}
	char **names = NULL;
	size_t n = 0, cap = 0;
	int r = 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		if (n == cap) {
			cap = cap ? 2 * cap : 64;
			char **grown = realloc(names, cap * sizeof(*names));
			if (!grown) {
				r = -1;
				break;
			}
			names = grown;
		}
		names[n] = strdup(de->d_name);
		if (!names[n]) {
			r = -1;
			break;
		}
		n++;
	}
	/* A fixed order, so that a failure names the same input every time. */
	if (n > 1)
		qsort(names, n, sizeof(*names), names_cmp);
	for (size_t i = 0; i < n; i++) {
		if (r == 0) {
			char shown[4096];
			snprintf(shown, sizeof(shown), "%s/%s", path, names[i]);
			if (replay_file(dirfd(d), names[i], shown, count) < 0)
				r = -1;
		}
		free(names[i]);
	}
	free(names);
	closedir(d);
	return r;
}

static int replay_path(const char *path, unsigned *count)
{
	struct stat st;
	if (stat(path, &st) < 0) {
		fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
		return -1;
	}
	if (S_ISDIR(st.st_mode))
		return replay_dir(path, count);
	return replay_file(AT_FDCWD, path, path, count);
}

int main(int argc, char **argv)
{
	LLVMFuzzerInitialize(&argc, &argv);

	unsigned count = 0;
	int failed = 0;
	for (int i = 1; i < argc; i++) {
		const char *arg = argv[i];
		if (strncmp(arg, "--optional=", 11) == 0) {
			struct stat st;
			if (stat(arg + 11, &st) < 0 && errno == ENOENT)
				continue;
			arg += 11;
		} else if (arg[0] == '-') {
			continue;
		}
		if (replay_path(arg, &count) < 0)
			failed = 1;
	}
	if (failed)
		return 1;
	if (count == 0) {
		fprintf(stderr, "replay: no input\n");
		return 1;
	}
	printf("replay: %u inputs\n", count);
	return 0;
}
