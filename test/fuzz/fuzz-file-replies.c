/* SPDX-License-Identifier: MIT */
/* The controller's side of a file session (src/daemon/manager-file.c): the frames an agent
 * (maybe one the sandbox took over) answers a file operation with, INFO, DATA, EVENT, END and
 * ERROR, through the session's own frame loop (session_process()). The header of
 * manager-file.c lists what it must refuse; the receiver here checks that what it lets through
 * holds to it (a NAME without '/', an ETAG fit for an HTTP header, an error that names the
 * path) and that end() comes exactly once.
 *
 * Input: one byte (the operation, STAT to WATCH), then the agent's bytes, delivered whole and
 * again a few bytes at a time as reads would add them; both must give the same events. EOF
 * follows the bytes, as when the agent closes.
 *
 * fuzz-max-len: 65536 */

/* The session's static functions: the harness builds a session without a socket. */
#include "daemon/manager-file.c"

#include "fuzz.h"

/* Not reached: a session is opened by manager_file_open(), which the harness does not call. */
bool adapter_agent_binds_socket(const struct adapter_context *ctx, const struct adapter_ops *ops)
{
	return false;
}

int workspace_lookup(struct manager *m, const char *id, struct workspace **ret,
		     struct station_error *e)
{
	*ret = NULL;
	return -ENOENT;
}

int workspace_check_ready(const struct workspace *ws, struct station_error *e)
{
	return -ENOTCONN;
}

struct trace {
	uint64_t hash;
	unsigned ends;
};

static struct trace *cur;

static void mix(const void *data, size_t n)
{
	const uint8_t *p = data;
	for (size_t i = 0; i < n; i++)
		cur->hash = (cur->hash ^ p[i]) * 1099511628211ull;
}

static void mix_u64(uint64_t v)
{
	mix(&v, sizeof(v));
}

static void mix_str(const char *s)
{
	mix_u64(s ? strlen(s) : UINT64_MAX);
	if (s)
		mix(s, strlen(s));
}

static void got_info(void *userdata, const struct file_entry *en)
{
	if (en->name &&
	    (strchr(en->name, '/') || strlen(en->name) == 0 || strlen(en->name) > FILE_MAX_NAME))
		abort();
	if (en->etag && (strlen(en->etag) == 0 || strlen(en->etag) > FILE_MAX_ETAG ||
			 !etag_ok(en->etag) || strpbrk(en->etag, "\r\n\"")))
		abort();
	if (!file_type_to_string(en->type) || en->mode > 07777)
		abort();
	mix_u64(1);
	mix_str(en->name);
	mix_str(en->path);
	mix_str(en->link_target);
	mix_str(en->etag);
	mix_u64(en->type);
	mix_u64(en->size);
	mix_u64(en->mode);
}

static void got_data(void *userdata, const uint8_t *data, size_t n)
{
	if (n == 0 || n > FILE_MAX_CHUNK)
		abort();
	mix_u64(2);
	mix(data, n);
}

static void got_event(void *userdata, const struct file_event_info *ev)
{
	if (!file_event_to_string(ev->event) || !ev->path)
		abort();
	mix_u64(3);
	mix_u64(ev->event);
	mix_str(ev->path);
	mix_str(ev->path2);
	mix_u64(ev->type);
}

static void got_end(void *userdata, int r, bool flag, const struct station_error *e)
{
	if (++cur->ends != 1)
		abort();
	if (r < 0 && (!e || e->err != r || e->message[0] == '\0'))
		abort(); /* an error always says what and names the path */
	mix_u64(4);
	mix_u64((uint64_t)r);
	mix_u64(flag);
	if (r < 0)
		mix_str(e->message);
}

static const struct file_session_ops ops = {
	.info = got_info,
	.data = got_data,
	.event = got_event,
	.end = got_end,
};

static void run_session(unsigned op, const uint8_t *data, size_t size, bool cut, struct trace *t)
{
	/* the workspace as manager_file_open() links a session into it */
	struct workspace *ws = calloc(1, sizeof(*ws));
	struct file_session *s = calloc(1, sizeof(*s));
	if (!ws || !s)
		abort();
	ws->row.id = (char *)"vm-fuzz";
	*t = (struct trace){ .hash = 14695981039346656037ull };
	cur = t;
	s->ws = ws;
	LIST_PREPEND(&ws->file_sessions, s);
	ws->n_file_sessions++;
	s->fd = -1;
	s->op = op;
	s->ops = &ops;
	s->path = strdup("/home/user/a");
	s->field = "path";
	if (op == FILE_OP_RENAME) {
		s->path2 = strdup("/home/user/b");
		s->field2 = "to";
	}
	if (!s->path || (op == FILE_OP_RENAME && !s->path2))
		abort();

	/* as session_read(): append what a read brought, deliver the whole frames, then EOF */
	size_t off = 0;
	int gone = 0;
	while (off < size && !gone) {
		size_t piece = size - off;
		if (cut) {
			piece = (size_t)(data[off] % 67) + 1;
			if (piece > size - off)
				piece = size - off;
		}
		if (buf_append(&s->in, data + off, piece) < 0)
			abort();
		off += piece;
		gone = session_process(s);
	}
	if (!gone)
		session_fail(s, -EPROTO, "the connection closed before the operation ended");
	if (t->ends != 1 || ws->file_sessions || ws->n_file_sessions != 0)
		abort(); /* ended once, and unlinked */
	free(ws);
	cur = NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	unsigned op = FILE_OP_STAT + data[0] % (FILE_OP_WATCH - FILE_OP_STAT + 1);
	data++;
	size--;

	struct trace whole, pieces;
	run_session(op, data, size, false, &whole);
	run_session(op, data, size, true, &pieces);
	if (whole.hash != pieces.hash)
		abort();
	return 0;
}
