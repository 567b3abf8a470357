/* SPDX-License-Identifier: MIT */
/* station-sandboxd: one controller per worker and metadata root. */

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <netdb.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <unistd.h>

#include <linux/sched.h>
#include <linux/sched/types.h>

#include "adapter/adapter.h"
#include "basic/cleanup.h"
#include "basic/log.h"
#include "basic/util.h"
#include "event/event.h"
#include "api/api-metrics.h"
#include "api/http.h"
#include "api/preview.h"
#include "domain/auth.h"
#include "image/image.h"
#include "manager.h"
#include "net/net.h"
#include "proto/agent-proto.h"
#include "store/etcd.h"
#include "store/secret-box.h"
#include "store/store.h"

#define DEFAULT_ROOT "/var/lib/station-sandbox"
#define MAX_LISTENERS 8
#define MAX_PREVIEW_LISTENERS 4
#define MAX_IMPORT_DIRS 16

#define MAX_SECCOMP_DIRS 16
#define MAX_TENANT_LIST 64
#define MAX_DNS_UPSTREAMS 4

#define MAX_MCP_ARGS 32
#define MAX_MCP_HOSTS 16

struct options {
	const char *root;
	const char *listen[MAX_LISTENERS];
	size_t n_listen;
	char worker[33];
	const char *agent;
	const char *kernel_dir; /* --kernel-dir: the code contexts' kernel programs */
	enum log_format log_format;
	enum log_level log_level;
	uint64_t max_wait_ms;
	uint64_t max_body;
	uint64_t max_connections;      /* 0: from the open-files limit */
	uint64_t reserved_connections; /* UINT64_MAX: the default for the limit */
	struct manager_config mc;
	const char *seccomp_dirs[MAX_SECCOMP_DIRS]; /* --seccomp-dir, as given */
	size_t n_seccomp_dirs;
	const char *import_dirs[MAX_IMPORT_DIRS];
	struct net_config net; /* --network-*, --dns-upstream */
	bool network_off;
	const char *dns_upstreams[MAX_DNS_UPSTREAMS + 1];
	size_t n_dns_upstreams;
	struct pool_config pools[POOL_MAX]; /* --pool; strings in pool_bufs */
	char *pool_bufs[POOL_MAX];
	bool mcp;				/* --mcp: POST /mcp on the TCP listeners */
	const char *mcp_cli;			/* --mcp-cli: station-sandbox; NULL: beside us */
	const char *mcp_argv[MAX_MCP_ARGS + 6]; /* the MCP server's argv, --mcp-option in it */
	size_t n_mcp_options;
	const char *mcp_options[MAX_MCP_ARGS];
	char mcp_socket[PATH_MAX + 16];
	const char *mcp_hosts[MAX_MCP_HOSTS + 1]; /* --mcp-allow-host */
	size_t n_mcp_hosts;
	const char *workers;	  /* --workers LIST */
	const char *workers_file; /* --workers-file PATH */
	/* --fleet, --fleet-prefix, --fleet-ca, --fleet-cert, --fleet-key: etcd (store/etcd.h);
	 * --advertise-url, or the one derived from a single tcp --listen (into advertise) */
	struct etcd_config fleet;
	const char *advertise_url;
	char advertise[FLEET_URL_MAX + 1];
	/* --tenant-images, --tenant-seccomp-profiles, --tenant-networks: the values split at
	 * commas (in bufs, freed with the pools' strings) */
	char *tenant_bufs[3];
	const char *tenant_lists[3][MAX_TENANT_LIST + 1];
	const char *admin_token_file; /* --admin-token-file; NULL: <root>/admin.token, made here */
	/* --workspace-ca, --workspace-proxy, --workspace-no-proxy as given; checked after the
	 * flags into mc (setup_workspace_egress) */
	const char *workspace_ca;
	const char *workspace_proxy_url;
	const char *workspace_no_proxy;
	struct workspace_proxy workspace_proxy;
	/* --preview-*: the listeners as given, bound before the manager is made (a port 0
	 * becomes the port the URLs name); domain and URL into mc by setup_previews() */
	const char *preview_listen[MAX_PREVIEW_LISTENERS];
	size_t n_preview_listen;
	int preview_fds[MAX_PREVIEW_LISTENERS];
	const char *preview_domain;
	const char *preview_url;
	char preview_host[256];
	struct preview_config preview;
};

static void usage(FILE *f)
{
	fprintf(f,
		"usage: station-sandboxd [--root DIR] [--listen unix:PATH|tcp:HOST:PORT]...\n"
		"                        [--worker NAME] [--agent PATH] [--kernel-dir DIR]\n"
		"                        [--log-format json|text]\n"
		"                        [--log-level debug|info|warn|error] [--max-wait-ms N]\n"
		"                        [--max-running N] [--max-workspaces N] [--events-kept N]\n"
		"                        [--metrics-max-workspaces N]\n"
		"                        [--idempotency-retention-ms N]\n"
		"                        [--default-timeout-ms N] [--max-timeout-ms N]\n"
		"                        [--max-output-bytes N] [--max-body-bytes N]\n"
		"                        [--max-connections N] [--reserved-connections N]\n"
		"                        [--default-adapter host|container] [--runtime runc|crun|runsc|PATH]\n"
		"                        [--runtime-timeout-ms N] [--create-concurrency N]\n"
		"                        [--criu PATH]\n"
		"                        [--default-image NAME@sha256:…] [--seccomp-profile NAME|PATH]\n"
		"                        [--seccomp-dir DIR]...\n"
		"                        [--userns-base UID]\n"
		"                        [--import-dir DIR]... [--max-layer-bytes N]\n"
		"                        [--max-image-bytes N] [--max-image-entries N]\n"
		"                        [--max-snapshot-bytes N] [--max-snapshots-per-tenant N]\n"
		"                        [--adapters host,container] [--host-user NAME|UID[:GID]]\n"
		"                        [--default-pids-limit N] [--default-memory-mb N]\n"
		"                        [--home-size-mb N]\n"
		"                        [--network-range CIDR|none] [--network-bridge NAME]\n"
		"                        [--dns-upstream ADDR[:PORT]]...\n"
		"                        [--network-allow CLASS[,CLASS...]] (worker, gateways, connected,\n"
		"                         workspaces, private, link-local, documentation, ...)\n"
		"                        [--egress-pin-min-ms N]\n"
		"                        [--pool IMAGE[,size=N][,network=none|bridge][,seccomp=PROFILE]]...\n"
		"                        [--lxcfs auto|off|DIR]\n"
		"                        [--mcp] [--mcp-option FLAG]... [--mcp-cli PATH]\n"
		"                        [--mcp-allow-host NAME]...\n"
		"                        [--workers NAME=URL,... | --workers-file PATH]\n"
		"                        [--fleet etcd[s]://HOST:PORT[,...]] [--fleet-prefix P]\n"
		"                        [--fleet-ca FILE] [--fleet-cert FILE --fleet-key FILE]\n"
		"                        [--advertise-url URL]\n"
		"                        [--tenant NAME] [--tenant-images REF[,REF…]]\n"
		"                        [--tenant-seccomp-profiles NAME[,NAME…]]\n"
		"                        [--tenant-networks none,bridge,restricted]\n"
		"                        [--admin-token-file PATH] [--audit-kept N]\n"
		"                        [--usage-interval-ms N] [--usage-max-rows N]\n"
		"                        [--workspace-ca FILE] [--workspace-proxy http://HOST:PORT]\n"
		"                        [--workspace-no-proxy LIST] [--workspace-proxy-restricted]\n"
		"                        [--preview-listen tcp:HOST:PORT]... [--preview-domain NAME]\n"
		"                        [--preview-url http[s]://HOST[:PORT]]\n"
		"                        [--preview-max-connections N] [--preview-workspace-connections N]\n"
		"                        [--preview-port-connections N] [--preview-idle-timeout-ms N]\n"
		"\n"
		"--lxcfs auto (the default) starts lxcfs on <root>/lxcfs when it is installed and\n"
		"binds its /proc and /sys/devices/system/cpu views into container workspaces;\n"
		"DIR uses an lxcfs some other supervisor keeps mounted there.\n"
		"--mcp serves the Model Context Protocol at POST /mcp on the TCP listeners, each\n"
		"request by a `station-sandbox mcp` child given the --mcp-option flags (its limits).\n"
		"--workers names the other workers (as STATION_WORKERS does for clients; this one is\n"
		"added when not listed): GET /v1/workers lists them with their state and\n"
		"/v1/workers/NAME/v1/... forwards a request to NAME with the caller's own token.\n"
		"--fleet keeps the fleet's shared state in etcd (prefix P, default /station/):\n"
		"this worker registers there at --advertise-url (default: http://HOST:PORT of a\n"
		"single tcp --listen on a named address) under a 10 s lease, and tokens minted or\n"
		"revoked on any worker hold on every worker; etcds:// is TLS (--fleet-ca, and a\n"
		"client certificate with --fleet-cert and --fleet-key).\n"
		"--pool keeps SIZE (default 1) started idle container workspaces of IMAGE (as a\n"
		"create names it) with the runtime, network and seccomp profile given, refilled in\n"
		"the background; a create that asks for the same and no env takes one.\n"
		"--tenant makes a private worker: creates by another tenant's token are refused.\n"
		"--tenant-images (REF: NAME@sha256:… or REPO@* for any digest of REPO; default: the\n"
		"default image), --tenant-seccomp-profiles (default: default) and --tenant-networks\n"
		"(default: none) are what a tenant's token may create with.\n"
		"The unix socket <root>/station.sock (mode 0600) is always served (a --listen\n"
		"unix: naming a socket already served adds nothing). TCP listeners\n"
		"need a bearer token: the admin token is written to <root>/admin.token on first\n"
		"start, or read from --admin-token-file (a root-owned file, not group- or\n"
		"world-writable, one line of 32 to 4096 characters), which many workers can share.\n"
		"--audit-kept keeps that many audit rows (default 100000), the oldest dropped.\n"
		"--usage-interval-ms samples each workspace's CPU, memory, pids and network every N\n"
		"ms (default 5000, at least 100) for GET /v1/workspaces/ID/usage; --usage-max-rows\n"
		"caps the usage history's rows (default 4000000), the oldest dropped.\n"
		"--egress-pin-min-ms keeps an address that an allowed DNS answer gave a restricted\n"
		"workspace reachable for at least N ms after the last such answer (default 600000;\n"
		"0: the answer's TTL alone, at least 30 s); open connections outlive it.\n"
		"--workspace-ca (PEM, one or more certificates) is trusted in every workspace: a\n"
		"bundle of the image's (or the host's) CAs and these, bound over the image's trust\n"
		"store and named by NODE_EXTRA_CA_CERTS, REQUESTS_CA_BUNDLE, PIP_CERT,\n"
		"GIT_SSL_CAINFO, CURL_CA_BUNDLE and SSL_CERT_FILE. --workspace-proxy sets\n"
		"HTTP(S)_PROXY and http(s)_proxy (and NO_PROXY, no_proxy: --workspace-no-proxy,\n"
		"default " PROXY_NO_PROXY_DEFAULT ") in host and bridge workspaces, and in\n"
		"restricted ones with --workspace-proxy-restricted (which allows the proxy's\n"
		"address and port there); a workspace's env overrides them.\n"
		"--preview-listen serves previews of exposed workspace ports there (no API), each\n"
		"at <label>.<domain>: --preview-domain (default preview.localhost, which browsers\n"
		"resolve to 127.0.0.1, when every preview listener is on loopback). --preview-url\n"
		"is what the URLs say when a reverse proxy (TLS, a wildcard certificate) is in\n"
		"front: https://DOMAIN[:PORT]. Limits: connections in all (1024), per workspace\n"
		"(512) and per exposed port (256); no byte either way for 5 minutes closes one.\n");
}

