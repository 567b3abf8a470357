/* SPDX-License-Identifier: MIT */
/* Previews (docs/api.md, "Previews"): a workspace's ports exposed through the preview listener.
 * Each exposure is a row of the store and an entry of a table on the loop, found by its host
 * label in one bucket, so that a preview request never reaches SQLite. A token exposure keeps
 * only its token's SHA-256, compared in constant time. An exposure ends with its DELETE, its
 * expiry (a timer; find() treats an expired one as missing before it fires) or its workspace's
 * deletion, and the listener's revoke hook hears of each. */

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <netinet/in.h>
#include <arpa/inet.h>

#include "basic/cleanup.h"
#include "basic/list.h"
#include "basic/log.h"
#include "basic/util.h"
#include "daemon/port-label.h"
#include "event/event.h"
#include "manager-internal.h"
#include "net/link.h"

#define PORT_BUCKETS 1024
/* the expiry timer looks at least this often (the realtime clock may jump) */
#define PORT_SWEEP_MAX_USEC (60ull * 1000000)

struct exposure {
	struct exposure *prev, *next; /* in ports->all */
	struct exposure *bucket_next;
	char label[PREVIEW_LABEL_MAX + 1];
	char ws_id[64];
	uint16_t port;
	bool public;
	uint8_t hash[32]; /* SHA-256 of the token; zero for a public one */
	uint64_t expires_at, created_at;
};

struct manager_ports {
	struct exposure *buckets[PORT_BUCKETS];
	struct exposure *all;
	struct event_source *timer;
	manager_preview_revoked_fn revoked;
	void *revoked_data;
};

static void token_hash(const char *token, size_t n, uint8_t ret[32])
{
	struct sha256_ctx c;

	sha256_init(&c);
	sha256_update(&c, token, n);
	sha256_final(&c, ret);
}

static unsigned bucket_of(const char *label, size_t n)
{
	uint32_t h = 2166136261u; /* FNV-1a */

	for (size_t i = 0; i < n; i++)
		h = (h ^ (uint8_t)label[i]) * 16777619u;
	return h % PORT_BUCKETS;
}

static void exposure_link(struct manager_ports *p, struct exposure *x)
{
	unsigned b = bucket_of(x->label, strlen(x->label));

	x->bucket_next = p->buckets[b];
	p->buckets[b] = x;
	LIST_PREPEND(&p->all, x);
}

/* Unlinks and frees x, telling the listener. */
static void exposure_end(struct manager *m, struct exposure *x, const char *why)
{
	struct manager_ports *p = m->ports;
	struct exposure **pp = &p->buckets[bucket_of(x->label, strlen(x->label))];
	char port[8];

	while (*pp && *pp != x)
		pp = &(*pp)->bucket_next;
	if (*pp)
		*pp = x->bucket_next;
	LIST_REMOVE(&p->all, x);
	snprintf(port, sizeof port, "%u", (unsigned)x->port);
	log_info("port exposure ended", "workspace", x->ws_id, "port", port, "reason", why, NULL);
	if (p->revoked)
		p->revoked(p->revoked_data, x->label);
	explicit_bzero(x->hash, sizeof x->hash);
	free(x);
}

static bool exposure_expired(const struct exposure *x, uint64_t now)
{
	return now >= x->expires_at;
}

static struct exposure *exposure_by_label(struct manager *m, const char *label, size_t n)
{
	if (!m->ports || n == 0 || n > PREVIEW_LABEL_MAX)
		return NULL;
	for (struct exposure *x = m->ports->buckets[bucket_of(label, n)]; x; x = x->bucket_next)
		if (strlen(x->label) == n && memcmp(x->label, label, n) == 0)
			return x;
	return NULL;
}

static struct exposure *exposure_by_port(struct manager *m, const char *ws_id, uint16_t port)
{
	for (struct exposure *x = m->ports ? m->ports->all : NULL; x; x = x->next)
		if (x->port == port && strcmp(x->ws_id, ws_id) == 0)
			return x;
	return NULL;
}

