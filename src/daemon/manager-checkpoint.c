/* SPDX-License-Identifier: MIT */
/* Memory snapshots (docs/operations.md "Memory snapshots"): whether this worker can checkpoint
 * a container workspace's processes, probed once at start off the loop (criu check and the
 * runtime take a second or more), answered from then on by GET /v1/ready's "checkpoint" check
 * and by the refusal of a snapshot with "memory": true. */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "adapter/adapter.h"
#include "agentlink.h"
#include "basic/cleanup.h"
#include "basic/json-util.h"
#include "basic/log.h"
#include "basic/safe-fs.h"
#include "basic/util.h"
#include "event/event.h"
#include "event/work.h"
#include "manager-internal.h"
#include "net/net.h"

#define CHECKPOINT_READY_TIMEOUT_USEC (10 * 1000000ull)

struct checkpoint_job {
	struct manager *m;
	char *runtime;
	const char *criu; /* the manager's config: lives as long as it */
	struct checkpoint_status status;
};

static void checkpoint_job_run(void *userdata)
{
	struct checkpoint_job *j = userdata;
	checkpoint_probe(j->runtime, j->criu, &j->status);
}

static void checkpoint_job_done(void *userdata, bool cancelled)
{
	struct checkpoint_job *j = userdata;
	struct manager *m = j->m;
	if (!cancelled) {
		m->checkpoint = j->status;
		m->checkpoint_probed = true;
		if (j->status.ok)
			log_info("memory snapshots available", "checkpoint", j->status.message,
				 NULL);
		else
			log_info("memory snapshots unavailable", "reason", j->status.message, NULL);
		manager_ready_kick(m);
	}
	free(j->runtime);
	free(j);
}

static void checkpoint_bases_load(struct manager *m);
static void checkpoint_base_add(struct manager *m, const char *snapshot_id, uint64_t base);
static void checkpoint_base_drop(struct manager *m, const char *snapshot_id);

void manager_checkpoint_init(struct manager *m)
{
	if (!m->cfg.allow_container)
		return;
	checkpoint_bases_load(m);
	if (!m->actx.runtime) {
		m->checkpoint.ok = false;
		snprintf(m->checkpoint.message, sizeof m->checkpoint.message,
			 "memory snapshots unavailable: no container runtime: %.400s",
			 m->actx.runtime_error);
		m->checkpoint_probed = true;
		return;
	}
	struct checkpoint_job *j = calloc(1, sizeof *j);
	if (j)
		j->m = m, j->criu = m->cfg.criu;
	if (!j || !(j->runtime = strdup(adapter_runtime_path(&m->actx))) ||
	    event_work_queue(m->work, checkpoint_job_run, checkpoint_job_done, j) < 0) {
		if (j)
			free(j->runtime);
		free(j);
		snprintf(m->checkpoint.message, sizeof m->checkpoint.message,
			 "memory snapshots unavailable: the probe could not be started");
		m->checkpoint_probed = true;
	}
}

void manager_checkpoint_ready(struct manager *m, json_t *checks)
{
	if (!m->cfg.allow_container)
		return;
	json_array_append_new(
		checks,
		json_pack("{s:s,s:b,s:s}", "name", "checkpoint", "ok",
			  m->checkpoint_probed && m->checkpoint.ok, "message",
			  m->checkpoint_probed ?
				  m->checkpoint.message :
				  "checking whether this worker can checkpoint (criu check)"));
}

int workspace_checkpoint_check(struct workspace *ws, struct station_error *e)
{
	struct manager *m = ws->m;
	if (ws->adapter != &adapter_container)
		return station_error_set(
			e, -ENOTSUP, "memory",
			"memory snapshots are taken of container workspaces only; "
			"\"%s\" is a %s workspace (its snapshot holds its directory)",
			ws->row.id, ws->adapter->name);
	if (!m->checkpoint_probed)
		return station_error_set(e, -ENOTSUP, "memory",
					 "this worker is still checking whether it can checkpoint "
					 "(criu check); ask again in a few seconds");
	if (!m->checkpoint.ok)
		return station_error_set(e, -ENOTSUP, "memory", "%s", m->checkpoint.message);
	if (ws->net_mode != NET_NONE)
		return station_error_set(
			e, -ENOTSUP, "memory",
			"memory snapshots are taken of workspaces with network \"none\" only; "
			"\"%s\" has network \"%s\" (its links and their addresses are outside "
			"what a checkpoint carries)",
			ws->row.id, net_mode_to_string(ws->net_mode));
	if (workspace_is_paused(ws))
		return station_error_set(e, -EBUSY, "memory",
					 "workspace \"%s\" is paused: resume it for a memory "
					 "snapshot (CRIU freezes and thaws it itself)",
					 ws->row.id);
	if (ws->checkpoint)
		return station_error_set(e, -EBUSY, "memory",
					 "workspace \"%s\" is being checkpointed already",
					 ws->row.id);
	return 0;
}

