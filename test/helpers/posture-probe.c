/* SPDX-License-Identifier: MIT */
/* Static probe run inside a workspace by the container integration tests: prints the posture it
 * finds as key=value lines, one fact per line, so a test can compare it with the expected one.
 *
 *   uid_map=0 300000 65536        gid_map=…        (every line of the map, joined by ";")
 *   uid=0 gid=0
 *   euid=0 egid=0                                                      (group "euid" only)
 *   CapInh= CapPrm= CapEff= CapBnd= CapAmb=  NoNewPrivs=  Seccomp=   (from /proc/self/status)
 *   mount./=overlay  mount./tmp=tmpfs  mount./home/node=ext4 …         (top mount's fs type)
 *   mountroot./home/node=<the bind's source path>                      (mountinfo field 4)
 *   masked./proc/keys=empty|denied|absent|readable:N                   (N bytes read)
 *   readonly./proc/sys=ro|rw|absent                                    (mount flags)
 *   fds=0,1,2                                                          (the probe's own fds)
 *   ifaces=lo                                                          (sorted, comma-separated)
 *   unshare_user=ok|<errno name>                                       (unshare(CLONE_NEWUSER))
 *   proc1_environ=denied|readable                                      (the agent is PID 1)
 *   socket.vsock=ok|<errno name>   socketpair.unix=…   socket32.vsock=…   socketcall.vsock=…
 *                  (socket(2) per family or netlink protocol; socket32 and socketcall: the
 *                  i386 entry points through int 0x80, x86-64 only, printed
 *                  when they ran: compat32=ok, else compat32=signal:SEGV (no IA-32 emulation in
 *                  the kernel) or signal:SYS (a seccomp filter without the x86 ABI))
 *   hostname=…
 *
 * Without arguments it prints everything; with arguments only the named groups (uid, caps,
 * mounts, masked, fds, ifaces, unshare, proc1, hostname, sockets). Exit status 0. */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/netlink.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *const masked_paths[] = {
	"/proc/acpi",
	"/proc/asound",
	"/proc/kcore",
	"/proc/keys",
	"/proc/latency_stats",
	"/proc/timer_list",
	"/proc/timer_stats",
	"/proc/sched_debug",
	"/proc/scsi",
	"/sys/firmware",
	"/sys/devices/virtual/powercap",
};

static const char *const readonly_paths[] = {
	"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger",
};

static const char *const mount_points[] = {
	"/",	 "/tmp", "/home/node", "/run/station", "/run/station/agent/station-agent",
	"/proc", "/sys", "/dev",
};

static bool want(int argc, char **argv, const char *group)
{
	if (argc < 2)
		return true;
	for (int i = 1; i < argc; i++)
		if (strcmp(argv[i], group) == 0)
			return true;
	return false;
}

static const char *errname(int err)
{
	const char *s = strerrorname_np(err);
	return s ? s : "?";
}

/* uid_map / gid_map: each line's three numbers separated by single spaces, lines by ";". */
static void print_map(const char *key, const char *path)
{
	FILE *f = fopen(path, "re");
	unsigned long a, b, c;
	bool first = true;
	printf("%s=", key);
	while (f && fscanf(f, "%lu %lu %lu", &a, &b, &c) == 3) {
		printf("%s%lu %lu %lu", first ? "" : ";", a, b, c);
		first = false;
	}
	if (!f)
		printf("error:%s", errname(errno));
	printf("\n");
	if (f)
		fclose(f);
}

static void print_status(void)
{
	static const char *const keys[] = { "CapInh", "CapPrm",	    "CapEff", "CapBnd",
					    "CapAmb", "NoNewPrivs", "Seccomp" };
	char line[512];
	FILE *f = fopen("/proc/self/status", "re");
	if (!f) {
		printf("status=error:%s\n", errname(errno));
		return;
	}
	while (fgets(line, sizeof line, f)) {
		char *colon = strchr(line, ':');
		if (!colon)
			continue;
		*colon = '\0';
		for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
			if (strcmp(line, keys[i]) != 0)
				continue;
			char *v = colon + 1;
			v += strspn(v, " \t");
			v[strcspn(v, "\n")] = '\0';
			printf("%s=%s\n", keys[i], v);
		}
	}
	fclose(f);
}

/* mountinfo: "id parent major:minor root mountpoint options optional... - fstype source super" */
struct mnt {
	char root[4096], point[4096], opts[1024], type[64];
};

