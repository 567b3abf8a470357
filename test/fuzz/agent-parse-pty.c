/* SPDX-License-Identifier: MIT */
/* The terminal requests' parsers (agent/pty.c, static there) for fuzz-agent-requests.c. */
#include "agent/pty.c"

#include "agent-parse.h"

int fuzz_agent_term_open(const struct frame *f)
{
	struct term_request q = {};
	int r = request_parse(f, &q);
	if (r >= 0) {
		if (!q.id || !proto_id_valid(q.id) || q.cols < 1 || q.rows < 1 ||
		    q.cols > PROTO_MAX_TERM_SIZE || q.rows > PROTO_MAX_TERM_SIZE ||
		    q.scrollback > PROTO_MAX_SCROLLBACK)
			abort();
		if (q.command && strlen(q.command) == 0)
			abort();
		for (size_t i = 0; i < q.n_env; i++)
			if (!strchr(q.env[i], '='))
				abort();
	}
	request_done(&q);
	return r;
}

int fuzz_agent_term_small(const struct frame *f)
{
	struct term_small s = {};
	int r = small_parse(f, &s);
	if (r >= 0) {
		if (!s.id || !proto_id_valid(s.id) || s.data_len > PROTO_MAX_TERM_INPUT)
			abort();
		uint8_t sum = 0;
		for (size_t i = 0; i < s.data_len; i++)
			sum ^= s.data[i];
		(void)sum;
	}
	free(s.id);
	return r;
}
