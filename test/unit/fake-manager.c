/* SPDX-License-Identifier: MIT */
#include "fake-manager.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "basic/cleanup.h"
#include "daemon/manager.h"
#include "event/event.h"
#include "proto/agent-proto.h"

#define MAX_RUNS 64
#define MAX_CALLBACKS 64

struct fake_run {
	char id[16];
	char command[64];
	const char *status;
	uint8_t *out;
	size_t out_len;
	struct event_source *timer;
};

struct run_waiter {
	bool used;
	struct fake_run *run;
	run_result_fn fn;
	void *userdata;
};

struct run_watch {
	bool used;
	struct fake_run *run;
	const struct run_watch_ops *ops;
	void *userdata;
	size_t sent;
	struct event_source *timer;
};

static struct event_loop *fake_loop;
static struct fake_run runs[MAX_RUNS];
static size_t n_runs;
static struct run_waiter waiters[MAX_CALLBACKS];
static struct run_watch watches[MAX_CALLBACKS];

void fake_manager_setup(struct event_loop *loop)
{
	fake_loop = loop;
}

size_t fake_manager_waiters(void)
{
	size_t n = 0;

	for (size_t i = 0; i < MAX_CALLBACKS; i++)
		n += waiters[i].used;
	return n;
}

size_t fake_manager_watches(void)
{
	size_t n = 0;

	for (size_t i = 0; i < MAX_CALLBACKS; i++)
		n += watches[i].used;
	return n;
}

static int find_ws(const char *id, struct station_error *e)
{
	if (strcmp(id, "w1-test") == 0)
		return 0;
	if (strcmp(id, "w1-down") == 0)
		return station_error_set(e, -ENOTCONN, NULL,
					 "workspace \"%s\": agent not connected", id);
	return station_error_set(e, -ENOENT, NULL, "no workspace \"%s\"", id);
}

/* Set by the fake pause, cleared by the fake resume: runs are then refused as the manager's
 * workspace_wake_for() refuses them. */
static bool fake_paused;

static struct fake_run *find_run(const char *ws, const char *id, struct station_error *e)
{
	if (find_ws(ws, e) < 0)
		return NULL;
	for (size_t i = 0; i < n_runs; i++)
		if (strcmp(runs[i].id, id) == 0)
			return &runs[i];
	station_error_set(e, -ENOENT, NULL, "no run \"%s\"", id);
	return NULL;
}

static json_t *run_json(const struct fake_run *r)
{
	return json_pack("{s:s, s:s, s:s, s:s, s:I}", "id", r->id, "workspaceId", "w1-test",
			 "command", r->command, "status", r->status, "stdoutBytes",
			 (json_int_t)r->out_len);
}

static json_t *ws_json(const char *id)
{
	return json_pack("{s:s, s:s, s:s}", "id", id, "worker", "w1", "state", "ready");
}

void manager_ready_forget(struct ready_waiter *w)
{
}

json_t *manager_ready(struct manager *m, bool refresh, void (*fn)(void *userdata, json_t *result),
		      void *userdata, struct ready_waiter **ret_waiter)
{
	return json_pack("{s:b, s:[{s:s, s:b, s:s}]}", "ready", 1, "checks", "name", "store", "ok",
			 1, "message", "fake");
}

json_t *manager_worker(struct manager *m)
{
	return json_pack("{s:s, s:{s:i}}", "name", "w1", "limits", "maxWorkspaces", 1000);
}

/* No fleet: the static list alone. */
const json_t *manager_fleet_workers(struct manager *m)
{
	return NULL;
}

/* Echoes the container fields so a test sees what reached the manager. */
void manager_workspace_op_forget(struct workspace_op *op)
{
}

const char *manager_workspace_op_id(const struct workspace_op *op)
{
	return NULL;
}

int manager_workspace_create(struct manager *m, const struct workspace_spec *spec,
			     workspace_op_fn fn, void *userdata, struct workspace_op **ret_op,
			     json_t **ret, struct station_error *e)
{
	json_t *ws = ws_json("w1-new");

	json_object_set_new(ws, "adapter", json_string(spec->adapter ? spec->adapter : "host"));
	if (spec->image)
		json_object_set_new(ws, "image", json_string(spec->image));
	if (spec->seccomp_profile)
		json_object_set_new(ws, "seccompProfile", json_string(spec->seccomp_profile));
	if (spec->network)
		json_object_set_new(ws, "network", json_string(spec->network));
	if (spec->egress)
		json_object_set_new(ws, "egress", json_deep_copy(spec->egress));
	*ret = ws;
	return 0;
}

int manager_workspace_list(struct manager *m, const struct workspace_filter *f, json_t **ret,
			   struct station_error *e)
{
	*ret = json_pack("[o]", ws_json("w1-test"));
	return 0;
}

int manager_workspace_update(struct manager *m, const char *id, bool name_set, const char *name,
			     bool labels_clear, json_t *labels, json_t **ret,
			     struct station_error *e)
{
	int r = find_ws(id, e);

	if (r < 0)
		return r;
	*ret = ws_json(id);
	return 0;
}

int manager_workspace_resolve(struct manager *m, const char *tenant, const char *name, char *ret,
			      size_t size)
{
	return -ENOENT;
}