static void default_worker(char *buf, size_t n)
{
	char host[256] = "worker";
	gethostname(host, sizeof host - 1);
	size_t j = 0;
	for (size_t i = 0; host[i] && j + 1 < n; i++) {
		char c = host[i];
		if (c >= 'A' && c <= 'Z')
			c = (char)(c - 'A' + 'a');
		if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')
			buf[j++] = c;
	}
	buf[j] = 0;
	if (!j)
		snprintf(buf, n, "worker");
}

static bool worker_valid(const char *s)
{
	size_t n = strlen(s);
	if (n == 0 || n > 32)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '-'))
			return false;
	return true;
}

static int parse_number(const char *opt, const char *arg, uint64_t max, uint64_t *ret)
{
	int r = parse_u64(arg, max, ret);
	if (r < 0)
		fprintf(stderr, "station-sandboxd: %s: \"%s\" is not a number from 0 to %llu\n",
			opt, arg, (unsigned long long)max);
	return r;
}

/* The first of candidates (printf formats taking the daemon's directory) that exists,
 * canonical; the last one when none does. */
static char *find_beside_self(const char *const *candidates, size_t n_candidates)
{
	char self[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
	if (n <= 0)
		return NULL;
	self[n] = 0;
	char *slash = strrchr(self, '/');
	*slash = 0;
	char *p = NULL, *real = NULL;
	for (size_t i = 0; i < n_candidates; i++) {
		free(p);
		if (asprintf(&p, candidates[i], self) < 0)
			return NULL;
		if (access(p, F_OK) == 0)
			break;
	}
	real = realpath(p, NULL);
	if (!real)
		return p;
	free(p);
	return real;
}

static char *default_cli_path(void)
{
	static const char *const candidates[] = { "%s/station-sandbox",
						  "%s/../cli/station-sandbox" };
	return find_beside_self(candidates, ELEMENTSOF(candidates));
}

/* The event loop (this thread) answers every request and every agent frame; on a busy host it
 * competes for the CPU with the runtime processes of a burst of creates and with the sandboxes'
 * own work, and each time slice it waits for is latency on every request. Nice LOOP_NICE gives
 * it the CPU first whenever it is runnable (it is idle most of the time, so it takes little).
 * SCHED_FLAG_RESET_ON_FORK: the threads and processes it starts (work pools, runtime calls,
 * agents, and so the sandboxes) begin at nice 0 and the default slice, never at ours. Without CAP_SYS_NICE it runs at
 * the nice it was started with (and still asks for the short slice). */
#define LOOP_NICE (-10)
/* and a short time slice (Linux 6.12 and later, EEVDF; ignored before): a wakeup of the loop
 * preempts a task with the default slice at once instead of waiting for that slice to end */
#define LOOP_SLICE_NSEC 500000ull

static void raise_loop_priority(void)
{
	struct sched_attr a = { .size = sizeof a,
				.sched_policy = SCHED_NORMAL,
				.sched_flags = SCHED_FLAG_RESET_ON_FORK,
				.sched_nice = LOOP_NICE,
				.sched_runtime = LOOP_SLICE_NSEC };
	if (syscall(SYS_sched_setattr, 0, &a, 0) == 0)
		return;
	int err = errno;
	char nice[16];
	snprintf(nice, sizeof nice, "%d", LOOP_NICE);
	log_info("event loop keeps its nice value", "nice", nice, "error", strerror(err), NULL);
	/* the short slice needs no privilege */
	errno = 0;
	int cur = getpriority(PRIO_PROCESS, 0);
	if (err == EPERM && errno == 0) {
		a.sched_nice = cur;
		(void)syscall(SYS_sched_setattr, 0, &a, 0);
	}
}

static char *default_agent_path(void)
{
	static const char *const candidates[] = { "%s/station-agent", "%s/../agent/station-agent",
						  "%s/../lib/station-sandbox/station-agent" };
	return find_beside_self(candidates, ELEMENTSOF(candidates));
}

/* The code contexts' kernel programs (station-kernel-python, station-kernel-js): from a build
 * tree or an installed tree. */
static char *default_kernel_dir(void)
{
	static const char *const candidates[] = { "%s/../kernel", "%s/../libexec/station-sandbox",
						  "%s/../lib/station-sandbox" };
	return find_beside_self(candidates, ELEMENTSOF(candidates));
}

/* The reviewed profile shipped in profiles/: from a build tree or an installed tree. */
static char *default_seccomp_path(void)
{
	static const char *const candidates[] = {
		"%s/../../../profiles/default.json",
		"%s/../share/station-sandbox/profiles/default.json",
	};
	return find_beside_self(candidates, ELEMENTSOF(candidates));
}

static void free_seccomp_dirs(char *(*dirs)[MAX_SECCOMP_DIRS + 2])
{
	for (size_t i = 0; (*dirs)[i]; i++)
		free((*dirs)[i]);
}

/* The profile directories: the shipped profiles/ (where default.json is), then each
 * --seccomp-dir, canonical. The default profile (--seccomp-profile, a name or a path) must be
 * in one of them, like any profile a request names: adapter.h. */
static int setup_seccomp(struct options *o, char *dirs[MAX_SECCOMP_DIRS + 2], char **ret_default)
{
	size_t n = 0;
	_cleanup_free_ char *shipped = default_seccomp_path();
	char *slash = shipped ? strrchr(shipped, '/') : NULL;
	if (slash && access(shipped, F_OK) == 0) {
		*slash = '\0';
		dirs[n++] = strdup(shipped);
	}
	for (size_t i = 0; i < o->n_seccomp_dirs; i++) {
		struct stat st;
		char *real = realpath(o->seccomp_dirs[i], NULL);
		if (!real || stat(real, &st) < 0 || !S_ISDIR(st.st_mode)) {
			fprintf(stderr, "station-sandboxd: --seccomp-dir \"%s\": %s\n",
				o->seccomp_dirs[i], real ? "not a directory" : strerror(errno));
			free(real);
			return -EINVAL;
		}
		dirs[n++] = real;
	}
	dirs[n] = NULL;
	o->mc.seccomp_dirs = (const char *const *)dirs;
	const char *name = o->mc.default_seccomp ? o->mc.default_seccomp : "default";
	struct station_error e = {};
	int r = adapter_seccomp_find((const char *const *)dirs, name, ret_default, &e);
	if (r < 0 && o->mc.default_seccomp) {
		fprintf(stderr, "station-sandboxd: --seccomp-profile: %s\n", e.message);
		return r;
	}
	o->mc.default_seccomp = r < 0 ? NULL : *ret_default;
	return 0;
}

enum {
	OPT_ROOT = 256,
	OPT_LISTEN,
	OPT_WORKER,
	OPT_AGENT,
	OPT_KERNEL_DIR,
	OPT_LOG_FORMAT,
	OPT_LOG_LEVEL,
	OPT_MAX_WAIT,
	OPT_MAX_RUNNING,
	OPT_MAX_WORKSPACES,
	OPT_IDEMPOTENCY_RETENTION,
	OPT_EVENTS_KEPT,
	OPT_ADMIN_TOKEN_FILE,
	OPT_AUDIT_KEPT,
	OPT_USAGE_INTERVAL,
	OPT_USAGE_MAX_ROWS,
	OPT_DEFAULT_TIMEOUT,
	OPT_MAX_TIMEOUT,
	OPT_MAX_OUTPUT,
	OPT_MAX_BODY,
	OPT_MAX_CONNECTIONS,
	OPT_RESERVED_CONNECTIONS,
	OPT_RUNTIME,
	OPT_RUNTIME_TIMEOUT,
	OPT_CRIU,
	OPT_CREATE_CONCURRENCY,
	OPT_DEFAULT_IMAGE,
	OPT_SECCOMP,
	OPT_SECCOMP_DIR,
	OPT_ADAPTER,
	OPT_USERNS_BASE,
	OPT_IMPORT_DIR,
	OPT_MAX_LAYER_BYTES,
	OPT_MAX_IMAGE_BYTES,
	OPT_MAX_IMAGE_ENTRIES,
	OPT_MAX_SNAPSHOT_BYTES,
	OPT_MAX_SNAPSHOTS,
	OPT_METRICS_MAX_WORKSPACES,
	OPT_ADAPTERS,
	OPT_HOST_USER,
	OPT_DEFAULT_PIDS,
	OPT_DEFAULT_MEMORY,
	OPT_HOME_SIZE,
	OPT_NETWORK_RANGE,
	OPT_NETWORK_BRIDGE,
	OPT_DNS_UPSTREAM,
	OPT_NETWORK_ALLOW,
	OPT_EGRESS_PIN_MIN,
	OPT_POOL,
	OPT_LXCFS,
	OPT_MCP,
	OPT_MCP_OPTION,
	OPT_MCP_CLI,
	OPT_MCP_ALLOW_HOST,
	OPT_WORKERS,
	OPT_WORKERS_FILE,
	OPT_FLEET,
	OPT_FLEET_PREFIX,
	OPT_FLEET_CA,
	OPT_FLEET_CERT,
	OPT_FLEET_KEY,
	OPT_ADVERTISE_URL,
	OPT_TENANT,
	OPT_TENANT_IMAGES,
	OPT_TENANT_SECCOMP,
	OPT_TENANT_NETWORKS,
	OPT_WORKSPACE_CA,
	OPT_WORKSPACE_PROXY,
	OPT_WORKSPACE_NO_PROXY,
	OPT_WORKSPACE_PROXY_RESTRICTED,
	OPT_PREVIEW_LISTEN,
	OPT_PREVIEW_DOMAIN,
	OPT_PREVIEW_URL,
	OPT_PREVIEW_MAX_CONNECTIONS,
	OPT_PREVIEW_WORKSPACE_CONNECTIONS,
	OPT_PREVIEW_PORT_CONNECTIONS,
	OPT_PREVIEW_IDLE_TIMEOUT,
};

static void pool_bufs_free(struct options **o)
{
	for (size_t i = 0; i < (*o)->mc.n_pools; i++)
		free((*o)->pool_bufs[i]);
	for (size_t i = 0; i < ELEMENTSOF((*o)->tenant_bufs); i++)
		free((*o)->tenant_bufs[i]);
}

static bool tenant_image_valid(const char *s)
{
	const char *at = strrchr(s, '@');
	struct image_ref ref;

	if (at && strcmp(at, "@*") == 0)
		return at > s;
	return image_ref_parse(s, &ref, NULL) >= 0;
}

static bool tenant_profile_valid(const char *s)
{
	return s[0] && !strchr(s, '/');
}

static bool tenant_network_valid(const char *s)
{
	return strcmp(s, "none") == 0 || strcmp(s, "bridge") == 0 || strcmp(s, "restricted") == 0;
}

/* An allow list for tenants' creates (--tenant-images and the like): NAME[,NAME…]. */
static int parse_tenant_list(struct options *o, int which, const char *flag, const char *arg,
			     bool (*valid)(const char *), const char *want)
{
	const char **list = o->tenant_lists[which];
	size_t n = 0;
	char *save = NULL;

	free(o->tenant_bufs[which]);
	o->tenant_bufs[which] = strdup(arg);
	if (!o->tenant_bufs[which])
		return -ENOMEM;
	for (char *t = strtok_r(o->tenant_bufs[which], ",", &save); t;
	     t = strtok_r(NULL, ",", &save)) {
		if (!valid(t)) {
			fprintf(stderr, "station-sandboxd: %s \"%s\": want %s\n", flag, t, want);
			return -EINVAL;
		}
		if (n == MAX_TENANT_LIST) {
			fprintf(stderr, "station-sandboxd: %s: at most %d entries\n", flag,
				MAX_TENANT_LIST);
			return -EINVAL;
		}
		list[n++] = t;
	}
	if (n == 0) {
		fprintf(stderr, "station-sandboxd: %s names nothing\n", flag);
		return -EINVAL;
	}
	list[n] = NULL;
	return 0;
}

static int parse_tenant_option(struct options *o, int opt, const char *arg)
{
	switch (opt) {
	case OPT_TENANT:
		if (!auth_tenant_valid(arg)) {
			fprintf(stderr,
				"station-sandboxd: --tenant \"%s\": use 1-64 of [a-z0-9-], not "
				"starting with '-'\n",
				arg);
			return -EINVAL;
		}
		o->mc.tenant = arg;
		return 0;
	case OPT_TENANT_IMAGES:
		o->mc.tenant_images = o->tenant_lists[0];
		return parse_tenant_list(o, 0, "--tenant-images", arg, tenant_image_valid,
					 "NAME@sha256:<64 hex>, sha256:<64 hex> or REPO@*");
	case OPT_TENANT_SECCOMP:
		o->mc.tenant_seccomp_profiles = o->tenant_lists[1];
		return parse_tenant_list(o, 1, "--tenant-seccomp-profiles", arg,
					 tenant_profile_valid, "a profile name");
	default:
		o->mc.tenant_networks = o->tenant_lists[2];
		return parse_tenant_list(o, 2, "--tenant-networks", arg, tenant_network_valid,
					 "none, bridge or restricted");
	}
}

/* --pool IMAGE[,size=N][,network=none|bridge][,seccomp=PROFILE] (manager.h); what the store
 * and the profile directories must hold is checked when the manager starts. */
static int parse_pool(struct options *o, const char *arg)
{
	char err[256];
	if (o->mc.n_pools == POOL_MAX) {
		fprintf(stderr, "station-sandboxd: --pool: at most %d pools\n", POOL_MAX);
		return -EINVAL;
	}
	char *buf = strdup(arg);
	if (!buf)
		return -ENOMEM;
	if (pool_config_parse(buf, &o->pools[o->mc.n_pools], err, sizeof err) < 0) {
		fprintf(stderr, "station-sandboxd: --pool \"%s\": %s\n", arg, err);
		free(buf);
		return -EINVAL;
	}
	o->pool_bufs[o->mc.n_pools++] = buf;
	o->mc.pools = o->pools;
	return 0;
}

/* Image imports: where layouts may come from, and how large an image may unpack. */
static int parse_image_option(struct options *o, int c, const char *arg)
{
	struct image_limits *l = &o->mc.image_limits;

	switch (c) {
	case OPT_IMPORT_DIR:
		if (arg[0] != '/') {
			fprintf(stderr, "station-sandboxd: --import-dir must be absolute\n");
			return -EINVAL;
		}
		if (o->mc.n_import_dirs == MAX_IMPORT_DIRS) {
			fprintf(stderr, "station-sandboxd: at most %d --import-dir\n",
				MAX_IMPORT_DIRS);
			return -EINVAL;
		}
		o->import_dirs[o->mc.n_import_dirs++] = arg;
		o->mc.import_dirs = o->import_dirs;
		return 0;
	case OPT_MAX_LAYER_BYTES:
		return parse_number("--max-layer-bytes", arg, UINT64_MAX, &l->max_layer_bytes);
	case OPT_MAX_IMAGE_BYTES:
		return parse_number("--max-image-bytes", arg, UINT64_MAX, &l->max_image_bytes);
	case OPT_MAX_IMAGE_ENTRIES:
		return parse_number("--max-image-entries", arg, UINT64_MAX, &l->max_image_entries);
	case OPT_MAX_SNAPSHOT_BYTES: /* snapshots are images: their limits sit beside */
		return parse_number("--max-snapshot-bytes", arg, UINT64_MAX,
				    &o->mc.max_snapshot_bytes);
	case OPT_MAX_SNAPSHOTS:
		return parse_number("--max-snapshots-per-tenant", arg, 1000000,
				    &o->mc.max_snapshots_per_tenant);
	default:
		return -EINVAL;
	}
}

/* "host", "container" or both, comma-separated: the adapters the API may create. */
static int parse_adapters(struct manager_config *mc, const char *arg)
{
	_cleanup_free_ char *copy = strdup(arg);
	char *save = NULL;
	if (!copy)
		return -ENOMEM;
	mc->allow_host = mc->allow_container = false;
	for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		if (strcmp(t, "host") == 0)
			mc->allow_host = true;
		else if (strcmp(t, "container") == 0)
			mc->allow_container = true;
		else {
			fprintf(stderr,
				"station-sandboxd: --adapters \"%s\": unknown adapter \"%s\" "
				"(host, container)\n",
				arg, t);
			return -EINVAL;
		}
	}
	if (!mc->allow_host && !mc->allow_container) {
		fprintf(stderr, "station-sandboxd: --adapters names no adapter\n");
		return -EINVAL;
	}
	return 0;
}

