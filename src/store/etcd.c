/* SPDX-License-Identifier: MIT */
/* etcd.h over libcurl and jansson (the watch: etcd-watch.c). What it adds to the header:
 * - Endpoints are tried in the order given, starting from the one that answered last. Each
 *   attempt has ETCD_CONNECT_MS to connect and ETCD_CALL_MS in all, so a call whose endpoints
 *   all hang returns after n * ETCD_CALL_MS at most; a refused connection costs nothing. An
 *   attempt that timed out may still have been applied: etcd_create() retried on the next
 *   endpoint can then find its own key (-EEXIST).
 * - The gateway's own errors: gRPC code 5 (a lease not found) is -ENOENT, 11 (compacted)
 *   -ERANGE, 3 (invalid argument) -EINVAL, 4 -ETIMEDOUT, 14 (unavailable: no leader) tries the
 *   next endpoint and is -EAGAIN when none does better; anything else is -EIO with etcd's words.
 *   An HTTPS handshake that fails either way (etcd's certificate not signed by ca_file, or no
 *   client certificate where etcd wants one) is -EACCES naming TLS.
 * - Answers are bounded: ETCD_ANSWER_MAX for a call, ETCD_WATCH_MESSAGE_MAX for one message of
 *   a watch (-EFBIG beyond, the connection closed). A key in an answer outside the prefix, or
 *   holding a NUL byte, is -EPROTO.
 * - A watch connects as a call does: its first message ("created") must come within
 *   ETCD_CALL_MS, or the next endpoint is tried. Once created it stays on that endpoint; TCP
 *   keepalives (ETCD_KEEPALIVE_S) notice a peer that vanished, and a stream that ends is
 *   -ECONNRESET. A watch cancelled by etcd other than for compaction is -ECANCELED. */
#include "etcd-internal.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "basic/util.h"

#define ETCD_DEFAULT_PREFIX "/station/"

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_result;

static void curl_init(void)
{
	curl_init_result = curl_global_init(CURL_GLOBAL_DEFAULT);
}

/* ---- configuration ------------------------------------------------------------------------- */

static bool host_char_ok(char ch, bool bracketed)
{
	if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9'))
		return true;
	return ch == '.' || ch == '-' || ch == '_' || (bracketed && ch == ':');
}

/* One "HOST:PORT" of the list (s is not NUL-terminated at len). */
static int endpoint_parse(const char *s, size_t len, struct etcd_endpoint *ret,
			  struct station_error *e)
{
	const char *colon = NULL, *host = s, *host_end;
	bool bracketed = len > 0 && s[0] == '[';
	uint64_t port;
	char buf[16];

	for (size_t i = len; i > 0; i--)
		if (s[i - 1] == ':') {
			colon = s + i - 1;
			break;
		}
	if (!colon)
		return station_error_set(e, -EINVAL, "fleet", "etcd endpoint '%.*s' has no port",
					 (int)len, s);
	host_end = colon;
	if (bracketed) {
		host++;
		if (host_end == s || host_end[-1] != ']')
			return station_error_set(e, -EINVAL, "fleet",
						 "etcd endpoint '%.*s': '[' without ']'", (int)len,
						 s);
		host_end--;
	}
	if (host_end <= host)
		return station_error_set(e, -EINVAL, "fleet", "etcd endpoint '%.*s' has no host",
					 (int)len, s);
	for (const char *p = host; p < host_end; p++)
		if (!host_char_ok(*p, bracketed))
			return station_error_set(e, -EINVAL, "fleet",
						 "etcd endpoint '%.*s': bad character in host",
						 (int)len, s);
	if ((size_t)(s + len - colon - 1) >= sizeof buf || s + len == colon + 1)
		return station_error_set(e, -EINVAL, "fleet", "etcd endpoint '%.*s': bad port",
					 (int)len, s);
	snprintf(buf, sizeof buf, "%.*s", (int)(s + len - colon - 1), colon + 1);
	if (parse_u64(buf, 65535, &port) < 0 || port == 0)
		return station_error_set(e, -EINVAL, "fleet",
					 "etcd endpoint '%.*s': port out of range", (int)len, s);
	if (len >= sizeof ret->hostport)
		return station_error_set(e, -EINVAL, "fleet", "etcd endpoint '%.*s' too long",
					 (int)len, s);
	snprintf(ret->hostport, sizeof ret->hostport, "%.*s", (int)len, s);
	return 0;
}