static bool parse_mountinfo_line(char *line, struct mnt *m)
{
	char *save = NULL, *tok;
	int field = 0;
	bool after_dash = false;
	int after = 0;
	for (tok = strtok_r(line, " \n", &save); tok; tok = strtok_r(NULL, " \n", &save), field++) {
		if (after_dash) {
			if (after++ == 0)
				snprintf(m->type, sizeof m->type, "%s", tok);
			continue;
		}
		if (field == 3)
			snprintf(m->root, sizeof m->root, "%s", tok);
		else if (field == 4)
			snprintf(m->point, sizeof m->point, "%s", tok);
		else if (field == 5)
			snprintf(m->opts, sizeof m->opts, "%s", tok);
		else if (field > 5 && strcmp(tok, "-") == 0)
			after_dash = true;
	}
	return after_dash && after > 0;
}

/* The last (topmost) mount at point, in mountinfo order. */
static bool find_mount(const char *point, struct mnt *ret)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	char line[8192];
	bool found = false;
	struct mnt m;
	while (f && fgets(line, sizeof line, f)) {
		if (parse_mountinfo_line(line, &m) && strcmp(m.point, point) == 0) {
			*ret = m;
			found = true;
		}
	}
	if (f)
		fclose(f);
	return found;
}

static bool opt_has(const char *opts, const char *opt)
{
	size_t n = strlen(opt);
	for (const char *p = opts; p && *p;) {
		if (strncmp(p, opt, n) == 0 && (p[n] == ',' || p[n] == '\0'))
			return true;
		p = strchr(p, ',');
		if (p)
			p++;
	}
	return false;
}

static void print_mounts(void)
{
	struct mnt m;
	for (size_t i = 0; i < sizeof mount_points / sizeof mount_points[0]; i++) {
		const char *p = mount_points[i];
		if (!find_mount(p, &m)) {
			printf("mount.%s=none\n", p);
			continue;
		}
		printf("mount.%s=%s\n", p, m.type);
		printf("mountroot.%s=%s\n", p, m.root);
		printf("mountopts.%s=%s\n", p, opt_has(m.opts, "ro") ? "ro" : "rw");
	}
	for (size_t i = 0; i < sizeof readonly_paths / sizeof readonly_paths[0]; i++) {
		const char *p = readonly_paths[i];
		struct stat st;
		if (stat(p, &st) < 0)
			printf("readonly.%s=absent\n", p);
		else if (find_mount(p, &m))
			printf("readonly.%s=%s\n", p, opt_has(m.opts, "ro") ? "ro" : "rw");
		else
			printf("readonly.%s=notmounted\n", p);
	}
}

/* A masked path is either an empty read-only tmpfs (directories) or /dev/null (files). */
static void print_masked(void)
{
	for (size_t i = 0; i < sizeof masked_paths / sizeof masked_paths[0]; i++) {
		const char *p = masked_paths[i];
		struct stat st;
		if (stat(p, &st) < 0) {
			printf("masked.%s=%s\n", p, errno == ENOENT ? "absent" : "denied");
			continue;
		}
		if (S_ISDIR(st.st_mode)) {
			DIR *d = opendir(p);
			if (!d) {
				printf("masked.%s=denied\n", p);
				continue;
			}
			size_t n = 0;
			struct dirent *de;
			while ((de = readdir(d)))
				if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0)
					n++;
			closedir(d);
			if (n == 0)
				printf("masked.%s=empty\n", p);
			else
				printf("masked.%s=readable:%zu\n", p, n);
			continue;
		}
		int fd = open(p, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
		if (fd < 0) {
			printf("masked.%s=denied\n", p);
			continue;
		}
		char buf[4096];
		ssize_t k, total = 0;
		while ((k = read(fd, buf, sizeof buf)) > 0 && total < (1 << 20))
			total += k;
		close(fd);
		if (k < 0 && total == 0)
			printf("masked.%s=denied\n", p);
		else if (total == 0)
			printf("masked.%s=empty\n", p);
		else
			printf("masked.%s=readable:%zd\n", p, total);
	}
}

