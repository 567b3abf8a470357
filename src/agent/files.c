/* SPDX-License-Identifier: MIT */
/* File sessions: the agent forks one worker per FILE_OPEN (at most FILE_MAX_SESSIONS alive)
 * and forgets the connection; the worker is alone with it. */

#include "agent/files.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/files-internal.h"
#include "basic/cleanup.h"
#include "basic/log.h"
#include "basic/util.h"
#include "proto/agent-proto.h"

struct files_manager {
	struct files_config config;
	char *root;
	char *workdir;
	void (*before_worker)(void *userdata);
	void *userdata;
	pid_t workers[FILE_MAX_SESSIONS];
	size_t n_workers;
};

int files_manager_new(const struct files_config *config, void (*before_worker)(void *userdata),
		      void *userdata, struct files_manager **ret)
{
	struct files_manager *m = calloc(1, sizeof *m);

	if (!m)
		return -ENOMEM;
	m->config = *config;
	m->root = strdup(config->root ? config->root : "");
	m->workdir = strdup(config->workdir);
	if (!m->root || !m->workdir) {
		files_manager_free(m);
		return -ENOMEM;
	}
	/* the root's absolute form without a trailing slash: "" for "/" */
	for (size_t n = strlen(m->root); n > 0 && m->root[n - 1] == '/'; n--)
		m->root[n - 1] = 0;
	m->before_worker = before_worker;
	m->userdata = userdata;
	*ret = m;
	return 0;
}

void files_manager_free(struct files_manager *m)
{
	if (!m)
		return;
	free(m->root);
	free(m->workdir);
	free(m);
}

size_t files_manager_alive(const struct files_manager *m)
{
	return m->n_workers;
}

bool files_manager_child_exited(struct files_manager *m, pid_t pid)
{
	for (size_t i = 0; i < m->n_workers; i++)
		if (m->workers[i] == pid) {
			m->workers[i] = m->workers[--m->n_workers];
			return true;
		}
	return false;
}

static int worker_drop(const struct files_manager *m)
{
	const struct files_config *c = &m->config;

	if (c->set_user && (setgroups(0, NULL) < 0 || setgid(c->gid) < 0 || setuid(c->uid) < 0))
		return -errno;
	return 0;
}

/* stdin, stdout and stderr (the agent's log) on /dev/null, where there is one. */
static void worker_stdio(void)
{
	int null = open("/dev/null", O_RDWR | O_CLOEXEC);

	if (null < 0)
		return;
	for (int i = 0; i < 3; i++)
		(void)dup2(null, i);
	if (null > 2)
		close(null);
}

/* Everything of the agent the worker must not keep: fds, signal handling, privileges. The
 * root is opened first, with the agent's rights: the user may not be able to walk to it by
 * name on the host. agent: the agent's pid, taken before the fork (a getppid() here would be
 * the reaper's already when the agent died before the worker ran). */
static int worker_setup(const struct files_manager *m, int fd, pid_t agent, int *ret_root_fd)
{
	struct sigaction dfl = { .sa_handler = SIG_DFL };
	sigset_t none;
	int r;

	r = close_all_fds_except(&fd, 1);
	if (r < 0)
		return r;
	worker_stdio();
	*ret_root_fd =
		open(m->root[0] ? m->root : "/", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (*ret_root_fd < 0)
		return -errno;
	for (int sig = 1; sig < _NSIG; sig++)
		if (sig != SIGKILL && sig != SIGSTOP)
			(void)sigaction(sig, &dfl, NULL);
	sigemptyset(&none);
	if (sigprocmask(SIG_SETMASK, &none, NULL) < 0)
		return -errno;
	r = worker_drop(m);
	if (r < 0)
		return r;
	/* no worker outlives the agent (set after the drop, which clears it) */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0)
		return -errno;
	if (getppid() != agent)
		return -ESRCH;
	umask(0);
	return fd_set_nonblock(fd, false);
}

static int (*const ops[])(struct files_session *s, const struct files_request *q) = {
	[FILE_OP_STAT] = files_op_stat,	    [FILE_OP_LIST] = files_op_list,
	[FILE_OP_READ] = files_op_read,	    [FILE_OP_WRITE] = files_op_write,
	[FILE_OP_MKDIR] = files_op_mkdir,   [FILE_OP_RENAME] = files_op_rename,
	[FILE_OP_DELETE] = files_op_delete, [FILE_OP_WATCH] = files_op_watch,
};

static int worker_serve(const struct files_manager *m, int fd, int root_fd, const struct frame *f,
			const uint8_t *rest, size_t rest_len)
{
	struct files_session s = {
		.fd = fd,
		.root = { .fd = root_fd,
			  .how = m->root[0] ? FILES_BENEATH : FILES_IN_ROOT,
			  .prefix = m->root,
			  .workdir = m->workdir },
	};
	struct files_request q;
	const char *reason;
	int r;

	if (buf_append(&s.in, rest, rest_len) < 0)
		return -ENOMEM;
	r = files_request_parse(f, &q, &reason);
	if (r < 0)
		return files_send_error(&s, EINVAL, NULL, reason);
	return ops[q.op](&s, &q);
}

static _Noreturn void worker_main(struct files_manager *m, int fd, pid_t agent,
				  const struct frame *f, const uint8_t *rest, size_t rest_len)
{
	int root_fd = -1, r;

	if (m->before_worker)
		m->before_worker(m->userdata);
	r = worker_setup(m, fd, agent, &root_fd);
	if (r < 0) {
		struct files_session s = { .fd = fd };

		(void)fd_set_nonblock(fd, false);
		(void)files_send_error(&s, r, NULL, "cannot set up the file worker");
		_exit(1);
	}
	r = worker_serve(m, fd, root_fd, f, rest, rest_len);
	_exit(r < 0 ? 1 : 0);
}

static void reply_busy(int fd)
{
	struct buf b = { 0 };
	size_t start;

	if (frame_begin(&b, &start, MSG_FILE_ERROR, 0) >= 0 &&
	    frame_put_u64(&b, TAG_ERRNO, EBUSY) >= 0 &&
	    frame_put_str(&b, TAG_REASON, "too many file sessions") >= 0 &&
	    frame_end(&b, start) >= 0)
		(void)!send(fd, b.data, b.len, MSG_DONTWAIT | MSG_NOSIGNAL);
	buf_free(&b);
}

void files_manager_open(struct files_manager *m, int fd, const struct frame *f, const uint8_t *rest,
			size_t rest_len)
{
	pid_t pid, agent = getpid();

	if (m->n_workers >= FILE_MAX_SESSIONS) {
		log_warn("file session refused: too many", NULL);
		reply_busy(fd);
		close(fd);
		return;
	}
	pid = fork();
	if (pid == 0)
		worker_main(m, fd, agent, f, rest, rest_len);
	if (pid < 0)
		log_warn("cannot fork a file worker", "error", strerror(errno), NULL);
	else
		m->workers[m->n_workers++] = pid;
	close(fd);
}