int manager_workspace_get(struct manager *m, const char *id, json_t **ret, struct station_error *e)
{
	int r = find_ws(id, e);

	if (r < 0)
		return r;
	*ret = ws_json(id);
	return 0;
}

/* Ends at once, through fn, as an operation that ends before the manager returns. */
int manager_workspace_delete(struct manager *m, const char *id, workspace_op_fn fn, void *userdata,
			     struct workspace_op **ret_op, struct station_error *e)
{
	int r = find_ws(id, e);

	if (r < 0)
		return r;
	fn(userdata, 0, NULL, NULL);
	return 1;
}

/* w1-test is restricted; "w1-bridge" exists for the network endpoints only, in mode bridge. */
static json_t *fake_egress;

int manager_workspace_network_get(struct manager *m, const char *id, json_t **ret,
				  struct station_error *e)
{
	if (strcmp(id, "w1-bridge") == 0) {
		*ret = json_pack("{s:s, s:s, s:s}", "mode", "bridge", "address", "10.200.0.3",
				 "gateway", "10.200.0.1");
		return 0;
	}
	int r = find_ws(id, e);
	if (r < 0)
		return r;
	*ret = json_pack("{s:s, s:s, s:s, s:o, s:{s:i, s:i, s:i, s:i}}", "mode", "restricted",
			 "address", "10.200.0.2", "gateway", "10.200.0.1", "egress",
			 fake_egress ? json_deep_copy(fake_egress) : json_object(), "counters",
			 "allowed", 1, "denied", 2, "dnsAllowed", 3, "dnsRefused", 4);
	return 0;
}

/* The real manager checks the rules with net_policy_from_json(); here only that "allow", when
 * given, is an array. */
int manager_workspace_network_set(struct manager *m, const char *id, json_t *egress, json_t **ret,
				  struct station_error *e)
{
	json_t *allow = json_object_get(egress, "allow");

	if (strcmp(id, "w1-bridge") == 0)
		return station_error_set(e, -EBUSY, NULL,
					 "workspace \"%s\" has network \"bridge\", not "
					 "\"restricted\"",
					 id);
	int r = find_ws(id, e);
	if (r < 0)
		return r;
	if (allow && !json_is_array(allow))
		return station_error_set(e, -EINVAL, "egress",
					 "egress.allow must be an array of rules");
	json_decref(fake_egress);
	fake_egress = json_deep_copy(egress);
	return manager_workspace_network_get(m, id, ret, e);
}

int manager_workspace_restart(struct manager *m, const char *id, workspace_op_fn fn, void *userdata,
			      struct workspace_op **ret_op, struct station_error *e)
{
	json_t *ws = NULL;
	int r = manager_workspace_get(m, id, &ws, e);

	if (r < 0)
		return r;
	fn(userdata, 0, ws, NULL);
	json_decref(ws);
	return 1;
}

/* Pause answers at once, resume through fn, as the manager may do either. */
int manager_workspace_pause(struct manager *m, const char *id, workspace_op_fn fn, void *userdata,
			    struct workspace_op **ret_op, json_t **ret, struct station_error *e)
{
	int r = find_ws(id, e);

	if (r < 0)
		return r;
	fake_paused = true;
	*ret = json_pack("{s:s, s:s, s:s, s:s}", "id", id, "worker", "w1", "state", "paused",
			 "pausedAt", "2026-12-01T00:00:00Z");
	return 0;
}

int manager_workspace_resume(struct manager *m, const char *id, workspace_op_fn fn, void *userdata,
			     struct workspace_op **ret_op, json_t **ret, struct station_error *e)
{
	json_t *ws = NULL;
	int r = manager_workspace_get(m, id, &ws, e);

	if (r < 0)
		return r;
	fake_paused = false;
	fn(userdata, 0, ws, NULL);
	json_decref(ws);
	return 1;
}

static void run_finish(struct fake_run *r, const char *status)
{
	r->status = status;
	for (size_t i = 0; i < MAX_CALLBACKS; i++)
		if (waiters[i].used && waiters[i].run == r) {
			waiters[i].used = false;
			waiters[i].fn(waiters[i].userdata, NULL); /* the API reads the run */
		}
}

static int on_run_timer(struct event_source *s, uint64_t now, void *userdata)
{
	struct fake_run *r = userdata;

	run_finish(r, strcmp(r->command, "hang") == 0 ? "cancelled" : "exited");
	return 0;
}

static void run_setup(struct fake_run *r)
{
	unsigned long n;

	if (strcmp(r->command, "true") == 0) {
		r->status = "exited";
	} else if (sscanf(r->command, "sleep:%lu", &n) == 1) {
		event_add_timer(fake_loop, &r->timer, now_usec() + n * 1000, on_run_timer, r);
	} else if (sscanf(r->command, "spew:%lu", &n) == 1) {
		r->out = malloc(n);
		for (size_t i = 0; i < n; i++)
			r->out[i] = (uint8_t)(i % 251);
		r->out_len = n;
		event_add_timer(fake_loop, &r->timer, now_usec() + 100000, on_run_timer, r);
	}
}