/* ---- taking one ------------------------------------------------------------------------- *
 *
 * The agent is the container's init, and what it holds of the controller's CRIU cannot carry:
 * stdout and stderr on agent.log of the workspace directory (outside every mount of the
 * container), a listener the controller made in the host's network namespace, connections
 * whose other end is the controller. CHECKPOINT has it log to run/agent.log, listen on a socket
 * of its own at run/agent.sock, and close every connection; the controller expects that close
 * (runs, services, terminals go on: nothing is lost), runs `runc checkpoint --leave-running`
 * off the loop, and connects again, as after a restart of its own. The agent's own listener is
 * trusted by its pid (agent_peer_ok()). */

struct checkpoint_take {
	struct workspace *ws;
	struct event_work_pool *pool;
	checkpoint_done_fn done;
	void *userdata;
	uint64_t request;
	bool ready;  /* CHECKPOINT_READY said yes: the close is expected */
	bool queued; /* the runtime's checkpoint is under way */
	struct event_source *timer;
	/* for the job */
	const struct adapter_context *actx;
	const char *criu;
	char *dir;
	char *ws_dir;
	uint8_t secret[SECRET_BYTES];
	json_int_t id_base;
	char id[PROTO_MAX_ID + 1];
	json_t *services; /* the workspace's service rows as the agent was dumped with them */
	int r;
	struct station_error e;
};

static uint64_t checkpoint_requests;

static void take_free(struct checkpoint_take *t)
{
	event_source_free(t->timer);
	explicit_bzero(t->secret, sizeof t->secret);
	json_decref(t->services);
	free(t->dir);
	free(t->ws_dir);
	free(t);
}

/* Once, on the loop: the agent is reconnected, the caller told. */
static void take_finish(struct checkpoint_take *t, int r, const struct station_error *e)
{
	struct workspace *ws = t->ws;
	ws->checkpoint = NULL;
	if (!ws->link)
		workspace_agent_reconnect(ws);
	if (r < 0)
		log_warn("checkpoint failed", "workspace", ws->row.id, "error", e->message, NULL);
	t->done(t->userdata, r, e);
	take_free(t);
}

static int make_private_dir(const char *path, struct station_error *e)
{
	if (mkdir(path, 0700) < 0 && errno != EEXIST)
		return station_error_set(e, negative_errno(), NULL, "cannot make \"%s\": %m", path);
	_cleanup_close_ int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 || fchown(fd, 0, 0) < 0 || fchmod(fd, 0700) < 0)
		return station_error_set(e, negative_errno(), NULL, "cannot own \"%s\": %m", path);
	return 0;
}

/* criu writes most images 0644: 0600 each, so only root reads a process's memory. */
static int files_private(const char *path, struct station_error *e)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	DIR *d = fd < 0 ? NULL : fdopendir(fd);
	if (!d)
		return station_error_set(e, negative_errno(), NULL, "cannot read \"%s\": %m", path);
	fd = -1; /* the DIR's now */
	int r = 0;
	for (struct dirent *de; r >= 0 && (de = readdir(d));)
		if (de->d_type == DT_REG &&
		    fchmodat(dirfd(d), de->d_name, 0600, AT_SYMLINK_NOFOLLOW) < 0 &&
		    errno != EOPNOTSUPP)
			r = station_error_set(e, negative_errno(), NULL,
					      "cannot close \"%s/%s\" to others: %m", path,
					      de->d_name);
	closedir(d);
	return r;
}

/* meta.json: what a restore must match (the runtime, criu) and the uid range the restored
 * processes keep (criu restores the user namespace's mapping as dumped). */
