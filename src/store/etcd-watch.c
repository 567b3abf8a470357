/* SPDX-License-Identifier: MIT */
/* etcd_watch(): POST /v3/watch answers a stream of JSON messages, one a line, read as they
 * arrive on a multi handle polled every half ETCD_WATCH_TICK_MS, so *stop is seen within a
 * tick without a thread of its own. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "etcd-internal.h"

struct watch {
	struct etcd *c;
	etcd_watch_fn fn;
	void *userdata;
	int64_t start_revision;
	char *buf; /* bytes of a message not yet ended by its newline */
	size_t len;
	bool created;
	int err; /* set by a message that ends the watch */
	struct station_error error;
};

static int watch_event(struct watch *w, const json_t *j)
{
	const char *type = json_string_value(json_object_get(j, "type"));
	struct etcd_event ev = {};
	int r;

	if (!type || strcmp(type, "PUT") == 0)
		ev.type = ETCD_EVENT_PUT;
	else if (strcmp(type, "DELETE") == 0)
		ev.type = ETCD_EVENT_DELETE;
	else
		return station_error_set(&w->error, -EPROTO, NULL, "an event of type '%s'", type);
	r = etcd_kv_from_json(w->c, json_object_get(j, "kv"), &ev.kv, &w->error);
	if (r < 0)
		return r;
	w->fn(&ev, w->userdata);
	free(ev.kv.key);
	free(ev.kv.value);
	return 0;
}

/* One message of the stream: {"result":{created | canceled | events}} or {"error":{…}}. */
static int watch_message(struct watch *w, const char *line, size_t n)
{
	_cleanup_json_ json_t *msg = json_loadb(line, n, 0, NULL);
	const json_t *result = json_object_get(msg, "result"), *events;
	char why[256];
	int64_t compacted = 0;
	size_t i;
	json_t *ev;
	int r;

	if (json_object_get(msg, "error")) {
		r = etcd_gateway_error(msg, why, sizeof why);
		return station_error_set(&w->error, r, NULL, "%s", why);
	}
	if (!json_is_object(result))
		return station_error_set(&w->error, -EPROTO, NULL,
					 "a message that is not the gateway's");
	if (json_is_true(json_object_get(result, "created")))
		w->created = true;
	if (json_is_true(json_object_get(result, "canceled"))) {
		(void)etcd_json_int64(result, "compact_revision", &compacted);
		if (compacted > 0)
			return station_error_set(
				&w->error, -ERANGE, NULL,
				"revision %lld compacted away (the oldest kept is %lld)",
				(long long)w->start_revision, (long long)compacted);
		return station_error_set(
			&w->error, -ECANCELED, NULL, "cancelled by etcd: %s",
			json_string_value(json_object_get(result, "cancel_reason")) ?: "no reason");
	}
	events = json_object_get(result, "events");
	json_array_foreach(events, i, ev) {
		r = watch_event(w, ev);
		if (r < 0)
			return r;
	}
	return 0;
}