static int url_parse(struct etcd *c, const char *url, struct station_error *e)
{
	const char *p;

	if (!url || !url[0])
		return station_error_set(e, -EINVAL, "fleet", "no etcd URL");
	if (strncmp(url, "etcd://", 7) == 0) {
		p = url + 7;
	} else if (strncmp(url, "etcds://", 8) == 0) {
		p = url + 8;
		c->https = true;
	} else {
		return station_error_set(e, -EINVAL, "fleet",
					 "etcd URL '%s' must begin with etcd:// or etcds://", url);
	}
	for (;;) {
		size_t len = strcspn(p, ",");
		int r;

		if (len > 0 && p[len - 1] == '/' && p[len] == '\0')
			len--; /* "etcd://host:2379/" */
		if (c->n_ep == ETCD_ENDPOINTS_MAX)
			return station_error_set(e, -EINVAL, "fleet",
						 "etcd URL '%s' names more than %d endpoints", url,
						 ETCD_ENDPOINTS_MAX);
		r = endpoint_parse(p, len, &c->ep[c->n_ep], e);
		if (r < 0)
			return r;
		c->n_ep++;
		p += strcspn(p, ",");
		if (*p == '\0')
			return 0;
		p++;
	}
}

static int file_option(const char *what, const char *path, char **ret, struct station_error *e)
{
	if (!path)
		return 0;
	if (access(path, R_OK) < 0)
		return station_error_set(e, -EINVAL, "fleet", "etcd %s '%s' cannot be read: %s",
					 what, path, strerror(errno));
	*ret = strdup(path);
	return *ret ? 0 : -ENOMEM;
}

static int config_files(struct etcd *c, const struct etcd_config *cfg, struct station_error *e)
{
	int r;

	if (!c->https && (cfg->ca_file || cfg->cert_file || cfg->key_file))
		return station_error_set(e, -EINVAL, "fleet",
					 "etcd certificates need an etcds:// URL");
	if (!cfg->cert_file != !cfg->key_file)
		return station_error_set(
			e, -EINVAL, "fleet",
			"an etcd client certificate needs its key and the reverse");
	r = file_option("CA file", cfg->ca_file, &c->ca_file, e);
	if (r >= 0)
		r = file_option("certificate", cfg->cert_file, &c->cert_file, e);
	if (r >= 0)
		r = file_option("key", cfg->key_file, &c->key_file, e);
	return r;
}

int etcd_new(const struct etcd_config *cfg, struct etcd **ret, struct station_error *e)
{
	const char *prefix = cfg->prefix ?: ETCD_DEFAULT_PREFIX;
	struct etcd *c;
	int r;

	pthread_once(&curl_once, curl_init);
	if (curl_init_result != CURLE_OK)
		return station_error_set(e, -ENOMEM, NULL, "libcurl: %s",
					 curl_easy_strerror(curl_init_result));
	c = calloc(1, sizeof *c);
	if (!c)
		return -ENOMEM;
	r = url_parse(c, cfg->url, e);
	if (r >= 0)
		r = config_files(c, cfg, e);
	if (r >= 0) {
		bool slash = prefix[0] && prefix[strlen(prefix) - 1] == '/';

		r = asprintf(&c->prefix, "%s%s", prefix, slash ? "" : "/") < 0 ? -ENOMEM : 0;
	}
	if (r >= 0) {
		c->prefix_len = strlen(c->prefix);
		r = asprintf(&c->description, "%s prefix %s", cfg->url, c->prefix) < 0 ? -ENOMEM :
											 0;
	}
	if (r < 0) {
		etcd_free(c);
		return r;
	}
	*ret = c;
	return 0;
}

void etcd_free(struct etcd *c)
{
	if (!c)
		return;
	free(c->prefix);
	free(c->ca_file);
	free(c->cert_file);
	free(c->key_file);
	free(c->description);
	free(c);
}

const char *etcd_describe(const struct etcd *c)
{
	return c->description;
}

void etcd_kv_free_array(struct etcd_kv *v, size_t n)
{
	for (size_t i = 0; v && i < n; i++) {
		free(v[i].key);
		free(v[i].value);
	}
	free(v);
}

/* ---- one HTTP exchange ---------------------------------------------------------------------- */

