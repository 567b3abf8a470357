/* SPDX-License-Identifier: MIT */
/* A main() for the fuzz harnesses in the normal build: runs LLVMFuzzerTestOneInput on every
 * file named on the command line, or found (not recursively) in a directory named there, so
 * `make test` replays the seed corpora and the crash regressions without libFuzzer. A
 * harness reports a broken property by aborting; this exits 1 when an argument cannot be
 * read or names no input at all. Arguments starting with '-' are options and ignored. */

#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv) __attribute__((weak));

static int replay_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	uint8_t *data = NULL;
	size_t n = 0, cap = 0;

	if (!f) {
		fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
		return -1;
	}
	for (;;) {
		if (n == cap) {
			cap = cap ? cap * 2 : 4096;
			data = realloc(data, cap);
			if (!data)
				abort();
		}
		size_t k = fread(data + n, 1, cap - n, f);
		if (k == 0)
			break;
		n += k;
	}
	if (ferror(f)) {
		fprintf(stderr, "replay: %s: read error\n", path);
		fclose(f);
		free(data);
		return -1;
	}
	fclose(f);
	/* An exact-size copy, so that ASan (when on) sees a read past the input. */
	uint8_t *exact = malloc(n ? n : 1);
	if (!exact)
		abort();
	if (n)
		memcpy(exact, data, n);
	free(data);
	LLVMFuzzerTestOneInput(exact, n);
	free(exact);
	return 0;
}

static int by_name(const struct dirent **a, const struct dirent **b)
{
	return strcmp((*a)->d_name, (*b)->d_name);
}

static int replay_dir(const char *dir, unsigned *count)
{
	struct dirent **ents;
	int n = scandir(dir, &ents, NULL, by_name), r = 0;

	if (n < 0) {
		fprintf(stderr, "replay: %s: %s\n", dir, strerror(errno));
		return -1;
	}
	for (int i = 0; i < n; i++) {
		char path[4096];
		struct stat st;

		snprintf(path, sizeof(path), "%s/%s", dir, ents[i]->d_name);
		if (ents[i]->d_name[0] != '.' && stat(path, &st) == 0 && S_ISREG(st.st_mode)) {
			if (replay_file(path) < 0)
				r = -1;
			else
				(*count)++;
		}
		free(ents[i]);
	}
	free(ents);
	return r;
}

int main(int argc, char **argv)
{
	unsigned count = 0;
	int bad = 0;

	if (LLVMFuzzerInitialize)
		LLVMFuzzerInitialize(&argc, &argv);
	for (int i = 1; i < argc; i++) {
		struct stat st;

		if (argv[i][0] == '-') /* options (libFuzzer's, a test runner's): not inputs */
			continue;
		if (stat(argv[i], &st) < 0) {
			fprintf(stderr, "replay: %s: %s\n", argv[i], strerror(errno));
			bad = 1;
		} else if (S_ISDIR(st.st_mode)) {
			if (replay_dir(argv[i], &count) < 0)
				bad = 1;
		} else if (replay_file(argv[i]) < 0) {
			bad = 1;
		} else {
			count++;
		}
	}
	if (count == 0) {
		fprintf(stderr, "replay: no input\n");
		return 1;
	}
	printf("replay: %u inputs, no crash\n", count);
	return bad;
}
