/* SPDX-License-Identifier: MIT */
/* The adapters' worker-wide pieces (runtime, image store) and the image API. */

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "adapter/adapter.h"
#include "basic/cleanup.h"
#include "basic/list.h"
#include "basic/log.h"
#include "basic/safe-fs.h"
#include "basic/util.h"
#include "event/event.h"
#include "event/work.h"
#include "image/image.h"
#include "manager-internal.h"

/* <root>/ca-certificates.crt, what host workspaces trust (adapter/ca-bundle.h): the host's
 * trust store as it is at start, then the operator's CAs. The host's store itself is left as
 * it is: the controller's and the host's other programs keep trusting what they trusted. */
static void host_ca_bundle_init(struct manager *m)
{
	_cleanup_free_ char *store = NULL, *bundle = NULL, *path = NULL;
	size_t store_len = 0, len = 0;
	if (!m->cfg.workspace_ca_pem || asprintf(&path, "%s/ca-certificates.crt", m->cfg.root) < 0)
		return;
	int r = ca_host_store(&store, &store_len);
	if (r >= 0)
		r = ca_bundle_join(store, store_len, m->cfg.workspace_ca_pem,
				   m->cfg.workspace_ca_len, &bundle, &len);
	if (r >= 0)
		r = write_file_atomic(path, bundle, len, 0644);
	if (r < 0) {
		log_error("cannot write the host workspaces' CA bundle", "path", path, "error",
			  strerror(-r), NULL);
		return;
	}
	if (!store)
		log_warn("no trust store on this host: host workspaces trust the --workspace-ca "
			 "certificates only",
			 NULL);
	m->actx.host_ca_bundle = TAKE_PTR(path); /* manager_free() frees it */
}

void manager_adapters_init(struct manager *m)
{
	struct station_error e = { 0 };
	m->actx = (struct adapter_context){
		.root = m->cfg.root,
		.agent_path = m->cfg.agent_path,
		.kernel_dir = m->cfg.kernel_dir,
		.default_image = m->cfg.default_image,
		.default_seccomp = m->cfg.default_seccomp,
		.seccomp_dirs = m->cfg.seccomp_dirs,
		.id_base = m->cfg.id_base,
		.host_user_set = m->cfg.host_user_set,
		.host_uid = m->cfg.host_uid,
		.host_gid = m->cfg.host_gid,
		.ca_pem = m->cfg.workspace_ca_pem,
		.ca_pem_len = m->cfg.workspace_ca_len,
	};
	host_ca_bundle_init(m);
	if (adapter_runtime_open(&m->actx, m->cfg.runtime, &e) < 0)
		log_warn("container runtime unavailable", "runtime", m->cfg.runtime, "error",
			 e.message, NULL);
	else
		adapter_runtime_set_timeout(&m->actx, m->cfg.runtime_timeout_ms);
	e = (struct station_error){ 0 };
	if (image_store_open(m->cfg.root, &m->actx.images, &e) < 0)
		log_warn("image store unavailable", "error", e.message, NULL);
	else
		image_store_set_limits(m->actx.images, &m->cfg.image_limits);
}

/* --- owners: who imported or pulled an image (docs/security.md, "The tenant boundary") --- */

struct image_owners {
	struct image_owner_row *rows;
	size_t n;
};

static void image_owners_done(struct image_owners *o)
{
	for (size_t i = 0; i < o->n; i++)
		image_owner_row_free(&o->rows[i]);
	free(o->rows);
	*o = (struct image_owners){ 0 };
}

static int image_owners_load(struct manager *m, struct image_owners *ret)
{
	*ret = (struct image_owners){ 0 };
	return store_image_owner_list(m->store, &ret->rows, &ret->n);
}

/* The tenant digest is recorded as: "" the operator's (no rows, or a row of the operator's);
 * else the viewer's own row, or (no viewer) the first tenant's. NULL: the viewer does not see
 * it. */
static const char *image_owner(const struct manager *m, const struct image_owners *o,
			       const char *digest)
{
	const char *first = NULL;
	bool any = false;

	for (size_t i = 0; i < o->n; i++) {
		if (strcmp(o->rows[i].digest, digest) != 0)
			continue;
		any = true;
		if (!o->rows[i].tenant[0])
			return "";
		if (m->viewer && strcmp(o->rows[i].tenant, m->viewer) == 0)
			return m->viewer;
		if (!first)
			first = o->rows[i].tenant;
	}
	if (!any)
		return "";
	return m->viewer ? NULL : first;
}

/* Whether the viewer sees the image this reference names (an unparsable one: yes, the lookup
 * says what is wrong with it). */
bool manager_image_visible(struct manager *m, const char *ref)
{
	struct image_owners o;
	struct image_ref parsed;
	bool seen;

	if (!m->viewer || image_ref_parse(ref, &parsed, NULL) < 0)
		return true;
	if (image_owners_load(m, &o) < 0)
		return false;
	seen = image_owner(m, &o, parsed.digest) != NULL;
	image_owners_done(&o);
	return seen;
}

