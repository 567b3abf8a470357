/* SPDX-License-Identifier: MIT */
/* Host memory of idle workspaces: o->count of them are created, left idle, measured from their
 * cgroups and from /proc, and deleted. Host workspaces, or container workspaces of o->image
 * (network none) when an image is given. Rows (o->id as prefix):
 *   .cgroup      per workspace: the workspace cgroup's usage minus page cache
 *                (v1: memory.usage_in_bytes - total_cache; v2: memory.current - file)
 *   .agent       per workspace: the agent's RSS (PSS and anonymous RSS in extra)
 *   .system      (MemTotal - MemFree - Buffers - Cached - SReclaimable) after - before, / count:
 *                everything, cgroup structures and other kernel objects included; noisy when
 *                other work runs on the machine. In extra, two drivers of its kernel share,
 *                less disturbed by other work: the memory cgroups added per workspace
 *                (/proc/cgroups) and the kmalloc-1k slab growth per workspace (/proc/slabinfo),
 *                where the kernel keeps each memory cgroup's shrinker map: one 1 KiB unit per 64
 *                shrinker ids, and every mounted superblock takes one (BENCHMARKS.md, density)
 *   .controller  the controller's RSS with the workspaces, and before them in extra
 *   .exec        (container workspaces) exec of `true` into the last one created, o->runs
 *                samples, while all of them are held */

#include <curl/curl.h>
#include <dirent.h>
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bench.h"

#define ID_MAX 128

struct ws_mem {
	char id[ID_MAX];
	pid_t agent;
	double cgroup_kib, kmem_kib, rss_kib, pss_kib, anon_kib;
	bool measured;
};

static int64_t meminfo_used(void)
{
	static const char *const keys[] = { "MemFree", "Buffers", "Cached", "SReclaimable" };
	char line[256];
	int64_t total = -1, sub = 0;
	FILE *f = fopen("/proc/meminfo", "re");
	if (!f)
		return -errno;
	while (fgets(line, sizeof line, f)) {
		long long v;
		char key[64];
		if (sscanf(line, "%63[^:]: %lld", key, &v) != 2)
			continue;
		if (strcmp(key, "MemTotal") == 0)
			total = v * 1024;
		for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
			if (strcmp(key, keys[i]) == 0)
				sub += v * 1024;
	}
	fclose(f);
	return total < 0 ? -EIO : total - sub;
}

/* The host's count of memory cgroups (the num_cgroups column of /proc/cgroups). */
static int64_t memcg_count(void)
{
	char line[256], name[64];
	long long hier, num;
	int enabled;
	int64_t found = -ENOENT;
	FILE *f = fopen("/proc/cgroups", "re");
	if (!f)
		return -errno;
	while (fgets(line, sizeof line, f))
		if (sscanf(line, "%63s %lld %lld %d", name, &hier, &num, &enabled) == 4 &&
		    strcmp(name, "memory") == 0)
			found = num;
	fclose(f);
	return found;
}

/* Bytes of the live objects of one slab cache (active objects x object size); -errno when
 * /proc/slabinfo cannot be read (it is root's) or lacks the cache. */
static int64_t slab_bytes(const char *cache)
{
	char line[512], name[64];
	long long active, total, size;
	int64_t found = -ENOENT;
	FILE *f = fopen("/proc/slabinfo", "re");
	if (!f)
		return -errno;
	while (fgets(line, sizeof line, f))
		if (sscanf(line, "%63s %lld %lld %lld", name, &active, &total, &size) == 4 &&
		    strcmp(name, cache) == 0) {
			found = active * size;
			break;
		}
	fclose(f);
	return found;
}

/* Kernel counters read before and after the workspaces: see .system above. */
struct kernel_counts {
	int64_t memcgs, kmalloc_1k;
};

static void kernel_counts_read(struct kernel_counts *k)
{
	k->memcgs = memcg_count();
	k->kmalloc_1k = slab_bytes("kmalloc-1k");
}

