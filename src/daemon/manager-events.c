/* SPDX-License-Identifier: MIT */
/* Events (docs/api.md, "Events"): state changes of workspaces, runs, services and terminals, in
 * a ring of the last MANAGER_EVENTS_KEPT (--events-kept), numbered by seq. seq is the boot epoch (a counter in
 * ROOT/events-epoch, raised and written before the first event of a boot) times 2^32 plus the
 * event's number in this boot, so a seq after a restart is always greater than every seq
 * before it. Subscribers are told that there is something new and read the ring at their own
 * pace: a slow one costs no memory, it only falls out of the ring (a gap). */

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "basic/cleanup.h"
#include "basic/list.h"
#include "basic/log.h"
#include "basic/util.h"
#include "event/event.h"
#include "manager-internal.h"

#define EPOCH_FILE "events-epoch"
/* Epochs stay below 2^21 so that every seq is below 2^53 (exact in JSON numbers everywhere). */
#define EPOCH_MAX ((UINT64_C(1) << 21) - 1)

struct event_rec {
	uint64_t seq;
	uint64_t tseq; /* its number among its tenant's (0: the operator's workspace) */
	enum manager_event_kind kind;
	char ws_id[PROTO_MAX_ID + 1];
	char tenant[MANAGER_TENANT_MAX + 1]; /* the workspace's; "" the operator's */
	char *text;			     /* the event's JSON */
	char *ttext;			     /* the same with tseq as its seq, for its tenant */
};

/* Events of this boot per tenant, for the tenant's own numbering. */
struct tenant_count {
	char tenant[MANAGER_TENANT_MAX + 1];
	uint64_t counter;
};

struct events_sub {
	struct events_sub *prev, *next;
	struct manager *m;
	manager_events_fn fn;
	void *userdata;
};

struct manager_events {
	struct event_rec *ring;
	size_t cap, start, n;
	uint64_t epoch;
	uint64_t counter; /* events of this boot */
	struct tenant_count *tenants;
	size_t n_tenants;
	struct events_sub *subs;
	struct event_source *notify; /* subscribers are told from the loop, never from the caller */
};

static const char *const kind_names[_MANAGER_EVENT_KIND_MAX] = {
	[MANAGER_EVENT_WORKSPACE] = "workspace", [MANAGER_EVENT_RUN] = "run",
	[MANAGER_EVENT_SERVICE] = "service",	 [MANAGER_EVENT_TERMINAL] = "terminal",
	[MANAGER_EVENT_SNAPSHOT] = "snapshot",
};

const char *manager_event_kind_to_string(enum manager_event_kind k)
{
	return k >= 0 && k < _MANAGER_EVENT_KIND_MAX ? kind_names[k] : NULL;
}

int manager_event_kind_from_string(const char *s)
{
	for (int k = 0; s && k < _MANAGER_EVENT_KIND_MAX; k++)
		if (strcmp(s, kind_names[k]) == 0)
			return k;
	return -EINVAL;
}

static int on_notify(struct event_source *s, uint64_t now, void *userdata)
{
	struct manager *m = userdata;

	for (struct events_sub *sub = m->events->subs, *next; sub; sub = next) {
		next = sub->next; /* the callback may unsubscribe */
		sub->fn(sub->userdata);
	}
	return 0;
}

/* The epoch of this boot: one more than the last one written. */
static int epoch_next(struct manager *m, uint64_t *ret)
{
	_cleanup_free_ char *path = NULL, *text = NULL;
	char buf[32];
	uint64_t epoch = 0;
	size_t len;
	int n, r;

	if (asprintf(&path, "%s/%s", m->cfg.root, EPOCH_FILE) < 0)
		return -ENOMEM;
	r = read_file(path, 31, &text, &len);
	if (r >= 0) {
		while (len > 0 && text[len - 1] == '\n')
			text[--len] = '\0';
		if (parse_u64(text, EPOCH_MAX - 1, &epoch) < 0)
			return -EBADMSG;
	} else if (r != -ENOENT)
		return r;
	epoch++;
	n = snprintf(buf, sizeof buf, "%" PRIu64 "\n", epoch);
	r = write_file_atomic(path, buf, (size_t)n, 0600);
	if (r < 0)
		return r;
	*ret = epoch;
	return 0;
}

int manager_events_init(struct manager *m)
{
	int r;

	m->events = calloc(1, sizeof *m->events);
	if (!m->events)
		return -ENOMEM;
	m->events->cap = m->cfg.events_kept ? m->cfg.events_kept : MANAGER_EVENTS_KEPT;
	m->events->ring = calloc(m->events->cap, sizeof *m->events->ring);
	if (!m->events->ring)
		return -ENOMEM;
	r = epoch_next(m, &m->events->epoch);
	if (r < 0) {
		log_error("cannot raise the events epoch", "file", EPOCH_FILE, "error",
			  strerror(-r), NULL);
		return r;
	}
	return event_add_timer(m->loop, &m->events->notify, UINT64_MAX, on_notify, m);
}