static json_t *image_to_json(struct manager *m, const struct image *img, const char *owner)
{
	char ref[IMAGE_NAME_MAX + IMAGE_DIGEST_MAX + 2];
	snprintf(ref, sizeof ref, "%s%s%s", img->name ? img->name : "", img->name ? "@" : "",
		 img->digest);
	json_t *env = json_array(), *used = json_array();
	for (size_t i = 0; img->config.env && img->config.env[i]; i++)
		json_array_append_new(env, json_string(img->config.env[i]));
	for (struct workspace *ws = m->workspaces; ws; ws = ws->next) {
		if (ws->pool || !workspace_visible(m, ws)) /* unclaimed pool members go with it */
			continue;
		const char *wi = json_string_value(json_object_get(ws->spec, "image"));
		const char *at = wi ? strrchr(wi, '@') : NULL;
		if (wi && strcmp(at ? at + 1 : wi, img->digest) == 0)
			json_array_append_new(used, json_string(ws->row.id));
	}
	json_t *o = json_pack("{s:s,s:s?,s:s,s:I,s:I,s:{s:s?,s:o,s:s?},s:o}", "digest", img->digest,
			      "name", img->name, "reference", ref, "size", (json_int_t)img->size,
			      "layers", (json_int_t)img->n_layers, "config", "user",
			      img->config.user, "env", env, "workdir", img->config.workdir,
			      "usedBy", used);
	if (o) {
		json_set_time(o, "createdAt", img->created);
		json_object_set_new(o, "tenant",
				    owner && owner[0] ? json_string(owner) : json_null());
	}
	return o;
}

/* What the client sent was wrong (a bad layout, a digest mismatch, a refused layer entry, a
 * missing path): 400. An image past the worker's limits: 413. The store's own failures keep
 * their errno. */
static int image_error(int r, const char *field, struct station_error *e)
{
	static const int client_errors[] = { -EBADMSG, -EPERM,	-ENOENT, -ENOTDIR,
					     -EINVAL,  -EPROTO, -ENOTSUP };
	if (r == -EFBIG && e) {
		e->err = -E2BIG;
		return -E2BIG;
	}
	for (size_t i = 0; i < ELEMENTSOF(client_errors); i++)
		if (r == client_errors[i] && e && e->err != -EHOSTDOWN) {
			e->err = -EINVAL;
			if (!e->field[0])
				snprintf(e->field, sizeof e->field, "%s", field);
			return -EINVAL;
		}
	return r;
}

static int images_available(struct manager *m, struct station_error *e)
{
	if (!m->actx.images)
		return station_error_set(e, -EHOSTDOWN, NULL, "the image store is unavailable");
	return 0;
}

/* ---- import paths ----------------------------------------------------------------------- */

/* The configured directory path lies beneath, and the rest of path; NULL when none. */
static const char *import_dir_match(struct manager *m, const char *path, const char **ret_rel)
{
	for (size_t i = 0; i < m->cfg.n_import_dirs; i++) {
		const char *dir = m->cfg.import_dirs[i];
		size_t n = strlen(dir);

		while (n > 1 && dir[n - 1] == '/')
			n--;
		if (n == 1 && dir[0] == '/')
			n = 0;
		if (strncmp(path, dir, n) != 0 || (path[n] != '/' && path[n] != '\0'))
			continue;
		path += n;
		path += strspn(path, "/");
		*ret_rel = *path ? path : ".";
		return dir;
	}
	return NULL;
}

static void import_dirs_list(struct manager *m, char *buf, size_t size)
{
	size_t used = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < m->cfg.n_import_dirs && used < size; i++)
		used += snprintf(buf + used, size - used, "%s%s", i ? ", " : "",
				 m->cfg.import_dirs[i]);
}

/* Opens the layout at path for reading, resolved beneath its import directory's fd without
 * following any symlink or leaving it through "..". */
static int import_path_open(struct manager *m, const char *path, int *ret, struct station_error *e)
{
	_cleanup_close_ int dfd = -1, fd = -1;
	const char *dir, *rel = NULL;
	char dirs[512], proc[64];
	struct stat st;

	if (m->cfg.n_import_dirs == 0)
		return station_error_set(e, -EINVAL, "path",
					 "importing an image from a path is not enabled on this "
					 "worker: start station-sandboxd with --import-dir DIR and "
					 "put the layout beneath DIR (or pull the image from a "
					 "registry)");
	dir = import_dir_match(m, path, &rel);
	if (!dir) {
		import_dirs_list(m, dirs, sizeof dirs);
		return station_error_set(e, -EINVAL, "path",
					 "layout \"%s\" is not beneath an import directory of this "
					 "worker (--import-dir: %s)",
					 path, dirs);
	}
	dfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return station_error_set(e, negative_errno(), NULL,
					 "import directory \"%s\": cannot open: %m", dir);
	fd = safe_openat(dfd, rel, O_PATH, 0, SAFE_BENEATH);
	if (fd < 0)
		errno = -fd;
	if (fd < 0 && errno == ELOOP)
		return station_error_set(e, -EINVAL, "path",
					 "layout \"%s\": goes through a symlink, which is not "
					 "followed beneath import directory %s",
					 path, dir);
	if (fd < 0 && errno == EXDEV)
		return station_error_set(e, -EINVAL, "path",
					 "layout \"%s\": leaves import directory %s", path, dir);
	if (fd < 0)
		return station_error_set(e, errno == ENOTDIR ? -ENOENT : negative_errno(), "path",
					 "layout \"%s\": %m", path);
	if (fstat(fd, &st) < 0)
		return negative_errno();
	if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode))
		return station_error_set(e, -EINVAL, "path",
					 "layout \"%s\": neither a directory nor a tar", path);
	/* The file just checked, now open for reading (no FIFO or device can be it). */
	snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
	*ret = open(proc, O_RDONLY | O_CLOEXEC);
	if (*ret < 0)
		return station_error_set(e, negative_errno(), NULL,
					 "layout \"%s\": cannot open: %m", path);
	return 0;
}

