/* SPDX-License-Identifier: MIT */
/* Pull by digest from an OCI distribution registry with libcurl: the manifest (or image index)
 * by digest with the right Accept headers, then config and layer blobs by digest, each
 * verified as it is written. Anonymous bearer tokens are fetched when a 401 asks for one. */

#include <curl/curl.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "basic/cleanup.h"
#include "basic/json-util.h"
#include "image/image-internal.h"

#define ERROR_BODY_MAX (64u << 10)
#define TOKEN_MAX (16u << 10)
#define DEFAULT_STALL_SEC 60

DEFINE_TRIVIAL_CLEANUP_FUNC(CURL *, curl_easy_cleanup);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct curl_slist *, curl_slist_free_all);

static const char accept_manifests[] = "Accept: " MT_OCI_MANIFEST ", " MT_OCI_INDEX
				       ", " MT_DOCKER_MANIFEST ", " MT_DOCKER_LIST;

struct registry {
	struct blob_source src;
	const struct image_pull_options *o;
	char host[IMAGE_NAME_MAX];
	char repo[IMAGE_NAME_MAX];
	char what[2 * IMAGE_NAME_MAX + 32]; /* "registry HOST" */
	char *token;
};

/* One response: a 2xx body goes to the blob writer or to memory (up to body_max); any other
 * body to memory up to ERROR_BODY_MAX, for the registry's error message. */
struct response {
	CURL *curl;
	long status;
	struct registry_headers h;
	char *body;
	size_t body_len, body_max;
	struct blob_writer *w;
	int err;
};

static void response_done(struct response *r)
{
	registry_headers_done(&r->h);
	free(r->body);
	*r = (struct response){};
}

void registry_headers_done(struct registry_headers *h)
{
	free(h->www_authenticate);
	*h = (struct registry_headers){};
}

/* Bytes of s[0..n) before the first byte of reject (or n): s need not be NUL-terminated. */
static size_t span_until(const char *s, size_t n, const char *reject)
{
	size_t i = 0;

	while (i < n && s[i] != '\0' && !strchr(reject, s[i]))
		i++;
	return i;
}

void registry_header_line(struct registry_headers *h, const char *data, size_t len)
{
	const char *v;
	size_t vlen;

	if (len >= 5 && strncmp(data, "HTTP/", 5) == 0) { /* a new response (redirect, retry) */
		h->content_type[0] = '\0';
		free(h->www_authenticate);
		h->www_authenticate = NULL;
	}
	v = memchr(data, ':', len);
	if (!v)
		return;
	vlen = len - (++v - data);
	while (vlen > 0 && (*v == ' ' || *v == '\t'))
		v++, vlen--;
	while (vlen > 0 && (v[vlen - 1] == '\r' || v[vlen - 1] == '\n' || v[vlen - 1] == ' '))
		vlen--;
	if (len > 13 && strncasecmp(data, "content-type:", 13) == 0)
		snprintf(h->content_type, sizeof h->content_type, "%.*s",
			 (int)span_until(v, vlen, ";\r\n"), v);
	else if (len > 17 && strncasecmp(data, "www-authenticate:", 17) == 0) {
		free(h->www_authenticate);
		h->www_authenticate = strndup(v, vlen);
	}
}

static size_t header_cb(char *data, size_t size, size_t n, void *userdata)
{
	struct response *resp = userdata;

	registry_header_line(&resp->h, data, size * n);
	return size * n;
}

static size_t body_cb(char *data, size_t size, size_t n, void *userdata)
{
	struct response *resp = userdata;
	size_t len = size * n;
	long status = 0;
	char *nb;

	curl_easy_getinfo(resp->curl, CURLINFO_RESPONSE_CODE, &status);
	if (status / 100 == 2 && resp->w) {
		resp->err = blob_writer_write(resp->w, data, len);
		return resp->err < 0 ? 0 : len;
	}
	if (resp->body_len + len > (status / 100 == 2 ? resp->body_max : ERROR_BODY_MAX)) {
		resp->err = -EFBIG;
		return 0;
	}
	nb = realloc(resp->body, resp->body_len + len + 1);
	if (!nb) {
		resp->err = -ENOMEM;
		return 0;
	}
	memcpy(nb + resp->body_len, data, len);
	resp->body = nb;
	resp->body_len += len;
	nb[resp->body_len] = '\0';
	return len;
}