/* A user name from the host's passwd (its uid and primary gid), or UID[:GID] (GID defaults
 * to UID). Root is refused: leaving the flag out means root. */
static int parse_host_user(struct manager_config *mc, const char *arg)
{
	uint64_t uid, gid;
	const struct passwd *pw = getpwnam(arg);
	if (pw) {
		uid = pw->pw_uid;
		gid = pw->pw_gid;
	} else {
		_cleanup_free_ char *copy = strdup(arg);
		if (!copy)
			return -ENOMEM;
		char *colon = strchr(copy, ':');
		if (colon)
			*colon = 0;
		if (parse_u64(copy, UINT32_MAX - 1, &uid) < 0 ||
		    (colon && parse_u64(colon + 1, UINT32_MAX - 1, &gid) < 0)) {
			fprintf(stderr,
				"station-sandboxd: --host-user \"%s\": not a user of this host "
				"nor UID[:GID]\n",
				arg);
			return -EINVAL;
		}
		if (!colon)
			gid = uid;
	}
	if (uid == 0 || gid == 0) {
		fprintf(stderr,
			"station-sandboxd: --host-user \"%s\" is root (uid or gid 0): leave the "
			"flag out to run host commands as root\n",
			arg);
		return -EINVAL;
	}
	mc->host_user_set = true;
	mc->host_uid = (uint32_t)uid;
	mc->host_gid = (uint32_t)gid;
	return 0;
}

/* --network-allow: what a bridged workspace may reach beyond the outside world. */
static int parse_network_allow(struct net_config *n, const char *arg)
{
	_cleanup_free_ char *copy = strdup(arg);
	char *save = NULL;

	if (!copy)
		return -ENOMEM;
	for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		int c = net_class_from_string(t);
		if (c < 0) {
			fprintf(stderr, "station-sandboxd: --network-allow: unknown \"%s\" (%s)\n",
				t, net_class_names());
			return -EINVAL;
		}
		n->allow |= NET_CLASS_BIT(c);
	}
	return 0;
}

static int parse_network_option(struct options *o, int c, const char *arg)
{
	switch (c) {
	case OPT_NETWORK_RANGE:
		o->network_off = strcmp(arg, "none") == 0;
		o->net.range = arg;
		return 0;
	case OPT_NETWORK_BRIDGE:
		o->net.bridge = arg;
		return 0;
	case OPT_DNS_UPSTREAM:
		if (o->n_dns_upstreams == MAX_DNS_UPSTREAMS) {
			fprintf(stderr, "station-sandboxd: at most %d --dns-upstream\n",
				MAX_DNS_UPSTREAMS);
			return -EINVAL;
		}
		o->dns_upstreams[o->n_dns_upstreams++] = arg;
		o->net.dns_upstreams = o->dns_upstreams;
		return 0;
	case OPT_NETWORK_ALLOW:
		return parse_network_allow(&o->net, arg);
	case OPT_EGRESS_PIN_MIN:
		return parse_number("--egress-pin-min-ms", arg, 86400000,
				    &o->net.egress_pin_min_ms);
	default:
		return -EINVAL;
	}
}

/* --workspace-*: what every workspace trusts and which proxy it uses. */
static int parse_workspace_egress_option(struct options *o, int c, const char *arg)
{
	switch (c) {
	case OPT_WORKSPACE_CA:
		o->workspace_ca = arg;
		return 0;
	case OPT_WORKSPACE_PROXY:
		o->workspace_proxy_url = arg;
		return 0;
	case OPT_WORKSPACE_NO_PROXY:
		o->workspace_no_proxy = arg;
		return 0;
	case OPT_WORKSPACE_PROXY_RESTRICTED:
		o->mc.workspace_proxy_restricted = true;
		return 0;
	default:
		return -EINVAL;
	}
}

/* At start, before anything is made: every certificate of --workspace-ca parses, the proxy's
 * URL is well-formed and its host resolves. *ret_pem is the checked PEM (mc points at it). */
static int setup_workspace_egress(struct options *o, char **ret_pem)
{
	struct station_error e = { 0 };
	size_t count = 0;
	if (o->workspace_ca &&
	    ca_pem_load(o->workspace_ca, ret_pem, &o->mc.workspace_ca_len, &count, &e) < 0) {
		fprintf(stderr, "station-sandboxd: %s\n", e.message);
		return -EINVAL;
	}
	o->mc.workspace_ca_pem = *ret_pem;
	if ((o->workspace_no_proxy || o->mc.workspace_proxy_restricted) &&
	    !o->workspace_proxy_url) {
		fprintf(stderr, "station-sandboxd: --workspace-no-proxy and "
				"--workspace-proxy-restricted need --workspace-proxy\n");
		return -EINVAL;
	}
	if (!o->workspace_proxy_url)
		return 0;
	if (workspace_proxy_parse(o->workspace_proxy_url, o->workspace_no_proxy,
				  &o->workspace_proxy, &e) < 0) {
		fprintf(stderr, "station-sandboxd: %s\n", e.message);
		return -EINVAL;
	}
	o->mc.workspace_proxy = &o->workspace_proxy;
	o->net.proxy_address = o->workspace_proxy.address;
	o->net.proxy_port = o->workspace_proxy.port;
	o->net.proxy_restricted = o->mc.workspace_proxy_restricted;
	return 0;
}

static int listen_tcp(const char *spec);

/* --preview-*: previews of exposed ports on listeners of their own. */
static int parse_preview_option(struct options *o, int c, const char *arg)
{
	uint64_t v;

	switch (c) {
	case OPT_PREVIEW_LISTEN:
		if (o->n_preview_listen == MAX_PREVIEW_LISTENERS || strncmp(arg, "tcp:", 4) != 0) {
			fprintf(stderr,
				"station-sandboxd: --preview-listen takes tcp:HOST:PORT (at most "
				"%d)\n",
				MAX_PREVIEW_LISTENERS);
			return -EINVAL;
		}
		o->preview_listen[o->n_preview_listen++] = arg;
		return 0;
	case OPT_PREVIEW_DOMAIN:
		o->preview_domain = arg;
		return 0;
	case OPT_PREVIEW_URL:
		o->preview_url = arg;
		return 0;
	case OPT_PREVIEW_IDLE_TIMEOUT:
		if (parse_number("--preview-idle-timeout-ms", arg, 86400000, &v) < 0 || v == 0)
			return -EINVAL;
		o->preview.idle_timeout_ms = v;
		return 0;
	default:
		if (parse_number("--preview-*-connections", arg, 1 << 20, &v) < 0 || v == 0)
			return -EINVAL;
		*(c == OPT_PREVIEW_MAX_CONNECTIONS ? &o->preview.max_connections :
		  c == OPT_PREVIEW_WORKSPACE_CONNECTIONS ?
						     &o->preview.max_per_workspace :
						     &o->preview.max_per_exposure) = (unsigned)v;
		return 0;
	}
}