/* ---- jobs: import and pull in a child process ---------------------------------------------
 *
 * Why a process and not a thread: the layout or registry is hostile input, parsed by
 * libarchive, zlib, zstd, jansson and libcurl; in a child, a bug there cannot corrupt or crash
 * the controller, and the child can be killed at shutdown without leaving a thread holding the
 * loop's memory. Why a fresh program and not a fork of this one: the controller has threads
 * (its pools, the fleet's calls), and a lock one of them held at the fork (the allocator's,
 * libcurl's, OpenSSL's) stays held for ever in a forked copy, so a child that allocates or
 * pulls could hang at its first call; the child therefore only moves its two fds into place
 * and executes this binary again (/proc/self/exe: the running binary, even when an upgrade
 * replaced the file) as `station-sandboxd --image-job REQUEST` (manager_image_job_main()).
 * What runs where: the child opens its own image store (its own images/lock open file
 * description, so flock() excludes it from other jobs and from the loop's removals) and does
 * every write of the import there, under images/lock, rolled back on failure. It touches
 * nothing else: not the SQLite store, not the loop, not an HTTP connection (every other fd is
 * closed). It reports one line of JSON on a pipe: the image's digest, or the error. The loop
 * then reads the image's record (written atomically, last) to answer. Two jobs for the same
 * digest run one after the other under the lock; the second finds the image there. */

/* The fds of an image job's program: the layout (an import; absent for a pull) and the pipe
 * of its report. */
#define JOB_LAYOUT_FD 3
#define JOB_OUT_FD 4

struct image_job {
	struct manager *m;
	struct image_job *next;
	pid_t pid;
	int fd; /* the result pipe */
	struct event_source *watch;
	char out[1024];
	size_t out_len;
	const char *field; /* the request field an error is about */
	char what[IMAGE_NAME_MAX + 64];
	image_job_done_fn done;
	void *userdata;
	char tenant[MANAGER_TENANT_MAX + 1]; /* who asked: "" the operator */
	bool existed;			     /* the image was stored before */
};

struct job_request {
	int layout_fd; /* import: the layout, open for reading; -1 for a pull */
	const char *path, *name;
	const char *ref, *registry;
	bool plain_http;
};

static void job_result_write(int fd, int r, const struct image *img, const struct station_error *e)
{
	json_t *o = json_pack("{s:i,s:s,s:s,s:s}", "r", r, "digest", img ? img->digest : "",
			      "field", e->field, "message", e->message);
	_cleanup_free_ char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;

	json_decref(o);
	if (text)
		(void)write_all(fd, text, strlen(text));
}

/* The request as the job's program reads it: everything it needs, since it shares no memory
 * with the controller. */
static char *job_request_encode(struct manager *m, const struct job_request *jr)
{
	const struct image_limits *l = &m->cfg.image_limits;
	json_t *o = json_pack("{s:s,s:s?,s:s?,s:s?,s:s?,s:b,s:b,s:{s:I,s:I,s:I}}", "root",
			      m->cfg.root, "path", jr->path, "name", jr->name, "ref", jr->ref,
			      "registry", jr->registry, "plainHttp", jr->plain_http, "layout",
			      jr->layout_fd >= 0, "limits", "layerBytes",
			      (json_int_t)l->max_layer_bytes, "imageBytes",
			      (json_int_t)l->max_image_bytes, "imageEntries",
			      (json_int_t)l->max_image_entries);
	char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;

	json_decref(o);
	return text;
}

/* Between fork() and execve(): async-signal-safe calls only (see above). */
static _Noreturn void job_child(int out, int layout_fd, char *const argv[])
{
	sigset_t none;

	(void)prctl(PR_SET_PDEATHSIG, SIGKILL);
	/* out and layout_fd are above JOB_OUT_FD (fcntl F_DUPFD_CLOEXEC in job_start), so
	 * neither dup2() below overwrites the other's source. */
	if (dup2(out, JOB_OUT_FD) < 0 || (layout_fd >= 0 && dup2(layout_fd, JOB_LAYOUT_FD) < 0))
		_exit(127);
	close_all_fds_except((const int[]){ JOB_LAYOUT_FD, JOB_OUT_FD }, 2);
	signals_reset_for_exec();
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL); /* the loop's signalfd signals were blocked */
	execv("/proc/self/exe", argv);
	_exit(127);
}

