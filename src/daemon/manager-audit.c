/* SPDX-License-Identifier: MIT */
/* The audit log (docs/api.md, "Audit"): a row per audited request, queued in memory by the
 * HTTP layer and written off the request path, a batch per transaction, on a short timer or
 * when a batch is full. The table keeps the newest cfg.audit_kept rows. When the store cannot
 * take a batch (a full disk), the rows stay queued, up to AUDIT_PENDING_MAX, and the log says
 * so; past that the oldest are dropped, counted, and said too. */

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "basic/log.h"
#include "basic/util.h"
#include "event/event.h"
#include "manager-internal.h"

#define AUDIT_BATCH 256
#define AUDIT_FLUSH_USEC (200u * 1000)	/* a queued row waits at most this long */
#define AUDIT_RETRY_USEC (5u * 1000000) /* after a failed write */
#define AUDIT_PENDING_MAX 20000		/* rows kept in memory while the store refuses */
#define AUDIT_DEFAULT_KEPT 100000

struct manager_audit {
	struct audit_row *rows; /* a ring of AUDIT_PENDING_MAX */
	size_t head, n;
	struct event_source *timer;
	bool failing;	  /* the last write failed: said once */
	uint64_t dropped; /* since the last write that worked */
};

static int on_audit_timer(struct event_source *s, uint64_t now, void *userdata);

int manager_audit_init(struct manager *m)
{
	struct manager_audit *a = calloc(1, sizeof *a);
	int r;

	if (!a)
		return -ENOMEM;
	m->audit = a;
	a->rows = calloc(AUDIT_PENDING_MAX, sizeof *a->rows);
	if (!a->rows)
		return -ENOMEM;
	if (!m->cfg.audit_kept)
		m->cfg.audit_kept = AUDIT_DEFAULT_KEPT;
	r = event_add_timer(m->loop, &a->timer, UINT64_MAX, on_audit_timer, m);
	return r;
}

/* Writes what is queued, a batch per transaction; 0, or the store's -errno (rows kept). */
static int audit_flush(struct manager *m)
{
	struct manager_audit *a = m->audit;

	while (a && a->n > 0) {
		/* a batch is contiguous in the ring */
		size_t k = MIN(MIN(a->n, (size_t)AUDIT_BATCH), AUDIT_PENDING_MAX - a->head);
		int r = store_audit_insert(m->store, &a->rows[a->head], k, m->cfg.audit_kept);

		if (r < 0) {
			if (!a->failing)
				log_error("cannot write the audit log; keeping its rows in memory",
					  "error", strerror(-r), NULL);
			a->failing = true;
			return r;
		}
		if (a->failing || a->dropped) {
			char dropped[32];

			snprintf(dropped, sizeof dropped, "%llu", (unsigned long long)a->dropped);
			log_info("the audit log is written again", "dropped", dropped, NULL);
		}
		a->failing = false;
		a->dropped = 0;
		for (size_t i = 0; i < k; i++)
			audit_row_free(&a->rows[a->head + i]);
		a->head = (a->head + k) % AUDIT_PENDING_MAX;
		a->n -= k;
	}
	return 0;
}

static int on_audit_timer(struct event_source *s, uint64_t now, void *userdata)
{
	struct manager *m = userdata;
	int r = audit_flush(m);

	(void)event_source_set_time(s, r < 0 ? now + AUDIT_RETRY_USEC : UINT64_MAX);
	return 0;
}

void manager_audit_free(struct manager *m)
{
	struct manager_audit *a = m->audit;

	if (!a)
		return;
	(void)audit_flush(m);
	if (a->n)
		log_error("audit rows lost at exit: the store did not take them", NULL);
	for (size_t i = 0; a->rows && i < a->n; i++)
		audit_row_free(&a->rows[(a->head + i) % AUDIT_PENDING_MAX]);
	free(a->rows);
	event_source_free(a->timer);
	free(a);
	m->audit = NULL;
}

static const char *outcome_of(unsigned status)
{
	if (status == 0)
		return "aborted";
	if (status == 401 || status == 403)
		return "denied";
	if (status >= 400)
		return "error";
	return "ok";
}

static char *dup_or_null(const char *s)
{
	return s && *s ? strdup(s) : NULL;
}