static void curl_setup(CURL *c, const struct image_pull_options *o, struct response *resp)
{
	const char *protocols = o->plain_http ? "http,https" : "https";
	long stall = o->timeout_sec > 0 ? o->timeout_sec : DEFAULT_STALL_SEC;

	curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, protocols);
	curl_easy_setopt(c, CURLOPT_REDIR_PROTOCOLS_STR, protocols);
	curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 1L);
	curl_easy_setopt(c, CURLOPT_MAXREDIRS, 5L);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 30L);
	curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1024L);
	curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, stall);
	curl_easy_setopt(c, CURLOPT_USERAGENT, "station-sandbox/" STATION_VERSION);
	if (o->ca_file)
		curl_easy_setopt(c, CURLOPT_CAINFO, o->ca_file);
	curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, header_cb);
	curl_easy_setopt(c, CURLOPT_HEADERDATA, resp);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, body_cb);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, resp);
}

/* One GET; resp->status is the final HTTP status. A transport failure sets a message. */
static int http_get(struct registry *reg, const char *url, const char *accept, const char *token,
		    struct response *resp, struct station_error *e)
{
	_cleanup_(curl_easy_cleanupp) CURL *c = curl_easy_init();
	_cleanup_(curl_slist_free_allp) struct curl_slist *headers = NULL;
	_cleanup_free_ char *auth = NULL;
	CURLcode cr;

	if (!c)
		return -ENOMEM;
	resp->curl = c;
	curl_setup(c, reg->o, resp);
	curl_easy_setopt(c, CURLOPT_URL, url);
	if (accept)
		headers = curl_slist_append(headers, accept);
	if (token) {
		if (asprintf(&auth, "Authorization: Bearer %s", token) < 0)
			return -ENOMEM;
		headers = curl_slist_append(headers, auth);
	}
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
	cr = curl_easy_perform(c);
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &resp->status);
	resp->curl = NULL;
	if (resp->err < 0 && resp->err != -EFBIG)
		return resp->err;
	if (cr != CURLE_OK && resp->err == 0)
		return station_error_set(e, -EIO, NULL, "%s: %s: %s", reg->what, url,
					 curl_easy_strerror(cr));
	return 0;
}

char *registry_challenge_param(const char *challenge, const char *key)
{
	size_t klen = strlen(key);

	for (const char *p = challenge; (p = strstr(p, key)); p += klen) {
		const char *end;

		if ((p != challenge && p[-1] != ' ' && p[-1] != ',') || strncmp(p + klen, "=\"", 2))
			continue;
		p += klen + 2;
		end = strchr(p, '"');
		return end ? strndup(p, end - p) : NULL;
	}
	return NULL;
}

static int token_url(struct registry *reg, const char *challenge, char **ret)
{
	_cleanup_free_ char *realm = registry_challenge_param(challenge, "realm");
	_cleanup_free_ char *service = registry_challenge_param(challenge, "service");
	_cleanup_free_ char *scope = registry_challenge_param(challenge, "scope");
	_cleanup_(curl_easy_cleanupp) CURL *c = curl_easy_init();
	char *s_esc, *sc_esc;
	int r;

	if (!c)
		return -ENOMEM;
	if (!realm || (strncmp(realm, "https://", 8) && strncmp(realm, "http://", 7)))
		return -EPROTO;
	if (!scope && asprintf(&scope, "repository:%s:pull", reg->repo) < 0)
		return -ENOMEM;
	s_esc = curl_easy_escape(c, service ? service : "", 0);
	sc_esc = curl_easy_escape(c, scope, 0);
	r = asprintf(ret, "%s%sservice=%s&scope=%s", realm, strchr(realm, '?') ? "&" : "?",
		     s_esc ? s_esc : "", sc_esc ? sc_esc : "");
	curl_free(s_esc);
	curl_free(sc_esc);
	return r < 0 ? -ENOMEM : 0;
}