/* A DNS name: labels of letters, digits and '-', lower-cased into out. */
static bool dns_name_valid(const char *s, size_t n, char *out, size_t out_size)
{
	if (n == 0 || n >= out_size || n > 200 || s[0] == '.' || s[n - 1] == '.')
		return false;
	for (size_t i = 0; i < n; i++) {
		char ch = s[i];
		if (ch >= 'A' && ch <= 'Z')
			ch = (char)(ch - 'A' + 'a');
		if (!((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '-' ||
		      (ch == '.' && s[i + 1] != '.')))
			return false;
		out[i] = ch;
	}
	out[n] = 0;
	return true;
}

/* Whether the listening socket fd is bound to a loopback address; its port into *port. */
static bool socket_loopback(int fd, uint16_t *port)
{
	struct sockaddr_storage sa;
	socklen_t sl = sizeof sa;
	if (getsockname(fd, (struct sockaddr *)&sa, &sl) < 0)
		return false;
	if (sa.ss_family == AF_INET) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)&sa;
		*port = ntohs(in->sin_port);
		return (ntohl(in->sin_addr.s_addr) >> 24) == 127;
	}
	const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)&sa;
	*port = ntohs(in6->sin6_port);
	return IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr);
}

/* Binds the preview listeners and fills mc's preview_* from --preview-domain, --preview-url
 * and the first listener's port: before the manager is made. Nothing to do without
 * --preview-listen (the other --preview-* flags are refused then). */
static int setup_previews(struct options *o)
{
	bool loopback = true;
	uint16_t port = 0;

	for (size_t i = 0; i < MAX_PREVIEW_LISTENERS; i++)
		o->preview_fds[i] = -1;
	if (!o->n_preview_listen) {
		if (o->preview_domain || o->preview_url) {
			fprintf(stderr, "station-sandboxd: --preview-domain and --preview-url need "
					"--preview-listen\n");
			return -EINVAL;
		}
		return 0;
	}
	for (size_t i = 0; i < o->n_preview_listen; i++) {
		uint16_t p = 0;
		int fd = listen_tcp(o->preview_listen[i] + 4);
		if (fd < 0) {
			fprintf(stderr, "station-sandboxd: cannot listen on \"%s\": %s\n",
				o->preview_listen[i],
				fd == -EINVAL ? "use tcp:HOST:PORT" : strerror(-fd));
			return fd;
		}
		o->preview_fds[i] = fd;
		loopback &= socket_loopback(fd, &p);
		if (i == 0)
			port = p;
	}
	const char *scheme = "http";
	if (o->preview_url) {
		const char *u = o->preview_url, *host;
		if (strncmp(u, "https://", 8) == 0)
			scheme = "https", host = u + 8;
		else if (strncmp(u, "http://", 7) == 0)
			host = u + 7;
		else
			host = NULL;
		size_t n = host ? strcspn(host, ":/") : 0;
		uint64_t v = 0;
		const char *rest = host ? host + n : NULL;
		if (rest && *rest == ':') {
			char num[8] = "";
			size_t k = strcspn(rest + 1, "/");
			if (k == 0 || k >= sizeof num)
				host = NULL;
			else {
				memcpy(num, rest + 1, k);
				if (parse_u64(num, 65535, &v) < 0 || v == 0)
					host = NULL;
				rest += 1 + k;
			}
		}
		if (!host || (*rest && strcmp(rest, "/") != 0) ||
		    !dns_name_valid(host, n, o->preview_host, sizeof o->preview_host)) {
			fprintf(stderr,
				"station-sandboxd: --preview-url is http[s]://DOMAIN[:PORT], the "
				"address previews are reached at: \"%s\"\n",
				u);
			return -EINVAL;
		}
		port = (uint16_t)v;
	} else if (o->preview_domain) {
		if (!dns_name_valid(o->preview_domain, strlen(o->preview_domain), o->preview_host,
				    sizeof o->preview_host)) {
			fprintf(stderr,
				"station-sandboxd: --preview-domain is a DNS name: \"%s\"\n",
				o->preview_domain);
			return -EINVAL;
		}
	} else if (loopback) {
		snprintf(o->preview_host, sizeof o->preview_host, "preview.localhost");
	} else {
		fprintf(stderr,
			"station-sandboxd: a --preview-listen off loopback needs "
			"--preview-domain or --preview-url (the name its previews are under)\n");
		return -EINVAL;
	}
	if (o->preview_url && o->preview_domain) {
		char d[256];
		if (!dns_name_valid(o->preview_domain, strlen(o->preview_domain), d, sizeof d) ||
		    strcmp(d, o->preview_host) != 0) {
			fprintf(stderr, "station-sandboxd: --preview-domain differs from "
					"--preview-url's host: give one\n");
			return -EINVAL;
		}
	}
	if ((strcmp(scheme, "http") == 0 && port == 80) ||
	    (strcmp(scheme, "https") == 0 && port == 443))
		port = 0;
	o->mc.preview_domain = o->preview_host;
	o->mc.preview_scheme = scheme;
	o->mc.preview_port = port;
	o->preview.domain = o->preview_host;
	o->preview.https = strcmp(scheme, "https") == 0;
	return 0;
}

/* The options that loosen or tighten what a workspace may do on this worker. */
static int parse_safety_option(struct options *o, int c, const char *arg)
{
	switch (c) {
	case OPT_NETWORK_RANGE:
	case OPT_NETWORK_BRIDGE:
	case OPT_DNS_UPSTREAM:
	case OPT_NETWORK_ALLOW:
	case OPT_EGRESS_PIN_MIN:
		return parse_network_option(o, c, arg);
	case OPT_WORKSPACE_CA:
	case OPT_WORKSPACE_PROXY:
	case OPT_WORKSPACE_NO_PROXY:
	case OPT_WORKSPACE_PROXY_RESTRICTED:
		return parse_workspace_egress_option(o, c, arg);
	case OPT_PREVIEW_LISTEN:
	case OPT_PREVIEW_DOMAIN:
	case OPT_PREVIEW_URL:
	case OPT_PREVIEW_MAX_CONNECTIONS:
	case OPT_PREVIEW_WORKSPACE_CONNECTIONS:
	case OPT_PREVIEW_PORT_CONNECTIONS:
	case OPT_PREVIEW_IDLE_TIMEOUT:
		return parse_preview_option(o, c, arg);
	case OPT_ADAPTERS:
		return parse_adapters(&o->mc, arg);
	case OPT_POOL:
		return parse_pool(o, arg);
	case OPT_TENANT:
	case OPT_TENANT_IMAGES:
	case OPT_TENANT_SECCOMP:
	case OPT_TENANT_NETWORKS:
		return parse_tenant_option(o, c, arg);
	case OPT_LXCFS:
		if (strcmp(arg, "auto") && strcmp(arg, "off") && arg[0] != '/') {
			fprintf(stderr, "station-sandboxd: --lxcfs is auto, off or the absolute "
					"mount point of a running lxcfs\n");
			return -EINVAL;
		}
		o->mc.lxcfs = arg;
		return 0;
	case OPT_MCP:
		o->mcp = true;
		return 0;
	case OPT_MCP_OPTION:
		if (o->n_mcp_options == MAX_MCP_ARGS || strncmp(arg, "--", 2) != 0) {
			fprintf(stderr,
				"station-sandboxd: --mcp-option takes a flag of "
				"`station-sandbox mcp` (--no-delete, --adapters=host), at "
				"most %d\n",
				MAX_MCP_ARGS);
			return -EINVAL;
		}
		o->mcp_options[o->n_mcp_options++] = arg;
		return 0;
	case OPT_MCP_CLI:
		o->mcp_cli = arg;
		return 0;
	case OPT_MCP_ALLOW_HOST:
		if (o->n_mcp_hosts == MAX_MCP_HOSTS || !*arg || strpbrk(arg, ":/ ")) {
			fprintf(stderr,
				"station-sandboxd: --mcp-allow-host takes a host name without "
				"port (at most %d)\n",
				MAX_MCP_HOSTS);
			return -EINVAL;
		}
		o->mcp_hosts[o->n_mcp_hosts++] = arg;
		return 0;
	case OPT_WORKERS:
	case OPT_WORKERS_FILE:
		if (o->workers || o->workers_file) {
			fprintf(stderr,
				"station-sandboxd: give --workers or --workers-file once\n");
			return -EINVAL;
		}
		*(c == OPT_WORKERS ? &o->workers : &o->workers_file) = arg;
		return 0;
	case OPT_FLEET:
		o->fleet.url = arg;
		return 0;
	case OPT_FLEET_PREFIX:
		o->fleet.prefix = arg;
		return 0;
	case OPT_FLEET_CA:
		o->fleet.ca_file = arg;
		return 0;
	case OPT_FLEET_CERT:
		o->fleet.cert_file = arg;
		return 0;
	case OPT_FLEET_KEY:
		o->fleet.key_file = arg;
		return 0;
	case OPT_ADVERTISE_URL:
		if ((strncmp(arg, "http://", 7) != 0 && strncmp(arg, "https://", 8) != 0) ||
		    strlen(arg) > FLEET_URL_MAX || arg[strcspn(arg, " \t\r\n")]) {
			fprintf(stderr, "station-sandboxd: --advertise-url takes an http:// or "
					"https:// URL\n");
			return -EINVAL;
		}
		o->advertise_url = arg;
		return 0;
	case OPT_HOST_USER:
		return parse_host_user(&o->mc, arg);
	case OPT_DEFAULT_PIDS:
		return parse_number("--default-pids-limit", arg, WORKSPACE_MAX_PIDS_LIMIT,
				    &o->mc.default_pids_limit);
	case OPT_DEFAULT_MEMORY:
		return parse_number("--default-memory-mb", arg, WORKSPACE_MAX_MEMORY_MB,
				    &o->mc.default_memory_mb);
	case OPT_HOME_SIZE:
		if (parse_number("--home-size-mb", arg, 1u << 30, &o->mc.home_size_mb) < 0)
			return -EINVAL;
		if (o->mc.home_size_mb > 0 && o->mc.home_size_mb < 8) {
			fprintf(stderr, "station-sandboxd: --home-size-mb is 0 (none) or at least "
					"8 (an ext4 filesystem with its journal)\n");
			return -EINVAL;
		}
		return 0;
	default:
		return -EINVAL;
	}
}