static int checkpoint_meta_write(struct checkpoint_take *t, struct station_error *e)
{
	char path[PATH_MAX];
	const char *rt = adapter_runtime_path(t->actx);
	_cleanup_json_ json_t *o = json_pack("{s:I,s:s,s:s}", "idBase", (json_int_t)t->id_base,
					     "runtime", rt ? rt : "", "criu",
					     t->criu ? t->criu : "");
	_cleanup_free_ char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;
	snprintf(path, sizeof path, "%s/" CHECKPOINT_META, t->dir);
	int r = text ? write_file_atomic(path, text, strlen(text), 0600) : -ENOMEM;
	if (r < 0)
		return station_error_set(e, r, NULL, "cannot write \"%s\": %s", path, strerror(-r));
	return 0;
}

/* services.json: the source's services (manager-service.c services_checkpoint_json()), for a
 * restore to list and keep the books of what the restored agent supervises. */
static int checkpoint_services_write(struct checkpoint_take *t, struct station_error *e)
{
	char path[PATH_MAX];
	_cleanup_free_ char *text = json_dumps(t->services, JSON_COMPACT);
	snprintf(path, sizeof path, "%s/" CHECKPOINT_SERVICES, t->dir);
	int r = text ? write_file_atomic(path, text, strlen(text), 0600) : -ENOMEM;
	if (r < 0)
		return station_error_set(e, r, NULL, "cannot write \"%s\": %s", path, strerror(-r));
	return 0;
}

static void take_job_run(void *userdata)
{
	struct checkpoint_take *t = userdata;
	_cleanup_free_ char *images = NULL, *work = NULL;
	if (asprintf(&images, "%s/images", t->dir) < 0 || asprintf(&work, "%s/work", t->dir) < 0) {
		t->r = station_error_set(&t->e, -ENOMEM, NULL, "out of memory");
		return;
	}
	_cleanup_free_ char *parent = strdup(t->dir);
	char *slash = parent ? strrchr(parent, '/') : NULL;
	if (!slash) {
		t->r = station_error_set(&t->e, -ENOMEM, NULL, "out of memory");
		return;
	}
	*slash = 0;
	int r = make_private_dir(parent, &t->e);
	if (r >= 0)
		r = make_private_dir(t->dir, &t->e);
	if (r >= 0)
		r = make_private_dir(images, &t->e);
	if (r >= 0)
		r = make_private_dir(work, &t->e);
	if (r >= 0) {
		r = adapter_checkpoint(t->actx, t->id, t->ws_dir, t->criu, t->dir, t->secret,
				       sizeof t->secret, &t->e);
		if (r < 0) /* criu's own words are in dump.log */
			adapter_criu_log_error(work, "dump.log", &t->e);
	}
	if (r >= 0)
		r = checkpoint_meta_write(t, &t->e);
	if (r >= 0)
		r = checkpoint_services_write(t, &t->e);
	if (r >= 0)
		r = files_private(images, &t->e);
	if (r >= 0)
		r = files_private(work, &t->e);
	t->r = r;
}

static void take_job_done(void *userdata, bool cancelled)
{
	struct checkpoint_take *t = userdata;
	int r = t->r;
	if (cancelled)
		r = station_error_set(&t->e, -ECANCELED, NULL,
				      "the controller stopped before the checkpoint was taken");
	const char *slash = strrchr(t->dir, '/');
	if (r >= 0 && t->id_base > 0) /* dir: <root>/checkpoints/<snapshot id> */
		checkpoint_base_add(t->ws->m, slash ? slash + 1 : t->dir, (uint64_t)t->id_base);
	take_finish(t, r, &t->e);
}

static int take_on_timeout(struct event_source *s, uint64_t now, void *userdata)
{
	struct checkpoint_take *t = userdata;
	struct station_error e = {};
	if (t->queued)
		return 0;
	station_error_set(&e, -ETIMEDOUT, NULL,
			  "the agent of workspace \"%s\" did not get ready for the checkpoint in "
			  "time",
			  t->ws->row.id);
	take_finish(t, e.err, &e);
	return 0;
}