/* The probe's own open fds, without the directory handle used to list them. */
static void print_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	int self = d ? dirfd(d) : -1;
	int fds[1024];
	size_t n = 0;
	struct dirent *de;
	while (d && (de = readdir(d)) && n < 1024) {
		char *end;
		long v = strtol(de->d_name, &end, 10);
		if (*end || end == de->d_name || v == self)
			continue;
		fds[n++] = (int)v;
	}
	if (d)
		closedir(d);
	for (size_t i = 1; i < n; i++)
		for (size_t j = i; j > 0 && fds[j - 1] > fds[j]; j--) {
			int t = fds[j];
			fds[j] = fds[j - 1];
			fds[j - 1] = t;
		}
	printf("fds=");
	for (size_t i = 0; i < n; i++)
		printf("%s%d", i ? "," : "", fds[i]);
	printf("\n");
	/* what each one is, for diagnostics */
	for (size_t i = 0; i < n; i++) {
		char link[64], target[4096];
		snprintf(link, sizeof link, "/proc/self/fd/%d", fds[i]);
		ssize_t k = readlink(link, target, sizeof target - 1);
		target[k > 0 ? k : 0] = '\0';
		printf("fd.%d=%s\n", fds[i], target);
	}
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void print_ifaces(void)
{
	struct if_nameindex *ifs = if_nameindex();
	char *names[256];
	size_t n = 0;
	if (!ifs) {
		printf("ifaces=error:%s\n", errname(errno));
		return;
	}
	for (struct if_nameindex *i = ifs; i->if_index && n < 256; i++)
		names[n++] = i->if_name;
	qsort(names, n, sizeof names[0], cmp_str);
	printf("ifaces=");
	for (size_t i = 0; i < n; i++)
		printf("%s%s", i ? "," : "", names[i]);
	printf("\n");
	if_freenameindex(ifs);
}

/* In a child, so the probe itself stays where it is. */
static void print_unshare(void)
{
	int p[2];
	if (pipe(p) < 0) {
		printf("unshare_user=error:%s\n", errname(errno));
		return;
	}
	pid_t pid = fork();
	if (pid == 0) {
		int err = unshare(CLONE_NEWUSER) < 0 ? errno : 0;
		(void)!write(p[1], &err, sizeof err);
		_exit(0);
	}
	close(p[1]);
	int err = -1;
	if (pid < 0 || read(p[0], &err, sizeof err) != sizeof err)
		printf("unshare_user=error:fork\n");
	else
		printf("unshare_user=%s\n", err == 0 ? "ok" : errname(err));
	close(p[0]);
	if (pid > 0)
		waitpid(pid, NULL, 0);
}

static void print_proc1(void)
{
	int fd = open("/proc/1/environ", O_RDONLY | O_CLOEXEC);
	char buf[64];
	if (fd < 0) {
		printf("proc1_environ=denied\n");
		return;
	}
	ssize_t k = read(fd, buf, sizeof buf);
	close(fd);
	printf("proc1_environ=%s\n", k < 0 ? "denied" : "readable");
}

/* The families and netlink protocols the socket test tries, each with a type it accepts. */
struct sock_try {
	const char *name;
	long family; /* long: "hibits" variants set bits above the int the kernel reads */
	int type, protocol;
};

static const struct sock_try sock_tries[] = {
	{ "unix", AF_UNIX, SOCK_STREAM, 0 },
	{ "inet", AF_INET, SOCK_STREAM, 0 },
	{ "inet6", AF_INET6, SOCK_DGRAM, 0 },
	{ "netlink_route", AF_NETLINK, SOCK_RAW, NETLINK_ROUTE },
	{ "netlink_sock_diag", AF_NETLINK, SOCK_RAW, NETLINK_SOCK_DIAG },
	{ "netlink_audit", AF_NETLINK, SOCK_RAW, NETLINK_AUDIT },
	{ "netlink_uevent", AF_NETLINK, SOCK_DGRAM, NETLINK_KOBJECT_UEVENT },
	{ "netlink_netfilter", AF_NETLINK, SOCK_RAW, NETLINK_NETFILTER },
	{ "unspec", AF_UNSPEC, SOCK_STREAM, 0 },
	{ "vsock", AF_VSOCK, SOCK_STREAM, 0 },
	{ "alg", AF_ALG, SOCK_SEQPACKET, 0 },
	{ "packet", AF_PACKET, SOCK_DGRAM, 0 },
	{ "key", AF_KEY, SOCK_RAW, 2 /* PF_KEY_V2 */ },
	{ "bluetooth", AF_BLUETOOTH, SOCK_SEQPACKET, 0 },
	{ "xdp", AF_XDP, SOCK_RAW, 0 },
	{ "max", AF_MAX, SOCK_STREAM, 0 },
	{ "unix_hibits", (1L << 32) | AF_UNIX, SOCK_STREAM, 0 },
	{ "vsock_hibits", (1L << 32) | AF_VSOCK, SOCK_STREAM, 0 },
};

static const char *sock_result(long r)
{
	if (r >= 0) {
		close((int)r);
		return "ok";
	}
	return errname(errno);
}