/* Whether pid runs /…/station-agent (a host workspace's agent, or a container's PID 1). */
static bool is_agent(pid_t pid)
{
	char path[64], buf[512];
	snprintf(path, sizeof path, "/proc/%d/cmdline", (int)pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return false;
	size_t n = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	buf[n] = '\0';
	const char *base = strrchr(buf, '/');
	return strcmp(base ? base + 1 : buf, "station-agent") == 0;
}

/* The process's memory cgroup path (v1 memory, else v2), relative to its hierarchy. */
static int proc_cgroup(pid_t pid, char *rel, size_t size, int *ret_version)
{
	char path[64], line[1024];
	snprintf(path, sizeof path, "/proc/%d/cgroup", (int)pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return -errno;
	*ret_version = 0;
	while (fgets(line, sizeof line, f)) {
		line[strcspn(line, "\n")] = '\0';
		char *a = strchr(line, ':'), *b = a ? strchr(a + 1, ':') : NULL;
		if (!b)
			continue;
		if (strncmp(a + 1, "memory:", 7) == 0) {
			snprintf(rel, size, "%s", b + 1);
			*ret_version = 1;
		} else if (*ret_version == 0 && strncmp(line, "0::", 3) == 0) {
			snprintf(rel, size, "%s", b + 1);
			*ret_version = 2;
		}
	}
	fclose(f);
	return *ret_version ? 0 : -ENOENT;
}

/* Whether rel has a component named id. */
static bool path_has(const char *rel, const char *id)
{
	size_t len = strlen(id);
	for (const char *p = strstr(rel, id); p; p = strstr(p + 1, id))
		if (p > rel && p[-1] == '/' && (p[len] == '/' || p[len] == '\0'))
			return true;
	return false;
}

/* Each workspace's agent: the station-agent process whose cgroup is the workspace's (its
 * group, or a group below it), the oldest one (lowest pid) when there are several. */
static void find_agents(struct ws_mem *ws, int n)
{
	DIR *d = opendir("/proc");
	struct dirent *de;
	char rel[1024];
	int version;
	while (d && (de = readdir(d))) {
		pid_t pid = (pid_t)atoi(de->d_name);
		if (pid <= 0 || !is_agent(pid) || proc_cgroup(pid, rel, sizeof rel, &version) < 0)
			continue;
		for (int i = 0; i < n; i++)
			if (path_has(rel, ws[i].id) && (ws[i].agent <= 0 || pid < ws[i].agent))
				ws[i].agent = pid;
	}
	if (d)
		closedir(d);
}

/* The agent's memory cgroup, walked up to the directory named after the workspace. */
static int workspace_cgroup(const struct ws_mem *w, char *ret, size_t size, int *ret_version)
{
	char rel[1024];
	int r = proc_cgroup(w->agent, rel, sizeof rel, ret_version);
	if (r < 0)
		return r;
	struct stat st;
	const char *mnt = *ret_version == 1			   ? "/sys/fs/cgroup/memory" :
			  stat("/sys/fs/cgroup/unified", &st) == 0 ? "/sys/fs/cgroup/unified" :
								     "/sys/fs/cgroup";
	for (int up = 0; up < 4; up++) {
		char *slash = strrchr(rel, '/');
		if (slash && strcmp(slash + 1, w->id) == 0)
			break;
		if (!slash || slash == rel)
			return -ENOENT;
		*slash = '\0';
	}
	snprintf(ret, size, "%s%s", mnt, rel);
	return 0;
}

static int64_t read_u64_file(const char *dir, const char *name)
{
	char path[1200];
	long long v;
	snprintf(path, sizeof path, "%s/%s", dir, name);
	FILE *f = fopen(path, "re");
	if (!f)
		return -errno;
	int k = fscanf(f, "%lld", &v);
	fclose(f);
	return k == 1 ? v : -EIO;
}

static int64_t read_stat_key(const char *dir, const char *key)
{
	char path[1200], name[128];
	long long v;
	snprintf(path, sizeof path, "%s/memory.stat", dir);
	FILE *f = fopen(path, "re");
	if (!f)
		return -errno;
	int64_t found = -ENOENT;
	while (fscanf(f, "%127s %lld", name, &v) == 2)
		if (strcmp(name, key) == 0) {
			found = v;
			break;
		}
	fclose(f);
	return found;
}

static int measure_one(struct ws_mem *w, int *ret_version)
{
	char dir[1100];
	int r = workspace_cgroup(w, dir, sizeof dir, ret_version);
	if (r < 0)
		return r;
	bool v1 = *ret_version == 1;
	int64_t usage = read_u64_file(dir, v1 ? "memory.usage_in_bytes" : "memory.current");
	int64_t cache = read_stat_key(dir, v1 ? "total_cache" : "file");
	int64_t kmem = v1 ? read_u64_file(dir, "memory.kmem.usage_in_bytes") :
			    read_stat_key(dir, "kernel");
	if (usage < 0 || cache < 0)
		return -EIO;
	w->cgroup_kib = (double)(usage - cache) / 1024;
	w->kmem_kib = kmem >= 0 ? (double)kmem / 1024 : 0;
	w->rss_kib = (double)bench_proc_kb_field(w->agent, "status", "VmRSS") / 1024;
	w->anon_kib = (double)bench_proc_kb_field(w->agent, "status", "RssAnon") / 1024;
	w->pss_kib = (double)bench_proc_kb_field(w->agent, "smaps_rollup", "Pss") / 1024;
	w->measured = true;
	return 0;
}

static struct bench_opts row_opts(const struct bench_opts *o, const char *suffix, char *buf,
				  size_t size)
{
	struct bench_opts r = *o;
	snprintf(buf, size, "%s.%s", o->id, suffix);
	r.id = buf;
	return r;
}

/* Stats of one field over the measured workspaces. */
static void field_stats(const struct ws_mem *ws, int n, size_t offset, struct bench_stats *ret)
{
	double *v = calloc((size_t)n + 1, sizeof *v);
	size_t k = 0;
	for (int i = 0; v && i < n; i++)
		if (ws[i].measured)
			v[k++] = *(const double *)((const char *)&ws[i] + offset);
	bench_stats_compute(v, v ? k : 0, ret);
	free(v);
}

/* GET /metrics with the workspaces held: each scrape's time, and the size and series of the
 * answer (the last). */
#define SCRAPES 20

struct scrape_body {
	size_t bytes, series;
	bool line_start;
};

static size_t scrape_write(char *data, size_t size, size_t n, void *userdata)
{
	struct scrape_body *b = userdata;
	for (size_t i = 0; i < size * n; i++) {
		if (b->line_start && data[i] != '#')
			b->series++;
		b->line_start = data[i] == '\n';
	}
	b->bytes += size * n;
	return size * n;
}

static int scrape_once(const struct bench_opts *o, double *ret_ms, struct scrape_body *b)
{
	CURL *c = curl_easy_init();
	struct curl_slist *h = NULL;
	char url[600], auth[400];
	long status = 0;
	if (!c)
		return -ENOMEM;
	if (strncmp(o->endpoint, "unix:", 5) == 0) {
		curl_easy_setopt(c, CURLOPT_UNIX_SOCKET_PATH, o->endpoint + 5);
		snprintf(url, sizeof url, "http://station/metrics");
	} else {
		snprintf(url, sizeof url, "%s/metrics", o->endpoint);
	}
	if (o->token) {
		snprintf(auth, sizeof auth, "Authorization: Bearer %s", o->token);
		h = curl_slist_append(h, auth);
		curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
	}
	*b = (struct scrape_body){ .line_start = true };
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_TIMEOUT, 60L);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, scrape_write);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, b);
	double start = bench_now_ms();
	CURLcode r = curl_easy_perform(c);
	*ret_ms = bench_now_ms() - start;
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
	curl_slist_free_all(h);
	curl_easy_cleanup(c);
	return r == CURLE_OK && status == 200 ? 0 : -EIO;
}