int manager_image_job_main(const char *request)
{
	json_t *o = json_loads(request, 0, NULL);
	json_t *limits = json_object_get(o, "limits");
	const char *root = json_string_value(json_object_get(o, "root"));
	const char *path = json_string_value(json_object_get(o, "path"));
	const char *name = json_string_value(json_object_get(o, "name"));
	struct image_limits l = {
		.max_layer_bytes =
			(uint64_t)json_integer_value(json_object_get(limits, "layerBytes")),
		.max_image_bytes =
			(uint64_t)json_integer_value(json_object_get(limits, "imageBytes")),
		.max_image_entries =
			(uint64_t)json_integer_value(json_object_get(limits, "imageEntries")),
	};
	struct station_error e = {};
	struct image_store *s = NULL;
	struct image *img = NULL;
	int r = root ? image_store_open(root, &s, &e) : -EINVAL;

	if (r >= 0) {
		image_store_set_limits(s, &l);
		if (json_is_true(json_object_get(o, "layout"))) {
			r = image_import_layout_fd(s, JOB_LAYOUT_FD, path ? path : "", name, &img,
						   &e);
		} else {
			struct image_pull_options po = {
				.registry = json_string_value(json_object_get(o, "registry")),
				.plain_http = json_is_true(json_object_get(o, "plainHttp")),
			};
			const char *ref = json_string_value(json_object_get(o, "ref"));
			r = ref ? image_pull(s, ref, &po, &img, &e) : -EINVAL;
		}
	}
	if (r < 0 && !e.message[0])
		station_error_set(&e, r, NULL, "%s", strerror(-r));
	job_result_write(JOB_OUT_FD, r, r >= 0 ? img : NULL, &e);
	image_free(img);
	image_store_close(s);
	json_decref(o);
	return r < 0 ? 1 : 0;
}

static void job_unlink(struct image_job *j)
{
	struct manager *m = j->m;

	for (struct image_job **p = &m->image_jobs; *p; p = &(*p)->next)
		if (*p == j) {
			*p = j->next;
			m->n_image_jobs--;
			break;
		}
}

static void job_free(struct image_job *j)
{
	event_source_free(j->watch);
	if (j->fd >= 0)
		close(j->fd);
	free(j);
}

/* The child's report, or why there is none. */
static int job_result(struct image_job *j, int status, char *digest, struct station_error *e)
{
	json_t *o = json_loadb(j->out, j->out_len, 0, NULL);
	const char *d = json_string_value(json_object_get(o, "digest"));
	const char *field = json_string_value(json_object_get(o, "field"));
	const char *message = json_string_value(json_object_get(o, "message"));
	json_t *rv = json_object_get(o, "r");
	int r;

	if (!json_is_integer(rv)) {
		json_decref(o);
		if (WIFSIGNALED(status))
			return station_error_set(e, -EIO, NULL,
						 "%s: the import process was killed by signal %d",
						 j->what, WTERMSIG(status));
		return station_error_set(e, -EIO, NULL,
					 "%s: the import process ended (status %d) without a "
					 "result",
					 j->what, WIFEXITED(status) ? WEXITSTATUS(status) : -1);
	}
	r = (int)json_integer_value(rv);
	if (r < 0) {
		station_error_set(e, r, field && *field ? field : NULL, "%s",
				  message && *message ? message : strerror(-r));
	} else if (!d || !image_digest_is_valid(d)) {
		r = station_error_set(e, -EIO, NULL, "%s: the import process gave no image",
				      j->what);
	} else {
		snprintf(digest, IMAGE_DIGEST_MAX, "%s", d);
	}
	json_decref(o);
	return r;
}

/* Records who asked for the image. An image stored before with no owner is the operator's:
 * that is recorded first, so a tenant's pull of it does not make it the tenant's alone. */
static int image_owner_record(struct image_job *j, const struct image *img, struct station_error *e)
{
	struct manager *m = j->m;
	struct image_owners o;
	bool owned = false;
	int r = 0;

	if (j->tenant[0] && j->existed) {
		r = image_owners_load(m, &o);
		for (size_t i = 0; r >= 0 && i < o.n && !owned; i++)
			owned = strcmp(o.rows[i].digest, img->digest) == 0;
		if (r >= 0)
			image_owners_done(&o);
		if (r >= 0 && !owned)
			r = store_image_owner_add(m->store, img->digest, "");
	}
	if (r >= 0)
		r = store_image_owner_add(m->store, img->digest, j->tenant);
	if (r < 0)
		return station_error_set(e, r, NULL,
					 "image %s is stored but its owner was not "
					 "recorded: %s",
					 img->digest, strerror(-r));
	return 0;
}

static void job_finish(struct image_job *j)
{
	struct station_error e = {};
	char digest[IMAGE_DIGEST_MAX] = "";
	struct image *img = NULL;
	json_t *image = NULL;
	int status = 0, r;

	while (waitpid(j->pid, &status, 0) < 0 && errno == EINTR)
		;
	job_unlink(j);
	r = job_result(j, status, digest, &e);
	if (r >= 0)
		r = image_lookup(j->m->actx.images, digest, &img, &e);
	if (r >= 0)
		r = image_owner_record(j, img, &e);
	if (r >= 0) {
		log_info("image stored", "digest", img->digest, "from", j->what, "tenant",
			 j->tenant, NULL);
		manager_ready_kick(j->m); /* the default image may be there now */
		const char *viewer = j->m->viewer;
		j->m->viewer = j->tenant[0] ? j->tenant : NULL; /* the answer is for who asked */
		image = image_to_json(j->m, img, j->tenant);
		j->m->viewer = viewer;
		image_free(img);
	} else if (img) {
		image_free(img);
	} else {
		r = image_error(r, j->field, &e);
		log_info("image import failed", "from", j->what, "error", e.message, NULL);
	}
	if (j->done)
		j->done(j->userdata, r, image, &e);
	else
		json_decref(image);
	job_free(j);
}

