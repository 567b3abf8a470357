/* SPDX-License-Identifier: MIT */
/* signal-probe: sends signals with a forged sender, the way a hostile container root can
 * (rt_sigqueueinfo and rt_tgsigqueueinfo accept any si_pid, 0 included, with a negative
 * si_code). Static, no libc beyond the syscalls: it runs in the busybox test image.
 *
 *   signal-probe forge PID SIG [queue|tgqueue|mesgq]
 *       one forged signal to PID: si_pid 0, si_uid 0, si_code SI_QUEUE (queue, through
 *       rt_sigqueueinfo), SI_QUEUE through rt_tgsigqueueinfo (tgqueue) or SI_MESGQ (mesgq).
 *       Prints `forge=ok` or `forge=<errno name>`.
 *   signal-probe control SIG [queue|tgqueue|mesgq]
 *       the same signal at a child of its own that waits for it with a signalfd: prints what
 *       arrived, `received signo=N pid=P code=C`, showing the forgery reaches a receiver
 *       with si_pid 0. */

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *errno_name(int e)
{
	switch (e) {
	case EPERM:
		return "EPERM";
	case ESRCH:
		return "ESRCH";
	case EINVAL:
		return "EINVAL";
	case EAGAIN:
		return "EAGAIN";
	default:
		return "other";
	}
}

static int forge(pid_t pid, int sig, const char *how)
{
	siginfo_t si;
	memset(&si, 0, sizeof si);
	si.si_signo = sig;
	si.si_code = strcmp(how, "mesgq") == 0 ? SI_MESGQ : SI_QUEUE;
	si.si_pid = 0; /* the forgery: "from outside the pid namespace" */
	si.si_uid = 0;
	if (strcmp(how, "tgqueue") == 0)
		return (int)syscall(SYS_rt_tgsigqueueinfo, pid, pid, sig, &si);
	return (int)syscall(SYS_rt_sigqueueinfo, pid, sig, &si);
}

static int control(int sig, const char *how)
{
	sigset_t set;
	int ready[2];
	sigemptyset(&set);
	sigaddset(&set, sig);
	if (sigprocmask(SIG_BLOCK, &set, NULL) < 0 || pipe(ready) < 0)
		return 1;
	pid_t child = fork();
	if (child == 0) {
		struct signalfd_siginfo ssi;
		int fd = signalfd(-1, &set, 0);
		if (fd < 0 || write(ready[1], "r", 1) != 1)
			_exit(1);
		if (read(fd, &ssi, sizeof ssi) != sizeof ssi)
			_exit(1);
		printf("received signo=%u pid=%u code=%d\n", ssi.ssi_signo, ssi.ssi_pid,
		       ssi.ssi_code);
		fflush(stdout);
		_exit(0);
	}
	char c;
	if (child < 0 || read(ready[0], &c, 1) != 1)
		return 1;
	if (forge(child, sig, how) < 0) {
		printf("forge=%s\n", errno_name(errno));
		kill(child, SIGKILL);
	}
	int status;
	waitpid(child, &status, 0);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

int main(int argc, char **argv)
{
	if (argc >= 4 && strcmp(argv[1], "forge") == 0) {
		int r = forge((pid_t)atoi(argv[2]), atoi(argv[3]), argc > 4 ? argv[4] : "queue");
		printf("forge=%s\n", r < 0 ? errno_name(errno) : "ok");
		return 0;
	}
	if (argc >= 3 && strcmp(argv[1], "control") == 0)
		return control(atoi(argv[2]), argc > 3 ? argv[3] : "queue");
	fprintf(stderr, "usage: signal-probe forge PID SIG [queue|tgqueue|mesgq] | "
			"control SIG [queue|tgqueue|mesgq]\n");
	return 2;
}
