/* SPDX-License-Identifier: MIT */
#include "agent-start.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static bool env_entry_ok(const char *s, size_t len)
{
	const char *eq = memchr(s, '=', len);
	return len <= PROTO_MAX_ENV_ENTRY && eq && eq != s;
}

int agent_start_encode(struct buf *b, const uint8_t *secret, size_t secret_len, const char *workdir,
		       char *const *env)
{
	size_t start, n = 0;
	if (secret_len < PROTO_MIN_SECRET || secret_len > PROTO_MAX_SECRET)
		return -EINVAL;
	if (workdir && (workdir[0] != '/' || strlen(workdir) > PROTO_MAX_PATH))
		return -EINVAL;
	for (; env && env[n]; n++)
		if (!env_entry_ok(env[n], strlen(env[n])))
			return -EINVAL;
	if (n > PROTO_MAX_START_ENV)
		return -E2BIG;
	int r = frame_begin(b, &start, MSG_AGENT_START, 0);
	if (r >= 0)
		r = frame_put_bytes(b, TAG_SECRET, secret, secret_len);
	if (r >= 0 && workdir)
		r = frame_put_str(b, TAG_CWD, workdir);
	for (size_t i = 0; r >= 0 && i < n; i++)
		r = frame_put_str(b, TAG_ENV, env[i]);
	if (r >= 0)
		r = frame_end(b, start);
	return r;
}

void agent_start_free(struct agent_start *s)
{
	explicit_bzero(s->secret, sizeof s->secret);
	s->secret_len = 0;
	free(s->workdir);
	s->workdir = NULL;
	for (size_t i = 0; s->env && i < s->n_env; i++)
		free(s->env[i]);
	free(s->env);
	s->env = NULL;
	s->n_env = 0;
}

static int start_workdir(struct agent_start *s, const uint8_t *v, size_t n)
{
	if (s->workdir || n == 0 || v[0] != '/')
		return -EBADMSG;
	int r = frame_val_strdup(v, n, PROTO_MAX_PATH, &s->workdir);
	return r == -E2BIG ? -EBADMSG : r;
}

static int start_env(struct agent_start *s, const uint8_t *v, size_t n)
{
	if (s->n_env >= PROTO_MAX_START_ENV)
		return -E2BIG;
	if (!env_entry_ok((const char *)v, n))
		return -EBADMSG;
	int r = frame_val_strdup(v, n, PROTO_MAX_ENV_ENTRY, &s->env[s->n_env]);
	if (r < 0)
		return r == -E2BIG ? -EBADMSG : r;
	s->n_env++;
	return 0;
}

static int start_field(struct agent_start *s, uint16_t tag, const uint8_t *v, size_t n)
{
	switch (tag) {
	case TAG_SECRET:
		if (s->secret_len || n < PROTO_MIN_SECRET || n > PROTO_MAX_SECRET)
			return -EBADMSG;
		memcpy(s->secret, v, n);
		s->secret_len = n;
		return 0;
	case TAG_CWD:
		return start_workdir(s, v, n);
	case TAG_ENV:
		return start_env(s, v, n);
	default:
		return -EBADMSG;
	}
}

int agent_start_decode(const uint8_t *data, size_t len, struct agent_start *ret)
{
	struct frame f;
	long sz = frame_parse(data, len, PROTO_MAX_START_PAYLOAD, &f);
	if (sz == -EMSGSIZE)
		return -E2BIG;
	if (sz <= 0 || (size_t)sz != len || f.type != MSG_AGENT_START || f.seq != 0)
		return -EBADMSG;
	struct agent_start s = { .env = calloc(PROTO_MAX_START_ENV + 1, sizeof(char *)) };
	if (!s.env)
		return -ENOMEM;
	struct frame_iter it;
	uint16_t tag;
	const uint8_t *v;
	size_t n;
	int r;
	frame_iter_init(&it, &f);
	while ((r = frame_iter_next(&it, &tag, &v, &n)) > 0) {
		r = start_field(&s, tag, v, n);
		if (r < 0)
			break;
	}
	if (r >= 0 && !s.secret_len)
		r = -EBADMSG;
	if (r < 0) {
		agent_start_free(&s);
		return r;
	}
	*ret = s;
	return 0;
}