void manager_events_free(struct manager *m)
{
	struct manager_events *ev = m->events;

	if (!ev)
		return;
	while (ev->subs) {
		struct events_sub *s = ev->subs;
		LIST_REMOVE(&ev->subs, s);
		free(s);
	}
	for (size_t i = 0; i < ev->n; i++) {
		free(ev->ring[(ev->start + i) % ev->cap].text);
		free(ev->ring[(ev->start + i) % ev->cap].ttext);
	}
	event_source_free(ev->notify);
	free(ev->ring);
	free(ev->tenants);
	free(ev);
	m->events = NULL;
}

/* The tenant's count of events this boot, added when it has none yet; NULL out of memory. */
static struct tenant_count *tenant_count(struct manager_events *ev, const char *tenant, bool add)
{
	struct tenant_count *t;

	for (size_t i = 0; i < ev->n_tenants; i++)
		if (strcmp(ev->tenants[i].tenant, tenant) == 0)
			return &ev->tenants[i];
	if (!add)
		return NULL;
	t = realloc(ev->tenants, (ev->n_tenants + 1) * sizeof *t);
	if (!t)
		return NULL;
	ev->tenants = t;
	t = &ev->tenants[ev->n_tenants++];
	*t = (struct tenant_count){ .counter = 0 };
	snprintf(t->tenant, sizeof t->tenant, "%s", tenant);
	return t;
}

static char *event_text(json_t *doc, uint64_t seq)
{
	if (json_object_set_new(doc, "seq", json_integer((json_int_t)seq)) < 0)
		return NULL;
	return json_dumps(doc, JSON_COMPACT | JSON_PRESERVE_ORDER);
}

void manager_event_emit(struct manager *m, enum manager_event_kind kind, const char *change,
			const char *id, const char *ws_id, const char *tenant, const char *state,
			const char *reason)
{
	struct manager_events *ev = m->events;
	struct tenant_count *tc = NULL;
	struct event_rec *rec;
	uint64_t seq, tseq = 0;
	char *text, *ttext = NULL;
	char at[32];
	json_t *doc;

	if (!ev || !ws_id || strlen(ws_id) > PROTO_MAX_ID)
		return;
	seq = (ev->epoch << 32) | (ev->counter + 1);
	format_rfc3339(realtime_usec(), at);
	doc = json_pack("{s:I,s:s,s:s,s:s,s:s,s:s?,s:s,s:s?}", "seq", (json_int_t)seq, "type",
			kind_names[kind], "change", change, "id", id, "workspaceId", ws_id, "state",
			state, "at", at, "reason", reason);
	text = doc ? event_text(doc, seq) : NULL;
	if (text && tenant && tenant[0]) {
		tc = tenant_count(ev, tenant, true);
		tseq = (ev->epoch << 32) | ((tc ? tc->counter : 0) + 1);
		ttext = tc ? event_text(doc, tseq) : NULL;
	}
	json_decref(doc);
	if (!text || (tenant && tenant[0] && !ttext)) {
		log_error("cannot record an event", "workspace", ws_id, "id", id, NULL);
		free(text);
		free(ttext);
		return;
	}
	ev->counter++;
	if (tc)
		tc->counter++;
	if (ev->n == ev->cap) {
		free(ev->ring[ev->start].text);
		free(ev->ring[ev->start].ttext);
		ev->start = (ev->start + 1) % ev->cap;
		ev->n--;
	}
	rec = &ev->ring[(ev->start + ev->n) % ev->cap];
	*rec = (struct event_rec){ .seq = seq,
				   .tseq = tseq,
				   .kind = kind,
				   .text = text,
				   .ttext = ttext };
	snprintf(rec->ws_id, sizeof rec->ws_id, "%s", ws_id);
	snprintf(rec->tenant, sizeof rec->tenant, "%s", tenant ? tenant : "");
	ev->n++;
	if (ev->subs)
		event_source_set_time(ev->notify, 0);
}

uint64_t manager_events_last(struct manager *m, const char *tenant)
{
	const struct tenant_count *t;

	if (!tenant)
		return (m->events->epoch << 32) | m->events->counter;
	t = tenant_count(m->events, tenant, false);
	return (m->events->epoch << 32) | (t ? t->counter : 0);
}

int manager_events_check_since(struct manager *m, uint64_t since, const char *tenant,
			       struct station_error *e)
{
	uint64_t last = manager_events_last(m, tenant);

	if (since > last)
		return station_error_set(e, -EINVAL, "since",
					 "since %" PRIu64 " is beyond the newest event (%" PRIu64
					 ")",
					 since, last);
	return 0;
}

static bool event_passes(const struct event_rec *rec, const struct manager_event_filter *f)
{
	if (f && f->ws_id && strcmp(f->ws_id, rec->ws_id) != 0)
		return false;
	if (f && f->kinds && !(f->kinds & (1u << rec->kind)))
		return false;
	return !f || !f->tenant || strcmp(f->tenant, rec->tenant) == 0;
}

