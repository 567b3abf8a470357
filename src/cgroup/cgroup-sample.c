/* SPDX-License-Identifier: MIT */
/* A group's counters from files opened once (cgroup-sample.h). */

#include "cgroup/cgroup-sample.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "basic/cleanup.h"
#include "basic/safe-fs.h"
#include "basic/util.h"
#include "cgroup/cgroup-internal.h"

enum sample_file {
	SAMPLE_CPU,
	SAMPLE_MEMORY,
	SAMPLE_MEMORY_STAT,
	SAMPLE_PIDS,
	_SAMPLE_MAX,
};

static const char *const v1_files[_SAMPLE_MAX] = {
	[SAMPLE_CPU] = "cpuacct.usage",
	[SAMPLE_MEMORY] = "memory.usage_in_bytes",
	[SAMPLE_MEMORY_STAT] = "memory.stat",
	[SAMPLE_PIDS] = "pids.current",
};

static const char *const v2_files[_SAMPLE_MAX] = {
	[SAMPLE_CPU] = "cpu.stat",
	[SAMPLE_MEMORY] = "memory.current",
	[SAMPLE_MEMORY_STAT] = "memory.stat",
	[SAMPLE_PIDS] = "pids.current",
};

struct cgroup_sampler {
	enum cgroup_version version;
	int fds[_SAMPLE_MAX]; /* -1: the host has no such file for this group */
};

static bool is_cgroupfs(int fd)
{
	struct statfs sfs;

	return fstatfs(fd, &sfs) >= 0 &&
	       (sfs.f_type == CGROUP_SUPER_MAGIC || sfs.f_type == CGROUP2_SUPER_MAGIC);
}

/* The group's own directory: a path the controller made, no symlink at its end, on cgroupfs. */
static int open_group_dir(const char *dir)
{
	_cleanup_close_ int fd = open(dir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

	if (fd < 0)
		return negative_errno();
	if (!is_cgroupfs(fd))
		return -EXDEV;
	return TAKE_FD(fd);
}

/* name (one fixed component) beneath dfd: a regular file of a cgroup filesystem. */
static int open_counter(int dfd, const char *name)
{
	_cleanup_close_ int fd = safe_open_file(dfd, name, O_RDONLY, 0, SAFE_BENEATH);

	if (fd < 0)
		return fd;
	if (!is_cgroupfs(fd))
		return -EXDEV;
	return TAKE_FD(fd);
}

void cgroup_sampler_free(struct cgroup_sampler *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < _SAMPLE_MAX; i++)
		if (s->fds[i] >= 0)
			close(s->fds[i]);
	free(s);
}

DEFINE_TRIVIAL_CLEANUP_FUNC(struct cgroup_sampler *, cgroup_sampler_free)

int cgroup_sampler_open(const struct cgroup *cg, struct cgroup_sampler **ret)
{
	_cleanup_(cgroup_sampler_freep) struct cgroup_sampler *s = NULL;
	const char *const *names;
	size_t found = 0;

	if (!cg || !ret)
		return -EINVAL;
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->version = cg->version;
	names = cg->version == CGROUP_V2 ? v2_files : v1_files;
	for (size_t i = 0; i < _SAMPLE_MAX; i++)
		s->fds[i] = -1;
	/* v1: each file in the first of the group's hierarchies that has it */
	for (size_t d = 0; d < cg->n_dirs && found < _SAMPLE_MAX; d++) {
		_cleanup_close_ int dfd = open_group_dir(cg->dirs[d]);
		if (dfd < 0)
			continue;
		for (size_t i = 0; i < _SAMPLE_MAX; i++) {
			if (s->fds[i] >= 0)
				continue;
			s->fds[i] = open_counter(dfd, names[i]);
			if (s->fds[i] >= 0)
				found++;
		}
	}
	if (found == 0)
		return -ENOENT;
	*ret = TAKE_PTR(s);
	return 0;
}

/* One pread of a whole control file (seq_file: a short read is all of it). */
static ssize_t pread_all(int fd, char *buf, size_t size)
{
	ssize_t n;

	do
		n = pread(fd, buf, size - 1, 0);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return negative_errno();
	if ((size_t)n >= size - 1)
		return -EFBIG;
	buf[n] = '\0';
	return n;
}

static int read_u64_at(int fd, uint64_t *ret)
{
	char buf[64];
	ssize_t n;

	if (fd < 0) {
		*ret = 0;
		return 0;
	}
	n = pread_all(fd, buf, sizeof buf);
	if (n < 0)
		return (int)n;
	buf[strcspn(buf, "\n")] = '\0';
	return parse_u64(buf, UINT64_MAX, ret);
}

/* The value of key in the flat-keyed file at fd (0 when the file or the key is absent). */
static int read_keyed_at(int fd, const char *key, uint64_t *ret)
{
	char buf[8192];
	ssize_t n;
	int r;

	*ret = 0;
	if (fd < 0)
		return 0;
	n = pread_all(fd, buf, sizeof buf);
	if (n < 0)
		return (int)n;
	r = cg_parse_keyed(buf, key, ret);
	return r == -ENOENT ? 0 : r;
}

int cgroup_sampler_read(struct cgroup_sampler *s, struct cgroup_sample *ret)
{
	bool v2 = s->version == CGROUP_V2;
	uint64_t cpu = 0, current = 0, inactive = 0, pids = 0;
	int r;

	if (v2)
		r = read_keyed_at(s->fds[SAMPLE_CPU], "usage_usec", &cpu);
	else
		r = read_u64_at(s->fds[SAMPLE_CPU], &cpu);
	if (r >= 0)
		r = read_u64_at(s->fds[SAMPLE_MEMORY], &current);
	if (r >= 0)
		r = read_keyed_at(s->fds[SAMPLE_MEMORY_STAT],
				  v2 ? "inactive_file" : "total_inactive_file", &inactive);
	if (r >= 0)
		r = read_u64_at(s->fds[SAMPLE_PIDS], &pids);
	if (r < 0)
		return r;
	*ret = (struct cgroup_sample){
		.cpu_usec = v2 ? cpu : cpu / 1000,
		.memory_bytes = current > inactive ? current - inactive : 0,
		.pids = pids,
	};
	return 0;
}