int workspace_checkpoint_take(struct workspace *ws, const char *dir, checkpoint_done_fn done,
			      void *userdata, struct station_error *e)
{
	struct manager *m = ws->m;
	if (!ws->link || !ws->link_ready)
		return station_error_set(e, -ENOTCONN, NULL,
					 "the agent of workspace \"%s\" is not connected; try "
					 "again",
					 ws->row.id);
	struct checkpoint_take *t = calloc(1, sizeof *t);
	if (!t || !(t->dir = strdup(dir)) || !(t->ws_dir = strdup(ws->dir))) {
		if (t)
			free(t->dir);
		free(t);
		return station_error_set(e, -ENOMEM, NULL, "out of memory");
	}
	*t = (struct checkpoint_take){ .ws = ws,
				       .done = done,
				       .userdata = userdata,
				       .request = ++checkpoint_requests,
				       .actx = &m->actx,
				       .criu = m->cfg.criu,
				       .dir = t->dir,
				       .ws_dir = t->ws_dir };
	memcpy(t->secret, ws->secret, sizeof t->secret);
	t->id_base = json_integer_value(json_object_get(ws->spec, "idBase"));
	snprintf(t->id, sizeof t->id, "%s", ws->row.id);
	int r = agentlink_send_checkpoint(ws->link, t->request, adapter_container_run_dir());
	if (r >= 0)
		r = event_add_timer(m->loop, &t->timer, now_usec() + CHECKPOINT_READY_TIMEOUT_USEC,
				    take_on_timeout, t);
	if (r < 0) {
		take_free(t);
		return station_error_set(e, r == -EOPNOTSUPP ? -ENOTSUP : r, "memory",
					 r == -EOPNOTSUPP ?
						 "the agent of workspace \"%s\" predates "
						 "checkpoints: restart the workspace" :
						 "cannot ask the agent of workspace \"%s\" for a "
						 "checkpoint",
					 ws->row.id);
	}
	ws->checkpoint = t;
	return 0;
}

void workspace_on_checkpoint_ready(struct workspace *ws, uint64_t request, const char *reason)
{
	struct checkpoint_take *t = ws->checkpoint;
	struct station_error e = {};
	if (!t || t->request != request || t->ready) {
		agent_report_ignored(ws, "checkpoint ready", NULL);
		return;
	}
	if (!reason) {
		t->ready = true; /* the close comes next */
		return;
	}
	station_error_set(&e, -EBUSY, "memory",
			  "the agent of workspace \"%s\" cannot be "
			  "checkpointed now: %s",
			  ws->row.id, reason);
	take_finish(t, e.err, &e);
}

bool workspace_checkpoint_link_closed(struct workspace *ws)
{
	struct checkpoint_take *t = ws->checkpoint;
	struct station_error e = {};
	if (!t || t->queued)
		return false;
	if (!t->ready) { /* closed before it answered: taken for a lost connection */
		station_error_set(&e, -ECONNRESET, NULL,
				  "the agent of workspace \"%s\" closed its connection before it "
				  "was ready for the checkpoint",
				  ws->row.id);
		ws->checkpoint = NULL;
		t->done(t->userdata, e.err, &e);
		take_free(t);
		return false;
	}
	t->queued = true;
	/* as the agent is dumped: nothing changes its services from here to the dump */
	t->services = services_checkpoint_json(ws);
	int r = t->services ? event_work_queue(ws->m->work, take_job_run, take_job_done, t) :
			      -ENOMEM;
	if (r < 0) {
		station_error_set(&e, r, NULL, "cannot queue the checkpoint: %s", strerror(-r));
		take_finish(t, r, &e);
	}
	return true;
}

/* ---- a memory snapshot's checkpoint ----------------------------------------------------- */

void checkpoint_dir_path(const struct manager *m, const char *snapshot_id, char *buf, size_t n)
{
	snprintf(buf, n, "%s/" CHECKPOINT_DIR "/%s", m->cfg.root, snapshot_id);
}

void checkpoint_dir_remove(struct manager *m, const char *snapshot_id)
{
	char dir[PATH_MAX];
	checkpoint_base_drop(m, snapshot_id);
	checkpoint_dir_path(m, snapshot_id, dir, sizeof dir);
	int r = rm_rf(dir);
	if (r < 0 && r != -ENOENT)
		log_warn("cannot remove a checkpoint", "snapshot", snapshot_id, "path", dir,
			 "error", strerror(-r), NULL);
}

uint64_t checkpoint_dir_bytes(const char *dir)
{
	char images[PATH_MAX];
	snprintf(images, sizeof images, "%s/images", dir);
	_cleanup_close_ int fd = open(images, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	DIR *d = fd < 0 ? NULL : fdopendir(fd);
	uint64_t bytes = 0;
	struct stat st;
	if (!d)
		return 0;
	fd = -1;
	for (struct dirent *de; (de = readdir(d));)
		if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
		    S_ISREG(st.st_mode))
			bytes += (uint64_t)st.st_size;
	closedir(d);
	return bytes;
}