int manager_run_start(struct manager *m, const char *ws_id, const struct run_spec *spec,
		      json_t **ret, struct station_error *e)
{
	struct fake_run *r;
	int k = find_ws(ws_id, e);

	if (k < 0)
		return k;
	if (fake_paused)
		return station_error_set(e, STATION_EPAUSED, NULL,
					 "workspace \"%s\" is paused (resume it first)", ws_id);
	if (n_runs >= MAX_RUNS)
		return station_error_set(e, -EAGAIN, NULL, "too many runs");
	r = &runs[n_runs++];
	snprintf(r->id, sizeof r->id, "r-%zu", n_runs);
	snprintf(r->command, sizeof r->command, "%s", spec->command);
	r->status = "running";
	run_setup(r);
	if (spec->idempotency_key) /* with the run, as the manager stores it */
		manager_idempotency_record(m, spec->idempotency_scope, spec->idempotency_key, r->id,
					   spec->idempotency_status);
	*ret = run_json(r);
	return 0;
}

int manager_run_get(struct manager *m, const char *ws_id, const char *run_id, json_t **ret,
		    struct station_error *e)
{
	struct fake_run *r = find_run(ws_id, run_id, e);

	if (!r)
		return e->err;
	*ret = run_json(r);
	return 0;
}

int manager_run_list(struct manager *m, const char *ws_id, json_t **ret, struct station_error *e)
{
	json_t *a;
	int k = find_ws(ws_id, e);

	if (k < 0)
		return k;
	a = json_array();
	for (size_t i = n_runs; i > 0; i--)
		json_array_append_new(a, run_json(&runs[i - 1]));
	*ret = a;
	return 0;
}

int manager_run_cancel(struct manager *m, const char *ws_id, const char *run_id,
		       struct station_error *e)
{
	struct fake_run *r = find_run(ws_id, run_id, e);

	if (!r)
		return e->err;
	if (strcmp(r->status, "running") != 0)
		return station_error_set(e, -EBUSY, NULL, "run \"%s\" already finished", run_id);
	event_source_free(r->timer);
	snprintf(r->command, sizeof r->command, "hang");
	return event_add_timer(fake_loop, &r->timer, now_usec() + 50000, on_run_timer, r);
}

int manager_run_wait(struct manager *m, const char *ws_id, const char *run_id, run_result_fn fn,
		     void *userdata, struct run_waiter **ret, struct station_error *e)
{
	struct fake_run *r = find_run(ws_id, run_id, e);

	if (!r)
		return e->err;
	if (strcmp(r->status, "running") != 0)
		return 1;
	for (size_t i = 0; i < MAX_CALLBACKS; i++)
		if (!waiters[i].used) {
			waiters[i] = (struct run_waiter){ true, r, fn, userdata };
			*ret = &waiters[i];
			return 0;
		}
	return station_error_set(e, -EAGAIN, NULL, "too many waiters");
}

void manager_run_waiter_cancel(struct run_waiter *w)
{
	if (!w->used)
		abort(); /* cancelled after its call or twice: the API layer's bug */
	w->used = false;
}

static int on_watch_timer(struct event_source *s, uint64_t now, void *userdata)
{
	struct run_watch *w = userdata;
	struct fake_run *r = w->run;

	while (w->sent < r->out_len) {
		size_t n = MIN(r->out_len - w->sent, (size_t)16384);

		w->ops->output(w->userdata, RUN_STREAM_STDOUT, w->sent, r->out + w->sent, n);
		w->sent += n;
	}
	if (strcmp(r->status, "running") == 0) {
		event_source_set_time(s, now_usec() + 10000);
		return 0;
	}
	w->used = false;
	event_source_free(s);
	w->timer = NULL;
	w->ops->done(w->userdata);
	return 0;
}

int manager_run_watch(struct manager *m, const char *ws_id, const char *run_id,
		      const uint64_t *from, const struct run_watch_ops *ops, void *userdata,
		      struct run_watch **ret, struct station_error *e)
{
	struct fake_run *r = find_run(ws_id, run_id, e);

	if (!r)
		return e->err;
	for (size_t i = 0; i < MAX_CALLBACKS; i++)
		if (!watches[i].used) {
			struct run_watch *w = &watches[i];

			/* everything is kept: from the follower's offset on */
			*w = (struct run_watch){ true, r, ops, userdata, from ? from[0] : 0, NULL };
			event_add_timer(fake_loop, &w->timer, now_usec(), on_watch_timer, w);
			*ret = w;
			return 0;
		}
	return station_error_set(e, -EAGAIN, NULL, "too many watches");
}

void manager_run_unwatch(struct run_watch *w)
{
	if (!w->used)
		abort();
	w->used = false;
	event_source_free(w->timer);
	w->timer = NULL;
}

/* ---- images: FAKE_IMAGE_USED (used by w1-test) and FAKE_IMAGE_FREE are in the store -------- */

static json_t *image_json(const char *digest, const char *name, const char *used_by)
{
	json_t *users = used_by ? json_pack("[s]", used_by) : json_array();

	return json_pack("{s:s, s:s?, s:I, s:i, s:s, s:o}", "digest", digest, "name", name, "size",
			 (json_int_t)1234567, "layers", 1, "createdAt", "2026-11-29T10:40:07.123Z",
			 "usedBy", users);
}

/* Jobs answer from the loop a moment later, like the real ones (a child process). */
struct image_job {
	struct event_source *timer;
	image_job_done_fn done;
	void *userdata;
	json_t *image;
};