static int on_job_output(struct event_source *s, int fd, uint32_t revents, void *userdata)
{
	struct image_job *j = userdata;
	ssize_t n;

	for (;;) {
		char *at = j->out + j->out_len;
		size_t room = sizeof j->out - j->out_len;
		char sink[256];

		n = read(fd, room ? at : sink, room ? room : sizeof sink);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return 0;
		if (n <= 0)
			break;
		if (room)
			j->out_len += n;
	}
	job_finish(j);
	return 0;
}

static int job_start(struct manager *m, const struct job_request *jr, const char *field,
		     image_job_done_fn done, void *userdata, struct image_job **ret,
		     struct station_error *e)
{
	_cleanup_free_ struct image_job *j = NULL;
	_cleanup_free_ char *request = NULL;
	_cleanup_close_ int out = -1, layout = -1;
	int p[2], r;

	if (m->n_image_jobs >= MANAGER_MAX_IMAGE_JOBS)
		return station_error_set(
			e, -EAGAIN, NULL,
			"%zu image imports and pulls are in progress, the most "
			"this worker runs at once; try again when one has finished",
			m->n_image_jobs);
	j = calloc(1, sizeof *j);
	if (!j)
		return -ENOMEM;
	*j = (struct image_job){ .m = m,
				 .fd = -1,
				 .field = field,
				 .done = done,
				 .userdata = userdata };
	snprintf(j->tenant, sizeof j->tenant, "%s", m->viewer ? m->viewer : "");
	if (jr->ref) {
		struct image *img = NULL;
		j->existed = image_lookup(m->actx.images, jr->ref, &img, NULL) >= 0;
		image_free(img);
	}
	if (jr->layout_fd >= 0)
		snprintf(j->what, sizeof j->what, "layout \"%s\"", jr->path);
	else
		snprintf(j->what, sizeof j->what, "%s", jr->ref);
	request = job_request_encode(m, jr);
	if (!request)
		return -ENOMEM;
	char *argv[] = { (char *)"station-sandboxd", (char *)"--image-job", request, NULL };
	if (pipe2(p, O_CLOEXEC) < 0)
		return station_error_set(e, negative_errno(), NULL, "cannot start the import: %m");
	/* Both fds the child moves into place, above the numbers they go to. */
	out = fcntl(p[1], F_DUPFD_CLOEXEC, JOB_OUT_FD + 1);
	layout = jr->layout_fd < 0 ? -1 : fcntl(jr->layout_fd, F_DUPFD_CLOEXEC, JOB_OUT_FD + 1);
	close(p[1]);
	if (out < 0 || (jr->layout_fd >= 0 && layout < 0)) {
		r = negative_errno();
		close(p[0]);
		return station_error_set(e, r, NULL, "cannot start the import: %s", strerror(-r));
	}
	j->pid = fork();
	if (j->pid == 0)
		job_child(out, layout, argv);
	if (j->pid < 0) {
		r = negative_errno();
		close(p[0]);
		return station_error_set(e, r, NULL, "cannot start the import: %s", strerror(-r));
	}
	j->fd = p[0];
	(void)fcntl(j->fd, F_SETFL, O_NONBLOCK);
	r = event_add_io(m->loop, &j->watch, j->fd, EPOLLIN, on_job_output, j);
	if (r < 0) {
		kill(j->pid, SIGKILL);
		waitpid(j->pid, NULL, 0);
		job_free(TAKE_PTR(j));
		return station_error_set(e, r, NULL, "cannot start the import: %s", strerror(-r));
	}
	j->next = m->image_jobs;
	m->image_jobs = j;
	m->n_image_jobs++;
	if (ret)
		*ret = j;
	TAKE_PTR(j);
	return 0;
}

int manager_image_import(struct manager *m, const char *path, const char *name,
			 image_job_done_fn done, void *userdata, struct image_job **ret,
			 struct station_error *e)
{
	_cleanup_close_ int fd = -1;
	struct job_request jr = { .layout_fd = -1, .path = path, .name = name };
	int r = images_available(m, e);

	if (r >= 0)
		r = import_path_open(m, path, &fd, e);
	if (r < 0)
		return image_error(r, "path", e);
	jr.layout_fd = fd;
	return job_start(m, &jr, "path", done, userdata, ret, e);
}

int manager_image_pull(struct manager *m, const char *ref, const char *registry, bool plain_http,
		       image_job_done_fn done, void *userdata, struct image_job **ret,
		       struct station_error *e)
{
	struct job_request jr = { .layout_fd = -1,
				  .ref = ref,
				  .registry = registry,
				  .plain_http = plain_http };
	struct image_ref parsed;
	int r = images_available(m, e);

	if (r >= 0)
		r = image_ref_parse(ref, &parsed, e);
	if (r < 0)
		return image_error(r, "reference", e);
	return job_start(m, &jr, "reference", done, userdata, ret, e);
}

void manager_image_job_forget(struct image_job *j)
{
	if (j)
		j->done = NULL;
}

void manager_image_jobs_free(struct manager *m)
{
	while (m->image_jobs) {
		struct image_job *j = m->image_jobs;

		m->image_jobs = j->next;
		kill(j->pid, SIGKILL);
		while (waitpid(j->pid, NULL, 0) < 0 && errno == EINTR)
			;
		job_free(j);
	}
	m->n_image_jobs = 0;
}