static int parse_option(struct options *o, int c, const char *arg)
{
	uint64_t v;
	switch (c) {
	case OPT_ROOT:
		o->root = arg;
		return 0;
	case OPT_LISTEN:
		if (o->n_listen == MAX_LISTENERS) {
			fprintf(stderr, "station-sandboxd: at most %d --listen\n", MAX_LISTENERS);
			return -EINVAL;
		}
		o->listen[o->n_listen++] = arg;
		return 0;
	case OPT_WORKER:
		if (!worker_valid(arg)) {
			fprintf(stderr,
				"station-sandboxd: --worker \"%s\": use 1-32 of [a-z0-9-]\n", arg);
			return -EINVAL;
		}
		snprintf(o->worker, sizeof o->worker, "%s", arg);
		return 0;
	case OPT_AGENT:
		o->agent = arg;
		return 0;
	case OPT_KERNEL_DIR:
		o->kernel_dir = arg;
		return 0;
	case OPT_LOG_FORMAT:
		if (strcmp(arg, "json") && strcmp(arg, "text")) {
			fprintf(stderr, "station-sandboxd: --log-format is json or text\n");
			return -EINVAL;
		}
		o->log_format = strcmp(arg, "json") == 0 ? LOG_FORMAT_JSON : LOG_FORMAT_TEXT;
		return 0;
	case OPT_LOG_LEVEL: {
		static const char *const levels[] = { "debug", "info", "warn", "error" };
		for (size_t i = 0; i < ELEMENTSOF(levels); i++)
			if (strcmp(arg, levels[i]) == 0) {
				o->log_level = (enum log_level)i;
				return 0;
			}
		fprintf(stderr, "station-sandboxd: --log-level is debug, info, warn or error\n");
		return -EINVAL;
	}
	case OPT_MAX_WAIT:
		return parse_number("--max-wait-ms", arg, 3600000, &o->max_wait_ms);
	case OPT_RUNTIME:
		o->mc.runtime = arg;
		return 0;
	case OPT_CRIU:
		if (arg[0] != '/') {
			fprintf(stderr, "station-sandboxd: --criu must be an absolute path\n");
			return -EINVAL;
		}
		o->mc.criu = arg;
		return 0;
	case OPT_RUNTIME_TIMEOUT: {
		uint64_t v;
		int r = parse_number("--runtime-timeout-ms", arg, 3600000, &v);
		if (r >= 0 && v < 100) {
			fprintf(stderr, "station-sandboxd: --runtime-timeout-ms is at least 100\n");
			r = -EINVAL;
		}
		o->mc.runtime_timeout_ms = (int)v;
		return r;
	}
	case OPT_CREATE_CONCURRENCY: {
		uint64_t v;
		int r = parse_number("--create-concurrency", arg, 1024, &v);
		if (r >= 0 && v == 0) {
			fprintf(stderr, "station-sandboxd: --create-concurrency is at least 1\n");
			r = -EINVAL;
		}
		o->mc.create_concurrency = (unsigned)v;
		return r;
	}
	case OPT_DEFAULT_IMAGE:
		o->mc.default_image = arg;
		return 0;
	case OPT_SECCOMP:
		o->mc.default_seccomp = arg; /* resolved in the profile directories by main() */
		return 0;
	case OPT_SECCOMP_DIR:
		if (arg[0] != '/' || o->n_seccomp_dirs == MAX_SECCOMP_DIRS) {
			fprintf(stderr,
				"station-sandboxd: --seccomp-dir must be absolute, at most %d\n",
				MAX_SECCOMP_DIRS);
			return -EINVAL;
		}
		o->seccomp_dirs[o->n_seccomp_dirs++] = arg;
		return 0;
	case OPT_ADAPTER:
		if (strcmp(arg, "host") && strcmp(arg, "container")) {
			fprintf(stderr,
				"station-sandboxd: --default-adapter is host or container\n");
			return -EINVAL;
		}
		o->mc.default_adapter = arg;
		return 0;
	case OPT_USERNS_BASE:
		if (parse_number("--userns-base", arg, UINT32_MAX - 65536, &v) < 0 || v < 65536) {
			fprintf(stderr, "station-sandboxd: --userns-base must be at least 65536\n");
			return -EINVAL;
		}
		o->mc.id_base = (uint32_t)v;
		return 0;
	case OPT_MAX_BODY:
		return parse_number("--max-body-bytes", arg, 64 << 20, &o->max_body);
	case OPT_MAX_CONNECTIONS:
		if (parse_number("--max-connections", arg, 1 << 20, &o->max_connections) < 0)
			return -EINVAL;
		if (o->max_connections < 2) {
			fprintf(stderr, "station-sandboxd: --max-connections must be at least 2\n");
			return -EINVAL;
		}
		return 0;
	case OPT_RESERVED_CONNECTIONS:
		return parse_number("--reserved-connections", arg, 1 << 20,
				    &o->reserved_connections);
	case OPT_MAX_RUNNING:
		if (parse_number("--max-running", arg, 256, &v) < 0)
			return -EINVAL;
		o->mc.max_running_per_workspace = v;
		return 0;
	case OPT_MAX_WORKSPACES:
		if (parse_number("--max-workspaces", arg, 100000, &v) < 0)
			return -EINVAL;
		o->mc.max_workspaces = v;
		return 0;
	case OPT_METRICS_MAX_WORKSPACES: /* GET /metrics: per-workspace series */
		if (parse_number("--metrics-max-workspaces", arg, 100000, &v) < 0 || v == 0)
			return -EINVAL;
		o->mc.metrics_max_workspaces = v;
		return 0;
	case OPT_IDEMPOTENCY_RETENTION:
		if (parse_number("--idempotency-retention-ms", arg, 30 * 86400000ull, &v) < 0)
			return -EINVAL;
		o->mc.idempotency_retention_usec = v * 1000;
		return 0;
	case OPT_EVENTS_KEPT:
		if (parse_number("--events-kept", arg, MANAGER_EVENTS_KEPT_MAX, &v) < 0 || v < 1) {
			fprintf(stderr, "station-sandboxd: --events-kept: 1 to %u\n",
				MANAGER_EVENTS_KEPT_MAX);
			return -EINVAL;
		}
		o->mc.events_kept = v;
		return 0;
	case OPT_ADMIN_TOKEN_FILE:
		o->admin_token_file = arg;
		return 0;
	case OPT_AUDIT_KEPT:
		if (parse_number("--audit-kept", arg, 100000000ull, &v) < 0 || v < 1) {
			fprintf(stderr, "station-sandboxd: --audit-kept: 1 to 100000000\n");
			return -EINVAL;
		}
		o->mc.audit_kept = v;
		return 0;
	case OPT_USAGE_INTERVAL:
		if (parse_number("--usage-interval-ms", arg, 3600000ull, &v) < 0 ||
		    v < USAGE_INTERVAL_MIN_MS) {
			fprintf(stderr, "station-sandboxd: --usage-interval-ms: %u to 3600000\n",
				USAGE_INTERVAL_MIN_MS);
			return -EINVAL;
		}
		o->mc.usage_interval_ms = v;
		return 0;
	case OPT_USAGE_MAX_ROWS:
		if (parse_number("--usage-max-rows", arg, 1000000000ull, &v) < 0 || v < 1000) {
			fprintf(stderr, "station-sandboxd: --usage-max-rows: 1000 to 1000000000\n");
			return -EINVAL;
		}
		o->mc.usage_max_rows = v;
		return 0;
	case OPT_DEFAULT_TIMEOUT:
		return parse_number("--default-timeout-ms", arg, 7 * 86400000ull,
				    &o->mc.default_timeout_ms);
	case OPT_MAX_TIMEOUT:
		return parse_number("--max-timeout-ms", arg, 7 * 86400000ull,
				    &o->mc.max_timeout_ms);
	case OPT_MAX_OUTPUT:
		return parse_number("--max-output-bytes", arg, 2ull * AGENT_MAX_OUTPUT_BYTES,
				    &o->mc.max_output_bytes);
	case OPT_IMPORT_DIR:
	case OPT_MAX_LAYER_BYTES:
	case OPT_MAX_IMAGE_BYTES:
	case OPT_MAX_IMAGE_ENTRIES:
	case OPT_MAX_SNAPSHOT_BYTES:
	case OPT_MAX_SNAPSHOTS:
		return parse_image_option(o, c, arg);
	default:
		return parse_safety_option(o, c, arg);
	}
}

/* The default adapter is one the API may create: container when allowed, else host. */
static int check_adapters(struct manager_config *mc)
{
	if (!mc->default_adapter)
		mc->default_adapter = mc->allow_container ? "container" : "host";
	bool host = strcmp(mc->default_adapter, "host") == 0;
	if (host ? mc->allow_host : mc->allow_container)
		return 0;
	fprintf(stderr,
		"station-sandboxd: --default-adapter %s is not among the allowed adapters "
		"(--adapters %s%s%s); allow it with --adapters %s\n",
		mc->default_adapter, mc->allow_host ? "host" : "",
		mc->allow_host && mc->allow_container ? "," : "",
		mc->allow_container ? "container" : "",
		host ? (mc->allow_container ? "host,container" : "host") : "host,container");
	return -EINVAL;
}

/* Returns 0 to go on, 1 when --help printed the usage (main() then exits 0), or -EINVAL after
 * saying why on stderr. */