static size_t exposures_of(struct manager *m, const char *ws_id)
{
	size_t n = 0;

	for (struct exposure *x = m->ports ? m->ports->all : NULL; x; x = x->next)
		n += strcmp(x->ws_id, ws_id) == 0;
	return n;
}

size_t ports_exposures_count(struct manager *m)
{
	uint64_t now = realtime_usec();
	size_t n = 0;

	for (struct exposure *x = m->ports ? m->ports->all : NULL; x; x = x->next)
		n += !exposure_expired(x, now);
	return n;
}

/* ---- expiry ------------------------------------------------------------------------------- */

static void ports_arm(struct manager *m)
{
	uint64_t now = realtime_usec(), next = UINT64_MAX, mono = now_usec();

	for (struct exposure *x = m->ports->all; x; x = x->next)
		if (x->expires_at < next)
			next = x->expires_at;
	if (next == UINT64_MAX) {
		event_source_set_time(m->ports->timer, UINT64_MAX);
		return;
	}
	next = next > now ? next - now : 0;
	event_source_set_time(m->ports->timer,
			      mono + (next < PORT_SWEEP_MAX_USEC ? next : PORT_SWEEP_MAX_USEC));
}

/* Ends every expired exposure: the store's rows first (a failure leaves them to the next
 * sweep; they are expired for find() meanwhile). */
static void ports_sweep(struct manager *m)
{
	uint64_t now = realtime_usec();
	struct exposure *x, *next;
	int r = store_port_delete_expired(m->store, now);

	if (r < 0) {
		log_warn("cannot delete expired port exposures", "error", strerror(-r), NULL);
		return;
	}
	for (x = m->ports->all; x; x = next) {
		next = x->next;
		if (exposure_expired(x, now))
			exposure_end(m, x, "expired");
	}
}

static int on_ports_timer(struct event_source *s, uint64_t now, void *userdata)
{
	struct manager *m = userdata;

	ports_sweep(m);
	ports_arm(m);
	return 0;
}

/* ---- load, free, the workspace's end ------------------------------------------------------ */

static int exposure_from_row(const struct port_row *row, struct exposure **ret)
{
	struct exposure *x;

	if (row->port == 0 || row->port > 65535 || strlen(row->label) > PREVIEW_LABEL_MAX ||
	    strlen(row->workspace_id) >= sizeof x->ws_id)
		return -EINVAL;
	x = calloc(1, sizeof *x);
	if (!x)
		return -ENOMEM;
	snprintf(x->label, sizeof x->label, "%s", row->label);
	snprintf(x->ws_id, sizeof x->ws_id, "%s", row->workspace_id);
	x->port = (uint16_t)row->port;
	x->public = strcmp(row->access, "public") == 0;
	x->expires_at = row->expires_at;
	x->created_at = row->created_at;
	if (!x->public && (!row->token_hash || strlen(row->token_hash) != 64 ||
			   hex_decode(row->token_hash, x->hash, sizeof x->hash) < 0)) {
		free(x);
		return -EINVAL;
	}
	*ret = x;
	return 0;
}

int manager_ports_init(struct manager *m)
{
	struct port_row *rows = NULL;
	size_t n = 0;
	int r;

	m->ports = calloc(1, sizeof *m->ports);
	if (!m->ports)
		return -ENOMEM;
	r = event_add_timer(m->loop, &m->ports->timer, UINT64_MAX, on_ports_timer, m);
	if (r < 0)
		return r;
	(void)store_port_delete_expired(m->store, realtime_usec());
	r = store_port_list(m->store, &rows, &n);
	if (r < 0)
		return r;
	for (size_t i = 0; i < n; i++) {
		struct exposure *x;

		if (exposure_from_row(&rows[i], &x) < 0)
			log_error("cannot load a port exposure", "workspace", rows[i].workspace_id,
				  "label", rows[i].label, NULL);
		else
			exposure_link(m->ports, x);
		port_row_free(&rows[i]);
	}
	free(rows);
	ports_arm(m);
	return 0;
}

void manager_ports_free(struct manager *m)
{
	struct manager_ports *p = m->ports;

	if (!p)
		return;
	while (p->all) {
		struct exposure *x = p->all;

		LIST_REMOVE(&p->all, x);
		free(x);
	}
	event_source_free(p->timer);
	free(p);
	m->ports = NULL;
}