int manager_image_list(struct manager *m, json_t **ret, struct station_error *e)
{
	struct image *imgs = NULL;
	size_t n = 0;
	int r = images_available(m, e);
	if (r >= 0)
		r = image_list(m->actx.images, &imgs, &n);
	if (r < 0)
		return station_error_set(e, r, NULL, "cannot list images: %s", strerror(-r));
	struct image_owners o;
	r = image_owners_load(m, &o);
	if (r < 0) {
		image_free_array(imgs, n);
		return station_error_set(e, r, NULL, "cannot list images: %s", strerror(-r));
	}
	json_t *a = json_array();
	for (size_t i = 0; i < n; i++) {
		const char *owner = image_owner(m, &o, imgs[i].digest);
		if (owner)
			json_array_append_new(a, image_to_json(m, &imgs[i], owner));
	}
	image_owners_done(&o);
	image_free_array(imgs, n);
	*ret = json_pack("{s:o}", "images", a);
	return 0;
}

/* ---- removal: the loop decides, a worker thread removes ------------------------------------
 *
 * DELETE looks the image up and removes its files on a worker thread (a large image is many
 * files, and the store's filesystem may stall). In between, on the loop and in one step: the
 * tenant's right to it, whether a workspace uses it (one being created included: its request
 * may name the image by its index digest, or not at all for the default image), whether it is
 * already being removed; then it is marked: from here until the removal ends, a create naming
 * it is refused (409) and no pool member of it is claimed (they are torn down). The worker
 * opens a store handle of its own, so images/lock (flock) excludes it from imports, pulls and
 * other removals like any other holder. */

struct image_removal {
	struct manager *m;
	struct image_removal *prev, *next;
	struct event_work_pool *pool;
	char ref[IMAGE_NAME_MAX + IMAGE_DIGEST_MAX + 2];
	char digest[IMAGE_DIGEST_MAX];	     /* the image's, once looked up */
	char index_digest[IMAGE_DIGEST_MAX]; /* "" when none */
	bool marked;			     /* creates and claims of it are refused */
	bool gone;			     /* its record is gone: the image is */
	bool viewer_set;
	char tenant[MANAGER_TENANT_MAX + 1]; /* who asked (viewer_set), for the checks */
	image_remove_done_fn done;
	void *userdata;
	int r;
	struct station_error e;
};

/* The digest part of a reference ("name@sha256:…" or "sha256:…"). */
static const char *ref_digest(const char *ref)
{
	const char *at = ref ? strrchr(ref, '@') : NULL;
	return at ? at + 1 : ref;
}

/* Whether the workspace's spec names the image (digest, or the index digest it was imported
 * through); a spec without an image is the default image's. */
static bool spec_names_image(struct manager *m, json_t *spec, const char *digest,
			     const char *index_digest)
{
	const char *image = json_string_value(json_object_get(spec, "image"));
	const char *d = ref_digest(image ? image : m->cfg.default_image);
	return d && ((digest[0] && strcmp(d, digest) == 0) ||
		     (index_digest[0] && strcmp(d, index_digest) == 0));
}

const char *manager_image_removing(struct manager *m, const char *ref)
{
	const char *d = ref_digest(ref ? ref : m->cfg.default_image);
	if (!d)
		return NULL;
	for (struct image_removal *x = m->image_removals; x; x = x->next)
		if (x->marked && (strcmp(d, x->digest) == 0 ||
				  (x->index_digest[0] && strcmp(d, x->index_digest) == 0)))
			return x->digest;
	return NULL;
}

/* A tenant removes only an image it alone recorded; another tenant's is missing to it. */
static int image_remove_check(struct manager *m, const struct image_owners *o, const char *digest,
			      const char *ref, struct station_error *e)
{
	const char *owner = image_owner(m, o, digest);
	bool shared = false;

	if (!owner)
		return image_error_not_in_store(ref, e);
	for (size_t i = 0; i < o->n; i++)
		if (strcmp(o->rows[i].digest, digest) == 0 &&
		    strcmp(o->rows[i].tenant, m->viewer) != 0)
			shared = true;
	if (!owner[0] || shared)
		return station_error_set(
			e, STATION_EFORBIDDEN, NULL,
			"image %s is the operator's or shared with another tenant: "
			"only an admin token removes it",
			digest);
	return 0;
}

/* -EBUSY naming the workspaces that use the image (those the viewer sees by id), or 0. */
static int image_in_use(struct manager *m, const struct image_removal *x, struct station_error *e)
{
	json_t *ids = json_array();
	size_t others = 0;

	for (struct workspace *ws = m->workspaces; ws; ws = ws->next) {
		if (ws->pool || !spec_names_image(m, ws->spec, x->digest, x->index_digest))
			continue; /* unclaimed pool members go with it */
		if (workspace_visible(m, ws))
			json_array_append_new(ids, json_string(ws->row.id));
		else
			others++;
	}
	if (json_array_size(ids) == 0 && others == 0) {
		json_decref(ids);
		return 0;
	}
	_cleanup_free_ char *list = json_dumps(ids, JSON_COMPACT);
	json_decref(ids);
	if (others)
		return station_error_set(e, -EBUSY, NULL,
					 "image %s is used by workspaces %s and %zu other%s",
					 x->digest, list ? list : "", others,
					 others > 1 ? "s" : "");
	return station_error_set(e, -EBUSY, NULL, "image %s is used by workspaces %s", x->digest,
				 list ? list : "");
}