static int parse_args(int argc, char **argv, struct options *o)
{
	static const struct option longopts[] = {
		{ "root", required_argument, NULL, OPT_ROOT },
		{ "listen", required_argument, NULL, OPT_LISTEN },
		{ "worker", required_argument, NULL, OPT_WORKER },
		{ "agent", required_argument, NULL, OPT_AGENT },
		{ "kernel-dir", required_argument, NULL, OPT_KERNEL_DIR },
		{ "log-format", required_argument, NULL, OPT_LOG_FORMAT },
		{ "log-level", required_argument, NULL, OPT_LOG_LEVEL },
		{ "max-wait-ms", required_argument, NULL, OPT_MAX_WAIT },
		{ "max-running", required_argument, NULL, OPT_MAX_RUNNING },
		{ "max-workspaces", required_argument, NULL, OPT_MAX_WORKSPACES },
		{ "metrics-max-workspaces", required_argument, NULL, OPT_METRICS_MAX_WORKSPACES },
		{ "idempotency-retention-ms", required_argument, NULL, OPT_IDEMPOTENCY_RETENTION },
		{ "events-kept", required_argument, NULL, OPT_EVENTS_KEPT },
		{ "admin-token-file", required_argument, NULL, OPT_ADMIN_TOKEN_FILE },
		{ "audit-kept", required_argument, NULL, OPT_AUDIT_KEPT },
		{ "usage-interval-ms", required_argument, NULL, OPT_USAGE_INTERVAL },
		{ "usage-max-rows", required_argument, NULL, OPT_USAGE_MAX_ROWS },
		{ "default-timeout-ms", required_argument, NULL, OPT_DEFAULT_TIMEOUT },
		{ "max-timeout-ms", required_argument, NULL, OPT_MAX_TIMEOUT },
		{ "max-output-bytes", required_argument, NULL, OPT_MAX_OUTPUT },
		{ "max-body-bytes", required_argument, NULL, OPT_MAX_BODY },
		{ "max-connections", required_argument, NULL, OPT_MAX_CONNECTIONS },
		{ "reserved-connections", required_argument, NULL, OPT_RESERVED_CONNECTIONS },
		{ "runtime", required_argument, NULL, OPT_RUNTIME },
		{ "runtime-timeout-ms", required_argument, NULL, OPT_RUNTIME_TIMEOUT },
		{ "criu", required_argument, NULL, OPT_CRIU },
		{ "create-concurrency", required_argument, NULL, OPT_CREATE_CONCURRENCY },
		{ "default-image", required_argument, NULL, OPT_DEFAULT_IMAGE },
		{ "seccomp-profile", required_argument, NULL, OPT_SECCOMP },
		{ "seccomp-dir", required_argument, NULL, OPT_SECCOMP_DIR },
		{ "default-adapter", required_argument, NULL, OPT_ADAPTER },
		{ "userns-base", required_argument, NULL, OPT_USERNS_BASE },
		{ "import-dir", required_argument, NULL, OPT_IMPORT_DIR },
		{ "max-layer-bytes", required_argument, NULL, OPT_MAX_LAYER_BYTES },
		{ "max-image-bytes", required_argument, NULL, OPT_MAX_IMAGE_BYTES },
		{ "max-image-entries", required_argument, NULL, OPT_MAX_IMAGE_ENTRIES },
		{ "max-snapshot-bytes", required_argument, NULL, OPT_MAX_SNAPSHOT_BYTES },
		{ "max-snapshots-per-tenant", required_argument, NULL, OPT_MAX_SNAPSHOTS },
		{ "adapters", required_argument, NULL, OPT_ADAPTERS },
		{ "host-user", required_argument, NULL, OPT_HOST_USER },
		{ "default-pids-limit", required_argument, NULL, OPT_DEFAULT_PIDS },
		{ "default-memory-mb", required_argument, NULL, OPT_DEFAULT_MEMORY },
		{ "home-size-mb", required_argument, NULL, OPT_HOME_SIZE },
		{ "network-range", required_argument, NULL, OPT_NETWORK_RANGE },
		{ "network-bridge", required_argument, NULL, OPT_NETWORK_BRIDGE },
		{ "dns-upstream", required_argument, NULL, OPT_DNS_UPSTREAM },
		{ "network-allow", required_argument, NULL, OPT_NETWORK_ALLOW },
		{ "egress-pin-min-ms", required_argument, NULL, OPT_EGRESS_PIN_MIN },
		{ "pool", required_argument, NULL, OPT_POOL },
		{ "tenant", required_argument, NULL, OPT_TENANT },
		{ "tenant-images", required_argument, NULL, OPT_TENANT_IMAGES },
		{ "tenant-seccomp-profiles", required_argument, NULL, OPT_TENANT_SECCOMP },
		{ "tenant-networks", required_argument, NULL, OPT_TENANT_NETWORKS },
		{ "lxcfs", required_argument, NULL, OPT_LXCFS },
		{ "mcp", no_argument, NULL, OPT_MCP },
		{ "mcp-option", required_argument, NULL, OPT_MCP_OPTION },
		{ "mcp-cli", required_argument, NULL, OPT_MCP_CLI },
		{ "mcp-allow-host", required_argument, NULL, OPT_MCP_ALLOW_HOST },
		{ "workers", required_argument, NULL, OPT_WORKERS },
		{ "workers-file", required_argument, NULL, OPT_WORKERS_FILE },
		{ "fleet", required_argument, NULL, OPT_FLEET },
		{ "fleet-prefix", required_argument, NULL, OPT_FLEET_PREFIX },
		{ "fleet-ca", required_argument, NULL, OPT_FLEET_CA },
		{ "fleet-cert", required_argument, NULL, OPT_FLEET_CERT },
		{ "fleet-key", required_argument, NULL, OPT_FLEET_KEY },
		{ "advertise-url", required_argument, NULL, OPT_ADVERTISE_URL },
		{ "workspace-ca", required_argument, NULL, OPT_WORKSPACE_CA },
		{ "workspace-proxy", required_argument, NULL, OPT_WORKSPACE_PROXY },
		{ "workspace-no-proxy", required_argument, NULL, OPT_WORKSPACE_NO_PROXY },
		{ "workspace-proxy-restricted", no_argument, NULL, OPT_WORKSPACE_PROXY_RESTRICTED },
		{ "preview-listen", required_argument, NULL, OPT_PREVIEW_LISTEN },
		{ "preview-domain", required_argument, NULL, OPT_PREVIEW_DOMAIN },
		{ "preview-url", required_argument, NULL, OPT_PREVIEW_URL },
		{ "preview-max-connections", required_argument, NULL, OPT_PREVIEW_MAX_CONNECTIONS },
		{ "preview-workspace-connections", required_argument, NULL,
		  OPT_PREVIEW_WORKSPACE_CONNECTIONS },
		{ "preview-port-connections", required_argument, NULL,
		  OPT_PREVIEW_PORT_CONNECTIONS },
		{ "preview-idle-timeout-ms", required_argument, NULL, OPT_PREVIEW_IDLE_TIMEOUT },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	int c;
	while ((c = getopt_long(argc, argv, "h", longopts, NULL)) >= 0) {
		if (c == 'h') {
			usage(stdout);
			return 1;
		}
		if (c == '?' || parse_option(o, c, optarg) < 0)
			return -EINVAL;
	}
	if (optind < argc) {
		fprintf(stderr, "station-sandboxd: unexpected argument \"%s\"\n", argv[optind]);
		return -EINVAL;
	}
	if (o->mc.default_timeout_ms == 0 || o->mc.default_timeout_ms > o->mc.max_timeout_ms ||
	    o->mc.max_output_bytes < 2 || o->mc.max_output_bytes > AGENT_MAX_OUTPUT_BYTES * 2 ||
	    o->mc.default_output_bytes > o->mc.max_output_bytes) {
		fprintf(stderr, "station-sandboxd: inconsistent timeout or output limits\n");
		return -EINVAL;
	}
	if (o->reserved_connections != UINT64_MAX && o->max_connections &&
	    o->reserved_connections >= o->max_connections) {
		fprintf(stderr, "station-sandboxd: --reserved-connections must be below "
				"--max-connections\n");
		return -EINVAL;
	}
	return check_adapters(&o->mc);
}

/* Exclusive ownership of the root: a second controller learns the owner's pid. */
static int take_lock(const char *root)
{
	char path[PATH_MAX];
	snprintf(path, sizeof path, "%s/lock", root);
	int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0) {
		fprintf(stderr, "station-sandboxd: cannot open \"%s\": %m\n", path);
		return -errno;
	}
	if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		int err = errno;
		char owner[32] = "";
		ssize_t n = pread(fd, owner, sizeof owner - 1, 0);
		owner[n > 0 ? n : 0] = 0;
		owner[strcspn(owner, "\n")] = 0;
		if (err == EWOULDBLOCK)
			fprintf(stderr,
				"station-sandboxd: root \"%s\" is owned by another controller "
				"(pid %s); two controllers must not share a root\n",
				root, owner[0] ? owner : "unknown");
		else
			fprintf(stderr, "station-sandboxd: cannot lock \"%s\": %s\n", path,
				strerror(err));
		close(fd);
		return -err;
	}
	char pid[32];
	int n = snprintf(pid, sizeof pid, "%d\n", getpid());
	if (ftruncate(fd, 0) < 0 || pwrite(fd, pid, (size_t)n, 0) != n) {
		fprintf(stderr, "station-sandboxd: cannot write \"%s\": %m\n", path);
		close(fd);
		return -EIO;
	}
	return fd;
}

static int listen_unix(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	if (snprintf(sa.sun_path, sizeof sa.sun_path, "%s", path) >= (int)sizeof sa.sun_path)
		return -ENAMETOOLONG;
	_cleanup_close_ int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	if (unlink(path) < 0 && errno != ENOENT)
		return -errno;
	mode_t old = umask(0177);
	int r = bind(fd, (struct sockaddr *)&sa, sizeof sa);
	umask(old);
	if (r < 0 || chmod(path, 0600) < 0 || listen(fd, 256) < 0)
		return -errno;
	return TAKE_FD(fd);
}

static int listen_tcp(const char *spec)
{
	_cleanup_free_ char *host = strdup(spec);
	if (!host)
		return -ENOMEM;
	char *colon = strrchr(host, ':');
	if (!colon)
		return -EINVAL;
	*colon = 0;
	const char *port = colon + 1;
	char *h = host;
	if (h[0] == '[' && colon > h && colon[-1] == ']') {
		h++;
		colon[-1] = 0;
	}
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM,
				  .ai_flags = AI_NUMERICHOST | AI_NUMERICSERV | AI_PASSIVE };
	struct addrinfo *ai = NULL;
	if (getaddrinfo(h[0] ? h : NULL, port, &hints, &ai) != 0 || !ai)
		return -EINVAL;
	int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	int one = 1, r = 0;
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0 ||
	    bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 || listen(fd, 256) < 0)
		r = -errno;
	freeaddrinfo(ai);
	if (r < 0) {
		if (fd >= 0)
			close(fd);
		return r;
	}
	return fd;
}

static bool admin_token_stored(struct store *store)
{
	struct token_row *rows = NULL;
	size_t n = 0;
	bool found = false;

	if (store_token_list(store, &rows, &n) < 0)
		return true; /* the caller's write would fail the same way: say nothing new */
	for (size_t i = 0; i < n; i++) {
		found |= strcmp(rows[i].id, "admin") == 0;
		token_row_free(&rows[i]);
	}
	free(rows);
	return found;
}

/* The admin token: made once, stored hashed, shown once through a 0600 file. */
static int ensure_admin_token(struct store *store, const char *root)
{
	if (admin_token_stored(store))
		return 0;
	uint8_t raw[32];
	char token[80], line[sizeof token + 1], hex[65], hash[65], path[PATH_MAX];
	int r = random_bytes(raw, sizeof raw);
	if (r < 0)
		return r;
	hex_encode(raw, sizeof raw, hex);
	snprintf(token, sizeof token, "sst_%s", hex);
	sha256_hex(token, strlen(token), hash);
	snprintf(path, sizeof path, "%s/admin.token", root);
	snprintf(line, sizeof line, "%s\n", token);
	r = write_file_atomic(path, line, strlen(line), 0600);
	explicit_bzero(token, sizeof token);
	explicit_bzero(line, sizeof line);
	if (r < 0)
		return r;
	return store_token_set_admin(store, hash, realtime_usec());
}

#define ADMIN_TOKEN_FILE_MAX 4096
#define ADMIN_TOKEN_MIN 32

/* --admin-token-file: the operator's secret (a Kubernetes Secret, a systemd credential),
 * hashed and stored as the admin token in place of any other. The file must be what only root
 * could have written: a regular file (not a symlink), owned by root, not group- or
 * world-writable, one line of 32 to 4096 printable characters. */