struct answer {
	char *data;
	size_t len;
	size_t max;
	bool too_large;
};

static size_t on_answer(char *data, size_t size, size_t nmemb, void *userdata)
{
	struct answer *a = userdata;
	size_t n = size * nmemb;
	char *p;

	if (n > a->max - a->len) {
		a->too_large = true;
		return 0;
	}
	p = realloc(a->data, a->len + n + 1);
	if (!p)
		return 0;
	a->data = p;
	memcpy(a->data + a->len, data, n);
	a->len += n;
	a->data[a->len] = '\0';
	return n;
}

/* A handle for POST path on ep, the connect deadline and TLS set; body and answer are the
 * caller's. */
CURL *etcd_handle_new(const struct etcd *c, const struct etcd_endpoint *ep, const char *path,
		      struct curl_slist *headers, char *detail)
{
	char url[320];
	CURL *h;

	h = curl_easy_init();
	if (!h)
		return NULL;
	snprintf(url, sizeof url, "%s://%s%s", c->https ? "https" : "http", ep->hostport, path);
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_PROXY, "");
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long)ETCD_CONNECT_MS);
	curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
	curl_easy_setopt(h, CURLOPT_TCP_KEEPIDLE, (long)ETCD_KEEPALIVE_S);
	curl_easy_setopt(h, CURLOPT_TCP_KEEPINTVL, (long)ETCD_KEEPALIVE_S);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
	curl_easy_setopt(h, CURLOPT_ERRORBUFFER, detail);
	if (c->ca_file)
		curl_easy_setopt(h, CURLOPT_CAINFO, c->ca_file);
	if (c->cert_file) {
		curl_easy_setopt(h, CURLOPT_SSLCERT, c->cert_file);
		curl_easy_setopt(h, CURLOPT_SSLKEY, c->key_file);
	}
	return h;
}

static bool curl_code_is_tls(CURLcode cc)
{
	switch (cc) {
	case CURLE_SSL_CONNECT_ERROR:
	case CURLE_PEER_FAILED_VERIFICATION:
	case CURLE_SSL_CERTPROBLEM:
	case CURLE_SSL_CIPHER:
	case CURLE_SSL_CACERT_BADFILE:
	case CURLE_SSL_ENGINE_NOTFOUND:
	case CURLE_SSL_ENGINE_SETFAILED:
	case CURLE_SSL_ISSUER_ERROR:
	case CURLE_SSL_CRL_BADFILE:
	case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
	case CURLE_SSL_INVALIDCERTSTATUS:
	case CURLE_SSL_CLIENTCERT:
		return true;
	default:
		return false;
	}
}

/* -errno for a failed transfer, and why in words: "connection refused", "no answer within
 * 5000 ms", "TLS: …". */
int etcd_transfer_error(CURL *h, CURLcode cc, const char *detail, bool https, bool too_large,
			long limit_ms, char *why, size_t n)
{
	long os = 0, status = 0;
	curl_off_t connected = 0;

	curl_easy_getinfo(h, CURLINFO_OS_ERRNO, &os);
	curl_easy_getinfo(h, CURLINFO_CONNECT_TIME_T, &connected);
	if (too_large || cc == CURLE_FILESIZE_EXCEEDED) {
		snprintf(why, n, "an answer larger than %d bytes", ETCD_ANSWER_MAX);
		return -EFBIG;
	}
	if (cc == CURLE_OPERATION_TIMEDOUT) {
		if (connected == 0)
			snprintf(why, n, "no connection within %d ms", ETCD_CONNECT_MS);
		else
			snprintf(why, n, "no answer within %ld ms", limit_ms);
		return -ETIMEDOUT;
	}
	if (cc == CURLE_COULDNT_RESOLVE_HOST) {
		snprintf(why, n, "host not found");
		return -EHOSTUNREACH;
	}
	if (cc == CURLE_COULDNT_CONNECT) {
		snprintf(why, n, "%s", os > 0 ? strerror((int)os) : "cannot connect");
		if (why[0] >= 'A' && why[0] <= 'Z')
			why[0] = (char)(why[0] - 'A' + 'a');
		return os == EHOSTUNREACH || os == ENETUNREACH ? -EHOSTUNREACH : -ECONNREFUSED;
	}
	if (curl_code_is_tls(cc) || strstr(detail, "alert") || strstr(detail, "SSL")) {
		snprintf(why, n, "TLS: %s", detail[0] ? detail : curl_easy_strerror(cc));
		return -EACCES;
	}
	/* TLS 1.3: a client certificate is refused after the client's side of the handshake,
	 * and the alert saying so is lost when the request's write fails first. */
	curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
	if (https && status == 0 &&
	    (cc == CURLE_SEND_ERROR || cc == CURLE_RECV_ERROR || cc == CURLE_GOT_NOTHING)) {
		snprintf(why, n,
			 "TLS: etcd closed the connection before answering (it refuses a client "
			 "without a certificate it trusts): %s",
			 detail[0] ? detail : curl_easy_strerror(cc));
		return -EACCES;
	}
	snprintf(why, n, "%s (curl %d)", detail[0] ? detail : curl_easy_strerror(cc), (int)cc);
	return cc == CURLE_OUT_OF_MEMORY ? -ENOMEM : -ECONNRESET;
}

