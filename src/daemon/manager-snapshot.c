/* SPDX-License-Identifier: MIT */
/* Snapshots, creates from a snapshot, and fork (docs/api.md "Snapshots and fork").
 *
 * A snapshot is an image: the workspace's image plus one layer holding the overlay's upper
 * (the root filesystem's changes) and HOME at home/node. The loop checks, holds the agent and
 * freezes the workspace as a pause does (workspace_hold_agent(), then workspace_freeze(); not
 * when it is paused already: a command sent before the freeze is forked and frozen with the
 * rest, none starts beside the read) and queues a job; the job opens
 * the trees through the workspace directory's fd (safe-fs.h: no symlink followed, no path
 * walked by name into what the sandbox wrote), writes the layer to an unlinked file under the
 * root (image_layer_write(): its own rules for what the sandbox put there), has the loop thaw
 * the workspace at once, then commits the layer onto the workspace's image in a store handle
 * of its own (image_commit_layer()). The loop records the row and answers. While the job
 * runs, the workspace cannot be deleted or restarted (409): its trees stay where they are.
 *
 * A host workspace has no image and no overlay: its snapshot is its HOME alone (the workspace
 * directory its commands work in), at ADAPTER_HOST_SNAPSHOT_HOME in an image of that one layer
 * (image_commit_layer() with no base), every owner stored as 0 (host ids mean nothing in a
 * layer); its row's base_image is "". A create from it is a host workspace whose HOME the host
 * adapter seeds from the layer, every entry its configured user's (--host-user, else root's).
 *
 * A create from a snapshot takes the snapshot's image as its image, and the adapter seeds the
 * new HOME from the snapshot's layer (image_layer_copy_subtree()). A fork is one snapshot and
 * N such creates, of the source's adapter. A snapshot's image cannot be deleted while the
 * snapshot exists; a snapshot cannot be deleted while a workspace made from it exists. */

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "basic/cleanup.h"
#include "basic/log.h"
#include "basic/safe-fs.h"
#include "basic/util.h"
#include "basic/workers.h"
#include "event/event.h"
#include "event/work.h"
#include "image/image.h"
#include "manager-internal.h"
#include "net/policy.h"

#define SNAPSHOT_ID_MAX 64 /* "s-" + worker (<= 32) + "-" + 26 base32 + NUL, rounded up */
#define SNAPSHOT_UPPER_DIR "upper/upper" /* the container adapter's overlay upper */
#define SNAPSHOT_HOME_PREFIX "home/node" /* where HOME is in the layer (OCI_HOME_DIR) */

struct snapshot_job;
typedef void (*snapshot_done_fn)(struct snapshot_job *j, int r, json_t *snapshot,
				 const struct station_error *e);

struct snapshot_job {
	struct manager *m;
	struct workspace *ws; /* loop-only; kept (no delete, no restart) while snapshots_running */
	struct event_work_pool *pool;
	snapshot_done_fn done;
	void *userdata;
	/* copied on the loop, read by the job */
	char id[SNAPSHOT_ID_MAX];
	char ws_id[PROTO_MAX_ID + 1];
	char tenant[MANAGER_TENANT_MAX + 1];
	char base_ref[IMAGE_NAME_MAX + IMAGE_DIGEST_MAX + 2];
	char *root, *dir, *name;
	uint32_t id_base;
	uint64_t max_bytes;
	bool memory;
	bool host;	       /* a host workspace's: HOME alone, no base image */
	bool was_paused;       /* paused before: left paused */
	bool frozen;	       /* frozen by us, not yet thawed */
	bool held;	       /* its agent told PAUSE by us, not yet RESUME */
	bool reading;	       /* counted in ws->snapshot_reading: starts are refused */
	uint64_t memory_bytes; /* its checkpoint's images (manager-checkpoint.c) */
	uint64_t frozen_at;
	uint64_t paused_ms;
	/* the job's results */
	char image[IMAGE_DIGEST_MAX];
	char base_digest[IMAGE_DIGEST_MAX];
	struct image_layer_stats stats;
	int r;
	struct station_error e;
};

static void snapshot_job_free(struct snapshot_job *j)
{
	free(j->root);
	free(j->dir);
	free(j->name);
	free(j);
}

static bool snapshot_visible(const struct manager *m, const struct snapshot_row *row)
{
	return !m->viewer || strcmp(row->tenant, m->viewer) == 0;
}

/* The digest part of a reference ("name@sha256:…" or "sha256:…"). */
static const char *ref_digest(const char *ref)
{
	const char *at = ref ? strrchr(ref, '@') : NULL;
	return at ? at + 1 : ref;
}

static json_t *snapshot_to_json(const struct snapshot_row *row, const char *worker)
{
	bool host = !row->base_image[0];
	json_t *o = json_pack("{s:s,s:s,s:s?,s:s,s:I,s:s?,s:s,s:b,s:I}", "id", row->id,
			      "workspaceId", row->workspace_id, "name", row->name, "adapter",
			      host ? "host" : "container", "sizeBytes", (json_int_t)row->size_bytes,
			      "baseImage", host ? NULL : row->base_image, "image", row->image,
			      "memory", row->memory, "pausedMs", (json_int_t)row->paused_ms);
	if (o)
		json_object_set_new(o, "durable", json_boolean(row->durable));
	if (!o || json_object_set_new(o, "worker", json_string(worker)) < 0) {
		json_decref(o);
		return NULL;
	}
	json_set_time(o, "createdAt", row->created_at);
	json_object_set_new(o, "tenant", row->tenant[0] ? json_string(row->tenant) : json_null());
	return o;
}

/* -EINVAL for what is no snapshot id; -ENOENT for one another worker keeps (its id names
 * it: the client asked the wrong worker). */