static int load_admin_token_file(struct store *store, const char *root, const char *path)
{
	char buf[ADMIN_TOKEN_FILE_MAX + 2], hash[65], old[PATH_MAX];
	struct stat st;
	ssize_t n;
	size_t len = 0;
	int r;
	_cleanup_close_ int fd =
		open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);

	if (fd < 0) {
		r = -errno;
		fprintf(stderr, "station-sandboxd: --admin-token-file \"%s\": %s\n", path,
			r == -ELOOP ? "is a symbolic link (give the file itself)" : strerror(-r));
		return r;
	}
	if (fstat(fd, &st) < 0)
		return -errno;
	if (!S_ISREG(st.st_mode)) {
		fprintf(stderr, "station-sandboxd: --admin-token-file \"%s\": not a regular file\n",
			path);
		return -EINVAL;
	}
	if (st.st_uid != 0) {
		fprintf(stderr,
			"station-sandboxd: --admin-token-file \"%s\": owned by uid %u, not root\n",
			path, (unsigned)st.st_uid);
		return -EPERM;
	}
	if (st.st_mode & (S_IWGRP | S_IWOTH)) {
		fprintf(stderr,
			"station-sandboxd: --admin-token-file \"%s\": mode %04o is group- or "
			"world-writable (chmod 0600 it)\n",
			path, (unsigned)(st.st_mode & 07777));
		return -EPERM;
	}
	while (len < sizeof buf && (n = read(fd, buf + len, sizeof buf - len)) != 0) {
		if (n < 0) {
			if (errno == EINTR)
				continue;
			r = -errno;
			fprintf(stderr, "station-sandboxd: --admin-token-file \"%s\": %s\n", path,
				strerror(-r));
			return r;
		}
		len += (size_t)n;
	}
	if (len > 0 && buf[len - 1] == '\n')
		len--;
	r = 0;
	if (len > ADMIN_TOKEN_FILE_MAX)
		r = fprintf(stderr, "station-sandboxd: --admin-token-file \"%s\": over %d bytes\n",
			    path, ADMIN_TOKEN_FILE_MAX);
	for (size_t i = 0; r == 0 && i < len; i++)
		if ((uint8_t)buf[i] <= 0x20 || (uint8_t)buf[i] >= 0x7f)
			r = fprintf(stderr,
				    "station-sandboxd: --admin-token-file \"%s\": must be one line "
				    "of printable characters without spaces (byte %zu is not)\n",
				    path, i + 1);
	if (r == 0 && len < ADMIN_TOKEN_MIN)
		r = fprintf(stderr,
			    "station-sandboxd: --admin-token-file \"%s\": the token is %zu "
			    "characters, shorter than %d\n",
			    path, len, ADMIN_TOKEN_MIN);
	if (r != 0) {
		explicit_bzero(buf, sizeof buf);
		return -EINVAL;
	}
	sha256_hex(buf, len, hash);
	explicit_bzero(buf, sizeof buf);
	r = store_token_set_admin(store, hash, realtime_usec());
	if (r < 0) {
		fprintf(stderr, "station-sandboxd: cannot store the admin token: %s\n",
			strerror(-r));
		return r;
	}
	/* A token this controller made before no longer works: do not leave it lying about. */
	snprintf(old, sizeof old, "%s/admin.token", root);
	(void)unlink(old);
	return 0;
}

static int authenticate(void *userdata, const char *token, size_t n, struct auth_principal *ret)
{
	return manager_token_authenticate(userdata, token, n, ret);
}

static int on_terminate(struct event_source *s, const struct signalfd_siginfo *si, void *userdata)
{
	log_info("shutting down; agents and their runs keep going", "signal",
		 si->ssi_signo == SIGTERM ? "SIGTERM" : "SIGINT", NULL);
	event_loop_exit(userdata, 0);
	return 0;
}

struct daemon {
	struct event_loop *loop;
	struct store *store;
	struct manager *manager;
	struct http_server *servers[MAX_LISTENERS + 1];
	size_t n_servers;
	struct stat unix_sockets[MAX_LISTENERS + 1]; /* the socket files bound, by st_dev/st_ino */
	size_t n_unix_sockets;
	struct http_connections conns;	/* all listeners together */
	struct api_metrics api_metrics; /* GET /metrics: every listener's requests */
	struct preview_server *preview; /* --preview-listen */
	struct fleet fleet;		/* --workers, --fleet */
	bool has_fleet;
	struct etcd *etcd; /* --fleet */
	struct event_source *signals[2];
	int lock_fd;
};

static void daemon_free(struct daemon *d)
{
	for (size_t i = 0; i < d->n_servers; i++)
		http_server_free(d->servers[i]);
	preview_server_free(d->preview);
	fleet_stop(&d->fleet);
	manager_free(d->manager);
	etcd_free(d->etcd);
	store_close(d->store);
	for (size_t i = 0; i < ELEMENTSOF(d->signals); i++)
		event_source_free(d->signals[i]);
	event_loop_free(d->loop);
	if (d->lock_fd >= 0)
		close(d->lock_fd);
}

/* A revoked token's open streams end on every listener. */
static void on_token_revoked(void *userdata, const char *token_id)
{
	struct daemon *d = userdata;

	for (size_t i = 0; i < d->n_servers; i++)
		http_server_revoke(d->servers[i], token_id);
}

/* An exposure ended: its open preview connections end with it. */
static void on_preview_revoked(void *userdata, const char *label)
{
	struct daemon *d = userdata;

	preview_server_revoke(d->preview, label);
}

/* The preview listeners (bound by setup_previews()) served. */
static int preview_start(struct daemon *d, struct options *o)
{
	int r;

	if (!o->n_preview_listen)
		return 0;
	r = preview_server_new(d->loop, d->manager, &o->preview, o->preview_fds,
			       o->n_preview_listen, &d->preview);
	for (size_t i = 0; i < o->n_preview_listen; i++)
		o->preview_fds[i] = -1; /* taken, or closed on failure */
	if (r < 0) {
		fprintf(stderr, "station-sandboxd: cannot serve previews: %s\n", strerror(-r));
		return r;
	}
	manager_preview_on_revoke(d->manager, on_preview_revoked, d);
	for (size_t i = 0; i < o->n_preview_listen; i++)
		log_info("serving previews", "address", o->preview_listen[i], "domain",
			 o->preview_host, NULL);
	return 0;
}

/* path is a socket file this controller bound already (<root>/station.sock, or an earlier
 * --listen), however it is spelled: binding it again would unlink the one served and leave
 * its listener running unreachable. */
static bool unix_socket_served(const struct daemon *d, const char *path)
{
	struct stat st;

	if (stat(path, &st) < 0 || !S_ISSOCK(st.st_mode))
		return false;
	for (size_t i = 0; i < d->n_unix_sockets; i++)
		if (d->unix_sockets[i].st_dev == st.st_dev &&
		    d->unix_sockets[i].st_ino == st.st_ino)
			return true;
	return false;
}

/* A unix listener: its socket file is remembered (unix_socket_served()). */
static int add_unix_listener(struct daemon *d, const char *path)
{
	int fd = listen_unix(path);

	if (fd >= 0 && stat(path, &d->unix_sockets[d->n_unix_sockets]) == 0)
		d->n_unix_sockets++;
	return fd;
}

static int add_listener(struct daemon *d, const struct options *o, const char *spec)
{
	bool tcp = strncmp(spec, "tcp:", 4) == 0;
	int fd;
	if (!tcp && strncmp(spec, "unix:", 5) == 0 && unix_socket_served(d, spec + 5)) {
		log_info("already listening there", "address", spec, NULL);
		return 0;
	}
	if (tcp)
		fd = listen_tcp(spec + 4);
	else if (strncmp(spec, "unix:", 5) == 0)
		fd = add_unix_listener(d, spec + 5);
	else
		fd = -EINVAL;
	if (fd < 0) {
		fprintf(stderr, "station-sandboxd: cannot listen on \"%s\": %s\n", spec,
			fd == -EINVAL ? "use unix:PATH or tcp:HOST:PORT" : strerror(-fd));
		return fd;
	}
	struct http_config hc = {
		.require_token = tcp,
		.authenticate = authenticate,
		.token_userdata = d->manager,
		.audit = true,
		.max_body_bytes = o->max_body,
		.max_wait_ms = o->max_wait_ms,
		.connections = &d->conns,
		.metrics = &d->api_metrics,
		.mcp_argv = tcp && o->mcp ? o->mcp_argv : NULL,
		.mcp_listen_host = tcp ? spec + 4 : NULL,
		.mcp_hosts = o->mcp_hosts,
		.fleet = d->has_fleet ? &d->fleet : NULL,
		.preview_scheme = o->mc.preview_scheme,
		.preview_domain = o->mc.preview_domain,
		.preview_port = o->mc.preview_port,
	};
	int r = http_server_new(d->loop, d->manager, fd, &hc, &d->servers[d->n_servers]);
	if (r < 0) {
		close(fd);
		fprintf(stderr, "station-sandboxd: cannot serve \"%s\": %s\n", spec, strerror(-r));
		return r;
	}
	d->n_servers++;
	log_info("listening", "address", spec, NULL);
	return 0;
}

/* --fleet: what the other workers reach this one at, given or derived from a single tcp
 * --listen on a named address (one on 0.0.0.0 or :: names none). */
static int fleet_options_check(struct options *o)
{
	const char *tcp = NULL, *host;
	size_t n_tcp = 0;

	if (!o->fleet.url) {
		if (o->fleet.prefix || o->fleet.ca_file || o->fleet.cert_file ||
		    o->fleet.key_file || o->advertise_url) {
			fprintf(stderr,
				"station-sandboxd: --fleet-prefix, --fleet-ca, "
				"--fleet-cert, --fleet-key and --advertise-url need --fleet\n");
			return -EINVAL;
		}
		return 0;
	}
	if (o->advertise_url)
		return 0;
	for (size_t i = 0; i < o->n_listen; i++)
		if (strncmp(o->listen[i], "tcp:", 4) == 0 && n_tcp++ == 0)
			tcp = o->listen[i] + 4;
	host = tcp ?: "";
	if (n_tcp != 1 || strncmp(host, "0.0.0.0:", 8) == 0 || strncmp(host, "[::]:", 5) == 0 ||
	    host[0] == ':') {
		fprintf(stderr,
			"station-sandboxd: --fleet needs --advertise-url URL, the URL other "
			"workers and clients reach this worker at (it is derived only from a "
			"single tcp --listen on a named address; %s)\n",
			n_tcp == 0 ? "there is none" :
			n_tcp > 1  ? "there are several" :
				     "this one listens on every address");
		return -EINVAL;
	}
	snprintf(o->advertise, sizeof o->advertise, "http://%s", host);
	o->advertise_url = o->advertise;
	return 0;
}

/* --fleet: the client of etcd the manager uses (no connection made yet). */
static int etcd_setup(struct daemon *d, struct options *o)
{
	struct station_error e = {};
	int r;

	if (!o->fleet.url)
		return 0;
	r = etcd_new(&o->fleet, &d->etcd, &e);
	if (r < 0) {
		fprintf(stderr, "station-sandboxd: --fleet: %s\n", e.message);
		return r;
	}
	o->mc.fleet = d->etcd;
	o->mc.advertise_url = o->advertise_url;
	return 0;
}

/* --workers or --workers-file: the list, with this controller in it, and its call pool; with
 * --fleet, the workers registered in etcd are added to it as they come and go. */
static int fleet_setup(struct daemon *d, const struct options *o)
{
	struct station_error e = {};
	int r;

	if (!o->workers && !o->workers_file && !o->fleet.url)
		return 0;
	r = fleet_parse(&d->fleet, o->workers ?: (o->workers_file ? NULL : ""), o->workers_file,
			o->worker, &e);
	if (r < 0) {
		fprintf(stderr, "station-sandboxd: --workers: %s\n", e.message);
		return r;
	}
	if (o->advertise_url && !fleet_self(&d->fleet)->url[0])
		snprintf(((struct fleet_worker *)fleet_self(&d->fleet))->url, FLEET_URL_MAX + 1,
			 "%s", o->advertise_url);
	r = fleet_start(&d->fleet, d->loop);
	if (r < 0) {
		fprintf(stderr, "station-sandboxd: cannot start the workers' pool: %s\n",
			strerror(-r));
		return r;
	}
	d->has_fleet = true;
	char names[FLEET_MAX * (FLEET_NAME_MAX + 1)] = "";
	for (size_t i = 0; i < d->fleet.n; i++)
		snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", i ? "," : "",
			 d->fleet.v[i].name);
	log_info("forwarding to workers", "workers", names, NULL);
	return 0;
}

static void secret_key_erase(uint8_t (*key)[SECRET_KEY_BYTES])
{
	explicit_bzero(*key, sizeof *key);
}

