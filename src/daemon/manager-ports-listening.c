/* SPDX-License-Identifier: MIT */
/* GET …/ports "listening": the TCP sockets listening in a workspace's network namespace
 * (net/listening.h, from the kernel) and the workspace's processes that hold them. The
 * processes are the workspace cgroup's (cgroup.procs, its subgroups walked), their sockets
 * found as "socket:[inode]" links in /proc/<pid>/fd, their pid as the workspace sees it (the
 * last NSpid of /proc/<pid>/status) and their name from /proc/<pid>/comm. Only kernel-made
 * files are read, never the workspace's tree; what the workspace controls (a process's name,
 * how many processes, fds and groups it makes) is bounded and made valid UTF-8. */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "basic/cleanup.h"
#include "basic/log.h"
#include "basic/util.h"
#include "cgroup/cgroup.h"
#include "manager-internal.h"
#include "net/listening.h"

#define WALK_MAX_PIDS 4096
#define WALK_MAX_GROUPS 256
#define WALK_MAX_DEPTH 16
#define WALK_MAX_READLINKS 20000
#define COMMAND_MAX 64

struct holder {
	pid_t pid; /* the host's; 0: none found */
};

struct walk {
	pid_t pids[WALK_MAX_PIDS];
	size_t n_pids, n_groups;
};