/* Bytes of the stream as they arrive: each newline ends a message. */
static size_t on_watch_data(char *data, size_t size, size_t nmemb, void *userdata)
{
	struct watch *w = userdata;
	size_t n = size * nmemb, start = 0;
	char *p;

	if (n > ETCD_WATCH_MESSAGE_MAX + 1 - w->len) {
		w->err = station_error_set(&w->error, -EFBIG, NULL,
					   "a message larger than %d bytes",
					   ETCD_WATCH_MESSAGE_MAX);
		return 0;
	}
	p = realloc(w->buf, w->len + n);
	if (!p) {
		w->err = -ENOMEM;
		return 0;
	}
	w->buf = p;
	memcpy(w->buf + w->len, data, n);
	w->len += n;
	for (size_t i = w->len - n; i < w->len; i++) {
		if (w->buf[i] != '\n')
			continue;
		if (i > start) {
			w->err = watch_message(w, w->buf + start, i - start);
			if (w->err < 0)
				return 0;
		}
		start = i + 1;
	}
	memmove(w->buf, w->buf + start, w->len - start);
	w->len -= start;
	return n;
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Runs the transfer h until *stop (0), its end or its failure (-errno, why), or no "created"
 * within ETCD_CALL_MS (-ETIMEDOUT). */
static int watch_run(struct watch *w, CURLM *m, CURL *h, const char *detail, volatile int *stop,
		     char *why, size_t n)
{
	uint64_t deadline = now_ms() + ETCD_CALL_MS;
	CURLcode cc = CURLE_OK;
	int running = 1;

	for (;;) {
		CURLMsg *msg;
		int left;

		if (*stop)
			return 0;
		if (curl_multi_perform(m, &running) != CURLM_OK)
			return -ENOMEM;
		while ((msg = curl_multi_info_read(m, &left)))
			if (msg->msg == CURLMSG_DONE)
				cc = msg->data.result;
		if (!running)
			break;
		if (!w->created && now_ms() >= deadline) {
			snprintf(why, n, "no answer within %d ms", ETCD_CALL_MS);
			return -ETIMEDOUT;
		}
		curl_multi_poll(m, NULL, 0, ETCD_WATCH_TICK_MS / 2, NULL);
	}
	if (w->err < 0) {
		snprintf(why, n, "%.*s", (int)n - 1, w->error.message);
		return w->err;
	}
	if (cc != CURLE_OK)
		return etcd_transfer_error(h, cc, detail, w->c->https, false, ETCD_CALL_MS, why, n);
	snprintf(why, n, "the watch stream ended");
	return -ECONNRESET;
}

/* The watch on one endpoint. */
static int watch_once(struct watch *w, const struct etcd_endpoint *ep, const char *body,
		      volatile int *stop, char *why, size_t n)
{
	char detail[CURL_ERROR_SIZE] = "";
	CURLM *m;
	int r;

	_cleanup_(curl_slist_free_allp) struct curl_slist *headers = NULL;
	_cleanup_(curl_easy_cleanupp) CURL *h = NULL;

	headers = curl_slist_append(NULL, "Content-Type: application/json");
	if (!headers)
		return -ENOMEM;
	h = etcd_handle_new(w->c, ep, "/v3/watch", headers, detail);
	if (!h)
		return -ENOMEM;
	curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_watch_data);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, w);
	m = curl_multi_init();
	if (!m)
		return -ENOMEM;
	if (curl_multi_add_handle(m, h) != CURLM_OK) {
		curl_multi_cleanup(m);
		return -ENOMEM;
	}
	r = watch_run(w, m, h, detail, stop, why, n);
	curl_multi_remove_handle(m, h);
	curl_multi_cleanup(m);
	return r;
}

int etcd_watch(struct etcd *c, const char *key_prefix, int64_t start_revision, etcd_watch_fn fn,
	       void *userdata, volatile int *stop, struct station_error *e)
{
	unsigned start = __atomic_load_n(&c->preferred, __ATOMIC_RELAXED);
	struct watch w = { .c = c,
			   .fn = fn,
			   .userdata = userdata,
			   .start_revision = start_revision };
	char words[512] = "";
	size_t used = 0;
	int r = -EIO;

	_cleanup_json_ json_t *req = json_pack("{s:{s:o,s:o,s:o}}", "create_request", "key",
					       etcd_key_json(c, key_prefix), "range_end",
					       etcd_range_end_json(c, key_prefix), "start_revision",
					       etcd_json_int64_new(start_revision));
	_cleanup_free_ char *body = req ? json_dumps(req, JSON_COMPACT) : NULL;

	if (!body)
		return -ENOMEM;
	for (size_t i = 0; i < c->n_ep; i++) {
		unsigned k = (start + i) % c->n_ep;
		char why[256];

		w.created = false;
		w.err = 0;
		w.len = 0;
		r = watch_once(&w, &c->ep[k], body, stop, why, sizeof why);
		if (r == 0 || r == -ENOMEM) {
			free(w.buf);
			return r;
		}
		if (used < sizeof words)
			used += (size_t)snprintf(words + used, sizeof words - used, "%s%s: %s",
						 used ? "; " : "", c->ep[k].hostport, why);
		/* Once created, the watch was this endpoint's: its end is the caller's to see. */
		if (w.created || !etcd_error_moves_on(r))
			break;
	}
	free(w.buf);
	return station_error_set(e, r, NULL, "etcd watch: %s", words);
}