static int on_image_job_timer(struct event_source *s, uint64_t now, void *userdata)
{
	struct image_job *j = userdata;
	struct station_error e = {};

	event_source_free(j->timer);
	if (j->done)
		j->done(j->userdata, 0, j->image, &e);
	else
		json_decref(j->image);
	free(j);
	return 0;
}

static int image_job_start(json_t *image, image_job_done_fn done, void *userdata,
			   struct image_job **ret)
{
	struct image_job *j = calloc(1, sizeof *j);

	if (!j)
		return -ENOMEM;
	*j = (struct image_job){ .done = done, .userdata = userdata, .image = image };
	*ret = j;
	return event_add_timer(fake_loop, &j->timer, now_usec() + 10000, on_image_job_timer, j);
}

int manager_image_import(struct manager *m, const char *path, const char *name,
			 image_job_done_fn done, void *userdata, struct image_job **ret,
			 struct station_error *e)
{
	if (strcmp(path, "/missing") == 0)
		return station_error_set(e, -ENOENT, "path", "no OCI layout at \"%s\"", path);
	return image_job_start(image_json(FAKE_IMAGE_IMPORTED, name, NULL), done, userdata, ret);
}

int manager_image_pull(struct manager *m, const char *ref, const char *registry, bool plain_http,
		       image_job_done_fn done, void *userdata, struct image_job **ret,
		       struct station_error *e)
{
	const char *at = strchr(ref, '@');

	return image_job_start(image_json(at ? at + 1 : ref, registry, plain_http ? "plain" : NULL),
			       done, userdata, ret);
}

void manager_image_job_forget(struct image_job *j)
{
	if (j)
		j->done = NULL;
}

int manager_image_list(struct manager *m, json_t **ret, struct station_error *e)
{
	*ret = json_pack("[o, o]", image_json(FAKE_IMAGE_USED, "busybox", "w1-test"),
			 image_json(FAKE_IMAGE_FREE, NULL, NULL));
	return 0;
}

struct image_removal {
	struct event_source *timer;
	image_remove_done_fn done;
	void *userdata;
};

static int on_image_removal_timer(struct event_source *s, uint64_t now, void *userdata)
{
	struct image_removal *x = userdata;
	struct station_error e = {};

	if (x->done)
		x->done(x->userdata, 0, &e);
	event_source_free(x->timer);
	free(x);
	return 0;
}

int manager_image_remove(struct manager *m, const char *ref, image_remove_done_fn done,
			 void *userdata, struct image_removal **ret, struct station_error *e)
{
	if (strcmp(ref, FAKE_IMAGE_USED) == 0)
		return station_error_set(e, -EBUSY, NULL, "image %s is used by workspace w1-test",
					 ref);
	if (strcmp(ref, FAKE_IMAGE_FREE) != 0)
		return station_error_set(e, -ENOENT, NULL, "image %s not in store", ref);
	struct image_removal *x = calloc(1, sizeof *x);
	if (!x)
		return -ENOMEM;
	*x = (struct image_removal){ .done = done, .userdata = userdata };
	*ret = x;
	return event_add_timer(fake_loop, &x->timer, now_usec() + 10000, on_image_removal_timer, x);
}

void manager_image_removal_forget(struct image_removal *x)
{
	if (x)
		x->done = NULL;
}

struct image_export {
	struct event_source *timer;
	int fd; /* the pipe's write end, non-blocking */
	uint64_t written, total;
	int r;
	image_export_done_fn done;
	void *userdata;
};

static int on_export_timer(struct event_source *s, uint64_t now, void *userdata)
{
	struct image_export *x = userdata;
	struct station_error e = {};
	uint8_t buf[16384];

	while (x->written < x->total) {
		size_t n = x->total - x->written < sizeof buf ? x->total - x->written : sizeof buf;
		for (size_t i = 0; i < n; i++)
			buf[i] = (x->written + i) % 251;
		ssize_t k = write(x->fd, buf, n);
		if (k < 0 && errno == EAGAIN)
			return event_source_set_time(x->timer, now_usec() + 1000);
		if (k < 0) { /* the reader went away */
			x->r = -EPIPE;
			break;
		}
		x->written += k;
	}
	close(x->fd);
	if (x->r < 0)
		station_error_set(&e, x->r, NULL, "image %s: layer blob sha256:0123 damaged",
				  FAKE_IMAGE_USED);
	if (x->done)
		x->done(x->userdata, x->r, &e);
	event_source_free(x->timer);
	free(x);
	return 0;
}

int manager_image_export(struct manager *m, const char *ref, image_export_done_fn done,
			 void *userdata, struct image_export **ret, int *ret_fd,
			 struct station_error *e)
{
	struct image_export *x;
	int p[2];

	if (strcmp(ref, FAKE_IMAGE_USED) != 0 && strcmp(ref, FAKE_IMAGE_FREE) != 0)
		return image_error_not_in_store(ref, e);
	x = calloc(1, sizeof *x);
	if (!x || pipe2(p, O_CLOEXEC | O_NONBLOCK) < 0) {
		free(x);
		return -ENOMEM;
	}
	*x = (struct image_export){ .fd = p[1], .done = done, .userdata = userdata };
	x->total = strcmp(ref, FAKE_IMAGE_FREE) == 0 ? FAKE_EXPORT_BYTES : FAKE_EXPORT_CUT;
	x->r = strcmp(ref, FAKE_IMAGE_FREE) == 0 ? 0 : -EBADMSG;
	*ret = x;
	*ret_fd = p[0];
	return event_add_timer(fake_loop, &x->timer, now_usec() + 1000, on_export_timer, x);
}