static void procs_read(int dirfd, struct walk *w)
{
	_cleanup_close_ int fd = openat(dirfd, "cgroup.procs", O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	char buf[8192];
	ssize_t k;
	size_t used = 0;

	if (fd < 0)
		return;
	while ((k = read(fd, buf + used, sizeof buf - 1 - used)) > 0) {
		char *line = buf, *nl;

		used += (size_t)k;
		buf[used] = '\0';
		while ((nl = strchr(line, '\n'))) {
			*nl = '\0';
			uint64_t v;
			if (parse_u64(line, INT32_MAX, &v) >= 0 && v > 0 &&
			    w->n_pids < WALK_MAX_PIDS)
				w->pids[w->n_pids++] = (pid_t)v;
			line = nl + 1;
		}
		used = strlen(line);
		memmove(buf, line, used);
		if (used >= sizeof buf - 1)
			used = 0; /* no line is this long */
	}
}

/* The group at fd (taken) and its subgroups, depth first, bounded. */
static void group_walk(int fd, unsigned depth, struct walk *w)
{
	DIR *d;
	struct dirent *de;

	if (w->n_groups++ >= WALK_MAX_GROUPS) {
		close(fd);
		return;
	}
	procs_read(fd, w);
	d = depth < WALK_MAX_DEPTH ? fdopendir(fd) : NULL;
	if (!d) {
		close(fd);
		return;
	}
	while ((de = readdir(d)) && w->n_pids < WALK_MAX_PIDS) {
		int sub;

		if (de->d_type != DT_DIR || de->d_name[0] == '.')
			continue;
		sub = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
		if (sub >= 0)
			group_walk(sub, depth + 1, w);
	}
	closedir(d);
}

static uint64_t socket_inode(const char *link)
{
	uint64_t v;
	char digits[24];
	size_t n;

	if (strncmp(link, "socket:[", 8) != 0)
		return 0;
	n = strcspn(link + 8, "]");
	if (n == 0 || n >= sizeof digits || link[8 + n] != ']' || link[9 + n] != '\0')
		return 0;
	memcpy(digits, link + 8, n);
	digits[n] = '\0';
	return parse_u64(digits, UINT64_MAX, &v) >= 0 ? v : 0;
}

/* Matches the fds of pid against the sockets; *budget readlinks at most. */
static void pid_sockets(pid_t pid, const struct listening_socket *s, struct holder *h, size_t n,
			size_t *budget)
{
	char path[64];
	DIR *d;
	struct dirent *de;

	snprintf(path, sizeof path, "/proc/%d/fd", (int)pid);
	d = opendir(path);
	if (!d)
		return;
	while (*budget > 0 && (de = readdir(d))) {
		char link[64];
		ssize_t k;
		uint64_t ino;

		if (de->d_name[0] == '.')
			continue;
		(*budget)--;
		k = readlinkat(dirfd(d), de->d_name, link, sizeof link - 1);
		if (k <= 0)
			continue;
		link[k] = '\0';
		ino = socket_inode(link);
		for (size_t i = 0; ino && i < n; i++)
			if (s[i].inode == ino && h[i].pid == 0)
				h[i].pid = pid;
	}
	closedir(d);
}

/* The pid as the workspace sees it: the last field of NSpid; 0 when unreadable. */
static int64_t pid_in_workspace(pid_t pid)
{
	_cleanup_free_ char *text = NULL;
	char path[64], *line, *last = NULL, *tok, *save = NULL;
	size_t n;
	uint64_t v;

	snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
	if (read_file(path, 65536, &text, &n) < 0)
		return 0;
	line = strstr(text, "\nNSpid:");
	if (!line)
		return 0;
	line += strlen("\nNSpid:");
	line[strcspn(line, "\n")] = '\0';
	for (tok = strtok_r(line, " \t", &save); tok; tok = strtok_r(NULL, " \t", &save))
		last = tok;
	return last && parse_u64(last, INT32_MAX, &v) >= 0 ? (int64_t)v : 0;
}

/* comm as valid UTF-8 (a byte that is not: U+FFFD), control characters as '?'. */
static json_t *pid_command(pid_t pid)
{
	_cleanup_free_ char *text = NULL;
	char path[64], out[COMMAND_MAX * 3 + 1];
	size_t n, o = 0;

	snprintf(path, sizeof path, "/proc/%d/comm", (int)pid);
	if (read_file(path, COMMAND_MAX, &text, &n) < 0)
		return json_null();
	if (n > 0 && text[n - 1] == '\n')
		n--;
	for (size_t i = 0; i < n && o + 4 < sizeof out;) {
		size_t k = utf8_char_len(text + i, n - i);

		if (k == 0) {
			memcpy(out + o, "\xef\xbf\xbd", 3);
			o += 3;
			i++;
		} else if (k == 1 && ((uint8_t)text[i] < 0x20 || text[i] == 0x7f)) {
			out[o++] = '?';
			i++;
		} else {
			memcpy(out + o, text + i, k);
			o += k;
			i += k;
		}
	}
	out[o] = '\0';
	return json_string(out);
}

static int cmp_socket(const void *a, const void *b)
{
	const struct listening_socket *x = a, *y = b;

	if (x->port != y->port)
		return (int)x->port - (int)y->port;
	if (x->family != y->family)
		return x->family == AF_INET ? -1 : 1;
	return strcmp(x->address, y->address);
}

static json_t *listening_to_json(const struct listening_socket *s, size_t n, const struct holder *h)
{
	json_t *a = json_array();

	for (size_t i = 0; a && i < n; i++) {
		json_t *o = json_object();
		int64_t pid = h[i].pid ? pid_in_workspace(h[i].pid) : 0;

		if (!o || json_array_append_new(a, o) < 0) {
			json_decref(a);
			return NULL;
		}
		json_object_set_new(o, "port", json_integer(s[i].port));
		json_object_set_new(o, "address", json_string(s[i].address));
		json_object_set_new(o, "proto",
				    json_string(s[i].family == AF_INET6 ? "tcp6" : "tcp"));
		json_object_set_new(o, "pid", pid > 0 ? json_integer(pid) : json_null());
		json_object_set_new(o, "command", pid > 0 ? pid_command(h[i].pid) : json_null());
	}
	return a;
}

/* The holders of the sockets among the workspace cgroup's processes. */
static void holders_find(const struct workspace *ws, const struct listening_socket *s, size_t n,
			 struct holder *h)
{
	_cleanup_free_ struct walk *w = calloc(1, sizeof *w);
	size_t budget = WALK_MAX_READLINKS;
	int dirfd;

	if (!w || !ws->cgroup || ws->cgroup->n_dirs == 0)
		return;
	dirfd = open(ws->cgroup->dirs[0], O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	if (dirfd < 0)
		return;
	group_walk(dirfd, 0, w);
	for (size_t i = 0; i < w->n_pids && budget > 0; i++)
		pid_sockets(w->pids[i], s, h, n, &budget);
}

json_t *workspace_listening_json(const struct workspace *ws)
{
	_cleanup_free_ struct listening_socket *s = NULL;
	_cleanup_free_ struct holder *h = NULL;
	_cleanup_close_ int netns = -1;
	struct station_error e = {};
	int n;

	if (ws->adapter == &adapter_host)
		return json_array(); /* the worker's own sockets are not the workspace's */
	netns = workspace_netns_open(ws, &e);
	if (netns < 0)
		return json_array();
	s = calloc(LISTENING_MAX, sizeof *s);
	if (!s)
		return NULL;
	n = listening_read(netns, s, LISTENING_MAX);
	if (n < 0) {
		log_warn("cannot list a workspace's listening sockets", "workspace", ws->row.id,
			 "error", strerror(-n), NULL);
		return json_array();
	}
	qsort(s, (size_t)n, sizeof *s, cmp_socket);
	h = calloc((size_t)n + 1, sizeof *h);
	if (!h)
		return NULL;
	holders_find(ws, s, (size_t)n, h);
	return listening_to_json(s, (size_t)n, h);
}