/* The gateway's error {"error","code","message"} (a call) or {"error":{"grpc_code",
 * "message"}} (a stream) as -errno and words. */
int etcd_gateway_error(const json_t *ans, char *why, size_t n)
{
	const json_t *err = json_object_get(ans, "error");
	const json_t *code = json_object_get(ans, "code");
	const char *msg = json_string_value(json_object_get(ans, "message"));

	if (json_is_object(err)) {
		code = json_object_get(err, "grpc_code") ?: json_object_get(err, "code");
		msg = json_string_value(json_object_get(err, "message"));
	}
	snprintf(why, n, "%s", msg ?: json_string_value(err) ?: "an error without words");
	switch (json_integer_value(code)) {
	case 3:
		return -EINVAL;
	case 4:
		return -ETIMEDOUT;
	case 5:
		return -ENOENT;
	case 11:
		return -ERANGE;
	case 14:
		return -EAGAIN;
	default:
		return -EIO;
	}
}

/* One POST of body to ep: 0 and the answer's JSON object in *ret (HTTP 200), or -errno and
 * why. -EAGAIN (etcd unavailable) and transfer errors other than -EFBIG let the caller try the
 * next endpoint. */
static int call_once(const struct etcd *c, const struct etcd_endpoint *ep, const char *path,
		     const char *body, json_t **ret, char *why, size_t n)
{
	char detail[CURL_ERROR_SIZE] = "";
	struct answer a = { .max = ETCD_ANSWER_MAX };
	json_error_t jerr;
	long status = 0;
	CURLcode cc;
	int r;

	_cleanup_(curl_slist_free_allp) struct curl_slist *headers = NULL;
	_cleanup_(curl_easy_cleanupp) CURL *h = NULL;
	_cleanup_json_ json_t *ans = NULL;

	headers = curl_slist_append(NULL, "Content-Type: application/json");
	if (!headers)
		return -ENOMEM;
	h = etcd_handle_new(c, ep, path, headers, detail);
	if (!h)
		return -ENOMEM;
	curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)ETCD_CALL_MS);
	curl_easy_setopt(h, CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)ETCD_ANSWER_MAX);
	curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_answer);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, &a);
	cc = curl_easy_perform(h);
	if (cc != CURLE_OK) {
		r = etcd_transfer_error(h, cc, detail, c->https, a.too_large, ETCD_CALL_MS, why, n);
		free(a.data);
		return r;
	}
	curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
	ans = json_loadb(a.data ?: "", a.len, 0, &jerr);
	free(a.data);
	if (!json_is_object(ans)) {
		snprintf(why, n, "HTTP %ld, not the gateway's JSON (%s)", status, jerr.text);
		return -EPROTO;
	}
	if (status != 200 || json_object_get(ans, "error"))
		return etcd_gateway_error(ans, why, n);
	*ret = TAKE_PTR(ans);
	return 0;
}

bool etcd_error_moves_on(int r)
{
	return r == -EAGAIN || r == -ETIMEDOUT || r == -ECONNREFUSED || r == -EHOSTUNREACH ||
	       r == -ECONNRESET || r == -EACCES;
}

/* POSTs req to path on each endpoint in turn until one answers: 0 and the answer, or -errno
 * with e naming each endpoint tried and why. */