void manager_image_export_forget(struct image_export *x)
{
	if (x)
		x->done = NULL;
}

/* Services: not faked; every call answers 404 (the HTTP layer's routing is what is tested). */
static int no_service(const char *name, struct station_error *e)
{
	return station_error_set(e, -ENOENT, NULL, "service \"%s\" not found", name);
}

int manager_service_start(struct manager *m, const char *ws_id, const struct service_spec *spec,
			  json_t **ret, struct station_error *e)
{
	return no_service(spec->name, e);
}

int manager_service_list(struct manager *m, const char *ws_id, json_t **ret,
			 struct station_error *e)
{
	*ret = json_pack("{s:[]}", "services");
	return 0;
}

int manager_service_get(struct manager *m, const char *ws_id, const char *name, json_t **ret,
			struct station_error *e)
{
	return no_service(name, e);
}

int manager_service_stop(struct manager *m, const char *ws_id, const char *name, json_t **ret,
			 struct station_error *e)
{
	return no_service(name, e);
}

int manager_service_restart(struct manager *m, const char *ws_id, const char *name, json_t **ret,
			    struct station_error *e)
{
	return no_service(name, e);
}

int manager_service_delete(struct manager *m, const char *ws_id, const char *name,
			   struct station_error *e)
{
	return no_service(name, e);
}

int manager_service_watch(struct manager *m, const char *ws_id, const char *name, bool follow,
			  const uint64_t *from, const struct run_watch_ops *ops, void *userdata,
			  struct service_watch **ret, struct station_error *e)
{
	return no_service(name, e);
}

int manager_service_watch_attempt(struct manager *m, const char *ws_id, const char *name,
				  uint64_t attempt, const uint64_t *from,
				  const struct run_watch_ops *ops, void *userdata,
				  struct service_watch **ret, struct station_error *e)
{
	return no_service(name, e);
}

uint64_t manager_service_watch_number(const struct service_watch *w)
{
	return 0;
}

void manager_service_unwatch(struct service_watch *w)
{
}

/* Terminals: not faked either; every call about one answers 404. */
static int no_terminal(const char *id, struct station_error *e)
{
	return station_error_set(e, -ENOENT, NULL, "terminal \"%s\" not found", id);
}

int manager_terminal_open(struct manager *m, const char *ws_id, const struct terminal_spec *spec,
			  json_t **ret, struct station_error *e)
{
	return no_terminal("new", e);
}

int manager_terminal_list(struct manager *m, const char *ws_id, json_t **ret,
			  struct station_error *e)
{
	*ret = json_pack("{s:[]}", "terminals");
	return 0;
}

int manager_terminal_get(struct manager *m, const char *ws_id, const char *term_id, json_t **ret,
			 struct station_error *e)
{
	return no_terminal(term_id, e);
}

int manager_terminal_resize(struct manager *m, const char *ws_id, const char *term_id,
			    unsigned cols, unsigned rows, json_t **ret, struct station_error *e)
{
	return no_terminal(term_id, e);
}

int manager_terminal_close(struct manager *m, const char *ws_id, const char *term_id,
			   struct station_error *e)
{
	return no_terminal(term_id, e);
}

int manager_terminal_wait(struct manager *m, const char *ws_id, const char *term_id,
			  enum terminal_wait what, run_waiter_fn fn, void *userdata,
			  struct terminal_waiter **ret, struct station_error *e)
{
	return no_terminal(term_id, e);
}

void manager_terminal_waiter_cancel(struct terminal_waiter *w)
{
}

int manager_terminal_attach(struct manager *m, const char *ws_id, const char *term_id,
			    const struct terminal_attach_ops *ops, void *userdata,
			    struct terminal_attach **ret, struct station_error *e)
{
	return no_terminal(term_id, e);
}

void manager_terminal_detach(struct terminal_attach *a)
{
}

int manager_terminal_input(struct terminal_attach *a, const void *data, size_t n)
{
	return -ENOTCONN;
}

int manager_terminal_attach_resize(struct terminal_attach *a, unsigned cols, unsigned rows)
{
	return -ENOTCONN;
}

int manager_terminal_resync(struct terminal_attach *a, uint64_t from)
{
	return -ENOTCONN;
}

/* Secrets: a put answers 201 with the name (the value is wiped, as the real one does); every
 * other call about one answers 404. */
int manager_secret_put(struct manager *m, const char *ws_id, const char *name, json_t *body,
		       json_t **ret, bool *ret_created, struct station_error *e)
{
	json_t *v = json_object_get(body, "value");

	if (!json_is_string(v))
		return station_error_set(e, -EINVAL, "value", "field \"value\" is required");
	explicit_bzero((char *)json_string_value(v), json_string_length(v));
	*ret = json_pack("{s:s}", "name", name);
	*ret_created = true;
	return 0;
}

