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
 *   hostname=…
 *
 * Without arguments it prints everything; with arguments only the named groups (uid, caps,
 * mounts, masked, fds, ifaces, unshare, proc1, hostname). Exit status 0. */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
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
	if (want(argc, argv, "hostname")) {
		char h[256] = "";
		gethostname(h, sizeof h - 1);
		printf("hostname=%s\n", h);
	}
	fflush(stdout);
	return 0;
}