static int emit_scrape(const struct bench_opts *o, int n)
{
	char id[160];
	double ms[SCRAPES];
	struct scrape_body b;
	struct bench_stats s;
	struct bench_opts ro = row_opts(o, "scrape", id, sizeof id);
	for (int i = 0; i < SCRAPES; i++)
		if (scrape_once(o, &ms[i], &b) < 0)
			return bench_emit_fail(&ro, "GET /metrics failed (scrape %d)", i + 1);
	bench_stats_compute(ms, SCRAPES, &s);
	return bench_emit(&ro, "ms", &s,
			  json_pack("{si si si}", "workspaces", n, "bytes", (int)b.bytes, "series",
				    (int)b.series));
}

static int emit_rows(const struct bench_opts *o, struct ws_mem *ws, int n, int version, double rss0,
		     double rss1, double used_delta, const struct kernel_counts *k0,
		     const struct kernel_counts *k1, double create_ms, double delete_ms)
{
	char id[160];
	struct bench_opts ro;
	struct bench_stats s, kmem, pss, anon, one;
	double per_ws_kib = (rss1 - rss0) / 1024 / n, x[1];
	field_stats(ws, n, offsetof(struct ws_mem, cgroup_kib), &s);
	field_stats(ws, n, offsetof(struct ws_mem, kmem_kib), &kmem);
	ro = row_opts(o, "cgroup", id, sizeof id);
	bench_emit(&ro, "KiB", &s,
		   json_pack("{si si sf sf sf}", "workspaces", n, "cgroupVersion", version,
			     "kmemMedianKiB", kmem.median, "createMedianMs", create_ms,
			     "deleteMedianMs", delete_ms));
	field_stats(ws, n, offsetof(struct ws_mem, rss_kib), &s);
	field_stats(ws, n, offsetof(struct ws_mem, pss_kib), &pss);
	field_stats(ws, n, offsetof(struct ws_mem, anon_kib), &anon);
	ro = row_opts(o, "agent", id, sizeof id);
	bench_emit(&ro, "KiB", &s,
		   json_pack("{si sf sf sf sf}", "workspaces", n, "pssMedianKiB", pss.median,
			     "pssMeanKiB", pss.mean, "anonMedianKiB", anon.median, "anonMeanKiB",
			     anon.mean));
	x[0] = used_delta / 1024 / n;
	bench_stats_compute(x, 1, &one);
	ro = row_opts(o, "system", id, sizeof id);
	json_t *sys = json_pack("{si}", "workspaces", n);
	if (sys && k0->memcgs >= 0 && k1->memcgs >= 0) {
		json_object_set_new(sys, "memcgsPerWorkspace",
				    json_real((double)(k1->memcgs - k0->memcgs) / n));
		json_object_set_new(sys, "memcgsAfter", json_integer(k1->memcgs));
	}
	if (sys && k0->kmalloc_1k >= 0 && k1->kmalloc_1k >= 0)
		json_object_set_new(
			sys, "kmalloc1kKiBPerWorkspace",
			json_real((double)(k1->kmalloc_1k - k0->kmalloc_1k) / 1024 / n));
	bench_emit(&ro, "KiB", &one, sys);
	x[0] = rss1 / (1 << 20);
	bench_stats_compute(x, 1, &one);
	ro = row_opts(o, "controller", id, sizeof id);
	return bench_emit(&ro, "MiB", &one,
			  json_pack("{si sf sf sf}", "workspaces", n, "rssBeforeMiB",
				    rss0 / (1 << 20), "perWorkspaceKiB", per_ws_kib,
				    "extrapolated1000MiB",
				    (rss0 + (rss1 - rss0) * 1000.0 / n) / (1 << 20)));
}