int manager_secret_list(struct manager *m, const char *ws_id, json_t **ret, struct station_error *e)
{
	*ret = json_pack("{s:[]}", "secrets");
	return 0;
}

int manager_secret_get(struct manager *m, const char *ws_id, const char *name, json_t **ret,
		       struct station_error *e)
{
	return station_error_set(e, -ENOENT, NULL, "secret \"%s\" not found", name);
}

int manager_secret_delete(struct manager *m, const char *ws_id, const char *name, json_t **ret,
			  struct station_error *e)
{
	return station_error_set(e, -ENOENT, NULL, "secret \"%s\" not found", name);
}

int manager_port_expose(struct manager *m, const char *ws_id, const struct port_spec *spec,
			json_t **ret, struct station_error *e)
{
	return station_error_set(e, -EBUSY, NULL,
				 "previews are off: start the controller with --preview-listen");
}

int manager_port_list(struct manager *m, const char *ws_id, json_t **ret, struct station_error *e)
{
	*ret = json_pack("{s:[],s:[]}", "exposed", "listening");
	return 0;
}

int manager_port_get(struct manager *m, const char *ws_id, uint16_t port, json_t **ret,
		     struct station_error *e)
{
	return station_error_set(e, -ENOENT, NULL, "port %u is not exposed", (unsigned)port);
}

int manager_port_revoke(struct manager *m, const char *ws_id, uint16_t port,
			struct station_error *e)
{
	return station_error_set(e, -ENOENT, NULL, "port %u is not exposed", (unsigned)port);
}

int manager_secret_for_host(struct manager *m, const char *ws_id, const char *protocol,
			    const char *host, char **ret_name, char **ret_username,
			    char **ret_password)
{
	return -ENOENT;
}

/* Files: no agent here; the file endpoints are tested end to end (test-files.sh). */
int manager_file_open(struct manager *m, const char *ws_id, const struct file_request *req,
		      const struct file_session_ops *ops, void *userdata, struct file_session **ret,
		      struct station_error *e)
{
	return station_error_set(e, -ENOTCONN, NULL, "no agent in the fake manager");
}

void manager_file_pause(struct file_session *s, bool pause)
{
}

int manager_file_write(struct file_session *s, const void *data, size_t n)
{
	return -EPIPE;
}

int manager_file_write_end(struct file_session *s)
{
	return -EPIPE;
}

void manager_file_close(struct file_session *s)
{
}

/* Resource use: the fake has no agent; every workspace answers 409 as if not ready. */
int manager_usage_get(struct manager *m, const char *ws_id, usage_fn fn, void *userdata,
		      struct usage_waiter **ret, struct station_error *e)
{
	int r = find_ws(ws_id, e);

	if (r < 0)
		return r;
	return station_error_set(e, -EBUSY, NULL, "workspace \"%s\" is stopped, not ready", ws_id);
}

void manager_usage_cancel(struct usage_waiter *w)
{
}

/* Usage history: none recorded; the answer echoes the query so that parsing can be checked. */
int manager_usage_history_get(struct manager *m, const char *ws_id, uint64_t since_ms,
			      uint64_t step_ms, json_t **ret, struct station_error *e)
{
	int r = find_ws(ws_id, e);

	if (r < 0)
		return r;
	*ret = json_pack("{s:s, s:I, s:I, s:[]}", "workspaceId", ws_id, "sinceMs",
			 (json_int_t)since_ms, "stepMs", (json_int_t)step_ms, "samples");
	return 0;
}

int manager_worker_usage_history_get(struct manager *m, uint64_t since_ms, uint64_t step_ms,
				     json_t **ret, struct station_error *e)
{
	*ret = json_pack("{s:I, s:I, s:[]}", "sinceMs", (json_int_t)since_ms, "stepMs",
			 (json_int_t)step_ms, "samples");
	return 0;
}

/* Idempotency keys: a few in memory. A key starting with "busy-" is claimed by a request
 * still under way. */
struct fake_key {
	char scope[128], key[256], hash[65], object_id[128];
	unsigned status;
	bool claimed;
	bool recorded; /* manager_idempotency_record() stored it while claimed */
};
static struct fake_key fake_keys[16];

static struct fake_key *fake_key_find(const char *scope, const char *key)
{
	for (size_t i = 0; i < sizeof fake_keys / sizeof *fake_keys; i++)
		if (strcmp(fake_keys[i].scope, scope) == 0 && strcmp(fake_keys[i].key, key) == 0)
			return &fake_keys[i];
	return NULL;
}

int manager_idempotency_claim(struct manager *m, const char *scope, const char *key,
			      const char *hash, struct idempotency_hit *ret,
			      struct station_error *e)
{
	struct fake_key *k = fake_key_find(scope, key);

	if (strncmp(key, "busy-", 5) == 0)
		return station_error_set(e, -EINPROGRESS, "Idempotency-Key", "in progress");
	if (k && strcmp(k->hash, hash) != 0)
		return station_error_set(e, -EBUSY, "Idempotency-Key", "used with another request");
	if (k && k->claimed)
		return station_error_set(e, -EINPROGRESS, "Idempotency-Key", "in progress");
	if (k) {
		snprintf(ret->object_id, sizeof ret->object_id, "%s", k->object_id);
		ret->status = k->status;
		return 1;
	}
	k = fake_key_find("", "");
	if (!k)
		return station_error_set(e, -ENOMEM, NULL, "fake: no room");
	snprintf(k->scope, sizeof k->scope, "%s", scope);
	snprintf(k->key, sizeof k->key, "%s", key);
	snprintf(k->hash, sizeof k->hash, "%s", hash);
	k->claimed = true;
	return 0;
}

