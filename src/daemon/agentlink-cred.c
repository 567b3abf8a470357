/* SPDX-License-Identifier: MIT */
/* Credentials on the agent link (docs/agent-protocol.md, "Credentials"): CRED_REQUEST from the
 * agent, every field bounded and each at most once; CRED_REPLY back, whose buffers are wiped. */

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "agentlink-internal.h"
#include "basic/util.h"
#include "proto/agent-proto.h"
#include "proto/frame.h"

struct cred_fields {
	uint64_t request;
	bool have_request;
	char *protocol, *host, *path, *username;
};

static int cred_field(void *userdata, uint16_t tag, const uint8_t *v, size_t n)
{
	struct cred_fields *x = userdata;

	switch (tag) {
	case TAG_REQUEST:
		if (x->have_request)
			return -EBADMSG;
		x->have_request = true;
		return frame_val_u64(v, n, &x->request);
	case TAG_CRED_PROTOCOL:
		return agentlink_str_once(&x->protocol, v, n, AGENTLINK_CRED_MAX_PROTOCOL);
	case TAG_CRED_HOST:
		return agentlink_str_once(&x->host, v, n, AGENTLINK_CRED_MAX_HOST);
	case TAG_CRED_PATH:
		return agentlink_str_once(&x->path, v, n, AGENTLINK_CRED_MAX_VALUE);
	case TAG_CRED_USERNAME:
		return agentlink_str_once(&x->username, v, n, AGENTLINK_CRED_MAX_VALUE);
	default:
		return -EBADMSG;
	}
}

int agentlink_cred_dispatch(const struct agentlink_ops *ops, void *userdata, const struct frame *f)
{
	struct cred_fields x = {};
	int r = frame_for_each_field(f, cred_field, &x);

	if (r >= 0 && (!x.have_request || !x.protocol || !x.host))
		r = -EBADMSG;
	if (r >= 0 && ops->cred_request) {
		const struct agentlink_cred_request req = {
			.request = x.request,
			.protocol = x.protocol,
			.host = x.host,
			.path = x.path,
			.username = x.username,
		};
		ops->cred_request(userdata, &req);
	}
	free(x.protocol);
	free(x.host);
	free(x.path);
	free(x.username);
	return r;
}

int agentlink_send_cred_reply(struct agentlink *l, uint64_t request, const char *username,
			      const char *password, const char *reason)
{
	struct buf b = { 0 };
	size_t start;
	int r = frame_begin(&b, &start, MSG_CRED_REPLY, 0);

	if (r >= 0)
		r = frame_put_u64(&b, TAG_REQUEST, request);
	if (r >= 0 && password) {
		r = frame_put_str(&b, TAG_CRED_USERNAME, username);
		if (r >= 0)
			r = frame_put_str(&b, TAG_CRED_PASSWORD, password);
	} else if (r >= 0)
		r = frame_put_str(&b, TAG_REASON, reason ? reason : "refused");
	if (r >= 0)
		r = frame_end(&b, start);
	if (r >= 0)
		r = agentlink_send_secret(l, b.data, b.len);
	if (b.data)
		explicit_bzero(b.data, b.cap);
	buf_free(&b);
	return r;
}
