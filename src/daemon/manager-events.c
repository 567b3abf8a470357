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
	enum manager_event_kind kind;
	char ws_id[PROTO_MAX_ID + 1];
	char tenant[MANAGER_TENANT_MAX + 1]; /* the workspace's; "" the operator's */
	char *text;			     /* the event's JSON */
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
	for (size_t i = 0; i < ev->n; i++)
		free(ev->ring[(ev->start + i) % ev->cap].text);
	event_source_free(ev->notify);
	free(ev->ring);
	free(ev);
	m->events = NULL;
}

void manager_event_emit(struct manager *m, enum manager_event_kind kind, const char *change,
			const char *id, const char *ws_id, const char *tenant, const char *state,
			const char *reason)
{
	struct manager_events *ev = m->events;
	struct event_rec *rec;
	uint64_t seq;
	char at[32];
	json_t *doc;
	char *text;

	if (!ev || !ws_id || strlen(ws_id) > PROTO_MAX_ID)
		return;
	seq = (ev->epoch << 32) | (ev->counter + 1);
	format_rfc3339(realtime_usec(), at);
	doc = json_pack("{s:I,s:s,s:s,s:s,s:s,s:s?,s:s,s:s?}", "seq", (json_int_t)seq, "type",
			kind_names[kind], "change", change, "id", id, "workspaceId", ws_id, "state",
			state, "at", at, "reason", reason);
	text = doc ? json_dumps(doc, JSON_COMPACT) : NULL;
	json_decref(doc);
	if (!text) {
		log_error("cannot record an event", "workspace", ws_id, "id", id, NULL);
		return;
	}
	ev->counter++;
	if (ev->n == ev->cap) {
		free(ev->ring[ev->start].text);
		ev->start = (ev->start + 1) % ev->cap;
		ev->n--;
	}
	rec = &ev->ring[(ev->start + ev->n) % ev->cap];
	*rec = (struct event_rec){ .seq = seq, .kind = kind, .text = text };
	snprintf(rec->ws_id, sizeof rec->ws_id, "%s", ws_id);
	snprintf(rec->tenant, sizeof rec->tenant, "%s", tenant ? tenant : "");
	ev->n++;
	if (ev->subs)
		event_source_set_time(ev->notify, 0);
}

uint64_t manager_events_last(struct manager *m)
{
	return (m->events->epoch << 32) | m->events->counter;
}

int manager_events_check_since(struct manager *m, uint64_t since, struct station_error *e)
{
	if (since > manager_events_last(m))
		return station_error_set(e, -EINVAL, "since",
					 "since %" PRIu64 " is beyond the newest event (%" PRIu64
					 ")",
					 since, manager_events_last(m));
	return 0;
}

int manager_events_next(struct manager *m, uint64_t after, const struct manager_event_filter *f,
			struct manager_event *ret)
{
	struct manager_events *ev = m->events;
	uint64_t first = ev->n ? ev->ring[ev->start].seq : manager_events_last(m) + 1;
	uint64_t boot_first = (ev->epoch << 32) | 1;

	/* Missed: what lies between after and the oldest event kept. since=0 asks for everything
	 * kept, not for a gap. */
	if (after != 0 && after + 1 < first) {
		*ret = (struct manager_event){ .seq = first - 1, .gap = true };
		/* Before this boot: how many there were is not known. */
		ret->missed = after < boot_first ? -1 : (int64_t)(first - 1 - after);
		ret->gap_from = after + 1;
		return 1;
	}
	/* The ring holds consecutive seqs: start right after `after`. */
	for (size_t i = after < first ? 0 : (size_t)(after + 1 - first); i < ev->n; i++) {
		const struct event_rec *rec = &ev->ring[(ev->start + i) % ev->cap];

		if (rec->seq <= after)
			continue;
		if (f && f->ws_id && strcmp(f->ws_id, rec->ws_id) != 0)
			continue;
		if (f && f->kinds && !(f->kinds & (1u << rec->kind)))
			continue;
		if (f && f->tenant && strcmp(f->tenant, rec->tenant) != 0)
			continue;
		*ret = (struct manager_event){ .seq = rec->seq, .text = rec->text };
		return 1;
	}
	/* Nothing more that passes the filter: the caller stands at the newest. */
	*ret = (struct manager_event){ .seq = manager_events_last(m) };
	return 0;
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