static int daemon_setup(struct daemon *d, struct options *o)
{
	_cleanup_(secret_key_erase) uint8_t key[SECRET_KEY_BYTES];
	struct station_error e = {};
	char path[PATH_MAX];
	int r = mkdir_p(o->root, 0700);
	if (r < 0) {
		fprintf(stderr, "station-sandboxd: cannot create root \"%s\": %s\n", o->root,
			strerror(-r));
		return r;
	}
	d->lock_fd = take_lock(o->root);
	if (d->lock_fd < 0)
		return d->lock_fd;
	r = setup_previews(o);
	if (r < 0)
		return r;
	/* Searchable, not listable, by others: a container's mapped root must reach its
	 * workspace's rootfs and HOME. What is secret in here is 0600 on its own. */
	if (chmod(o->root, 0711) < 0)
		fprintf(stderr, "station-sandboxd: chmod \"%s\": %m\n", o->root);
	snprintf(path, sizeof path, "%s/secrets.key", o->root);
	r = secret_key_load(path, key, &e);
	if (r < 0) {
		fprintf(stderr, "station-sandboxd: %s\n", e.message);
		return r;
	}
	o->mc.secret_key = key;
	snprintf(path, sizeof path, "%s/station.db", o->root);
	r = store_open(path, &d->store);
	if (r < 0) {
		fprintf(stderr, "station-sandboxd: cannot open the store \"%s\": %s\n", path,
			strerror(-r));
		return r;
	}
	if (o->admin_token_file) {
		r = load_admin_token_file(d->store, o->root, o->admin_token_file);
		if (r < 0)
			return r;
	}
	r = o->admin_token_file ? 0 : ensure_admin_token(d->store, o->root);
	if (r < 0) {
		fprintf(stderr, "station-sandboxd: cannot create the admin token: %s\n",
			strerror(-r));
		return r;
	}
	r = etcd_setup(d, o);
	if (r < 0)
		return r;
	r = event_loop_new(&d->loop);
	if (r >= 0)
		r = event_add_signal(d->loop, &d->signals[0], SIGTERM, on_terminate, d->loop);
	if (r >= 0)
		r = event_add_signal(d->loop, &d->signals[1], SIGINT, on_terminate, d->loop);
	if (r >= 0)
		r = manager_new(d->loop, d->store, &o->mc, &d->manager);
	o->mc.secret_key = NULL; /* the manager has its copy; key is wiped on return */
	if (r >= 0 && manager_pools_setup(d->manager, &e) < 0) {
		fprintf(stderr, "station-sandboxd: %s\n", e.message);
		return -EINVAL;
	}
	if (r >= 0)
		r = manager_start(d->manager);
	if (r < 0) {
		fprintf(stderr, "station-sandboxd: cannot start: %s\n", strerror(-r));
		return r;
	}
	r = fleet_setup(d, o);
	if (r < 0)
		return r;
	manager_token_on_revoke(d->manager, on_token_revoked, d);
	if (manager_fleet_start(d->manager, &e) < 0) {
		fprintf(stderr, "station-sandboxd: --fleet: %s\n", e.message);
		return -EINVAL;
	}
	r = preview_start(d, o);
	if (r < 0)
		return r;
	snprintf(path, sizeof path, "unix:%s/station.sock", o->root);
	r = add_listener(d, o, path);
	for (size_t i = 0; r >= 0 && i < o->n_listen; i++)
		r = add_listener(d, o, o->listen[i]);
	return r;
}

/* Open files the controller holds: per workspace its agent's connection and pidfd and the
 * usage history's counter files (6), per run and client connection more. The soft limit (often 1024) is raised toward what
 * --max-workspaces needs, never past the hard limit; a hard limit too low for it is said once,
 * at start. */
#define NOFILE_BASE 1024
#define NOFILE_PER_WORKSPACE 10
/* Client connections: one fd each, and up to 64 refused ones still being answered. */
#define NOFILE_REFUSED 64
#define CONNECTIONS_DEFAULT_MAX 1024
#define CONNECTIONS_MIN 64

static rlim_t nofile_for(size_t max_workspaces, uint64_t connections)
{
	return NOFILE_BASE + (rlim_t)max_workspaces * NOFILE_PER_WORKSPACE + NOFILE_REFUSED +
	       (rlim_t)(connections ? connections : CONNECTIONS_DEFAULT_MAX);
}

static void raise_nofile(size_t max_workspaces, uint64_t connections)
{
	struct rlimit rl;
	rlim_t want = nofile_for(max_workspaces, connections);
	if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur >= want)
		return;
	rlim_t to = rl.rlim_max == RLIM_INFINITY ? want : MIN(want, rl.rlim_max);
	if (to > rl.rlim_cur) {
		rl.rlim_cur = to;
		if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
			return;
	}
	if (to < want) {
		char have[32], need[32];
		snprintf(have, sizeof have, "%llu", (unsigned long long)to);
		snprintf(need, sizeof need, "%llu", (unsigned long long)want);
		log_warn("the open-files limit (RLIMIT_NOFILE hard limit) is below what "
			 "--max-workspaces and --max-connections need: creates fail (out of open "
			 "files) before that many workspaces; raise it (ulimit -Hn, systemd "
			 "LimitNOFILE=)",
			 "limit", have, "wanted", need, NULL);
	}
}

/* The connection table: --max-connections as given, else what the open-files limit (as
 * raised) leaves beside the workspaces, at most 1024 and at least 64. The reserve is kept for
 * short requests and probes. */
static void size_connections(const struct options *o, struct http_connections *c)
{
	struct rlimit rl = {};
	rlim_t used = nofile_for(o->mc.max_workspaces, 1) - 1, room = 0;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur > used)
		room = rl.rlim_cur - used;
	if (o->max_connections)
		c->limit = (unsigned)o->max_connections;
	else
		c->limit = (unsigned)MAX(MIN(room, (rlim_t)CONNECTIONS_DEFAULT_MAX),
					 (rlim_t)CONNECTIONS_MIN);
	c->reserve = o->reserved_connections != UINT64_MAX ?
			     (unsigned)o->reserved_connections :
			     http_connections_default_reserve(c->limit);
	if (c->reserve >= c->limit)
		c->reserve = c->limit - 1;
	char limit[32], reserve[32];
	snprintf(limit, sizeof limit, "%u", c->limit);
	snprintf(reserve, sizeof reserve, "%u", c->reserve);
	if (c->limit > room)
		log_warn("the open-files limit leaves less room than the connection limit: past "
			 "it new connections are answered 503",
			 "max_connections", limit, NULL);
	log_info("connection table", "max_connections", limit, "reserved", reserve, NULL);
}

int main(int argc, char **argv)
{
	struct options o = {
		.root = DEFAULT_ROOT,
		.log_format = LOG_FORMAT_JSON,
		.log_level = LOG_LEVEL_INFO,
		.max_wait_ms = 60000,
		.max_body = 2 << 20,
		.reserved_connections = UINT64_MAX,
		.mc = {
			.default_timeout_ms = 60000,
			.max_timeout_ms = 86400000,
			.default_output_bytes = 128 << 10,
			.max_output_bytes = AGENT_MAX_OUTPUT_BYTES,
			.max_running_per_workspace = 64,
			.max_workspaces = 1000,
			.max_snapshot_bytes = SNAPSHOT_MAX_BYTES_DEFAULT,
			.max_snapshots_per_tenant = SNAPSHOTS_PER_TENANT_DEFAULT,
			.retention_usec = 24ull * 3600 * 1000000,
			.retention_runs = 1000,
			.idempotency_retention_usec = 24ull * 3600 * 1000000,
			.allow_container = true,
			.default_pids_limit = 1024,
			.default_memory_mb = 2048,
			.runtime = "runc",
			.id_base = 300000,
		},
		.net = {
			.range = "10.231.0.0/16",
			.bridge = "station0",
			.dns_port = 53,
			.egress_pin_min_ms = 600000,
		},
	};
	_cleanup_(pool_bufs_free) struct options *pools_owner = &o;
	/* An image import or pull the controller started (manager-image.c): not a controller. */
	if (argc == 3 && strcmp(argv[1], "--image-job") == 0)
		return manager_image_job_main(argv[2]);
	default_worker(o.worker, sizeof o.worker);
	int r = parse_args(argc, argv, &o);
	if (r < 0) {
		usage(stderr);
		return 64;
	}
	/* the denial log's nflog group, one per bridge: controllers of different bridges on one
	 * machine do not take each other's */
	uint32_t h = 2166136261u;
	for (const char *p = o.net.bridge; *p; p++)
		h = (h ^ (uint8_t)*p) * 16777619u;
	o.net.log_group = (uint16_t)(0x5300 + h % 0x100);
	o.mc.network = o.network_off ? NULL : &o.net;
	if (r > 0)
		return 0;
	_cleanup_free_ char *workspace_ca_pem = NULL;
	if (setup_workspace_egress(&o, &workspace_ca_pem) < 0)
		return 64;
	if (fleet_options_check(&o) < 0)
		return 64;
	_cleanup_free_ char *agent = o.agent ? strdup(o.agent) : default_agent_path();
	_cleanup_free_ char *kernel_dir = o.kernel_dir ? strdup(o.kernel_dir) :
							 default_kernel_dir();
	_cleanup_(free_seccomp_dirs) char *seccomp_dirs[MAX_SECCOMP_DIRS + 2] = {};
	_cleanup_free_ char *seccomp = NULL;
	if (setup_seccomp(&o, seccomp_dirs, &seccomp) < 0)
		return 64;
	char root[PATH_MAX];
	if (!agent || !realpath(o.root, root)) {
		if (mkdir_p(o.root, 0700) < 0 || !realpath(o.root, root)) {
			fprintf(stderr, "station-sandboxd: bad root \"%s\": %m\n", o.root);
			return 1;
		}
	}
	o.root = root;
	o.mc.root = root;
	_cleanup_free_ char *mcp_cli = o.mcp_cli ? strdup(o.mcp_cli) : default_cli_path();
	if (o.mcp) {
		size_t k = 0;
		if (!mcp_cli || access(mcp_cli, X_OK) < 0) {
			fprintf(stderr,
				"station-sandboxd: --mcp needs station-sandbox (--mcp-cli): "
				"\"%s\" is not executable\n",
				mcp_cli ? mcp_cli : "");
			return 64;
		}
		snprintf(o.mcp_socket, sizeof o.mcp_socket, "%s/station.sock", root);
		o.mcp_argv[k++] = mcp_cli;
		o.mcp_argv[k++] = "--socket";
		o.mcp_argv[k++] = o.mcp_socket;
		o.mcp_argv[k++] = "mcp";
		for (size_t i = 0; i < o.n_mcp_options; i++)
			o.mcp_argv[k++] = o.mcp_options[i];
		o.mcp_argv[k] = NULL;
	}
	o.mc.worker = o.worker;
	o.mc.agent_path = agent;
	o.mc.kernel_dir = kernel_dir;
	log_setup(STDERR_FILENO, o.log_format, o.log_level, "station-sandboxd");
	signal(SIGPIPE, SIG_IGN);
	/* a preview connection holds two files: the client's and the workspace's */
	uint64_t preview_files =
		o.n_preview_listen ?
			2ull * (o.preview.max_connections ? o.preview.max_connections : 1024) :
			0;
	raise_nofile(o.mc.max_workspaces,
		     (o.max_connections ? o.max_connections : CONNECTIONS_DEFAULT_MAX) +
			     preview_files);
	raise_loop_priority(); /* before any thread or child is made */

	struct daemon d = { .lock_fd = -1 };
	size_connections(&o, &d.conns);
	r = daemon_setup(&d, &o);
	if (r >= 0) {
		log_info("controller started", "root", root, "worker", o.worker, "agent", agent,
			 NULL);
		r = event_loop_run(d.loop);
	}
	daemon_free(&d);
	return r < 0 ? 1 : 0;
}