/* ---- restoring one (a create from a memory snapshot) ------------------------------------ */

static int checkpoint_meta_read(const struct manager *m, const char *snapshot_id, json_t **ret,
				struct station_error *e)
{
	char dir[PATH_MAX];
	_cleanup_free_ char *text = NULL;
	size_t len = 0;
	checkpoint_dir_path(m, snapshot_id, dir, sizeof dir);
	_cleanup_close_ int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	int r = dfd < 0 ? negative_errno() :
			  safe_read_file(dfd, CHECKPOINT_META, SAFE_BENEATH, 4096, &text, &len);
	if (r >= 0 && faccessat(dfd, "images/inventory.img", F_OK, AT_SYMLINK_NOFOLLOW) < 0)
		r = negative_errno();
	if (r >= 0 && faccessat(dfd, "agent.log", F_OK, AT_SYMLINK_NOFOLLOW) < 0)
		r = negative_errno();
	if (r < 0)
		return station_error_set(e, r == -ENOENT ? -EUCLEAN : r, "snapshot",
					 "snapshot \"%s\" holds processes, but its checkpoint "
					 "(%s) is missing or incomplete: %s; it cannot be "
					 "restored (delete it)",
					 snapshot_id, dir, strerror(-r));
	*ret = json_loadb(text, len, 0, NULL);
	if (!*ret || !json_is_object(*ret)) {
		json_decref(*ret);
		return station_error_set(e, -EUCLEAN, "snapshot",
					 "snapshot \"%s\": its checkpoint's %s is unreadable",
					 snapshot_id, CHECKPOINT_META);
	}
	return 0;
}

int checkpoint_restore_check(struct manager *m, const char *snapshot_id, struct station_error *e)
{
	_cleanup_json_ json_t *meta = NULL;
	if (!m->actx.runtime || !m->checkpoint_probed || !m->checkpoint.ok)
		return station_error_set(e, -ENOTSUP, "snapshot",
					 "snapshot \"%s\" holds processes, which this worker "
					 "cannot restore now: %s",
					 snapshot_id,
					 m->checkpoint_probed ? m->checkpoint.message :
								"it is still checking whether it "
								"can (criu check); ask again in a "
								"few seconds");
	int r = checkpoint_meta_read(m, snapshot_id, &meta, e);
	if (r < 0)
		return r;
	const char *rt = json_string_value(json_object_get(meta, "runtime"));
	const char *criu = json_string_value(json_object_get(meta, "criu"));
	const char *now_rt = adapter_runtime_path(&m->actx);
	const char *now_criu = m->cfg.criu ? m->cfg.criu : "";
	if (!rt || strcmp(rt, now_rt) != 0)
		return station_error_set(e, -ENOTSUP, "snapshot",
					 "snapshot \"%s\" was checkpointed with runtime %s; this "
					 "worker's is %s: a restore needs the same runtime",
					 snapshot_id, rt ? rt : "(unknown)", now_rt);
	if (!criu || strcmp(criu, now_criu) != 0)
		return station_error_set(e, -ENOTSUP, "snapshot",
					 "snapshot \"%s\" was checkpointed with criu \"%s\"; this "
					 "worker runs \"%s\": a restore needs the same criu",
					 snapshot_id, criu ? criu : "(unknown)", now_criu);
	if (json_integer_value(json_object_get(meta, "idBase")) <= 0)
		return station_error_set(e, -EUCLEAN, "snapshot",
					 "snapshot \"%s\": its checkpoint names no uid range",
					 snapshot_id);
	return 0;
}

int checkpoint_spec_apply(struct manager *m, const char *snapshot_id, json_t *spec_json,
			  struct station_error *e)
{
	char dir[PATH_MAX];
	_cleanup_json_ json_t *meta = NULL;
	checkpoint_dir_path(m, snapshot_id, dir, sizeof dir);
	_cleanup_close_ int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0 || faccessat(dfd, CHECKPOINT_META, F_OK, AT_SYMLINK_NOFOLLOW) < 0)
		return 0; /* no memory: a create from its filesystem */
	int r = checkpoint_meta_read(m, snapshot_id, &meta, e);
	if (r < 0)
		return r;
	/* criu gives the restored processes the source's uid mapping: the new workspace takes the
	 * source's range (held while a snapshot of it or a workspace with it lives) */
	json_object_set(spec_json, "idBase", json_object_get(meta, "idBase"));
	json_object_set_new(spec_json, "checkpoint", json_string(snapshot_id));
	return 1;
}

