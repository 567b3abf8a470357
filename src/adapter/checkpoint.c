/* SPDX-License-Identifier: MIT */
/* The memory-snapshot probe (checkpoint.h): which of the pieces a checkpoint needs this worker
 * has. Three facts are gathered by running programs (criu --version, criu check, the runtime's
 * --version), bounded in time, and one function turns them into the status and the message an
 * operator reads in GET /v1/ready and in a refused memory snapshot. That function is pure, so
 * every message is unit-tested without a criu or a runtime installed.
 *
 * The vDSO hint: Linux 6.13 split the vDSO's data pages into two mappings ([vvar] and
 * [vvar_vclock], kernel commit e93d2521b27f). criu before 4.1 reads its own vDSO at start,
 * finds the unexpected layout and refuses everything ("vdso: Unexpected rt vDSO area bounds"),
 * `criu check` included; criu 4.1 handles it. Debian 12's criu is 3.17.1. */

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "adapter/checkpoint.h"
#include "basic/util.h"

#define PROBE_TIMEOUT_MS 20000
#define PROBE_OUTPUT_MAX 16384

/* PATH first, then where Debian puts criu (/usr/sbin is not in every service's PATH). */
static bool find_binary(const char *name, char *ret, size_t size)
{
	if (strchr(name, '/')) {
		snprintf(ret, size, "%s", name);
		return access(ret, X_OK) == 0;
	}
	const char *path = getenv("PATH");
	char dirs[4096];
	snprintf(dirs, sizeof dirs, "%s:/usr/local/sbin:/usr/sbin:/sbin", path ? path : "");
	char *save = NULL;
	for (char *d = strtok_r(dirs, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
		snprintf(ret, size, "%s/%s", d, name);
		if (access(ret, X_OK) == 0)
			return true;
	}
	return false;
}

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Runs argv (argv[0] an absolute path) with stdout and stderr into out (NUL-terminated,
 * truncated at size), stdin /dev/null, for PROBE_TIMEOUT_MS at most. The exit status (-1 when
 * killed by a signal or by the deadline) in *ret_status. */
static int capture(const char *const argv[], char *out, size_t size, int *ret_status)
{
	int p[2];
	size_t len = 0;
	out[0] = 0;
	if (pipe2(p, O_CLOEXEC) < 0)
		return -errno;
	pid_t pid = fork();
	if (pid < 0) {
		int r = -errno;
		close(p[0]);
		close(p[1]);
		return r;
	}
	if (pid == 0) {
		int devnull = open("/dev/null", O_RDONLY);
		if (devnull < 0 || dup2(devnull, 0) < 0 || dup2(p[1], 1) < 0 || dup2(p[1], 2) < 0)
			_exit(127);
		close_all_fds_except(NULL, 0);
		signals_reset_for_exec();
		setpgid(0, 0);
		execv(argv[0], (char **)argv);
		_exit(127);
	}
	close(p[1]);
	int64_t deadline = now_ms() + PROBE_TIMEOUT_MS;
	bool timed_out = false;
	for (;;) {
		int64_t left = deadline - now_ms();
		struct pollfd pfd = { .fd = p[0], .events = POLLIN };
		if (left <= 0 || (poll(&pfd, 1, (int)left) == 0)) {
			timed_out = true;
			break;
		}
		char buf[1024];
		ssize_t n = read(p[0], buf, sizeof buf);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		size_t k = MIN((size_t)n, size - 1 - len);
		memcpy(out + len, buf, k);
		len += k;
	}
	out[len] = 0;
	close(p[0]);
	if (timed_out)
		kill(-pid, SIGKILL), kill(pid, SIGKILL);
	int status;
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	*ret_status = !timed_out && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
	return 0;
}

/* The text after "prefix" up to the end of its line, into ret ("" when absent). */
static void line_after(const char *text, const char *prefix, char *ret, size_t size)
{
	const char *s = strstr(text, prefix);
	ret[0] = 0;
	if (!s)
		return;
	s += strlen(prefix);
	snprintf(ret, size, "%.*s", (int)strcspn(s, "\r\n"), s);
}

/* criu's first "Error (file:line): what" line, as "what". */
static void first_error(const char *text, char *ret, size_t size)
{
	char line[256];
	line_after(text, "Error (", line, sizeof line);
	const char *what = strstr(line, "): ");
	snprintf(ret, size, "%s", what ? what + 3 : line);
}

static void gather_criu(struct checkpoint_facts *f, const char *criu, char *version, char *error,
			size_t size)
{
	char path[PATH_MAX];
	_cleanup_free_ char *out = malloc(PROBE_OUTPUT_MAX);
	int status;
	if (!out || !find_binary(criu ? criu : "criu", path, sizeof path))
		return;
	const char *version_argv[] = { path, "--version", NULL };
	if (capture(version_argv, out, PROBE_OUTPUT_MAX, &status) < 0 || status != 0)
		return;
	line_after(out, "Version: ", version, size);
	if (!version[0])
		snprintf(version, size, "(unknown version)");
	f->criu_version = version;
	const char *check_argv[] = { path, "check", NULL };
	if (capture(check_argv, out, PROBE_OUTPUT_MAX, &status) < 0)
		status = -1;
	f->criu_check_status = status;
	first_error(out, error, size);
	f->criu_check_error = error;
}

static void gather_runtime(struct checkpoint_facts *f, const char *runtime, char *version,
			   size_t size)
{
	char path[PATH_MAX];
	_cleanup_free_ char *out = malloc(PROBE_OUTPUT_MAX);
	int status;
	if (!out || !find_binary(runtime, path, sizeof path))
		return;
	const char *argv[] = { path, "--version", NULL };
	if (capture(argv, out, PROBE_OUTPUT_MAX, &status) < 0 || status != 0)
		return;
	/* "runc version 1.1.5+ds1", "crun version 1.8.1", "runsc version release-…" */
	line_after(out, "version ", version, size);
	f->runtime_version = version;
	f->runtime_criu = strstr(out, "+CRIU") != NULL;
}

/* "3.17.1" older than major.minor */
static bool version_before(const char *v, int major, int minor)
{
	int a = 0, b = 0;
	if (sscanf(v, "%d.%d", &a, &b) < 1)
		return false;
	return a < major || (a == major && b < minor);
}

static bool says_vdso(const char *error)
{
	return error && (strstr(error, "vdso") || strstr(error, "vDSO"));
}

void checkpoint_status_from(const struct checkpoint_facts *f, struct checkpoint_status *ret)
{
	char criu[320] = "", rt[320] = "";
	const char *name = f->runtime_name ? f->runtime_name : "(none)";
	const char *version = f->criu_version;

	if (!version)
		snprintf(criu, sizeof criu,
			 "criu is not installed (install criu; kernels 6.13 and later need criu "
			 "4.1 or newer)");
	else if (f->criu_check_status != 0)
		snprintf(criu, sizeof criu, "criu %s: 'criu check' fails on kernel %s: %s%s",
			 version, f->kernel ? f->kernel : "?",
			 f->criu_check_status < 0		       ? "it did not finish" :
			 f->criu_check_error && f->criu_check_error[0] ? f->criu_check_error :
									 "no error named",
			 says_vdso(f->criu_check_error) && version_before(version, 4, 1) ?
				 " (kernels 6.13 and later map the vDSO's clock pages apart, which "
				 "criu reads from 4.1 on: install criu 4.1 or newer)" :
				 "");

	if (!f->runtime_version)
		snprintf(rt, sizeof rt, "the runtime \"%s\" is not installed or does not run",
			 name);
	else if (strcmp(name, "crun") == 0 && !f->runtime_criu)
		snprintf(rt, sizeof rt,
			 "crun %s was built without CRIU (no +CRIU in 'crun --version'): use "
			 "--runtime runc or a crun built with criu",
			 f->runtime_version);
	else if (strcmp(name, "runsc") == 0)
		snprintf(rt, sizeof rt,
			 "runsc does not checkpoint through CRIU: memory snapshots need --runtime "
			 "runc or a crun built with criu");
	else if (strcmp(name, "runc") != 0 && strcmp(name, "crun") != 0)
		snprintf(rt, sizeof rt,
			 "the runtime \"%s\" is not one known to checkpoint (runc, or crun built "
			 "with criu)",
			 name);

	ret->ok = !criu[0] && !rt[0];
	if (ret->ok)
		snprintf(ret->message, sizeof ret->message, "criu %s via %s %s", version, name,
			 f->runtime_version);
	else
		snprintf(ret->message, sizeof ret->message, "memory snapshots unavailable: %s%s%s",
			 criu, criu[0] && rt[0] ? "; " : "", rt);
}

void checkpoint_probe(const char *runtime, const char *criu, struct checkpoint_status *ret)
{
	char criu_version[256] = "", criu_error[256] = "", runtime_version[256] = "";
	struct utsname u;
	const char *base = runtime ? strrchr(runtime, '/') : NULL;
	struct checkpoint_facts f = { .criu_check_status = -1,
				      .runtime_name = base ? base + 1 : runtime };
	if (uname(&u) == 0)
		f.kernel = u.release;
	gather_criu(&f, criu, criu_version, criu_error, sizeof criu_error);
	if (runtime)
		gather_runtime(&f, runtime, runtime_version, sizeof runtime_version);
	checkpoint_status_from(&f, ret);
}