static int snapshot_check_id(const struct manager *m, const char *id, struct station_error *e)
{
	char worker[WORKER_NAME_MAX + 1];
	int r = snapshot_id_worker(id, worker);
	if (r < 0)
		return station_error_set(e, -EINVAL, NULL,
					 "invalid snapshot id \"%.128s\" (want s-WORKER-… as "
					 "snapshot create prints it)",
					 id);
	if (r > 0 && strcmp(worker, m->cfg.worker) != 0)
		return station_error_set(
			e, -ENOENT, NULL,
			"snapshot \"%s\" is kept by worker %s, not by this one (%s): "
			"ask that worker",
			id, worker, m->cfg.worker);
	return 0;
}

/* -ENOENT alike for a missing snapshot and another tenant's. */
static int snapshot_lookup(struct manager *m, const char *id, struct snapshot_row *ret,
			   struct station_error *e)
{
	struct snapshot_row row = {};
	int r = snapshot_check_id(m, id, e);
	if (r < 0)
		return r;
	r = store_snapshot_get(m->store, id, &row);
	if (r == -ENOENT || (r >= 0 && !snapshot_visible(m, &row))) {
		snapshot_row_free(&row);
		return station_error_set(e, -ENOENT, NULL, "snapshot \"%s\" not found", id);
	}
	if (r < 0)
		return station_error_set(e, r, NULL, "cannot read snapshot \"%s\": %s", id,
					 strerror(-r));
	*ret = row;
	return 0;
}

/* ---- memory snapshots: the hook the checkpoint fills -----------------------------------------
 *
 * "memory": true asks for the processes too (adapter/checkpoint.h: the runtime's checkpoint
 * through CRIU). workspace_checkpoint_check() (manager-checkpoint.c) says whether this worker
 * can take one of ws, naming what is missing (501) when not; it is asked before anything is
 * frozen or written. Taking the checkpoint itself goes here, beside the layer. */
static int snapshot_memory_check(struct workspace *ws, struct station_error *e)
{
	return workspace_checkpoint_check(ws, e);
}

static int snapshot_layer_begin(struct snapshot_job *j, struct station_error *e);

/* The checkpoint is taken (the workspace ran on through it): the layer is read as for any
 * snapshot, the images' bytes counted in its size. */
static void snapshot_checkpoint_done(void *userdata, int r, const struct station_error *e)
{
	struct snapshot_job *j = userdata;
	struct station_error le = {};
	char dir[PATH_MAX];
	checkpoint_dir_path(j->m, j->id, dir, sizeof dir);
	j->ws->snapshots_running--;
	if (r >= 0) {
		j->memory_bytes = checkpoint_dir_bytes(dir);
		if ((r = snapshot_layer_begin(j, &le)) >= 0)
			return;
		e = &le;
	}
	checkpoint_dir_remove(j->m, j->id);
	log_info("snapshot failed", "workspace", j->ws_id, "error", e->message, NULL);
	j->done(j, r, NULL, e);
	snapshot_job_free(j);
}

static int snapshot_memory_begin(struct snapshot_job *j, struct station_error *e)
{
	char dir[PATH_MAX];
	checkpoint_dir_path(j->m, j->id, dir, sizeof dir);
	int r = workspace_checkpoint_take(j->ws, dir, snapshot_checkpoint_done, j, e);
	if (r < 0)
		return r;
	j->ws->snapshots_running++; /* no delete, no restart meanwhile */
	return 0;
}

/* ---- the job ---------------------------------------------------------------------------- */

static void snapshot_thaw(struct snapshot_job *j)
{
	struct station_error e = {};
	if (!j->reading)
		return;
	j->reading = false;
	j->ws->snapshot_reading--;
	j->paused_ms = (now_usec() - j->frozen_at) / 1000;
	if (j->frozen && workspace_thaw(j->ws, &e) < 0)
		log_error("cannot thaw a workspace after its snapshot", "workspace", j->ws_id,
			  "error", e.message, NULL);
	if (j->frozen) /* the line's time is after the thaw's */
		log_info("workspace thawed after a snapshot's read", "workspace", j->ws_id,
			 "snapshot", j->id, NULL);
	j->frozen = false;
	if (j->held) /* thawed first, then told, as a resume does */
		workspace_release_agent(j->ws);
	j->held = false;
}

static void snapshot_thaw_on_loop(void *userdata)
{
	snapshot_thaw(userdata);
}