void ports_workspace_deleted(struct manager *m, const char *ws_id)
{
	struct exposure *x, *next;

	if (!m->ports)
		return;
	for (x = m->ports->all; x; x = next) {
		next = x->next;
		if (strcmp(x->ws_id, ws_id) == 0)
			exposure_end(m, x, "the workspace was deleted");
	}
	ports_arm(m);
}

void manager_preview_on_revoke(struct manager *m, manager_preview_revoked_fn fn, void *userdata)
{
	if (!m->ports)
		return;
	m->ports->revoked = fn;
	m->ports->revoked_data = userdata;
}

/* ---- JSON --------------------------------------------------------------------------------- */

static void exposure_urls(struct manager *m, const struct exposure *x, json_t *o)
{
	const struct manager_config *c = &m->cfg;
	const char *scheme = c->preview_scheme ? c->preview_scheme : "http";
	char host[PREVIEW_LABEL_MAX + 256], url[sizeof host + 32], port[8] = "";

	if (!c->preview_domain) {
		json_object_set_new(o, "host", json_null());
		json_object_set_new(o, "url", json_null());
		return;
	}
	snprintf(host, sizeof host, "%s.%s", x->label, c->preview_domain);
	if (c->preview_port)
		snprintf(port, sizeof port, ":%u", (unsigned)c->preview_port);
	snprintf(url, sizeof url, "%s://%s%s/", scheme, host, port);
	json_object_set_new(o, "host", json_string(host));
	json_object_set_new(o, "url", json_string(url));
}

static json_t *exposure_to_json(struct manager *m, const struct exposure *x)
{
	json_t *o = json_object();

	if (!o)
		return NULL;
	json_object_set_new(o, "port", json_integer(x->port));
	exposure_urls(m, x, o);
	json_object_set_new(o, "access", json_string(x->public ? "public" : "token"));
	json_set_time(o, "expiresAt", x->expires_at);
	json_set_time(o, "createdAt", x->created_at);
	return o;
}

/* ---- expose, list, revoke ----------------------------------------------------------------- */

static bool runtime_is_runsc(struct manager *m)
{
	const char *name = adapter_runtime_name(&m->actx);

	return name && strcmp(name, "runsc") == 0;
}

/* Why ws cannot have a preview (-EBUSY, 409), or 0. */
static int exposable(struct manager *m, const struct workspace *ws, struct station_error *e)
{
	if (!m->cfg.preview_domain)
		return station_error_set(e, -EBUSY, NULL,
					 "previews are off: start the controller with "
					 "--preview-listen");
	if (ws->adapter == &adapter_host)
		return station_error_set(e, -EBUSY, NULL,
					 "workspace \"%s\" is a host workspace: it shares the "
					 "worker's network namespace, so its ports cannot be "
					 "previewed",
					 ws->row.id);
	if (runtime_is_runsc(m))
		return station_error_set(e, -EBUSY, NULL,
					 "workspace \"%s\" runs under runsc: gVisor keeps its own "
					 "network stack, which the preview cannot reach",
					 ws->row.id);
	if (ws->row.state == WORKSPACE_DELETING)
		return station_error_set(e, -EBUSY, NULL, "workspace \"%s\" is being deleted",
					 ws->row.id);
	return 0;
}

/* A live exposure of (ws, port), an expired one ended first. */
static struct exposure *exposure_live(struct manager *m, const char *ws_id, uint16_t port)
{
	struct exposure *x = exposure_by_port(m, ws_id, port);

	if (x && exposure_expired(x, realtime_usec())) {
		ports_sweep(m);
		ports_arm(m);
		x = exposure_by_port(m, ws_id, port);
	}
	return x;
}