/* On the loop, between the lookup and the files: may it go, and if so mark it. */
static void removal_claim_on_loop(void *userdata)
{
	struct image_removal *x = userdata;
	struct manager *m = x->m;
	struct image_owners owners = { 0 };
	const char *viewer = m->viewer;
	int r = 0;

	m->viewer = x->viewer_set ? x->tenant : NULL; /* the checks are for who asked */
	/* a tenant: another tenant's image answers as a missing one */
	if (m->viewer && (r = image_owners_load(m, &owners)) < 0)
		station_error_set(&x->e, r, NULL, "cannot read the image owners: %s", strerror(-r));
	if (r >= 0 && m->viewer)
		r = image_remove_check(m, &owners, x->digest, x->ref, &x->e);
	image_owners_done(&owners);
	for (struct image_removal *o = m->image_removals; r >= 0 && o; o = o->next)
		if (o != x && o->marked && strcmp(o->digest, x->digest) == 0)
			r = station_error_set(&x->e, -EBUSY, NULL,
					      "image %s is already being removed (by an earlier "
					      "DELETE, still under way)",
					      x->digest);
	if (r >= 0) /* a snapshot's image goes with its snapshot (manager-snapshot.c) */
		r = snapshot_image_in_use(m, x->digest, &x->e);
	if (r >= 0)
		r = image_in_use(m, x, &x->e);
	m->viewer = viewer;
	x->r = r;
	if (r < 0)
		return;
	x->marked = true;
	log_info("image being removed", "digest", x->digest, "tenant", x->tenant, NULL);
	pool_image_remove(m, x->digest);
}

static void removal_run(void *userdata)
{
	struct image_removal *x = userdata;
	struct image_store *s = NULL;
	struct image *img = NULL;
	int r = image_store_open(x->m->cfg.root, &s, &x->e);

	if (r >= 0)
		r = image_lookup(s, x->ref, &img, &x->e);
	if (r >= 0) {
		snprintf(x->digest, sizeof x->digest, "%s", img->digest);
		snprintf(x->index_digest, sizeof x->index_digest, "%s", img->index_digest);
		image_free(img);
		event_work_call_on_loop(x->pool, removal_claim_on_loop, x);
		r = x->r;
	}
	if (r >= 0) {
		r = image_remove(s, x->digest, &x->e);
		/* a failure past the record's unlink leaves only files no image uses */
		x->gone = r >= 0 || image_lookup(s, x->digest, &img, NULL) == -ENOENT;
		if (!x->gone)
			image_free(img);
	}
	image_store_close(s);
	x->r = r;
}

static void removal_done(void *userdata, bool cancelled)
{
	struct image_removal *x = userdata;
	struct manager *m = x->m;

	LIST_REMOVE(&m->image_removals, x);
	if (cancelled) /* the controller is stopping: the store is whole either way */
		station_error_set(&x->e, x->r = -ECANCELED, NULL,
				  "image %s: the controller stopped before it was removed", x->ref);
	else if (x->gone) {
		if (store_image_owner_remove(m->store, x->digest) < 0)
			log_warn("image removed, its owners not", "digest", x->digest, NULL);
		if (x->r < 0)
			log_warn("image removed, files left", "digest", x->digest, "error",
				 x->e.message, NULL);
		else
			log_info("image removed", "digest", x->digest, NULL);
		manager_ready_kick(m); /* the default image may be gone */
	}
	if (x->done)
		x->done(x->userdata, x->r, &x->e);
	free(x);
}

int manager_image_remove(struct manager *m, const char *ref, image_remove_done_fn done,
			 void *userdata, struct image_removal **ret, struct station_error *e)
{
	struct image_ref parsed;
	int r = images_available(m, e);

	if (r >= 0)
		r = image_ref_parse(ref, &parsed, e);
	if (r < 0)
		return r;
	if (!m->work)
		return station_error_set(e, -ECANCELED, NULL, "the controller is stopping");
	struct image_removal *x = calloc(1, sizeof *x);
	if (!x)
		return station_error_set(e, -ENOMEM, NULL, "out of memory");
	*x = (struct image_removal){ .m = m,
				     .pool = m->work,
				     .done = done,
				     .userdata = userdata,
				     .viewer_set = m->viewer };
	snprintf(x->ref, sizeof x->ref, "%s", ref);
	snprintf(x->tenant, sizeof x->tenant, "%s", m->viewer ? m->viewer : "");
	r = event_work_queue(m->work, removal_run, removal_done, x);
	if (r < 0) {
		free(x);
		return station_error_set(e, r, NULL, "cannot queue the removal: %s", strerror(-r));
	}
	LIST_PREPEND(&m->image_removals, x);
	if (ret)
		*ret = x;
	return 0;
}

void manager_image_removal_forget(struct image_removal *x)
{
	if (x)
		x->done = NULL;
}

/* ---- export: a worker thread writes the tar into a pipe the HTTP layer reads -------------
 *
 * The loop looks the image up and checks the tenant's right to it (as GET does); the thread
 * runs image_export_layout() into the pipe's write end, blocking while the client reads
 * slowly, and ends when the client goes away (the read end closed: EPIPE). Exports have a pool
 * of their own: a slow client holds its thread for as long as it reads, which must not hold
 * up stops, deletes or removals. */

struct image_export {
	struct manager *m;
	struct image_store *images;
	char ref[IMAGE_NAME_MAX + IMAGE_DIGEST_MAX + 2];
	char tenant[MANAGER_TENANT_MAX + 1]; /* who asked: "" the operator */
	int fd;				     /* the pipe's write end, the thread's */
	image_export_done_fn done;
	void *userdata;
	int r;
	struct station_error e;
};

