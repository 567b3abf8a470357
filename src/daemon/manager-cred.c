/* SPDX-License-Identifier: MIT */
/* Credential requests from a workspace's agent (docs/api.md, "Secrets"; docs/agent-protocol.md,
 * "Credentials"). The request is hostile: the protocol must be https or http, the host a DNS
 * name with an optional port, and a workspace gets at most CRED_RATE_MAX requests a second.
 * The secret is whatever manager_secret_for_host() releases for that protocol and host. Each
 * release and each refusal is logged with the workspace, the secret's name and the host, never
 * the value; the value is wiped once the reply is queued. */

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "agentlink.h"
#include "basic/log.h"
#include "basic/util.h"
#include "event/event.h"
#include "manager-internal.h"

#define CRED_RATE_MAX 20
#define CRED_RATE_MAX_TEXT "20"
#define CRED_RATE_WINDOW_USEC 1000000ull
#define CRED_MAX_LABEL 63
#define CRED_MAX_NAME 253

static bool label_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '-';
}

/* A DNS name (labels of [A-Za-z0-9-], 1-63 long, no hyphen at either end, 253 in all), then
 * optionally ":PORT" with PORT 1-65535. */
bool cred_host_valid(const char *host)
{
	const char *colon = strchr(host, ':');
	size_t name_len = colon ? (size_t)(colon - host) : strlen(host), label = 0;

	if (name_len == 0 || name_len > CRED_MAX_NAME)
		return false;
	for (size_t i = 0; i < name_len; i++) {
		char c = host[i];

		if (c == '.') {
			if (label == 0 || host[i - 1] == '-')
				return false;
			label = 0;
			continue;
		}
		if (!label_char(c) || (label == 0 && c == '-') || ++label > CRED_MAX_LABEL)
			return false;
	}
	if (label == 0 || host[name_len - 1] == '-')
		return false;
	if (!colon)
		return true;
	uint64_t port;
	return colon[1] != '0' && parse_u64(colon + 1, 65535, &port) >= 0 && port > 0;
}

/* Whether the workspace may ask once more now; logs the first refused request of a window. */
static bool cred_rate_ok(struct workspace *ws)
{
	uint64_t now = now_usec();

	if (now - ws->cred_window_start >= CRED_RATE_WINDOW_USEC) {
		ws->cred_window_start = now;
		ws->cred_window_count = 0;
	}
	if (ws->cred_window_count++ < CRED_RATE_MAX)
		return true;
	if (ws->cred_window_count == CRED_RATE_MAX + 1)
		log_warn("credential requests refused: over the rate limit", "workspace",
			 ws->row.id, "limit_per_second", CRED_RATE_MAX_TEXT, NULL);
	return false;
}

static bool cred_protocol_valid(const char *protocol)
{
	return strcmp(protocol, "https") == 0 || strcmp(protocol, "http") == 0;
}

/* Logged and answered; what the agent sent is logged only once it is known to be sane. */
static void cred_refuse(struct workspace *ws, const struct agentlink_cred_request *req,
			const char *reason)
{
	log_info("credential refused", "workspace", ws->row.id, "protocol",
		 cred_protocol_valid(req->protocol) ? req->protocol : "(other)", "host",
		 cred_host_valid(req->host) ? req->host : "(invalid)", "reason", reason, NULL);
	if (ws->link)
		(void)agentlink_send_cred_reply(ws->link, req->request, NULL, NULL, reason);
}

void creds_on_request(void *userdata, const struct agentlink_cred_request *req)
{
	struct workspace *ws = userdata;
	char *name = NULL, *username = NULL, *password = NULL;
	int r;

	if (!cred_rate_ok(ws)) {
		if (ws->link)
			(void)agentlink_send_cred_reply(ws->link, req->request, NULL, NULL,
							"rate limited");
		return;
	}
	if (!cred_protocol_valid(req->protocol)) {
		cred_refuse(ws, req, "protocol not https or http");
		return;
	}
	if (!cred_host_valid(req->host)) {
		cred_refuse(ws, req, "host not a DNS name[:port]");
		return;
	}
	r = manager_secret_for_host(ws->m, ws->row.id, req->protocol, req->host, &name, &username,
				    &password);
	if (r < 0) {
		cred_refuse(ws, req, r == -ENOENT ? "no secret for this host" : strerror(-r));
		return;
	}
	if (strchr(username, '\n') || strchr(password, '\n')) {
		cred_refuse(ws, req,
			    "the secret holds a newline, which git's protocol cannot carry");
		free(name);
		free(username);
		erase_and_free(password);
		return;
	}
	log_info("credential released", "workspace", ws->row.id, "secret", name, "protocol",
		 req->protocol, "host", req->host, NULL);
	if (ws->link)
		(void)agentlink_send_cred_reply(ws->link, req->request, username, password, NULL);
	free(name);
	free(username);
	erase_and_free(password);
}