int registry_token_parse(const char *body, size_t len, char **ret)
{
	_cleanup_json_ json_t *j = json_loadb(body ? body : "", body ? len : 0, 0, NULL);
	json_t *t = json_object_get(j, "token");

	if (!json_is_string(t))
		t = json_object_get(j, "access_token");
	if (!json_is_string(t) || !*json_string_value(t))
		return -EPROTO;
	/* It goes back in an Authorization header: a CR or LF would add headers of its own. */
	for (const char *c = json_string_value(t); *c; c++)
		if ((unsigned char)*c < 0x20 || *c == 0x7f)
			return -EPROTO;
	*ret = strdup(json_string_value(t));
	return *ret ? 0 : -ENOMEM;
}

/* Anonymous token for the challenge of a 401 (Bearer realm=…,service=…,scope=…). */
static int token_fetch(struct registry *reg, const char *challenge, struct station_error *e)
{
	_cleanup_free_ char *url = NULL;
	struct response resp = { .body_max = TOKEN_MAX };
	int r;

	if (!challenge || strncasecmp(challenge, "Bearer ", 7) != 0)
		return station_error_set(e, -EACCES, NULL,
					 "%s asks for credentials (%s), which are not supported",
					 reg->what, challenge ? challenge : "no challenge");
	r = token_url(reg, challenge, &url);
	if (r < 0)
		return station_error_set(e, -EPROTO, NULL, "%s: unusable token challenge: %s",
					 reg->what, challenge);
	r = http_get(reg, url, NULL, NULL, &resp, e);
	if (r >= 0 && resp.status != 200)
		r = station_error_set(e, -EACCES, NULL, "%s: token service refused: HTTP %ld",
				      reg->what, resp.status);
	if (r >= 0 && registry_token_parse(resp.body, resp.body_len, &reg->token) < 0)
		r = station_error_set(e, -EPROTO, NULL, "%s: token service sent no token",
				      reg->what);
	response_done(&resp);
	return r;
}

/* GET with one retry after fetching a token when the registry answers 401. */
static int registry_get(struct registry *reg, const char *url, const char *accept,
			struct response *resp, struct station_error *e)
{
	int r = http_get(reg, url, accept, reg->token, resp, e);

	if (r < 0 || resp->status != 401 || reg->token)
		return r;
	r = token_fetch(reg, resp->h.www_authenticate, e);
	if (r < 0)
		return r;
	free(resp->body);
	resp->body = NULL;
	resp->body_len = 0;
	resp->err = 0;
	return http_get(reg, url, accept, reg->token, resp, e);
}

void registry_error_text(const char *body, size_t len, char *buf, size_t size)
{
	_cleanup_json_ json_t *j = body ? json_loadb(body, len, 0, NULL) : NULL;
	json_t *err = json_array_get(json_object_get(j, "errors"), 0);
	const char *code = json_string_value(json_object_get(err, "code"));
	const char *msg = json_string_value(json_object_get(err, "message"));

	snprintf(buf, size, "%s%s%s%s", code || msg ? ", " : "", code ? code : "",
		 code && msg ? ": " : "", msg ? msg : "");
}

static int status_error(struct registry *reg, const char *kind, const char *digest,
			const struct response *resp, struct station_error *e)
{
	char detail[256];
	int err = resp->status == 404			     ? -ENOENT :
		  resp->status == 401 || resp->status == 403 ? -EACCES :
							       -EIO;

	registry_error_text(resp->body, resp->body_len, detail, sizeof detail);
	if (err == -ENOENT)
		return station_error_set(e, err, NULL, "%s %s@%s not found in %s (HTTP 404%s)",
					 kind, reg->repo, digest, reg->what, detail);
	return station_error_set(e, err, NULL, "%s %s@%s: %s answered HTTP %ld%s", kind, reg->repo,
				 digest, reg->what, resp->status, detail);
}

