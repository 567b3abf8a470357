/* SPDX-License-Identifier: MIT */
/* The agent's side (src/agent/channel.c and the request parsers behind it): what it does with
 * the bytes of whoever connects to its socket, the controller or anyone else in reach of it,
 * and what the credential helper reads from inside the sandbox.
 *
 * Input: one selector byte, then the bytes.
 *   0  a connection's byte stream through the channel's own frame loop (conn_process(), the
 *      loop behind its socket reads), fed all at once and again a few bytes at a time as reads
 *      would append them; both must dispatch the same frames and end the same way. The agent's
 *      secret is SECRET below: HELLO or FILE_OPEN must carry it (seeds/agent-frames.py puts it
 *      into the captured sessions). Authenticated frames go to the real parsers: RUN_START,
 *      RUN_CANCEL / RUN_WATCH, TERM_*, SERVICE_*, CRED_REPLY; a FILE_OPEN session to
 *      files_request_parse().
 *   1  the start block (agent_start_decode(), read from the --secret-fd).
 *   2  a credential request from git, as the helper's socket receives it (3: and then EOF).
 *
 * fuzz-max-len: 65536 */

/* The channel's static functions: the harness drives a connection without a socket. */
#include "agent/channel.c"

#include "agent-parse.h"
#include "agent/files-internal.h"
#include "agent/service.h"
#include "fuzz.h"
#include "proto/agent-start.h"

#define SECRET "station-fuzz-secret-0123456789ab"

struct trace {
	uint64_t hash;
	unsigned frames;
};

static struct trace *cur;

static void mix_u64(uint64_t v)
{
	for (int i = 0; i < 8; i++)
		cur->hash = (cur->hash ^ ((v >> (8 * i)) & 0xff)) * 1099511628211ull;
}

static int on_message(struct channel *c, const struct frame *f, void *userdata)
{
	char *key = NULL;
	bool flag = false;
	int r;

	switch (f->type) {
	case MSG_RUN_START:
		r = fuzz_agent_run_start(f);
		break;
	case MSG_RUN_CANCEL:
	case MSG_RUN_WATCH:
		r = proto_parse_key_flag(f, TAG_RUN_ID, proto_id_read, f->type == MSG_RUN_WATCH,
					 &key, &flag);
		if (r >= 0 && !proto_id_valid(key))
			abort();
		free(key);
		break;
	case MSG_TERM_OPEN:
		r = fuzz_agent_term_open(f);
		break;
	case MSG_TERM_INPUT:
	case MSG_TERM_RESIZE:
	case MSG_TERM_ATTACH:
	case MSG_TERM_CLOSE:
		r = fuzz_agent_term_small(f);
		break;
	case MSG_SERVICE_START: {
		struct service_def d;
		r = service_def_parse(f, &d);
		service_def_done(&d);
		break;
	}
	case MSG_SERVICE_STOP:
	case MSG_SERVICE_RESTART:
	case MSG_SERVICE_REMOVE:
	case MSG_SERVICE_WATCH:
		r = service_parse_name(f, f->type == MSG_SERVICE_WATCH, &key, &flag);
		free(key);
		break;
	case MSG_CRED_REPLY:
		r = fuzz_agent_cred_reply(f);
		break;
	default:
		r = 0;
		break;
	}
	cur->frames++;
	mix_u64(f->type);
	mix_u64((uint64_t)r);
	/* main.c closes the connection on a refused request the same way */
	return r < 0 ? r : 0;
}

static void on_file_session(struct channel *c, int fd, const struct frame *f, const uint8_t *rest,
			    size_t rest_len, void *userdata)
{
	struct files_request q;
	const char *reason = NULL;
	int r = files_request_parse(f, &q, &reason);
	if (r < 0 && !reason)
		abort(); /* the worker answers with the reason */
	if (r >= 0) {
		uint8_t sum = 0;
		for (size_t i = 0; i < q.path_len; i++)
			sum ^= q.path[i];
		for (size_t i = 0; i < q.path2_len; i++)
			sum ^= q.path2[i];
		(void)sum;
	}
	mix_u64(1000 + (uint64_t)r);
	/* rest: whatever came after FILE_OPEN in the same reads, so not in the trace */
	uint8_t sum = 0;
	for (size_t i = 0; i < rest_len; i++)
		sum ^= rest[i];
	(void)sum;
	if (fd >= 0)
		close(fd);
}

static const struct channel_ops ops = {
	.message = on_message,
	.file_session = on_file_session,
};

/* One connection of a channel, fed data whole or in pieces. */
static int run_conn(const uint8_t *data, size_t size, bool cut, struct trace *t)
{
	struct channel c = { .ops = &ops, .secret_len = sizeof(SECRET) - 1 };
	struct conn *k = calloc(1, sizeof(*k));
	int r = 0;

	if (!k)
		abort();
	memcpy(c.secret, SECRET, c.secret_len);
	*k = (struct conn){ .channel = &c, .fd = -1 };
	c.conns = k;
	*t = (struct trace){ .hash = 14695981039346656037ull };
	cur = t;

	size_t off = 0;
	while (off < size && r == 0) {
		size_t piece = size - off;
		if (cut) {
			piece = (size_t)(data[off] % 53) + 1;
			if (piece > size - off)
				piece = size - off;
		}
		if (buf_append(&k->in, data + off, piece) < 0)
			abort();
		off += piece;
		r = conn_process(k);
	}
	mix_u64(k->authenticated);
	mix_u64(k->out.len); /* HELLO_OK after each accepted HELLO */
	if (r > 0) {
		/* handed over as a file session: the channel forgot the fd, the conn is ours */
		buf_free(&k->in);
		buf_free(&k->out);
		free(k);
	} else {
		conn_close(k);
	}
	cur = NULL;
	return r;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	/* refusals are logged at warning: keep the output to what fails */
	log_setup(STDERR_FILENO, LOG_FORMAT_TEXT, LOG_LEVEL_ERROR, "fuzz-agent-requests");
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	unsigned which = data[0] % 4;
	data++;
	size--;

	if (which == 0) {
		struct trace whole, pieces;
		int r_whole = run_conn(data, size, false, &whole);
		int r_pieces = run_conn(data, size, true, &pieces);
		if (r_whole != r_pieces || whole.hash != pieces.hash ||
		    whole.frames != pieces.frames)
			abort();
	} else if (which == 1) {
		struct agent_start s = {};
		int r = agent_start_decode(data, size, &s);
		if (r >= 0) {
			if (!s.env)
				abort();
			for (char **e = s.env; *e; e++)
				if (!strchr(*e, '='))
					abort();
			agent_start_free(&s);
		}
	} else {
		char *copy = malloc(size ? size : 1);
		if (!copy)
			abort();
		memcpy(copy, data, size);
		(void)fuzz_agent_cred_request(copy, size, which == 3);
		free(copy);
	}
	return 0;
}