/* An unlinked file under the root for the layer: on the same disk as the image store. */
static int layer_tmpfile(const char *root, struct station_error *e)
{
	int fd = open(root, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (fd >= 0)
		return fd;
	_cleanup_free_ char *path = NULL;
	if (asprintf(&path, "%s/.snapshot-XXXXXX", root) < 0)
		return station_error_set(e, -ENOMEM, NULL, "out of memory");
	fd = mkostemp(path, O_CLOEXEC);
	if (fd < 0)
		return station_error_set(e, negative_errno(), NULL,
					 "cannot make the snapshot's layer file under \"%s\": %m",
					 root);
	(void)unlink(path);
	return fd;
}

/* The workspace's trees as the layer's sources: the overlay upper at the root, HOME at
 * home/node. Opened beneath the workspace directory (the controller's path, root's),
 * never through a symlink the sandbox planted. */
static int snapshot_open_trees(struct snapshot_job *j, int fds[2], struct station_error *e)
{
	_cleanup_close_ int wfd = open(j->dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (wfd < 0)
		return station_error_set(e, negative_errno(), NULL,
					 "cannot open workspace directory \"%s\": %m", j->dir);
	fds[0] = safe_open_dir(wfd, SNAPSHOT_UPPER_DIR, SAFE_BENEATH);
	if (fds[0] < 0)
		return station_error_set(e, fds[0], NULL,
					 "cannot open \"%s/" SNAPSHOT_UPPER_DIR "\": %s", j->dir,
					 strerror(-fds[0]));
	fds[1] = safe_open_dir(wfd, "home", SAFE_BENEATH);
	if (fds[1] < 0)
		return station_error_set(e, fds[1], NULL, "cannot open \"%s/home\": %s", j->dir,
					 strerror(-fds[1]));
	return 0;
}

/* A host workspace's HOME, at its place in the workspace directory. */
static int snapshot_write_host_layer(struct snapshot_job *j, int out_fd)
{
	_cleanup_close_ int wfd = open(j->dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (wfd < 0)
		return station_error_set(&j->e, negative_errno(), NULL,
					 "cannot open workspace directory \"%s\": %m", j->dir);
	_cleanup_close_ int hfd = safe_open_dir(wfd, "home", SAFE_BENEATH);
	if (hfd < 0)
		return station_error_set(&j->e, hfd, NULL, "cannot open \"%s/home\": %s", j->dir,
					 strerror(-hfd));
	const struct image_layer_source src = { .dir_fd = hfd,
						.prefix = ADAPTER_HOST_SNAPSHOT_HOME };
	const struct image_layer_options o = { .owners_zero = true, .max_bytes = j->max_bytes };
	return image_layer_write(&src, 1, &o, out_fd, &j->stats, &j->e);
}

static int snapshot_write_layer(struct snapshot_job *j, int out_fd)
{
	if (j->host)
		return snapshot_write_host_layer(j, out_fd);
	int fds[2] = { -1, -1 };
	int r = snapshot_open_trees(j, fds, &j->e);
	if (r >= 0) {
		const struct image_layer_source src[] = {
			{ .dir_fd = fds[0], .prefix = "", .overlay_upper = true },
			/* opaque: on another worker, a HOME seeded from the image's home/node
			 * gets none of the base image's files the workspace deleted */
			{ .dir_fd = fds[1], .prefix = SNAPSHOT_HOME_PREFIX, .opaque = true },
		};
		const struct image_layer_options o = { .id_base = j->id_base,
						       .max_bytes = j->max_bytes };
		r = image_layer_write(src, ELEMENTSOF(src), &o, out_fd, &j->stats, &j->e);
	}
	for (size_t i = 0; i < ELEMENTSOF(fds); i++)
		if (fds[i] >= 0)
			close(fds[i]);
	return r;
}

static int snapshot_commit(struct snapshot_job *j, int tar_fd)
{
	struct image_store *s = NULL;
	struct image *base = NULL, *img = NULL;
	char name[IMAGE_NAME_MAX];
	int r;

	if (lseek(tar_fd, 0, SEEK_SET) < 0)
		return station_error_set(&j->e, negative_errno(), NULL,
					 "cannot read the snapshot's layer back: %m");
	snprintf(name, sizeof name, "snapshot/%s", j->id);
	r = image_store_open(j->root, &s, &j->e);
	if (r >= 0) /* answered once named; made durable after (snapshot_sync_queue()) */
		image_store_defer_sync(s);
	if (r >= 0 && !j->host) /* a host workspace's has no base: one layer */
		r = image_lookup(s, j->base_ref, &base, &j->e);
	if (r >= 0) {
		snprintf(j->base_digest, sizeof j->base_digest, "%s", base ? base->digest : "");
		r = image_commit_layer(s, base, tar_fd, j->stats.diff_id, name, &img, &j->e);
	}
	if (r >= 0)
		snprintf(j->image, sizeof j->image, "%s", img->digest);
	image_free(img);
	image_free(base);
	image_store_close(s);
	return r;
}

static void snapshot_job_run(void *userdata)
{
	struct snapshot_job *j = userdata;
	_cleanup_close_ int tar_fd = layer_tmpfile(j->root, &j->e);
	int r = tar_fd < 0 ? tar_fd : snapshot_write_layer(j, tar_fd);
	/* the trees are read: the workspace runs again while the layer is committed */
	event_work_call_on_loop(j->pool, snapshot_thaw_on_loop, j);
	if (r >= 0)
		r = snapshot_commit(j, tar_fd);
	j->r = r;
}

/* ---- durability: the image fsync()ed after the answer ----------------------------------
 *
 * A snapshot is answered once its layer is written, hashed and named in the store, its row
 * durable = 0; its image is fsync()ed right after, here, off the loop, and the row set
 * durable. Until then the page cache has it: a workspace made from it, an export or a pull
 * read the same bytes, and a controller that stops or dies loses nothing. A machine that
 * loses power may: at the next start every row still durable = 0 has its image checked
 * (image_verify(): every blob against its digest), made durable when it holds, and removed
 * with its image when it does not (event "lost", the reason logged). */

static bool snapshot_image_shared(struct manager *m, const char *image);

struct snapshot_sync {
	struct manager *m;
	char id[SNAPSHOT_ID_MAX];
	char image[IMAGE_DIGEST_MAX];
	char *root;
	bool verify; /* found not durable at start: checked first */
	int r;
	struct station_error e;
};

static void snapshot_sync_run(void *userdata)
{
	struct snapshot_sync *x = userdata;
	struct image_store *s = NULL;
	int r = image_store_open(x->root, &s, &x->e);

	if (r >= 0 && x->verify && (r = image_verify(s, x->image, &x->e)) < 0 && r != -ENOMEM)
		r = -EBADMSG; /* what is named is not what was written, or not there */
	if (r >= 0)
		r = image_sync(s, x->image, &x->e);
	image_store_close(s);
	x->r = r;
}

static void snapshot_lost_image_removed(void *userdata, int r, const struct station_error *e)
{
	char *image = userdata;
	if (r < 0)
		log_warn("a lost snapshot's image was not removed", "image", image, "error",
			 e ? e->message : "", NULL);
	free(image);
}

/* The row of a snapshot whose image did not survive a crash, and the image unless shared. */
static void snapshot_lost(struct manager *m, const struct snapshot_sync *x)
{
	struct snapshot_row row;
	struct station_error ie = {};

	if (store_snapshot_get(m->store, x->id, &row) < 0)
		return; /* deleted meanwhile */
	log_error("snapshot lost: its image was not on disk when the machine stopped", "snapshot",
		  x->id, "image", x->image, "error", x->e.message, NULL);
	if (store_snapshot_delete(m->store, x->id) >= 0) {
		if (row.memory)
			checkpoint_dir_remove(m, row.id);
		manager_event_emit(m, MANAGER_EVENT_SNAPSHOT, "lost", row.id, row.workspace_id,
				   row.tenant, NULL, NULL);
		char *image = strdup(x->image);
		if (image && !snapshot_image_shared(m, image) &&
		    manager_image_remove(m, image, snapshot_lost_image_removed, image, NULL, &ie) >=
			    0)
			image = NULL; /* the removal's */
		free(image);
	}
	snapshot_row_free(&row);
}

static void snapshot_sync_done(void *userdata, bool cancelled)
{
	struct snapshot_sync *x = userdata;
	struct manager *m = x->m;

	/* cancelled: the controller stops, the row checked at its next start */
	if (!cancelled && x->r >= 0) {
		int r = store_snapshot_set_durable(m->store, x->id);
		if (r < 0 && r != -ENOENT) /* ENOENT: deleted meanwhile */
			log_error("snapshot on disk, its record not updated", "snapshot", x->id,
				  "error", strerror(-r), NULL);
	} else if (!cancelled && x->verify && x->r == -EBADMSG) {
		snapshot_lost(m, x);
	} else if (!cancelled && (x->r != -ENOENT || x->verify)) {
		log_error("snapshot not written to disk: checked again at the next start",
			  "snapshot", x->id, "error", x->e.message, NULL);
	}
	free(x->root);
	free(x);
}

static void snapshot_sync_queue(struct manager *m, const char *id, const char *image, bool verify)
{
	struct snapshot_sync *x = calloc(1, sizeof *x);

	if (x && (x->root = strdup(m->cfg.root))) {
		x->m = m;
		x->verify = verify;
		snprintf(x->id, sizeof x->id, "%s", id);
		snprintf(x->image, sizeof x->image, "%s", image);
		if (event_work_queue(m->work, snapshot_sync_run, snapshot_sync_done, x) >= 0)
			return;
	}
	if (x)
		free(x->root);
	free(x);
	log_error("snapshot not written to disk: no memory for the job; checked again at the "
		  "next start",
		  "snapshot", id, NULL);
}

void manager_snapshots_recover(struct manager *m)
{
	struct snapshot_row *rows = NULL;
	size_t n = 0;

	if (store_snapshot_list(m->store, &rows, &n) < 0) {
		log_error("cannot read the snapshots to check the ones not on disk", NULL);
		return;
	}
	for (size_t i = 0; i < n; i++) {
		if (!rows[i].durable)
			snapshot_sync_queue(m, rows[i].id, rows[i].image, true);
		snapshot_row_free(&rows[i]);
	}
	free(rows);
}

/* The row, the image's owner (so the tenant lists and uses it), the event. */
static int snapshot_record(struct snapshot_job *j, struct snapshot_row *row)
{
	struct manager *m = j->m;
	*row = (struct snapshot_row){ .id = j->id,
				      .workspace_id = j->ws_id,
				      .tenant = j->tenant,
				      .name = j->name,
				      .image = j->image,
				      .base_image = j->base_digest,
				      .size_bytes = j->stats.bytes + j->memory_bytes,
				      .memory = j->memory,
				      .paused_ms = j->paused_ms,
				      .created_at = realtime_usec(),
				      .durable = false };
	int r = store_image_owner_add(m->store, j->image, j->tenant);
	if (r >= 0)
		r = store_snapshot_insert(m->store, row);
	if (r < 0)
		return station_error_set(&j->e, r, NULL,
					 "snapshot %s: its image %s is stored, its record is not: "
					 "%s",
					 j->id, j->image, strerror(-r));
	manager_event_emit(m, MANAGER_EVENT_SNAPSHOT, "created", j->id, j->ws_id, j->tenant, NULL,
			   NULL);
	metrics_snapshot_created(m);
	char bytes[24], entries[24];
	snprintf(bytes, sizeof bytes, "%llu", (unsigned long long)j->stats.bytes);
	snprintf(entries, sizeof entries, "%llu", (unsigned long long)j->stats.entries);
	log_info("snapshot created", "workspace", j->ws_id, "snapshot", j->id, "image", j->image,
		 "bytes", bytes, "entries", entries, NULL);
	return 0;
}

static void snapshot_job_done(void *userdata, bool cancelled)
{
	struct snapshot_job *j = userdata;
	struct snapshot_row row;
	json_t *snapshot = NULL;
	int r = j->r;

	j->ws->snapshots_running--;
	snapshot_thaw(j); /* not run (the controller is stopping), or thawed already */
	if (cancelled)
		r = station_error_set(&j->e, -ECANCELED, NULL,
				      "the controller stopped before the snapshot was made");
	if (r >= 0)
		r = snapshot_record(j, &row);
	if (r >= 0 && !(snapshot = snapshot_to_json(&row, j->m->cfg.worker)))
		r = station_error_set(&j->e, -ENOMEM, NULL, "out of memory");
	if (r >= 0)
		snapshot_sync_queue(j->m, row.id, row.image, false);
	if (r < 0) {
		if (j->memory)
			checkpoint_dir_remove(j->m, j->id);
		if (r == -EFBIG) /* past --max-snapshot-bytes: 413 */
			j->e.err = r = -E2BIG;
		log_info("snapshot failed", "workspace", j->ws_id, "error", j->e.message, NULL);
	}
	j->done(j, r, snapshot, &j->e);
	json_decref(snapshot);
	snapshot_job_free(j);
}

/* ---- starting one ---------------------------------------------------------------------- */

static int snapshot_check_name(const char *name, struct station_error *e)
{
	size_t n = name ? strlen(name) : 1;
	if (n == 0 || n > SNAPSHOT_NAME_MAX)
		return station_error_set(e, -EINVAL, "name",
					 "field \"name\" must be 1 to %d characters",
					 SNAPSHOT_NAME_MAX);
	for (const unsigned char *p = (const unsigned char *)name; p && *p; p++)
		if (*p < 0x20 || *p == 0x7f)
			return station_error_set(e, -EINVAL, "name",
						 "field \"name\" holds a control character");
	return 0;
}

static int snapshot_check_count(struct manager *m, const char *tenant, struct station_error *e)
{
	uint64_t n = 0;
	int r = store_snapshot_count(m->store, tenant, &n);
	if (r < 0)
		return station_error_set(e, r, NULL, "cannot count snapshots: %s", strerror(-r));
	if (n >= m->cfg.max_snapshots_per_tenant)
		return station_error_set(e, -EAGAIN, NULL,
					 "%s already has %llu snapshots (the limit, "
					 "--max-snapshots-per-tenant); delete one first",
					 tenant[0] ? "this tenant" : "the operator",
					 (unsigned long long)n);
	return 0;
}

static int snapshot_check_workspace(struct manager *m, struct workspace *ws,
				    struct station_error *e)
{
	if (workspace_op_pending(ws) || ws->snapshots_running)
		return station_error_set(
			e, -EBUSY, NULL,
			"workspace \"%s\" is busy (a create, restart, stop, delete "
			"or snapshot is under way); try again once it is done",
			ws->row.id);
	if (ws->row.state != WORKSPACE_READY && !workspace_is_paused(ws))
		return workspace_check_ready(ws, e);
	if (!m->actx.images || !m->work)
		return station_error_set(e, -EHOSTDOWN, NULL, "the image store is unavailable");
	return 0;
}

static struct snapshot_job *snapshot_job_new(struct manager *m, struct workspace *ws,
					     const struct snapshot_spec *spec)
{
	struct snapshot_job *j = calloc(1, sizeof *j);
	if (!j)
		return NULL;
	const char *image = json_string_value(json_object_get(ws->spec, "image"));
	json_int_t id_base = json_integer_value(json_object_get(ws->spec, "idBase"));
	*j = (struct snapshot_job){ .m = m,
				    .ws = ws,
				    .pool = m->work,
				    .id_base = id_base > 0 ? (uint32_t)id_base : m->cfg.id_base,
				    .max_bytes = m->cfg.max_snapshot_bytes,
				    .memory = spec->memory,
				    .host = ws->adapter == &adapter_host };
	/* its worker in its id, as a workspace's: a client routes it there */
	char random[WORKSPACE_ID_RANDOM + 1];
	random_id("", WORKSPACE_ID_RANDOM, random, sizeof random);
	snprintf(j->id, sizeof j->id, "s-%s-%s", m->cfg.worker, random);
	snprintf(j->ws_id, sizeof j->ws_id, "%s", ws->row.id);
	snprintf(j->tenant, sizeof j->tenant, "%s", ws->row.tenant ? ws->row.tenant : "");
	snprintf(j->base_ref, sizeof j->base_ref, "%s", image ? image : m->cfg.default_image);
	j->root = strdup(m->cfg.root);
	j->dir = strdup(ws->dir);
	j->name = spec->name ? strdup(spec->name) : NULL;
	if (!j->root || !j->dir || (spec->name && !j->name)) {
		snapshot_job_free(j);
		return NULL;
	}
	return j;
}

/* Checks, freezes ws (unless paused) and queues the job; done is called once, later. */
static int snapshot_begin(struct manager *m, struct workspace *ws, const struct snapshot_spec *spec,
			  snapshot_done_fn done, void *userdata, struct station_error *e)
{
	int r = snapshot_check_workspace(m, ws, e);
	if (r >= 0 && spec->name)
		r = snapshot_check_name(spec->name, e);
	if (r >= 0)
		r = snapshot_check_count(m, ws->row.tenant ? ws->row.tenant : "", e);
	if (r >= 0 && spec->memory)
		r = snapshot_memory_check(ws, e);
	if (r < 0)
		return r;
	struct snapshot_job *j = snapshot_job_new(m, ws, spec);
	if (!j)
		return station_error_set(e, -ENOMEM, NULL, "out of memory");
	j->done = done;
	j->userdata = userdata;
	r = spec->memory ? snapshot_memory_begin(j, e) : snapshot_layer_begin(j, e);
	if (r < 0)
		snapshot_job_free(j);
	return r;
}

/* Freezes the workspace (unless paused) and queues the job; on failure the workspace is thawed
 * and released, and j is the caller's. */
static int snapshot_freeze_queue(struct snapshot_job *j, struct station_error *e)
{
	struct workspace *ws = j->ws;
	if (!j->was_paused) /* the line's time is before the freeze's (the tests' reference) */
		log_info("workspace frozen for a snapshot", "workspace", j->ws_id, "snapshot",
			 j->id, NULL);
	int r = j->was_paused ? 0 : workspace_freeze(ws, e);
	if (r >= 0) {
		j->frozen = !j->was_paused;
		r = event_work_queue(j->m->work, snapshot_job_run, snapshot_job_done, j);
		if (r < 0)
			station_error_set(e, r, NULL, "cannot queue the snapshot: %s",
					  strerror(-r));
	}
	if (r < 0) {
		snapshot_thaw(j);
		return r;
	}
	ws->snapshots_running++;
	return 0;
}

/* The agent answered PAUSED (or not in time): every command asked for before is forked. */
static void snapshot_held(struct workspace *ws, void *userdata)
{
	struct snapshot_job *j = userdata;
	struct station_error e = {};
	ws->snapshots_running--;
	int r = snapshot_freeze_queue(j, &e);
	if (r >= 0)
		return;
	if (j->memory)
		checkpoint_dir_remove(j->m, j->id);
	log_info("snapshot failed", "workspace", j->ws_id, "error", e.message, NULL);
	j->done(j, r, NULL, &e);
	snapshot_job_free(j);
}

/* Holds the agent, freezes the workspace (unless paused) and queues the job; on failure j is
 * the caller's. A command asked for before is forked (and frozen) by the freeze, none after:
 * from here until the thaw, starts are refused (workspace_wake_for()). */
static int snapshot_layer_begin(struct snapshot_job *j, struct station_error *e)
{
	struct workspace *ws = j->ws;
	j->was_paused = workspace_is_paused(ws);
	if (j->was_paused)
		return snapshot_freeze_queue(j, e);
	j->reading = true;
	j->frozen_at = now_usec();
	ws->snapshot_reading++;
	int r = workspace_hold_agent(ws, snapshot_held, j, e);
	if (r == 0) /* an agent that predates PAUSE */
		return snapshot_freeze_queue(j, e);
	if (r < 0) {
		snapshot_thaw(j);
		return r;
	}
	j->held = true;
	ws->snapshots_running++; /* no delete, no restart meanwhile */
	return 0;
}

static void snapshot_create_done(struct snapshot_job *j, int r, json_t *snapshot,
				 const struct station_error *e)
{
	workspace_op_detached_end(j->userdata, r, snapshot, e);
}

int manager_snapshot_create(struct manager *m, const char *ws_id, const struct snapshot_spec *spec,
			    workspace_op_fn fn, void *userdata, struct workspace_op **ret_op,
			    struct station_error *e)
{
	struct workspace *ws = NULL;
	int r = workspace_lookup(m, ws_id, &ws, e);
	if (r < 0)
		return r;
	struct workspace_op *op = workspace_op_detached(fn, userdata);
	if (!op)
		return station_error_set(e, -ENOMEM, NULL, "out of memory");
	*ret_op = op;
	r = snapshot_begin(m, ws, spec, snapshot_create_done, op, e);
	if (r < 0) {
		*ret_op = NULL;
		manager_workspace_op_forget(op);
		workspace_op_detached_end(op, r, NULL, e);
		return r;
	}
	return 1;
}

/* ---- list, get, delete ----------------------------------------------------------------- */

int manager_snapshot_list(struct manager *m, json_t **ret, struct station_error *e)
{
	struct snapshot_row *rows = NULL;
	size_t n = 0;
	int r = store_snapshot_list(m->store, &rows, &n);
	if (r < 0)
		return station_error_set(e, r, NULL, "cannot list snapshots: %s", strerror(-r));
	json_t *a = json_array();
	for (size_t i = 0; i < n; i++) {
		if (a && snapshot_visible(m, &rows[i]))
			json_array_append_new(a, snapshot_to_json(&rows[i], m->cfg.worker));
		snapshot_row_free(&rows[i]);
	}
	free(rows);
	*ret = a ? json_pack("{s:o}", "snapshots", a) : NULL;
	return *ret ? 0 : station_error_set(e, -ENOMEM, NULL, "out of memory");
}

int manager_snapshot_get(struct manager *m, const char *id, json_t **ret, struct station_error *e)
{
	struct snapshot_row row;
	int r = snapshot_lookup(m, id, &row, e);
	if (r < 0)
		return r;
	*ret = snapshot_to_json(&row, m->cfg.worker);
	snapshot_row_free(&row);
	return *ret ? 0 : station_error_set(e, -ENOMEM, NULL, "out of memory");
}

/* -EBUSY naming the workspaces made from snapshot id that still exist. */
static int snapshot_in_use(struct manager *m, const char *id, struct station_error *e)
{
	json_t *ids = json_array();
	for (struct workspace *ws = m->workspaces; ws && ids; ws = ws->next) {
		const char *s = json_string_value(json_object_get(ws->spec, "snapshot"));
		if (s && strcmp(s, id) == 0)
			json_array_append_new(ids, json_string(ws->row.id));
	}
	if (json_array_size(ids) == 0) {
		json_decref(ids);
		return 0;
	}
	_cleanup_free_ char *list = json_dumps(ids, JSON_COMPACT);
	json_decref(ids);
	return station_error_set(e, -EBUSY, NULL,
				 "snapshot \"%s\" is in use by workspaces %s made from it: delete "
				 "them first",
				 id, list ? list : "");
}

/* Whether another snapshot's row names the same image (identical content, one image). */
static bool snapshot_image_shared(struct manager *m, const char *image)
{
	struct snapshot_row *rows = NULL;
	size_t n = 0;
	bool shared = false;
	if (store_snapshot_list(m->store, &rows, &n) < 0)
		return true; /* not known: the image stays */
	for (size_t i = 0; i < n; i++) {
		shared |= strcmp(rows[i].image, image) == 0;
		snapshot_row_free(&rows[i]);
	}
	free(rows);
	return shared;
}

struct snapshot_removal {
	struct workspace_op *op;
	char id[SNAPSHOT_ID_MAX];
	char image[IMAGE_DIGEST_MAX];
};

/* The record is gone already: an image that stays (a workspace runs on it by digest) is a
 * plain image now, listed and removed like any other. */
static void snapshot_image_removed(void *userdata, int r, const struct station_error *e)
{
	struct snapshot_removal *x = userdata;
	if (r < 0)
		log_warn("snapshot deleted, its image kept", "snapshot", x->id, "image", x->image,
			 "error", e ? e->message : "", NULL);
	workspace_op_detached_end(x->op, 0, NULL, NULL);
	free(x);
}

int manager_snapshot_delete(struct manager *m, const char *id, workspace_op_fn fn, void *userdata,
			    struct workspace_op **ret_op, struct station_error *e)
{
	struct snapshot_row row;
	int r = snapshot_lookup(m, id, &row, e);
	if (r < 0)
		return r;
	r = snapshot_in_use(m, id, e);
	if (r >= 0 && (r = store_snapshot_delete(m->store, id)) < 0)
		station_error_set(e, r, NULL, "cannot delete snapshot \"%s\": %s", id,
				  strerror(-r));
	if (r < 0) {
		snapshot_row_free(&row);
		return r;
	}
	if (row.memory)
		checkpoint_dir_remove(m, row.id);
	manager_event_emit(m, MANAGER_EVENT_SNAPSHOT, "deleted", row.id, row.workspace_id,
			   row.tenant, NULL, NULL);
	log_info("snapshot deleted", "snapshot", row.id, "image", row.image, NULL);
	struct snapshot_removal *x = calloc(1, sizeof *x);
	struct workspace_op *op = workspace_op_detached(fn, userdata);
	*ret_op = op;
	struct station_error ie = {};
	if (!x || !op || snapshot_image_shared(m, row.image)) {
		free(x);
		snapshot_row_free(&row);
		if (op)
			workspace_op_detached_end(op, 0, NULL, NULL);
		return op ? 1 : 0;
	}
	*x = (struct snapshot_removal){ .op = op };
	snprintf(x->id, sizeof x->id, "%s", row.id);
	snprintf(x->image, sizeof x->image, "%s", row.image);
	snapshot_row_free(&row);
	/* as DELETE /v1/images does it: who asked checked, the files off the loop */
	if (manager_image_remove(m, x->image, snapshot_image_removed, x, NULL, &ie) < 0)
		snapshot_image_removed(x, ie.err, &ie);
	return 1;
}

int snapshot_image_in_use(struct manager *m, const char *digest, struct station_error *e)
{
	struct snapshot_row *rows = NULL;
	size_t n = 0;
	int r = store_snapshot_list(m->store, &rows, &n);
	if (r < 0)
		return station_error_set(e, r, NULL, "cannot read the snapshots: %s", strerror(-r));
	for (size_t i = 0; i < n; i++) {
		if (r >= 0 && strcmp(rows[i].image, digest) == 0)
			r = station_error_set(e, -EBUSY, NULL,
					      "image %s is snapshot \"%s\"'s: delete the snapshot "
					      "(DELETE /v1/snapshots/%s), which removes its image",
					      digest, rows[i].id, rows[i].id);
		snapshot_row_free(&rows[i]);
	}
	free(rows);
	return r;
}

/* ---- create from a snapshot ------------------------------------------------------------ */

int snapshot_spec_apply(struct manager *m, const struct workspace_spec *spec,
			struct workspace_spec *ret, char image_buf[SNAPSHOT_IMAGE_REF_MAX],
			struct station_error *e)
{
	struct snapshot_row row;
	int r = snapshot_lookup(m, spec->snapshot, &row, e);
	if (r < 0) {
		snprintf(e->field, sizeof e->field, "snapshot");
		return r;
	}
	const char *adapter = row.base_image[0] ? "container" : "host";
	if (spec->adapter && strcmp(spec->adapter, adapter) != 0)
		r = station_error_set(e, -EINVAL, "adapter",
				      "snapshot \"%s\" is of a %s workspace: it starts %s "
				      "workspaces only, not %s ones",
				      spec->snapshot, adapter, adapter, spec->adapter);
	else if (row.memory) /* docs/operations.md "Memory snapshots" */
		r = checkpoint_restore_check(m, row.id, e);
	else if (spec->image && !row.base_image[0])
		r = station_error_set(e, -EINVAL, "image",
				      "snapshot \"%s\" is of a host workspace, which has no "
				      "image: give the snapshot alone",
				      spec->snapshot);
	else if (spec->image && strcmp(ref_digest(spec->image), row.image) != 0)
		r = station_error_set(e, -EINVAL, "image",
				      "image %s is not snapshot \"%s\"'s image (%s): give the "
				      "snapshot alone",
				      spec->image, spec->snapshot, row.image);
	if (r >= 0) {
		snprintf(image_buf, SNAPSHOT_IMAGE_REF_MAX, "%s", row.image);
		*ret = *spec;
		ret->adapter = adapter;
		ret->image = image_buf; /* a host workspace's HOME is seeded from it */
	}
	snapshot_row_free(&row);
	return r;
}

/* ---- fork ------------------------------------------------------------------------------ */

/* The source's spec, kept for the creates (the source may change meanwhile). */
struct fork_job {
	struct manager *m;
	struct workspace_op *op;
	unsigned count;
	unsigned pending;    /* creates not ended, plus one while they are being started */
	const char *adapter; /* the source's: "container" or "host" (static) */
	char snapshot[SNAPSHOT_ID_MAX];
	char image[IMAGE_DIGEST_MAX];
	uint64_t paused_ms;
	json_t *spec;	     /* the source's, a copy */
	json_t *egress;	     /* a restricted source's policy */
	char *tenant;	     /* the source's */
	json_t **workspaces; /* count slots: each fork's JSON once ready */
	int r;		     /* the first failure */
	struct station_error e;
};

static void fork_job_free(struct fork_job *f)
{
	for (unsigned i = 0; f->workspaces && i < f->count; i++)
		json_decref(f->workspaces[i]);
	free(f->workspaces);
	json_decref(f->spec);
	json_decref(f->egress);
	free(f->tenant);
	free(f);
}

/* Every create ended: all made, or none kept (those made are deleted). */
static void fork_finish(struct fork_job *f)
{
	if (f->r < 0) {
		for (unsigned i = 0; i < f->count; i++) {
			const char *id = json_string_value(json_object_get(f->workspaces[i], "id"));
			struct workspace *ws = id ? workspace_find(f->m, id) : NULL;
			if (ws)
				workspace_delete_begin(ws);
		}
		workspace_op_detached_end(f->op, f->r, NULL, &f->e);
		fork_job_free(f);
		return;
	}
	json_t *a = json_array();
	for (unsigned i = 0; a && i < f->count; i++)
		json_array_append(a, f->workspaces[i]);
	json_t *o = a ? json_pack("{s:o,s:s,s:I}", "workspaces", a, "snapshot", f->snapshot,
				  "pausedMs", (json_int_t)f->paused_ms) :
			NULL;
	struct station_error e = {};
	if (!o)
		station_error_set(&e, -ENOMEM, NULL, "out of memory");
	log_info("workspace forked", "snapshot", f->snapshot, NULL);
	if (o)
		metrics_fork_done(f->m, f->count);
	workspace_op_detached_end(f->op, o ? 0 : -ENOMEM, o, &e);
	json_decref(o);
	fork_job_free(f);
}

struct fork_slot {
	struct fork_job *f;
	unsigned i;
};

static void fork_fail(struct fork_job *f, int r, const struct station_error *e)
{
	if (f->r < 0)
		return;
	f->r = r < 0 ? r : -EIO;
	if (e)
		f->e = *e;
	else
		station_error_set(&f->e, f->r, NULL, "a fork failed: %s", strerror(-f->r));
}

static void fork_create_done(void *userdata, int r, json_t *result, const struct station_error *e)
{
	struct fork_slot *s = userdata;
	struct fork_job *f = s->f;
	if (r >= 0)
		f->workspaces[s->i] = json_incref(result);
	else
		fork_fail(f, r, e);
	free(s);
	if (--f->pending == 0)
		fork_finish(f);
}

/* The source's spec for a fork: the same limits, network, env, tenant; the snapshot's image. */
static struct workspace_spec fork_spec(const struct fork_job *f)
{
	json_t *s = f->spec;
	const char *idle = json_string_value(json_object_get(s, "idleAction"));
	return (struct workspace_spec){
		.adapter = f->adapter,
		.env = json_object_get(s, "env"),
		.image = f->image,
		.seccomp_profile = json_string_value(json_object_get(s, "seccompProfile")),
		.network = json_string_value(json_object_get(s, "network")),
		.egress = f->egress,
		.cpus = json_number_value(json_object_get(s, "cpus")),
		.memory_mb = (uint64_t)json_integer_value(json_object_get(s, "memoryMb")),
		.pids_limit = (uint64_t)json_integer_value(json_object_get(s, "pidsLimit")),
		.idle_timeout_ms =
			(uint64_t)json_integer_value(json_object_get(s, "idleTimeoutMs")),
		.tenant = f->tenant,
		.snapshot = f->snapshot,
		.auto_resume = json_is_true(json_object_get(s, "autoResume")),
		.idle_action = idle && strcmp(idle, "pause") == 0 ? IDLE_ACTION_PAUSE :
								    IDLE_ACTION_STOP,
	};
}

static void fork_snapshot_done(struct snapshot_job *j, int r, json_t *snapshot,
			       const struct station_error *e)
{
	struct fork_job *f = j->userdata;
	if (r < 0) {
		workspace_op_detached_end(f->op, r, NULL, e);
		fork_job_free(f);
		return;
	}
	snprintf(f->snapshot, sizeof f->snapshot, "%s", j->id);
	snprintf(f->image, sizeof f->image, "%s", j->image);
	f->paused_ms = j->paused_ms;
	const struct workspace_spec spec = fork_spec(f);
	f->pending = f->count + 1; /* a create may end before workspace_make() returns */
	for (unsigned i = 0; i < f->count; i++) {
		struct station_error ce = {};
		struct fork_slot *s = calloc(1, sizeof *s);
		int k = s ? 0 : station_error_set(&ce, -ENOMEM, NULL, "out of memory");
		if (s)
			*s = (struct fork_slot){ .f = f, .i = i };
		if (k >= 0 && f->r >= 0)
			k = workspace_make(f->m, &spec, NULL, NULL, fork_create_done, s, NULL, &ce);
		else if (k >= 0) /* an earlier one failed: the rest are not made */
			k = -ECANCELED;
		if (k < 0) { /* never called back */
			free(s);
			fork_fail(f, k, k == -ECANCELED ? NULL : &ce);
			f->pending--;
		}
	}
	if (--f->pending == 0)
		fork_finish(f);
}

static int fork_check(struct manager *m, unsigned count, struct station_error *e)
{
	if (count < 1 || count > FORK_MAX)
		return station_error_set(e, -EINVAL, "count", "field \"count\" must be 1 to %d",
					 FORK_MAX);
	size_t have = m->n_workspaces - m->n_pool_members;
	if (have + count > m->cfg.max_workspaces)
		return station_error_set(e, -EAGAIN, NULL,
					 "a fork of %u would pass this worker's limit of %zu "
					 "workspaces (%zu now)",
					 count, m->cfg.max_workspaces, have);
	if (!m->base_cgroup)
		return station_error_set(e, m->cgroup_error, NULL, "cgroups are unavailable: %s",
					 strerror(-m->cgroup_error));
	return 0;
}

int manager_workspace_fork(struct manager *m, const char *id, unsigned count, workspace_op_fn fn,
			   void *userdata, struct workspace_op **ret_op, struct station_error *e)
{
	struct workspace *ws = NULL;
	int r = workspace_lookup(m, id, &ws, e);
	if (r >= 0)
		r = fork_check(m, count, e);
	if (r < 0)
		return r;
	struct fork_job *f = calloc(1, sizeof *f);
	if (!f)
		return station_error_set(e, -ENOMEM, NULL, "out of memory");
	*f = (struct fork_job){ .m = m, .count = count, .adapter = ws->adapter->name };
	f->workspaces = calloc(count, sizeof *f->workspaces);
	f->spec = json_deep_copy(ws->spec);
	f->tenant = strdup(ws->row.tenant ? ws->row.tenant : "");
	if (ws->net_mode == NET_RESTRICTED && ws->net_policy)
		f->egress = net_policy_to_json(ws->net_policy);
	f->op = workspace_op_detached(fn, userdata);
	if (!f->workspaces || !f->spec || !f->tenant || !f->op) {
		free(f->op);
		fork_job_free(f);
		return station_error_set(e, -ENOMEM, NULL, "out of memory");
	}
	*ret_op = f->op;
	r = snapshot_begin(m, ws, &(struct snapshot_spec){ 0 }, fork_snapshot_done, f, e);
	if (r < 0) {
		*ret_op = NULL;
		manager_workspace_op_forget(f->op);
		workspace_op_detached_end(f->op, r, NULL, e);
		fork_job_free(f);
		return r;
	}
	return 1;
}