static int url_make(struct registry *reg, const char *kind, const char *digest, char **ret)
{
	return asprintf(ret, "%s://%s/v2/%s/%s/%s", reg->o->plain_http ? "http" : "https",
			reg->host, reg->repo, kind, digest) < 0 ?
		       -ENOMEM :
		       0;
}

/* blob_source.fetch: a manifest or blob by digest, streamed into the store and verified. */
static int registry_fetch(struct blob_source *src, struct image_store *s, struct image_txn *t,
			  const struct oci_descriptor *d, struct station_error *e)
{
	struct registry *reg = (struct registry *)src;
	enum media_kind k = media_kind_from_string(d->media_type);
	bool doc = k == MEDIA_MANIFEST || k == MEDIA_INDEX;
	_cleanup_free_ char *url = NULL;
	struct blob_writer w;
	struct response resp = { .w = &w };
	int r = url_make(reg, doc ? "manifests" : "blobs", d->digest, &url);

	if (r < 0)
		return r;
	r = blob_writer_open(s, d->digest, d->size, &w);
	if (r < 0)
		return station_error_set(e, r, NULL, "blob %.19s: cannot create in the store: %s",
					 d->digest, strerror(-r));
	r = registry_get(reg, url, doc ? accept_manifests : NULL, &resp, e);
	if (r >= 0 && resp.err == -EFBIG)
		r = station_error_set(e, -EBADMSG, NULL,
				      "blob %.19s: size mismatch: %s sent more than the %llu bytes "
				      "its descriptor says",
				      d->digest, reg->what, (unsigned long long)d->size);
	else if (r >= 0 && resp.status / 100 != 2)
		r = status_error(reg, doc ? "manifest" : "blob", d->digest, &resp, e);
	if (r >= 0)
		r = blob_writer_commit(&w, t, e);
	else
		blob_writer_abort(&w);
	response_done(&resp);
	return r;
}

static int top_verify(struct registry *reg, const char *digest, const struct response *resp,
		      struct station_error *e)
{
	char hex[65];

	sha256_hex(resp->body ? resp->body : "", resp->body_len, hex);
	if (strcmp(hex, digest + strlen("sha256:")) != 0)
		return station_error_set(e, -EBADMSG, NULL,
					 "manifest %s@%.19s from %s: digest mismatch: content has "
					 "sha256:%.12s",
					 reg->repo, digest, reg->what, hex);
	return 0;
}

static int top_store(struct image_store *s, struct image_txn *t, const struct response *resp,
		     const char *digest, struct station_error *e)
{
	struct blob_writer w;
	int r;

	if (blob_exists(s, digest, NULL) > 0)
		return 0;
	r = blob_writer_open(s, digest, resp->body_len, &w);
	if (r >= 0)
		r = blob_writer_write(&w, resp->body ? resp->body : "", resp->body_len);
	if (r < 0) {
		blob_writer_abort(&w);
		return station_error_set(e, r, NULL, "manifest %.19s: cannot store: %s", digest,
					 strerror(-r));
	}
	return blob_writer_commit(&w, t, e);
}

/* The document the reference's digest names: fetched, verified, stored, described. */
static int top_fetch(struct registry *reg, struct image_store *s, struct image_txn *t,
		     const char *digest, struct oci_descriptor *ret, struct station_error *e)
{
	_cleanup_free_ char *url = NULL;
	struct response resp = { .body_max = IMAGE_DOC_MAX };
	enum media_kind k;
	int r = url_make(reg, "manifests", digest, &url);

	if (r >= 0)
		r = registry_get(reg, url, accept_manifests, &resp, e);
	if (r >= 0 && resp.err == -EFBIG)
		r = station_error_set(e, -E2BIG, NULL, "manifest %s@%.19s is larger than %u bytes",
				      reg->repo, digest, IMAGE_DOC_MAX);
	else if (r >= 0 && resp.status / 100 != 2)
		r = status_error(reg, "image", digest, &resp, e);
	if (r >= 0)
		r = top_verify(reg, digest, &resp, e);
	if (r >= 0)
		r = top_store(s, t, &resp, digest, e);
	if (r >= 0) {
		k = oci_document_kind(resp.body, resp.body_len, resp.h.content_type);
		*ret = (struct oci_descriptor){ .size = resp.body_len };
		snprintf(ret->digest, sizeof ret->digest, "%s", digest);
		snprintf(ret->media_type, sizeof ret->media_type, "%s",
			 k == MEDIA_INDEX ? MT_OCI_INDEX : MT_OCI_MANIFEST);
		if (k != MEDIA_INDEX && k != MEDIA_MANIFEST)
			r = station_error_set(
				e, -ENOTSUP, NULL,
				"%s@%.19s from %s is neither an image manifest nor an "
				"image index (Content-Type \"%s\")",
				reg->repo, digest, reg->what, resp.h.content_type);
	}
	response_done(&resp);
	return r;
}