static int etcd_call(struct etcd *c, const char *path, const json_t *req, json_t **ret,
		     struct station_error *e)
{
	unsigned start = __atomic_load_n(&c->preferred, __ATOMIC_RELAXED);
	char words[512] = "";
	size_t used = 0;
	int r = -EIO;

	_cleanup_free_ char *body = json_dumps(req, JSON_COMPACT);

	if (!body)
		return -ENOMEM;
	for (size_t i = 0; i < c->n_ep; i++) {
		unsigned k = (start + i) % c->n_ep;
		char why[256];

		r = call_once(c, &c->ep[k], path, body, ret, why, sizeof why);
		if (r == 0) {
			__atomic_store_n(&c->preferred, k, __ATOMIC_RELAXED);
			return 0;
		}
		if (used < sizeof words)
			used += (size_t)snprintf(words + used, sizeof words - used, "%s%s: %s",
						 used ? "; " : "", c->ep[k].hostport, why);
		if (r == -ENOMEM)
			return r;
		/* etcd's answer stands (another endpoint of the same cluster would say the same),
		 * and a bound is a bound: only a transfer that failed or no leader moves on. */
		if (!etcd_error_moves_on(r))
			break;
	}
	return station_error_set(e, r, NULL, "etcd %s: %s", path, words);
}

/* ---- JSON fields ---------------------------------------------------------------------------- */

/* An int64 field, which the gateway sends as a string; absent (proto3's zero) is 0. */
int etcd_json_int64(const json_t *obj, const char *name, int64_t *ret)
{
	const json_t *v = json_object_get(obj, name);
	const char *s;
	char *end;

	if (!v) {
		*ret = 0;
		return 0;
	}
	if (json_is_integer(v)) {
		*ret = json_integer_value(v);
		return 0;
	}
	s = json_string_value(v);
	if (!s || !s[0])
		return -EPROTO;
	errno = 0;
	*ret = strtoll(s, &end, 10);
	return errno || *end ? -EPROTO : 0;
}

static int64_t header_revision(const json_t *ans)
{
	int64_t rev = 0;

	(void)etcd_json_int64(json_object_get(ans, "header"), "revision", &rev);
	return rev;
}

json_t *etcd_json_int64_new(int64_t v)
{
	char buf[24];

	snprintf(buf, sizeof buf, "%lld", (long long)v);
	return json_string(buf);
}

static json_t *json_base64_new(const void *data, size_t n)
{
	_cleanup_free_ char *s = base64_encode(data, n);

	return s ? json_string(s) : NULL;
}

/* prefix + key, base64. */
json_t *etcd_key_json(const struct etcd *c, const char *key)
{
	size_t n = strlen(key);
	_cleanup_free_ char *full = malloc(c->prefix_len + n + 1);

	if (!full)
		return NULL;
	memcpy(full, c->prefix, c->prefix_len);
	memcpy(full + c->prefix_len, key, n + 1);
	return json_base64_new(full, c->prefix_len + n);
}

/* The end of the range of every key beginning with prefix + key_prefix: that with its last
 * byte + 1 (a last 0xff dropped and the byte before it carried). */
json_t *etcd_range_end_json(const struct etcd *c, const char *key_prefix)
{
	size_t n = strlen(key_prefix);
	_cleanup_free_ uint8_t *end = malloc(c->prefix_len + n + 1);
	size_t len = c->prefix_len + n;

	if (!end)
		return NULL;
	memcpy(end, c->prefix, c->prefix_len);
	memcpy(end + c->prefix_len, key_prefix, n);
	while (len > 0 && end[len - 1] == 0xff)
		len--;
	if (len == 0)
		return json_string("AA=="); /* "\0": every key */
	end[len - 1]++;
	return json_base64_new(end, len);
}

static int base64_field(const json_t *obj, const char *name, uint8_t **ret, size_t *ret_len)
{
	const json_t *v = json_object_get(obj, name);
	const char *s = v ? json_string_value(v) : "";

	if (!s)
		return -EPROTO;
	return base64_decode(s, strlen(s), ret, ret_len) < 0 ? -EPROTO : 0;
}

/* One of the gateway's KeyValue objects, its key made relative to the prefix. */
int etcd_kv_from_json(const struct etcd *c, const json_t *j, struct etcd_kv *ret,
		      struct station_error *e)
{
	_cleanup_free_ uint8_t *key = NULL, *value = NULL;
	struct etcd_kv kv = {};
	size_t key_len, value_len;