#ifdef __x86_64__
/* The i386 system call entry from a 64-bit process: the kernel (and seccomp) sees the x86
 * ABI, where socket is 359 and socketcall 102 with its arguments in memory. */
/* int $0x80 clobbers r8-r11 of a 64-bit caller. */
static long int80(long nr, long a, long b, long c)
{
	long r;
	__asm__ volatile("int $0x80"
			 : "=a"(r)
			 : "a"(nr), "b"(a), "c"(b), "d"(c)
			 : "memory", "r8", "r9", "r10", "r11", "cc");
	return r;
}

static uint32_t socketcall_args[3];

static void print_sockets_i386(const char *name, int family, int type)
{
	long r = int80(359, family, type, 0);
	printf("socket32.%s=%s\n", name, r >= 0 ? "ok" : errname((int)-r));
	if (r >= 0)
		close((int)r);
	if ((uintptr_t)socketcall_args > UINT32_MAX) {
		printf("socketcall.%s=skip\n", name);
		return;
	}
	socketcall_args[0] = (uint32_t)family;
	socketcall_args[1] = (uint32_t)type;
	socketcall_args[2] = 0;
	r = int80(102, 1 /* SYS_SOCKET */, (long)(uintptr_t)socketcall_args, 0);
	printf("socketcall.%s=%s\n", name, r >= 0 ? "ok" : errname((int)-r));
	if (r >= 0)
		close((int)r);
}

/* In a child: a kernel without IA-32 emulation answers int 0x80 with SIGSEGV, a seccomp filter
 * without the x86 ABI kills at the first call (SIGSYS). compat32=ok|signal:<name>. */
static void print_sockets_compat(void)
{
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0) {
		print_sockets_i386("unix", AF_UNIX, SOCK_STREAM);
		print_sockets_i386("vsock", AF_VSOCK, SOCK_STREAM);
		printf("compat32=ok\n");
		fflush(stdout);
		_exit(0);
	}
	int status = 0;
	if (pid < 0 || waitpid(pid, &status, 0) < 0)
		printf("compat32=error:%s\n", errname(errno));
	else if (WIFSIGNALED(status))
		printf("compat32=signal:%s\n", sigabbrev_np(WTERMSIG(status)) ?: "?");
}
#endif

static void print_sockets(void)
{
	for (size_t i = 0; i < sizeof sock_tries / sizeof sock_tries[0]; i++) {
		const struct sock_try *t = &sock_tries[i];
		long r = syscall(SYS_socket, t->family, t->type | SOCK_CLOEXEC, t->protocol);
		printf("socket.%s=%s\n", t->name, sock_result(r));
	}
	static const struct {
		const char *name;
		int family, type;
	} pairs[] = { { "unix", AF_UNIX, SOCK_STREAM },
		      { "inet", AF_INET, SOCK_STREAM },
		      { "vsock", AF_VSOCK, SOCK_STREAM } };
	for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
		int sv[2];
		int r = socketpair(pairs[i].family, pairs[i].type | SOCK_CLOEXEC, 0, sv);
		printf("socketpair.%s=%s\n", pairs[i].name, r == 0 ? "ok" : errname(errno));
		if (r == 0) {
			close(sv[0]);
			close(sv[1]);
		}
	}
#ifdef __x86_64__
	print_sockets_compat();
#endif
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOFBF, 1 << 16);
	if (want(argc, argv, "uid")) {
		print_map("uid_map", "/proc/self/uid_map");
		print_map("gid_map", "/proc/self/gid_map");
		printf("uid=%u\ngid=%u\n", (unsigned)getuid(), (unsigned)getgid());
	}
	if (argc > 1 && want(argc, argv, "euid"))
		printf("euid=%u\negid=%u\n", (unsigned)geteuid(), (unsigned)getegid());
	if (want(argc, argv, "caps"))
		print_status();
	if (want(argc, argv, "mounts"))
		print_mounts();
	if (want(argc, argv, "masked"))
		print_masked();
	if (want(argc, argv, "fds"))
		print_fds();
	if (want(argc, argv, "ifaces"))
		print_ifaces();
	if (want(argc, argv, "unshare"))
		print_unshare();
	if (want(argc, argv, "proc1"))
		print_proc1();
	if (want(argc, argv, "sockets"))
		print_sockets();
	if (want(argc, argv, "hostname")) {
		char h[256] = "";
		gethostname(h, sizeof h - 1);
		printf("hostname=%s\n", h);
	}
	fflush(stdout);
	return 0;
}