void manager_audit_record(struct manager *m, const struct manager_audit_entry *in)
{
	struct manager_audit *a = m->audit;
	const struct auth_principal *p = in->principal;
	struct audit_row *row;

	if (!a || !a->rows)
		return;
	if (a->n == AUDIT_PENDING_MAX) {
		/* the store has refused for a while: the oldest row goes, and is counted */
		audit_row_free(&a->rows[a->head]);
		a->head = (a->head + 1) % AUDIT_PENDING_MAX;
		a->n--;
		if (a->dropped++ == 0)
			log_error(
				"the audit queue is full; dropping its oldest rows until the store "
				"takes them",
				NULL);
	}
	row = &a->rows[(a->head + a->n) % AUDIT_PENDING_MAX];
	*row = (struct audit_row){
		.at = realtime_usec(),
		.token_id = p ? strdup(p->token_id) : NULL,
		.token_name = p ? strdup(p->name) : NULL,
		.tenant = p ? dup_or_null(p->tenant) : NULL,
		.method = strdup(in->method ?: "-"),
		.route = strdup(in->route ?: "-"),
		.path = strdup(in->path ?: "-"),
		.workspace_id = dup_or_null(in->workspace_id),
		.object_id = dup_or_null(in->object_id),
		.status = in->status,
		.outcome = strdup(outcome_of(in->status)),
	};
	if (!row->method || !row->route || !row->path || !row->outcome) {
		audit_row_free(row);
		log_error("out of memory recording an audit row", NULL);
		return;
	}
	a->n++;
	if (a->n >= AUDIT_BATCH && !a->failing)
		(void)event_source_set_time(a->timer, 0);
	else if (a->n == 1 && !a->failing)
		(void)event_source_set_time(a->timer, now_usec() + AUDIT_FLUSH_USEC);
}

static json_t *audit_to_json(const struct audit_row *r)
{
	json_t *o = json_object();

	if (!o)
		return NULL;
	json_object_set_new(o, "id", json_integer(r->id));
	json_set_time(o, "at", r->at);
	json_object_set_new(o, "tokenId", r->token_id ? json_string(r->token_id) : json_null());
	json_object_set_new(o, "tokenName",
			    r->token_name ? json_string(r->token_name) : json_null());
	json_object_set_new(o, "tenant", r->tenant ? json_string(r->tenant) : json_null());
	json_object_set_new(o, "method", json_string(r->method));
	json_object_set_new(o, "route", json_string(r->route));
	json_object_set_new(o, "path", json_string(r->path));
	json_object_set_new(o, "workspaceId",
			    r->workspace_id ? json_string(r->workspace_id) : json_null());
	json_object_set_new(o, "objectId", r->object_id ? json_string(r->object_id) : json_null());
	json_object_set_new(o, "status", json_integer(r->status));
	json_object_set_new(o, "outcome", json_string(r->outcome));
	return o;
}

int manager_audit_list(struct manager *m, const struct manager_audit_query *q, json_t **ret,
		       struct station_error *e)
{
	const struct audit_filter filter = {
		.limit = q->limit,
		.before = q->before,
		.token_id = q->token_id,
		.tenant = q->tenant,
		.workspace_id = q->workspace_id,
	};
	const struct audit_filter *f = &filter;
	struct audit_row *rows = NULL;
	size_t n = 0;
	int64_t last = 0;
	json_t *o, *list;
	int r;

	/* What is queued is written first, so that a reader sees every request answered so far
	 * (unless the store refuses: then the log says so). */
	(void)audit_flush(m);
	r = store_audit_list(m->store, f, &rows, &n);
	if (r < 0)
		return station_error_set(e, r, NULL, "cannot read the audit log: %s", strerror(-r));
	o = json_object();
	list = json_array();
	for (size_t i = 0; i < n; i++) {
		last = rows[i].id;
		json_array_append_new(list, audit_to_json(&rows[i]));
		audit_row_free(&rows[i]);
	}
	if (o && list) {
		json_object_set_new(o, "entries", list);
		json_object_set_new(o, "nextBefore",
				    n == f->limit && n > 0 ? json_integer(last) : json_null());
		json_object_set_new(o, "queued", json_integer((json_int_t)m->audit->n));
	} else {
		json_decref(list);
		json_decref(o);
		o = NULL;
	}
	free(rows);
	if (!o)
		return station_error_set(e, -ENOMEM, NULL, "out of memory");
	*ret = o;
	return 0;
}