	if (!json_is_object(j) || base64_field(j, "key", &key, &key_len) < 0 ||
	    base64_field(j, "value", &value, &value_len) < 0 ||
	    etcd_json_int64(j, "mod_revision", &kv.mod_revision) < 0 ||
	    etcd_json_int64(j, "lease", &kv.lease) < 0)
		return station_error_set(e, -EPROTO, NULL, "etcd: a key-value not as sent by etcd");
	if (key_len < c->prefix_len || memcmp(key, c->prefix, c->prefix_len) != 0 ||
	    memchr(key, '\0', key_len))
		return station_error_set(e, -EPROTO, NULL, "etcd: a key outside the prefix '%s'",
					 c->prefix);
	kv.key = strdup((char *)key + c->prefix_len);
	if (!kv.key)
		return -ENOMEM;
	kv.value = (char *)TAKE_PTR(value); /* base64_decode NUL-terminates */
	kv.value_len = value_len;
	*ret = kv;
	return 0;
}

/* ---- keys ----------------------------------------------------------------------------------- */

/* /v3/kv/range of key (alone, or every key beginning with it). */
static int range(struct etcd *c, const char *key, bool prefix, json_t **ret,
		 struct station_error *e)
{
	_cleanup_json_ json_t *req = json_object();

	if (!req || json_object_set_new(req, "key", etcd_key_json(c, key)) < 0 ||
	    (prefix && json_object_set_new(req, "range_end", etcd_range_end_json(c, key)) < 0))
		return -ENOMEM;
	return etcd_call(c, "/v3/kv/range", req, ret, e);
}

int etcd_get(struct etcd *c, const char *key, struct etcd_kv *ret, int64_t *ret_revision,
	     struct station_error *e)
{
	_cleanup_json_ json_t *ans = NULL;
	const json_t *kvs;
	int r;

	r = range(c, key, false, &ans, e);
	if (r < 0)
		return r;
	kvs = json_object_get(ans, "kvs");
	if (json_array_size(kvs) == 0)
		return station_error_set(e, -ENOENT, NULL, "etcd: no key '%s%s'", c->prefix, key);
	r = etcd_kv_from_json(c, json_array_get(kvs, 0), ret, e);
	if (r < 0)
		return r;
	if (ret_revision)
		*ret_revision = header_revision(ans);
	return 0;
}

int etcd_range(struct etcd *c, const char *key_prefix, struct etcd_kv **ret, size_t *ret_n,
	       int64_t *ret_revision, struct station_error *e)
{
	_cleanup_json_ json_t *ans = NULL;
	struct etcd_kv *v;
	const json_t *kvs;
	size_t n;
	int r;

	r = range(c, key_prefix, true, &ans, e);
	if (r < 0)
		return r;
	kvs = json_object_get(ans, "kvs");
	if (kvs && !json_is_array(kvs))
		return station_error_set(e, -EPROTO, NULL, "etcd: kvs is %s", json_kind_name(kvs));
	n = json_array_size(kvs);
	v = calloc(n ?: 1, sizeof *v);
	if (!v)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		r = etcd_kv_from_json(c, json_array_get(kvs, i), &v[i], e);
		if (r < 0) {
			etcd_kv_free_array(v, i);
			return r;
		}
	}
	*ret = v;
	*ret_n = n;
	if (ret_revision)
		*ret_revision = header_revision(ans);
	return 0;
}

/* A PutRequest's JSON. */
static json_t *put_json(const struct etcd *c, const char *key, const void *value, size_t len,
			int64_t lease)
{
	_cleanup_json_ json_t *req = json_object();

	if (!req || json_object_set_new(req, "key", etcd_key_json(c, key)) < 0 ||
	    json_object_set_new(req, "value", json_base64_new(value, len)) < 0 ||
	    (lease && json_object_set_new(req, "lease", etcd_json_int64_new(lease)) < 0))
		return NULL;
	return TAKE_PTR(req);
}

int etcd_put(struct etcd *c, const char *key, const void *value, size_t len, int64_t lease,
	     struct station_error *e)
{
	_cleanup_json_ json_t *req = put_json(c, key, value, len, lease);
	_cleanup_json_ json_t *ans = NULL;

	if (!req)
		return -ENOMEM;
	return etcd_call(c, "/v3/kv/put", req, &ans, e);
}