static int exposure_check(struct manager *m, const struct workspace *ws,
			  const struct port_spec *spec, struct station_error *e)
{
	int r = exposable(m, ws, e);

	if (r < 0)
		return r;
	if (spec->port == 0)
		return station_error_set(e, -EINVAL, "port", "field \"port\" must be 1 to 65535");
	if (spec->expires_in_ms > PREVIEW_MAX_EXPIRES_MS)
		return station_error_set(e, -EINVAL, "expiresInMs",
					 "field \"expiresInMs\" must be at most %llu (30 days)",
					 (unsigned long long)PREVIEW_MAX_EXPIRES_MS);
	if (exposure_live(m, ws->row.id, spec->port))
		return station_error_set(e, -EBUSY, "port",
					 "port %u of workspace \"%s\" is exposed already (DELETE "
					 "/v1/workspaces/%s/ports/%u first)",
					 (unsigned)spec->port, ws->row.id, ws->row.id,
					 (unsigned)spec->port);
	if (exposures_of(m, ws->row.id) >= MANAGER_MAX_PORTS)
		return station_error_set(e, -EAGAIN, NULL,
					 "workspace \"%s\" has %d exposed ports, the most it may "
					 "have",
					 ws->row.id, MANAGER_MAX_PORTS);
	return 0;
}

/* The new exposure's row and entry; token (token access) gets its secret. */
static int exposure_make(struct manager *m, const struct workspace *ws,
			 const struct port_spec *spec, char token[PORT_TOKEN_LEN + 1],
			 struct exposure **ret, struct station_error *e)
{
	uint64_t now = realtime_usec();
	uint64_t ms = spec->expires_in_ms ? spec->expires_in_ms : PREVIEW_DEFAULT_EXPIRES_MS;
	char hash[65] = "";
	struct port_row row;
	struct exposure *x = calloc(1, sizeof *x);
	int r;

	if (!x)
		return station_error_set(e, -ENOMEM, NULL, "out of memory");
	r = port_label_new(spec->port, x->label);
	if (r >= 0 && !spec->public)
		r = port_token_new(token);
	if (r < 0) {
		free(x);
		return station_error_set(e, r, NULL, "cannot make a preview label or token: %s",
					 strerror(-r));
	}
	snprintf(x->ws_id, sizeof x->ws_id, "%s", ws->row.id);
	x->port = spec->port;
	x->public = spec->public;
	x->created_at = now;
	x->expires_at = now + ms * 1000;
	if (!spec->public) {
		token_hash(token, strlen(token), x->hash);
		hex_encode(x->hash, sizeof x->hash, hash);
	}
	row = (struct port_row){
		.workspace_id = x->ws_id,
		.port = x->port,
		.label = x->label,
		.access = x->public ? "public" : "token",
		.token_hash = x->public ? NULL : hash,
		.expires_at = x->expires_at,
		.created_at = x->created_at,
	};
	r = store_port_insert(m->store, &row);
	if (r < 0) {
		free(x);
		if (r == -EEXIST)
			return station_error_set(e, -EBUSY, "port",
						 "port %u of workspace \"%s\" is exposed already",
						 (unsigned)spec->port, ws->row.id);
		return station_error_set(e, r, NULL, "cannot store the exposure: %s", strerror(-r));
	}
	*ret = x;
	return 0;
}

int manager_port_expose(struct manager *m, const char *ws_id, const struct port_spec *spec,
			json_t **ret, struct station_error *e)
{
	char token[PORT_TOKEN_LEN + 1] = "", port[8];
	struct workspace *ws;
	struct exposure *x = NULL;
	json_t *o;
	int r;

	r = workspace_lookup(m, ws_id, &ws, e);
	if (r >= 0)
		r = exposure_check(m, ws, spec, e);
	if (r >= 0)
		r = exposure_make(m, ws, spec, token, &x, e);
	if (r < 0)
		return r;
	exposure_link(m->ports, x);
	ports_arm(m);
	snprintf(port, sizeof port, "%u", (unsigned)x->port);
	log_info("port exposed", "workspace", ws->row.id, "port", port, "access",
		 x->public ? "public" : "token", "label", x->label, NULL);
	o = exposure_to_json(m, x);
	if (o && !x->public) {
		const char *url = json_string_value(json_object_get(o, "url"));
		_cleanup_free_ char *open = NULL;

		json_object_set_new(o, "token", json_string(token));
		if (url && asprintf(&open, "%s?station_preview_token=%s", url, token) >= 0)
			json_object_set_new(o, "openUrl", json_string(open));
		if (open)
			explicit_bzero(open, strlen(open));
	}
	explicit_bzero(token, sizeof token);
	if (!o)
		return station_error_set(e, -ENOMEM, NULL, "out of memory");
	*ret = o;
	return 0;
}

