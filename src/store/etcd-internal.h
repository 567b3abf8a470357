/* SPDX-License-Identifier: MIT */
#pragma once

/* What etcd.c and etcd-watch.c share: the client's state, one endpoint's curl handle, the
 * gateway's errors and JSON. */

#include <curl/curl.h>

#include "basic/cleanup.h"
#include "basic/json-util.h"
#include "etcd.h"

#define ETCD_KEEPALIVE_S 10

struct etcd_endpoint {
	char hostport[264]; /* "127.0.0.1:2379", "[::1]:2379" */
};

struct etcd {
	struct etcd_endpoint ep[ETCD_ENDPOINTS_MAX];
	size_t n_ep;
	bool https;
	char *prefix;
	size_t prefix_len;
	char *ca_file;
	char *cert_file;
	char *key_file;
	char *description;
	unsigned preferred; /* the endpoint that answered last (atomic) */
};

DEFINE_TRIVIAL_CLEANUP_FUNC(CURL *, curl_easy_cleanup)
DEFINE_TRIVIAL_CLEANUP_FUNC(struct curl_slist *, curl_slist_free_all)

/* A handle for POST path on ep: the connect deadline, TCP keepalives and TLS set; the body,
 * the answer's callback and the whole-call deadline are the caller's. detail receives
 * libcurl's words (CURL_ERROR_SIZE). */
CURL *etcd_handle_new(const struct etcd *c, const struct etcd_endpoint *ep, const char *path,
		      struct curl_slist *headers, char *detail);
/* -errno for a failed transfer, and why in words ("connection refused", "no answer within
 * 5000 ms", "TLS: …"). */
int etcd_transfer_error(CURL *h, CURLcode cc, const char *detail, bool https, bool too_large,
			long limit_ms, char *why, size_t n);
/* The gateway's error object as -errno and words. */
int etcd_gateway_error(const json_t *ans, char *why, size_t n);
/* Whether a failure on one endpoint lets a call try the next (transfers that failed, no
 * leader), rather than being the answer. */
bool etcd_error_moves_on(int r);

/* An int64 field, sent as a string (absent: 0), and one to send. */
int etcd_json_int64(const json_t *obj, const char *name, int64_t *ret);
json_t *etcd_json_int64_new(int64_t v);
/* prefix + key, base64; the end of the range of keys beginning with prefix + key_prefix. */
json_t *etcd_key_json(const struct etcd *c, const char *key);
json_t *etcd_range_end_json(const struct etcd *c, const char *key_prefix);
/* A KeyValue of an answer, its key made relative to the prefix (-EPROTO outside it). */
int etcd_kv_from_json(const struct etcd *c, const json_t *j, struct etcd_kv *ret,
		      struct station_error *e);