int etcd_create(struct etcd *c, const char *key, const void *value, size_t len, int64_t lease,
		struct station_error *e)
{
	_cleanup_json_ json_t *put = put_json(c, key, value, len, lease);
	_cleanup_json_ json_t *ans = NULL;
	_cleanup_json_ json_t *req = NULL;
	int r;

	if (!put)
		return -ENOMEM;
	req = json_pack("{s:[{s:o,s:s,s:s,s:s}],s:[{s:O}]}", "compare", "key",
			etcd_key_json(c, key), "target", "CREATE", "result", "EQUAL",
			"create_revision", "0", "success", "request_put", put);
	if (!req)
		return -ENOMEM;
	r = etcd_call(c, "/v3/kv/txn", req, &ans, e);
	if (r < 0)
		return r;
	if (!json_is_true(json_object_get(ans, "succeeded")))
		return station_error_set(e, -EEXIST, NULL, "etcd: key '%s%s' exists", c->prefix,
					 key);
	return 0;
}

int etcd_delete(struct etcd *c, const char *key, bool prefix, struct station_error *e)
{
	_cleanup_json_ json_t *req = json_object();
	_cleanup_json_ json_t *ans = NULL;
	int64_t deleted;
	int r;

	if (!req || json_object_set_new(req, "key", etcd_key_json(c, key)) < 0 ||
	    (prefix && json_object_set_new(req, "range_end", etcd_range_end_json(c, key)) < 0))
		return -ENOMEM;
	r = etcd_call(c, "/v3/kv/deleterange", req, &ans, e);
	if (r < 0)
		return r;
	if (etcd_json_int64(ans, "deleted", &deleted) < 0)
		return station_error_set(e, -EPROTO, NULL, "etcd: deleted is not a number");
	if (!prefix && deleted == 0)
		return station_error_set(e, -ENOENT, NULL, "etcd: no key '%s%s'", c->prefix, key);
	return 0;
}

/* ---- leases --------------------------------------------------------------------------------- */

int etcd_lease_grant(struct etcd *c, int ttl_s, int64_t *ret_id, struct station_error *e)
{
	_cleanup_json_ json_t *req = NULL, *ans = NULL;
	const char *err;
	int64_t id;
	int r;

	if (ttl_s <= 0)
		return station_error_set(e, -EINVAL, NULL, "etcd: a lease of %d s", ttl_s);
	req = json_pack("{s:o}", "TTL", etcd_json_int64_new(ttl_s));
	if (!req)
		return -ENOMEM;
	r = etcd_call(c, "/v3/lease/grant", req, &ans, e);
	if (r < 0)
		return r;
	err = json_string_value(json_object_get(ans, "error"));
	if (err && err[0])
		return station_error_set(e, -EIO, NULL, "etcd: lease grant: %s", err);
	if (etcd_json_int64(ans, "ID", &id) < 0 || id == 0)
		return station_error_set(e, -EPROTO, NULL, "etcd: lease grant without an ID");
	*ret_id = id;
	return 0;
}

int etcd_lease_keepalive(struct etcd *c, int64_t id, struct station_error *e)
{
	_cleanup_json_ json_t *req = json_pack("{s:o}", "ID", etcd_json_int64_new(id));
	_cleanup_json_ json_t *ans = NULL;
	const json_t *result;
	int64_t ttl;
	int r;

	if (!req)
		return -ENOMEM;
	r = etcd_call(c, "/v3/lease/keepalive", req, &ans, e);
	if (r < 0)
		return r;
	result = json_object_get(ans, "result");
	if (!json_is_object(result) || etcd_json_int64(result, "TTL", &ttl) < 0)
		return station_error_set(e, -EPROTO, NULL,
					 "etcd: a keepalive answer without result");
	if (ttl <= 0)
		return station_error_set(e, -ENOENT, NULL, "etcd: lease %llx expired or revoked",
					 (unsigned long long)id);
	return 0;
}

int etcd_lease_revoke(struct etcd *c, int64_t id, struct station_error *e)
{
	_cleanup_json_ json_t *req = json_pack("{s:o}", "ID", etcd_json_int64_new(id));
	_cleanup_json_ json_t *ans = NULL;

	if (!req)
		return -ENOMEM;
	return etcd_call(c, "/v3/lease/revoke", req, &ans, e);
}