static int cmp_port(const void *a, const void *b)
{
	const struct exposure *x = *(struct exposure *const *)a, *y = *(struct exposure *const *)b;

	return (int)x->port - (int)y->port;
}

static json_t *exposed_json(struct manager *m, const char *ws_id)
{
	struct exposure *list[MANAGER_MAX_PORTS];
	uint64_t now = realtime_usec();
	size_t n = 0;
	json_t *a = json_array();

	for (struct exposure *x = m->ports->all; x && n < MANAGER_MAX_PORTS; x = x->next)
		if (strcmp(x->ws_id, ws_id) == 0 && !exposure_expired(x, now))
			list[n++] = x;
	qsort(list, n, sizeof list[0], cmp_port);
	for (size_t i = 0; a && i < n; i++)
		json_array_append_new(a, exposure_to_json(m, list[i]));
	return a;
}

/* The live exposure of a port of a workspace the viewer sees: 0, or -ENOENT naming what is
 * missing. */
static int exposure_of(struct manager *m, const char *ws_id, uint16_t port, struct exposure **ret,
		       struct station_error *e)
{
	struct workspace *ws;
	int r = workspace_lookup(m, ws_id, &ws, e);

	if (r < 0)
		return r;
	*ret = exposure_live(m, ws->row.id, port);
	if (!*ret)
		return station_error_set(e, -ENOENT, NULL,
					 "port %u of workspace \"%s\" is not exposed",
					 (unsigned)port, ws->row.id);
	return 0;
}

int manager_port_get(struct manager *m, const char *ws_id, uint16_t port, json_t **ret,
		     struct station_error *e)
{
	struct exposure *x;
	int r = exposure_of(m, ws_id, port, &x, e);

	if (r < 0)
		return r;
	*ret = exposure_to_json(m, x);
	return *ret ? 0 : station_error_set(e, -ENOMEM, NULL, "out of memory");
}

int manager_port_list(struct manager *m, const char *ws_id, json_t **ret, struct station_error *e)
{
	struct workspace *ws;
	json_t *o;
	int r = workspace_lookup(m, ws_id, &ws, e);

	if (r < 0)
		return r;
	o = json_object();
	if (o) {
		json_object_set_new(o, "exposed", exposed_json(m, ws->row.id));
		/* a host workspace's or a runsc one's namespace is not where its servers listen */
		json_object_set_new(o, "listening",
				    ws->adapter == &adapter_host || runtime_is_runsc(m) ?
					    json_array() :
					    workspace_listening_json(ws));
	}
	if (!o || !json_is_array(json_object_get(o, "exposed")) ||
	    !json_is_array(json_object_get(o, "listening"))) {
		json_decref(o);
		return station_error_set(e, -ENOMEM, NULL, "out of memory");
	}
	*ret = o;
	return 0;
}

int manager_port_revoke(struct manager *m, const char *ws_id, uint16_t port,
			struct station_error *e)
{
	struct exposure *x;
	int r = exposure_of(m, ws_id, port, &x, e);

	if (r < 0)
		return r;
	r = store_port_delete(m->store, x->ws_id, port);
	if (r < 0 && r != -ENOENT)
		return station_error_set(e, r, NULL, "cannot delete the exposure: %s",
					 strerror(-r));
	exposure_end(m, x, "revoked");
	ports_arm(m);
	return 0;
}

/* ---- the preview listener's side ---------------------------------------------------------- */

static struct exposure *exposure_find_live(struct manager *m, const char *label, size_t n)
{
	struct exposure *x = exposure_by_label(m, label, n);

	return x && !exposure_expired(x, realtime_usec()) ? x : NULL;
}