int manager_idempotency_finish(struct manager *m, const char *scope, const char *key,
			       const char *object_id, unsigned status)
{
	struct fake_key *k = fake_key_find(scope, key);

	if (!k || !k->claimed)
		return -ENOENT;
	if (!object_id && k->recorded) { /* stored with the object: only the claim ends */
		k->claimed = false;
		return 0;
	}
	if (!object_id) {
		*k = (struct fake_key){};
		return 0;
	}
	k->claimed = false;
	snprintf(k->object_id, sizeof k->object_id, "%s", object_id);
	k->status = status;
	return 0;
}

int manager_idempotency_record(struct manager *m, const char *scope, const char *key,
			       const char *object_id, unsigned status)
{
	struct fake_key *k = fake_key_find(scope, key);

	if (!k || !k->claimed)
		return -ENOENT;
	snprintf(k->object_id, sizeof k->object_id, "%s", object_id);
	k->status = status;
	k->recorded = true;
	return 0;
}

/* Services are at rest at once here. */
int manager_service_wait_rest(struct manager *m, const char *ws_id, const char *name,
			      service_rest_fn fn, void *userdata, struct service_waiter **ret,
			      struct station_error *e)
{
	return 1;
}

void manager_service_waiter_cancel(struct service_waiter *w)
{
}

uint64_t manager_service_stop_timeout_ms(struct manager *m, const char *ws_id, const char *name)
{
	return 0;
}
/* Events: none ever happen here. */
int manager_event_kind_from_string(const char *s)
{
	static const char *const names[] = { "workspace", "run", "service", "terminal" };

	for (int k = 0; s && k < 4; k++)
		if (strcmp(s, names[k]) == 0)
			return k;
	return -EINVAL;
}

int manager_events_next(struct manager *m, const struct manager_events_cursor *at,
			const struct manager_event_filter *f, struct manager_event *ret)
{
	*ret = (struct manager_event){ .seq = at->after, .pos = at->pos };
	return 0;
}

uint64_t manager_events_last(struct manager *m, const char *tenant)
{
	return UINT64_C(1) << 32;
}

int manager_events_check_since(struct manager *m, uint64_t since, const char *tenant,
			       struct station_error *e)
{
	return since > manager_events_last(m, tenant) ?
		       station_error_set(e, -EINVAL, "since", "since is beyond the newest event") :
		       0;
}

int manager_events_subscribe(struct manager *m, manager_events_fn fn, void *userdata,
			     struct events_sub **ret)
{
	*ret = NULL;
	return 0;
}

void manager_events_unsubscribe(struct events_sub *s)
{
}

/* Tenants: the fake serves the operator's view; the HTTP layer's scoping calls land here. */
static const char *fake_viewer;

void manager_set_viewer(struct manager *m, const char *tenant)
{
	fake_viewer = tenant && tenant[0] ? tenant : NULL;
}

const char *manager_viewer(const struct manager *m)
{
	return fake_viewer;
}

/* GET /metrics: one series saying whose view it is. */
void manager_metrics_write(struct manager *m, FILE *f)
{
	fprintf(f,
		"# HELP fake_viewer_workspaces Workspaces.\n# TYPE fake_viewer_workspaces gauge\n"
		"fake_viewer_workspaces{tenant=\"%s\"} 1\n",
		fake_viewer ?: "");
}

int manager_tenant_admit(struct manager *m, const struct auth_principal *p,
			 struct workspace_spec *spec, struct station_error *e)
{
	return 0;
}

int manager_tenant_image_allowed(struct manager *m, const char *ref, const char *field,
				 struct station_error *e)
{
	return 0;
}

int manager_token_create(struct manager *m, json_t *body, manager_token_done_fn done,
			 void *userdata, struct token_call **ret_call, json_t **ret,
			 struct station_error *e)
{
	return station_error_set(e, -ENOSYS, NULL, "no tokens in the fake manager");
}

int manager_token_list(struct manager *m, json_t **ret, struct station_error *e)
{
	*ret = json_array();
	return 0;
}

int manager_token_get(struct manager *m, const char *id, json_t **ret, struct station_error *e)
{
	return station_error_set(e, -ENOENT, NULL, "no such token: \"%s\"", id);
}

int manager_token_revoke(struct manager *m, const char *id, manager_token_done_fn done,
			 void *userdata, struct token_call **ret_call, json_t **ret,
			 struct station_error *e)
{
	return station_error_set(e, -ENOENT, NULL, "no such token: \"%s\"", id);
}

void manager_token_call_forget(struct token_call *c)
{
}

void manager_audit_record(struct manager *m, const struct manager_audit_entry *entry)
{
}

int manager_audit_list(struct manager *m, const struct manager_audit_query *q, json_t **ret,
		       struct station_error *e)
{
	*ret = json_pack("{s:[],s:n}", "entries", "nextBefore");
	return 0;
}

