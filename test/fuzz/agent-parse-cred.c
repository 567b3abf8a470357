/* SPDX-License-Identifier: MIT */
/* The credential helper's parsers (agent/credential.c, static there) for
 * fuzz-agent-requests.c: the controller's CRED_REPLY and git's request from inside the
 * sandbox. */
#include "agent/credential.c"

#include "agent-parse.h"

int fuzz_agent_cred_reply(const struct frame *f)
{
	struct cred_reply rep;
	int r = reply_parse(f, &rep);
	if (r >= 0 && !rep.refused) {
		/* what answer() writes back to git: one line each, within the bounds */
		if (!line_value_ok(rep.username, rep.username_len, CRED_MAX_VALUE) ||
		    !line_value_ok(rep.password, rep.password_len, CRED_MAX_PASSWORD))
			abort();
	}
	return r;
}

int fuzz_agent_cred_request(const char *data, size_t len, bool eof)
{
	struct cred_request req = {};
	int r = request_parse(data, len, eof, &req);
	/* every field NUL-terminated within its array, whatever was refused */
	if (strnlen(req.action, sizeof(req.action)) == sizeof(req.action) ||
	    strnlen(req.protocol, sizeof(req.protocol)) == sizeof(req.protocol) ||
	    strnlen(req.host, sizeof(req.host)) == sizeof(req.host) ||
	    strnlen(req.path, sizeof(req.path)) == sizeof(req.path) ||
	    strnlen(req.username, sizeof(req.username)) == sizeof(req.username))
		abort();
	return r;
}