static void export_run(void *userdata)
{
	struct image_export *x = userdata;

	x->r = image_export_layout(x->images, x->ref, x->fd, &x->e);
	close(x->fd); /* the reader sees the end */
	x->fd = -1;
}

static void export_done(void *userdata, bool cancelled)
{
	struct image_export *x = userdata;

	x->m->n_image_exports--;
	if (x->fd >= 0) /* cancelled before it ran */
		close(x->fd);
	if (cancelled)
		station_error_set(&x->e, x->r = -ECANCELED, NULL,
				  "image %s: the controller stopped before the export ended",
				  x->ref);
	if (x->r == -EPIPE)
		log_info("image export stopped: its client went away", "image", x->ref, "tenant",
			 x->tenant, NULL);
	else if (x->r < 0)
		log_warn("image export failed", "image", x->ref, "tenant", x->tenant, "error",
			 x->e.message, NULL);
	else
		log_info("image exported", "image", x->ref, "tenant", x->tenant, NULL);
	if (x->done)
		x->done(x->userdata, x->r, &x->e);
	free(x);
}

/* The image is there and the viewer sees it, else the same 404 as GET /v1/images/{ref}. */
static int export_check(struct manager *m, const char *ref, struct station_error *e)
{
	struct image *img = NULL;
	struct image_ref parsed;
	int r = images_available(m, e);

	if (r >= 0)
		r = image_ref_parse(ref, &parsed, e);
	if (r >= 0 && !manager_image_visible(m, ref))
		r = image_error_not_in_store(ref, e);
	if (r >= 0)
		r = image_lookup(m->actx.images, ref, &img, e);
	image_free(img);
	if (r >= 0 && m->n_image_exports >= MANAGER_MAX_IMAGE_EXPORTS)
		r = station_error_set(e, -EAGAIN, NULL,
				      "%zu image exports are under way, the most this worker runs "
				      "at once; try again when one has finished",
				      m->n_image_exports);
	if (r >= 0 && !m->work)
		r = station_error_set(e, -ECANCELED, NULL, "the controller is stopping");
	if (r >= 0 && !m->export_work)
		r = event_work_pool_new(m->loop, MANAGER_MAX_IMAGE_EXPORTS, &m->export_work);
	return r;
}

int manager_image_export(struct manager *m, const char *ref, image_export_done_fn done,
			 void *userdata, struct image_export **ret, int *ret_fd,
			 struct station_error *e)
{
	_cleanup_close_ int rfd = -1;
	struct image_export *x = NULL;
	int p[2], r = export_check(m, ref, e);

	if (r < 0)
		return e && e->err ?
			       r :
			       station_error_set(e, r, NULL, "cannot export: %s", strerror(-r));
	if (pipe2(p, O_CLOEXEC) < 0)
		return station_error_set(e, negative_errno(), NULL, "cannot export: %m");
	rfd = p[0];
	(void)fcntl(rfd, F_SETFL, O_NONBLOCK);
	(void)fcntl(rfd, F_SETPIPE_SZ, 1 << 20); /* fewer wakeups; the default size is fine too */
	x = calloc(1, sizeof *x);
	if (!x) {
		close(p[1]);
		return station_error_set(e, -ENOMEM, NULL, "out of memory");
	}
	*x = (struct image_export){ .m = m,
				    .images = m->actx.images,
				    .fd = p[1],
				    .done = done,
				    .userdata = userdata };
	snprintf(x->ref, sizeof x->ref, "%s", ref);
	snprintf(x->tenant, sizeof x->tenant, "%s", m->viewer ? m->viewer : "");
	r = event_work_queue(m->export_work, export_run, export_done, x);
	if (r < 0) {
		close(x->fd);
		free(x);
		return station_error_set(e, r, NULL, "cannot queue the export: %s", strerror(-r));
	}
	m->n_image_exports++;
	if (ret)
		*ret = x;
	*ret_fd = TAKE_FD(rfd);
	return 0;
}

void manager_image_export_forget(struct image_export *x)
{
	if (x)
		x->done = NULL;
}

/* ---- at start: finish what a removal or import cut short left (off the loop) ---------------- */

struct store_clean {
	char *root;
	int r;
	struct station_error e;
};

static void store_clean_run(void *userdata)
{
	struct store_clean *c = userdata;
	struct image_store *s = NULL;
	int r = image_store_open(c->root, &s, &c->e);

	if (r >= 0)
		r = image_store_clean(s, &c->e);
	image_store_close(s);
	c->r = r;
}

static void store_clean_done(void *userdata, bool cancelled)
{
	struct store_clean *c = userdata;
	if (!cancelled && c->r >= 0)
		log_info("image store checked: nothing unused left", NULL);
	else if (!cancelled) /* busy: an import or pull does the same at its end */
		log_info("image store check not done", "error", c->e.message, NULL);
	free(c->root);
	free(c);
}

void manager_image_store_clean(struct manager *m)
{
	struct store_clean *c = calloc(1, sizeof *c);
	if (!m->actx.images || !m->work || !c || !(c->root = strdup(m->cfg.root)) ||
	    event_work_queue(m->work, store_clean_run, store_clean_done, c) < 0) {
		if (c)
			free(c->root);
		free(c);
	}
}