/* Registry host and repository from the reference and the options. */
static int registry_init(struct registry *reg, const struct image_ref *ref,
			 const struct image_pull_options *o, const char *s_ref,
			 struct station_error *e)
{
	const char *slash = strchr(ref->name, '/');
	const char *repo = ref->name;
	size_t hlen = slash ? (size_t)(slash - ref->name) : 0;
	bool has_host = slash && (memchr(ref->name, '.', hlen) || memchr(ref->name, ':', hlen) ||
				  strncmp(ref->name, "localhost/", 10) == 0);

	if (!ref->name[0])
		return station_error_set(e, -EINVAL, "image",
					 "pull of %s needs a repository: NAME@%s", s_ref, s_ref);
	if (o->registry) {
		snprintf(reg->host, sizeof reg->host, "%s", o->registry);
		if (has_host && strlen(o->registry) == hlen &&
		    !strncmp(ref->name, o->registry, hlen))
			repo = slash + 1;
	} else if (has_host) {
		snprintf(reg->host, sizeof reg->host, "%.*s", (int)hlen, ref->name);
		repo = slash + 1;
	} else {
		return station_error_set(e, -EINVAL, "image",
					 "image reference %s names no registry: use "
					 "HOST[:PORT]/%s or give a registry",
					 s_ref, s_ref);
	}
	snprintf(reg->repo, sizeof reg->repo, "%s", repo);
	snprintf(reg->what, sizeof reg->what, "registry %s", reg->host);
	reg->o = o;
	reg->src = (struct blob_source){ .fetch = registry_fetch, .what = reg->what };
	return 0;
}

static int pull_locked(struct image_store *s, struct registry *reg, const struct image_ref *ref,
		       const char *name, struct image **ret, struct station_error *e)
{
	struct image_txn t = {};
	struct oci_descriptor top;
	int r = top_fetch(reg, s, &t, ref->digest, &top, e);

	if (r >= 0)
		r = image_ingest(s, &t, &reg->src, &top, name, ret, e);
	if (r < 0)
		image_txn_rollback(&t);
	image_txn_done(&t);
	return r;
}

int image_pull(struct image_store *s, const char *ref, const struct image_pull_options *o,
	       struct image **ret, struct station_error *e)
{
	static const struct image_pull_options defaults = {};
	struct registry reg = {};
	struct image_ref parsed;
	_cleanup_free_ char *existing = NULL;
	char name[2 * IMAGE_NAME_MAX + 2];
	int r = image_ref_parse(ref, &parsed, e);

	if (r < 0)
		return r;
	if (image_record_find(s, parsed.digest, &existing) >= 0)
		return ret ? image_lookup(s, ref, ret, e) : 0;
	r = registry_init(&reg, &parsed, o ? o : &defaults, ref, e);
	if (r < 0)
		return r;
	curl_global_init(CURL_GLOBAL_DEFAULT);
	snprintf(name, sizeof name, "%s/%s", reg.host, reg.repo);
	r = image_store_lock(s);
	if (r < 0)
		return station_error_set(e, r, NULL, "image store: cannot lock: %s", strerror(-r));
	r = pull_locked(s, &reg, &parsed, name, ret, e);
	image_store_unlock(s);
	free(reg.token);
	return r;
}