int checkpoint_services_restore(struct workspace *ws, const char *snapshot_id,
				struct station_error *e)
{
	char dir[PATH_MAX];
	_cleanup_free_ char *text = NULL;
	size_t len = 0;
	checkpoint_dir_path(ws->m, snapshot_id, dir, sizeof dir);
	_cleanup_close_ int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	int r = dfd < 0 ? negative_errno() :
			  safe_read_file(dfd, CHECKPOINT_SERVICES, SAFE_BENEATH,
					 CHECKPOINT_SERVICES_MAX, &text, &len);
	if (r == -ENOENT)
		return 0; /* a checkpoint that recorded none */
	if (r < 0)
		return station_error_set(e, r == -EFBIG ? -EUCLEAN : r, "snapshot",
					 "snapshot \"%s\": its checkpoint's %s cannot be read: %s",
					 snapshot_id, CHECKPOINT_SERVICES, strerror(-r));
	_cleanup_json_ json_t *rows = json_loadb(text, len, JSON_REJECT_DUPLICATES, NULL);
	if (!rows)
		return station_error_set(e, -EUCLEAN, "snapshot",
					 "snapshot \"%s\": its checkpoint's %s is not JSON",
					 snapshot_id, CHECKPOINT_SERVICES);
	r = services_restore(ws, rows, e);
	if (r < 0) {
		struct station_error why = *e;
		station_error_set(e, why.err, "snapshot",
				  "snapshot \"%s\": its checkpoint's %s: %s", snapshot_id,
				  CHECKPOINT_SERVICES, why.message);
		log_warn("cannot carry a checkpoint's services over", "workspace", ws->row.id,
			 "snapshot", snapshot_id, "error", e->message, NULL);
	}
	return r;
}

/* ---- the checkpoints' uid ranges, kept in memory ----------------------------------------- */

struct checkpoint_base {
	char snapshot_id[NAME_MAX + 1];
	uint64_t base;
};

static void checkpoint_base_add(struct manager *m, const char *snapshot_id, uint64_t base)
{
	struct checkpoint_base *v =
		realloc(m->checkpoint_bases, (m->n_checkpoint_bases + 1) * sizeof *v);
	if (!v) { /* the range may be handed out again: its restores would share it */
		log_error("out of memory: a checkpoint's uid range is not kept reserved",
			  "snapshot", snapshot_id, NULL);
		return;
	}
	m->checkpoint_bases = v;
	v = &v[m->n_checkpoint_bases++];
	snprintf(v->snapshot_id, sizeof v->snapshot_id, "%s", snapshot_id);
	v->base = base;
}

static void checkpoint_base_drop(struct manager *m, const char *snapshot_id)
{
	for (size_t i = 0; i < m->n_checkpoint_bases; i++)
		if (strcmp(m->checkpoint_bases[i].snapshot_id, snapshot_id) == 0) {
			m->checkpoint_bases[i] = m->checkpoint_bases[--m->n_checkpoint_bases];
			return;
		}
}

bool checkpoint_base_reserved(const struct manager *m, uint64_t base)
{
	for (size_t i = 0; i < m->n_checkpoint_bases; i++)
		if (m->checkpoint_bases[i].base == base)
			return true;
	return false;
}

/* At start, once: every checkpoint's meta.json. */
static void checkpoint_bases_load(struct manager *m)
{
	char dir[PATH_MAX];
	snprintf(dir, sizeof dir, "%s/" CHECKPOINT_DIR, m->cfg.root);
	_cleanup_close_ int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	DIR *d = fd < 0 ? NULL : fdopendir(fd);
	if (!d)
		return;
	fd = -1;
	for (struct dirent *de; (de = readdir(d));) {
		_cleanup_json_ json_t *meta = NULL;
		struct station_error e = {};
		if (de->d_name[0] == '.' || checkpoint_meta_read(m, de->d_name, &meta, &e) < 0)
			continue;
		json_int_t base = json_integer_value(json_object_get(meta, "idBase"));
		if (base > 0)
			checkpoint_base_add(m, de->d_name, (uint64_t)base);
	}
	closedir(d);
}

void manager_checkpoint_free(struct manager *m)
{
	free(m->checkpoint_bases);
	m->checkpoint_bases = NULL;
	m->n_checkpoint_bases = 0;
}
