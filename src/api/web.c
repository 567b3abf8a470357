/* SPDX-License-Identifier: MIT */
#include "web.h"

#include <errno.h>
#include <microhttpd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/http.h"

/* Scripts only from our own files (no inline script, no eval); API calls and WebSockets to
 * this origin. Inline styles are allowed: xterm.js sizes its DOM renderer through <style>
 * elements it creates (CSS cannot run code). Nothing may frame the page. web_csp_new() adds
 * the frames the Ports tab may show: this worker's previews, none of its own pages. */
#define WEB_CSP                                                                                    \
	"default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "                \
	"img-src 'self' data:; font-src 'self'; connect-src 'self' ws: wss:; object-src 'none'; "  \
	"base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

/* A DNS name of letters, digits, '-' and '.', nothing a CSP could read as more than a host. */
static bool csp_host_ok(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > 253 || s[0] == '.' || s[0] == '-' || s[n - 1] == '.')
		return false;
	return strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-.") == n;
}

int web_csp_new(const char *preview_scheme, const char *preview_domain, uint16_t preview_port,
		char **ret)
{
	char port[8] = "";
	char *csp;

	if (!preview_domain) {
		csp = strdup(WEB_CSP);
		if (!csp)
			return -ENOMEM;
		*ret = csp;
		return 0;
	}
	if (!preview_scheme ||
	    (strcmp(preview_scheme, "http") != 0 && strcmp(preview_scheme, "https") != 0) ||
	    !csp_host_ok(preview_domain))
		return -EINVAL;
	if (preview_port)
		snprintf(port, sizeof port, ":%u", preview_port);
	if (asprintf(&csp, "%s; frame-src %s://*.%s%s", WEB_CSP, preview_scheme, preview_domain,
		     port) < 0)
		return -ENOMEM;
	*ret = csp;
	return 0;
}

bool web_path(const char *url)
{
	return url && (strcmp(url, "/") == 0 || strncmp(url, "/ui/", 4) == 0);
}

const struct web_asset *web_find(const char *url)
{
	size_t lo = 0, hi = web_n_assets;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(url, web_assets[mid].path);

		if (c == 0)
			return &web_assets[mid];
		if (c < 0)
			hi = mid;
		else
			lo = mid + 1;
	}
	return NULL;
}

/* If-None-Match: "*" or a list of entity tags (weak ones compare weakly, RFC 9110 13.1.2). */
static bool etag_matches(const char *header, const char *etag)
{
	size_t n = strlen(etag);

	while (header && *header) {
		size_t k;

		header += strspn(header, " \t,");
		if (*header == '*')
			return true;
		if (strncmp(header, "W/", 2) == 0)
			header += 2;
		k = strcspn(header, " \t,");
		if (k == n && strncmp(header, etag, n) == 0)
			return true;
		header += k;
	}
	return false;
}

static bool add_headers(struct MHD_Response *r, const struct web_asset *a, const char *csp)
{
	return MHD_add_response_header(r, MHD_HTTP_HEADER_ETAG, a->etag) == MHD_YES &&
	       MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache") == MHD_YES &&
	       MHD_add_response_header(r, "Content-Security-Policy", csp ?: WEB_CSP) == MHD_YES &&
	       MHD_add_response_header(r, "X-Frame-Options", "DENY") == MHD_YES &&
	       MHD_add_response_header(r, "X-Content-Type-Options", "nosniff") == MHD_YES &&
	       MHD_add_response_header(r, "Referrer-Policy", "no-referrer") == MHD_YES &&
	       MHD_add_response_header(r, "Cross-Origin-Opener-Policy", "same-origin") == MHD_YES;
}

int web_reply(struct http_request *req, const char *method, const char *url, const char *csp)
{
	const struct web_asset *a;
	struct MHD_Response *r;
	unsigned status = MHD_HTTP_OK;
	int ret;

	if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0)
		return http_reply_method_not_allowed(req, method, url, "GET, HEAD");
	a = web_find(url);
	if (!a)
		return http_reply_status(req, 404, NULL, "no such page: %.200s", url);
	if (etag_matches(http_request_header(req, MHD_HTTP_HEADER_IF_NONE_MATCH), a->etag)) {
		status = MHD_HTTP_NOT_MODIFIED;
		r = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
	} else {
		r = MHD_create_response_from_buffer(a->size, (void *)a->data,
						    MHD_RESPMEM_PERSISTENT);
		if (r && MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE,
						 a->content_type) != MHD_YES) {
			MHD_destroy_response(r);
			r = NULL;
		}
	}
	if (r && !add_headers(r, a, csp)) {
		MHD_destroy_response(r);
		r = NULL;
	}
	if (!r)
		return -ENOMEM;
	ret = http_reply_response(req, status, r);
	MHD_destroy_response(r);
	return ret;
}