/* A gap: the events after `after` up to `last` are gone (numbered from first of this boot). */
static void event_gap(uint64_t after, uint64_t last, uint64_t boot_first, uint64_t pos,
		      struct manager_event *ret)
{
	*ret = (struct manager_event){ .seq = last, .gap = true, .pos = pos };
	/* Before this boot: how many there were is not known. */
	ret->missed = after < boot_first ? -1 : (int64_t)(last - after);
	ret->gap_from = after + 1;
}

static int events_next_all(struct manager *m, uint64_t after, const struct manager_event_filter *f,
			   struct manager_event *ret)
{
	struct manager_events *ev = m->events;
	uint64_t first = ev->n ? ev->ring[ev->start].seq : manager_events_last(m, NULL) + 1;

	/* Missed: what lies between after and the oldest event kept. since=0 asks for everything
	 * kept, not for a gap. */
	if (after != 0 && after + 1 < first) {
		event_gap(after, first - 1, (ev->epoch << 32) | 1, first - 1, ret);
		return 1;
	}
	/* The ring holds consecutive seqs: start right after `after`. */
	for (size_t i = after < first ? 0 : (size_t)(after + 1 - first); i < ev->n; i++) {
		const struct event_rec *rec = &ev->ring[(ev->start + i) % ev->cap];

		if (rec->seq <= after || !event_passes(rec, f))
			continue;
		*ret = (struct manager_event){ .seq = rec->seq,
					       .text = rec->text,
					       .pos = rec->seq };
		return 1;
	}
	/* Nothing more that passes the filter: the caller stands at the newest. */
	*ret = (struct manager_event){ .seq = manager_events_last(m, NULL),
				       .pos = manager_events_last(m, NULL) };
	return 0;
}

/* A tenant's stream: seq in the tenant's numbering. Where in the ring the reader stands is
 * found once from its seq (and again when it fell out of the ring), then kept as pos. */
static int events_next_tenant(struct manager *m, const struct manager_events_cursor *at,
			      const struct manager_event_filter *f, struct manager_event *ret)
{
	struct manager_events *ev = m->events;
	uint64_t first = ev->n ? ev->ring[ev->start].seq : manager_events_last(m, NULL) + 1;
	size_t i = 0;

	if (at->pos != 0 && at->pos + 1 >= first) {
		i = (size_t)(at->pos + 1 - first);
	} else {
		/* The tenant's oldest kept event: those of its events before it are gone. */
		uint64_t first_t = manager_events_last(m, f->tenant) + 1, pos = 0;

		for (size_t k = 0; k < ev->n; k++) {
			const struct event_rec *rec = &ev->ring[(ev->start + k) % ev->cap];

			if (strcmp(rec->tenant, f->tenant) == 0) {
				first_t = rec->tseq;
				pos = rec->seq - 1;
				break;
			}
		}
		if (at->after != 0 && at->after + 1 < first_t) {
			event_gap(at->after, first_t - 1, (ev->epoch << 32) | 1,
				  pos ? pos : manager_events_last(m, NULL), ret);
			return 1;
		}
	}
	for (; i < ev->n; i++) {
		const struct event_rec *rec = &ev->ring[(ev->start + i) % ev->cap];

		if (rec->tseq <= at->after || !event_passes(rec, f))
			continue;
		*ret = (struct manager_event){ .seq = rec->tseq,
					       .text = rec->ttext,
					       .pos = rec->seq };
		return 1;
	}
	*ret = (struct manager_event){ .seq = manager_events_last(m, f->tenant),
				       .pos = manager_events_last(m, NULL) };
	return 0;
}

int manager_events_next(struct manager *m, const struct manager_events_cursor *at,
			const struct manager_event_filter *f, struct manager_event *ret)
{
	if (f && f->tenant)
		return events_next_tenant(m, at, f, ret);
	return events_next_all(m, at->after, f, ret);
}

int manager_events_subscribe(struct manager *m, manager_events_fn fn, void *userdata,
			     struct events_sub **ret)
{
	struct events_sub *s = calloc(1, sizeof *s);

	if (!s)
		return -ENOMEM;
	*s = (struct events_sub){ .m = m, .fn = fn, .userdata = userdata };
	LIST_PREPEND(&m->events->subs, s);
	*ret = s;
	return 0;
}

void manager_events_unsubscribe(struct events_sub *s)
{
	if (!s)
		return;
	LIST_REMOVE(&s->m->events->subs, s);
	free(s);
}

void workspace_event(struct workspace *ws, enum manager_event_kind kind, const char *change,
		     const char *id, const char *state, const char *reason)
{
	if (!ws->pool)
		manager_event_emit(ws->m, kind, change, id, ws->row.id, ws->row.tenant, state,
				   reason);
}