static double median_of(double *v, int n)
{
	struct bench_stats s;
	bench_stats_compute(v, (size_t)n, &s);
	return s.median;
}

/* o->runs execs of `true` (after o->warmup) into ws, all the others still held: the .exec row.
 * A failure goes to error. */
static void exec_last(const struct bench_opts *o, struct station_client *c, const char *ws,
		      char *error, size_t size)
{
	char id[160];
	struct bench_stats s;
	double *t = calloc((size_t)o->runs, sizeof *t);
	if (!t) {
		snprintf(error, size, "exec into %s: out of memory", ws);
		return;
	}
	for (int i = -o->warmup; i < o->runs; i++) {
		double start = bench_now_ms();
		if (bench_exec_true(c, ws) < 0) {
			snprintf(error, size, "exec `true` into the last workspace %s: %s", ws,
				 station_client_last_error(c));
			free(t);
			return;
		}
		if (i >= 0)
			t[i] = bench_now_ms() - start;
	}
	bench_stats_compute(t, (size_t)o->runs, &s);
	free(t);
	struct bench_opts ro = row_opts(o, "exec", id, sizeof id);
	bench_emit(&ro, "ms", &s,
		   json_pack("{ss ss}", "command", "true (as /bin/sh -c true)", "workspace", ws));
}