/* Snapshots and fork: one snapshot "s-test" of w1-test, answered at once. */
static json_t *fake_snapshot(void)
{
	return json_pack("{s:s,s:s,s:n,s:s,s:i,s:s,s:s,s:b,s:i,s:b,s:n}", "id", "s-test",
			 "workspaceId", "w1-test", "name", "createdAt", "2026-12-01T00:00:00Z",
			 "sizeBytes", 0, "baseImage", FAKE_IMAGE_USED, "image", FAKE_IMAGE_FREE,
			 "memory", 0, "pausedMs", 0, "durable", 1, "tenant");
}

int manager_snapshot_create(struct manager *m, const char *ws_id, const struct snapshot_spec *spec,
			    workspace_op_fn fn, void *userdata, struct workspace_op **ret_op,
			    struct station_error *e)
{
	json_t *ws = NULL, *s;
	int r = manager_workspace_get(m, ws_id, &ws, e);

	if (r < 0)
		return r;
	json_decref(ws);
	s = fake_snapshot();
	fn(userdata, 0, s, NULL);
	json_decref(s);
	return 1;
}

int manager_snapshot_list(struct manager *m, json_t **ret, struct station_error *e)
{
	*ret = json_pack("{s:[o]}", "snapshots", fake_snapshot());
	return 0;
}

int manager_snapshot_get(struct manager *m, const char *id, json_t **ret, struct station_error *e)
{
	if (strcmp(id, "s-test") != 0)
		return station_error_set(e, -ENOENT, NULL, "snapshot \"%s\" not found", id);
	*ret = fake_snapshot();
	return 0;
}

int manager_snapshot_delete(struct manager *m, const char *id, workspace_op_fn fn, void *userdata,
			    struct workspace_op **ret_op, struct station_error *e)
{
	if (strcmp(id, "s-test") != 0)
		return station_error_set(e, -ENOENT, NULL, "snapshot \"%s\" not found", id);
	fn(userdata, 0, NULL, NULL);
	return 1;
}

int manager_workspace_fork(struct manager *m, const char *id, unsigned count, workspace_op_fn fn,
			   void *userdata, struct workspace_op **ret_op, struct station_error *e)
{
	json_t *ws = NULL, *o;
	int r = manager_workspace_get(m, id, &ws, e);

	if (r < 0)
		return r;
	o = json_pack("{s:[o],s:s,s:i}", "workspaces", ws, "snapshot", "s-test", "pausedMs", 0);
	fn(userdata, 0, o, NULL);
	json_decref(o);
	return 1;
}

/* Code contexts: the fake workspace has none. */
#include "daemon/manager-contexts.h"

static int no_context(const char *cid, struct station_error *e)
{
	return station_error_set(e, -ENOENT, NULL, "context \"%s\" not found", cid ? cid : "");
}

void manager_context_op_forget(struct context_op *op)
{
}

int manager_context_create(struct manager *m, const char *ws_id, const struct context_spec *spec,
			   context_done_fn fn, void *userdata, struct context_op **ret_op,
			   struct station_error *e)
{
	return station_error_set(e, CONTEXT_EMISSING, "language", "no kernel in the fake");
}

int manager_context_restart(struct manager *m, const char *ws_id, const char *cid,
			    context_done_fn fn, void *userdata, struct context_op **ret_op,
			    struct station_error *e)
{
	return no_context(cid, e);
}

void manager_usage_contexts_split(json_t *usage)
{
}

int manager_context_list(struct manager *m, const char *ws_id, const json_t *usage, json_t **ret,
			 struct station_error *e)
{
	*ret = json_pack("{s:[]}", "contexts");
	return 0;
}

int manager_context_get(struct manager *m, const char *ws_id, const char *cid, const json_t *usage,
			json_t **ret, struct station_error *e)
{
	return no_context(cid, e);
}

int manager_context_delete(struct manager *m, const char *ws_id, const char *cid,
			   struct station_error *e)
{
	return no_context(cid, e);
}

int manager_context_execute(struct manager *m, const char *ws_id, const char *cid, const char *code,
			    size_t code_len, uint64_t timeout_ms, context_done_fn fn,
			    void *userdata, struct context_op **ret_op, struct station_error *e)
{
	return no_context(cid, e);
}

int manager_context_interrupt(struct manager *m, const char *ws_id, const char *cid, char ret[64],
			      struct station_error *e)
{
	return no_context(cid, e);
}

int manager_execution_get(struct manager *m, const char *ws_id, const char *cid, const char *eid,
			  json_t **ret, struct station_error *e)
{
	return no_context(cid, e);
}

int manager_execution_list(struct manager *m, const char *ws_id, const char *cid, json_t **ret,
			   struct station_error *e)
{
	return no_context(cid, e);
}

int manager_execution_run_id(struct manager *m, const char *ws_id, const char *cid, const char *eid,
			     char ret[64], struct station_error *e)
{
	return no_context(cid, e);
}

int manager_execution_wait(struct manager *m, const char *ws_id, const char *cid, const char *eid,
			   void (*fn)(void *userdata), void *userdata,
			   struct execution_waiter **ret, struct station_error *e)
{
	return no_context(cid, e);
}

void manager_execution_waiter_cancel(struct execution_waiter *w)
{
}