int manager_preview_find(struct manager *m, const char *label, size_t n, struct preview_target *ret)
{
	struct exposure *x = exposure_find_live(m, label, n);
	const char *scheme = m->cfg.preview_scheme;

	if (!x)
		return -ENOENT;
	*ret = (struct preview_target){
		.port = x->port,
		.public = x->public,
		.https = scheme && strcmp(scheme, "https") == 0,
		.expires_at = x->expires_at,
	};
	snprintf(ret->label, sizeof ret->label, "%s", x->label);
	snprintf(ret->ws_id, sizeof ret->ws_id, "%s", x->ws_id);
	return 0;
}

bool manager_preview_token_ok(struct manager *m, const char *label, const char *token, size_t n)
{
	struct exposure *x = exposure_find_live(m, label, strlen(label));
	uint8_t hash[32];
	bool ok;

	if (!x || x->public || !token || n == 0)
		return false;
	token_hash(token, n, hash);
	ok = memeq_consttime(hash, x->hash, sizeof hash);
	explicit_bzero(hash, sizeof hash);
	return ok;
}

/* The agent still is the process agent_pid named when its namespace was opened: a pid reused
 * since cannot hand over another namespace. */
static bool agent_alive(const struct workspace *ws)
{
	return ws->agent_pidfd >= 0 &&
	       syscall(SYS_pidfd_send_signal, ws->agent_pidfd, 0, NULL, 0) == 0;
}

/* The workspace's network namespace, through its live agent: an fd, or -errno with e. */
int workspace_netns_open(const struct workspace *ws, struct station_error *e)
{
	int fd;

	if (ws->row.state != WORKSPACE_READY || ws->agent_pid <= 0 || ws->agent_pidfd < 0)
		return station_error_set(e, -EHOSTDOWN, NULL,
					 "the workspace is not running (it is %s)",
					 workspace_state_to_string(ws->row.state));
	fd = netns_open_pid(ws->agent_pid);
	if (fd >= 0 && !agent_alive(ws)) {
		close(fd);
		fd = -ESRCH;
	}
	if (fd < 0)
		return station_error_set(e, fd, NULL,
					 "the workspace's agent is gone: its network cannot be "
					 "reached");
	return fd;
}

static int preview_socket(int netns, bool ipv6, uint16_t port, int *ret_fd, struct station_error *e)
{
	struct sockaddr_in a4 = { .sin_family = AF_INET,
				  .sin_port = htons(port),
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	struct sockaddr_in6 a6 = { .sin6_family = AF_INET6,
				   .sin6_port = htons(port),
				   .sin6_addr = IN6ADDR_LOOPBACK_INIT };
	_cleanup_close_ int fd =
		netns_socket(netns, ipv6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	int r;

	if (fd < 0)
		return station_error_set(e, fd, NULL,
					 "cannot open a socket in the workspace's network: %s",
					 strerror(-fd));
	r = ipv6 ? connect(fd, (struct sockaddr *)&a6, sizeof a6) :
		   connect(fd, (struct sockaddr *)&a4, sizeof a4);
	if (r < 0 && errno != EINPROGRESS) {
		r = -errno;
		if (r == -ECONNREFUSED)
			return station_error_set(e, r, NULL,
						 "nothing listens on port %u in the workspace "
						 "(on %s)",
						 (unsigned)port, ipv6 ? "::1" : "127.0.0.1");
		return station_error_set(e, r, NULL,
					 "cannot connect to port %u in the workspace: %s",
					 (unsigned)port, strerror(-r));
	}
	*ret_fd = TAKE_FD(fd);
	return 0;
}

int manager_preview_connect(struct manager *m, const struct preview_target *t, bool ipv6,
			    int *ret_fd, struct station_error *e)
{
	struct workspace *ws = workspace_find(m, t->ws_id);
	_cleanup_close_ int netns = -1;
	struct station_error ignored;

	if (!ws || ws->pool || !exposure_find_live(m, t->label, strlen(t->label)))
		return station_error_set(e, -ENOENT, NULL, "this preview does not exist");
	if (exposable(m, ws, &ignored) < 0)
		return station_error_set(e, -EBUSY, NULL,
					 "this workspace's ports cannot be previewed");
	netns = workspace_netns_open(ws, e);
	if (netns < 0)
		return netns;
	return preview_socket(netns, ipv6, t->port, ret_fd, e);
}
