/* SPDX-License-Identifier: MIT */
/* RUN_START's parser (agent/run.c, static there) for fuzz-agent-requests.c. */
#include "agent/run.c"

#include "agent-parse.h"

int fuzz_agent_run_start(const struct frame *f)
{
	struct run_request q = {};
	int r = request_parse(f, &q);
	if (r >= 0) {
		if (!q.id || !proto_id_valid(q.id) || !q.command || (q.cwd && q.cwd[0] != '/'))
			abort();
		for (size_t i = 0; i < q.n_env; i++)
			if (!strchr(q.env[i], '='))
				abort();
		uint8_t sum = 0;
		for (size_t i = 0; i < q.stdin_len; i++)
			sum ^= q.stdin_data[i];
		(void)sum;
		if (q.head + q.tail > AGENT_MAX_OUTPUT_BYTES)
			abort();
	}
	request_done(&q);
	return r;
}