int cmd_memory(const struct bench_opts *o)
{
	struct station_client *c = NULL;
	int n = o->count, made = 0, version = 0, r = bench_client(o, &c);
	struct ws_mem *ws = calloc((size_t)n, sizeof *ws);
	double *create_ms = calloc((size_t)n, sizeof(double));
	double *delete_ms = calloc((size_t)n, sizeof(double));
	char error[600] = "";
	if (r < 0 || !ws || !create_ms || !delete_ms)
		return bench_emit_fail(o, "client: %s", strerror(r < 0 ? -r : ENOMEM));
	json_t *worker = NULL; /* the connection, before the first RSS reading */
	if (station_worker(c, &worker) >= 0)
		json_decref(worker);
	double rss0 = (double)bench_proc_kb_field(o->controller_pid, "status", "VmRSS");
	double used0 = (double)meminfo_used();
	struct kernel_counts k0, k1;
	kernel_counts_read(&k0);
	bool container = o->image != NULL;
	struct station_workspace_options wo = { .adapter = container ? "container" : "host",
						.image = o->image,
						.network = container ? "none" : NULL };
	for (; made < n; made++) {
		json_t *w = NULL;
		double start = bench_now_ms();
		if (station_workspace_create(c, &wo, &w) < 0) {
			snprintf(error, sizeof error, "create workspace %d of %d: %s", made + 1, n,
				 station_client_last_error(c));
			break;
		}
		create_ms[made] = bench_now_ms() - start;
		snprintf(ws[made].id, ID_MAX, "%s", json_string_value(json_object_get(w, "id")));
		json_decref(w);
	}
	bench_log("%s: %d idle %s workspaces made, settling 2 s", o->id, made, wo.adapter);
	sleep(2);
	double rss1 = (double)bench_proc_kb_field(o->controller_pid, "status", "VmRSS");
	double used1 = (double)meminfo_used();
	kernel_counts_read(&k1);
	find_agents(ws, made);
	int measured = 0;
	for (int i = 0; i < made; i++)
		if (ws[i].agent > 0 && measure_one(&ws[i], &version) >= 0)
			measured++;
	if (!error[0] && measured < made)
		snprintf(error, sizeof error,
			 "measured %d of %d workspaces (agent or cgroup not "
			 "found)",
			 measured, made);
	double create_med = median_of(create_ms, made);
	if (!error[0])
		(void)emit_scrape(o, made);
	if (container && made > 0 && !error[0])
		exec_last(o, c, ws[made - 1].id, error, sizeof error);
	for (int i = 0; i < made; i++) {
		double start = bench_now_ms();
		if (station_workspace_delete(c, ws[i].id, NULL) < 0 && !error[0])
			snprintf(error, sizeof error, "delete %s: %s", ws[i].id,
				 station_client_last_error(c));
		delete_ms[i] = bench_now_ms() - start;
	}
	if (error[0])
		r = bench_emit_fail(o, "%s", error);
	else
		r = emit_rows(o, ws, made, version, rss0, rss1, used1 - used0, &k0, &k1, create_med,
			      median_of(delete_ms, made));
	station_client_free(c);
	free(ws), free(create_ms), free(delete_ms);
	return r;
}
