/* SPDX-License-Identifier: MIT */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/agent-start.h"

static const uint8_t secret[32] = "0123456789abcdef0123456789abcdef";

static int decode(const struct buf *b, struct agent_start *s)
{
	return agent_start_decode(b->data, b->len, s);
}

Test(start, round_trip)
{
	char *env[] = { (char *)"API_KEY=sk-1", (char *)"EMPTY=", (char *)"X=a=b", NULL };
	struct buf b = { 0 };
	struct agent_start s;
	cr_assert_eq(agent_start_encode(&b, secret, sizeof secret, "/home/node/w", env), 0);
	cr_assert_eq(decode(&b, &s), 0);
	cr_assert_eq(s.secret_len, sizeof secret);
	cr_assert_eq(memcmp(s.secret, secret, sizeof secret), 0);
	cr_assert_str_eq(s.workdir, "/home/node/w");
	cr_assert_eq(s.n_env, 3);
	cr_assert_str_eq(s.env[0], "API_KEY=sk-1");
	cr_assert_str_eq(s.env[1], "EMPTY=");
	cr_assert_str_eq(s.env[2], "X=a=b");
	cr_assert_null(s.env[3]);
	agent_start_free(&s);
	buf_free(&b);
}

Test(start, no_workdir_no_env)
{
	struct buf b = { 0 };
	struct agent_start s;
	cr_assert_eq(agent_start_encode(&b, secret, 16, NULL, NULL), 0);
	cr_assert_eq(decode(&b, &s), 0);
	cr_assert_null(s.workdir);
	cr_assert_eq(s.n_env, 0);
	cr_assert_null(s.env[0]);
	agent_start_free(&s);
	buf_free(&b);
}

/* More than a pipe holds: what the limits allow gets through whole. */
Test(start, large)
{
	size_t n = PROTO_MAX_START_ENV;
	char **env = calloc(n + 2, sizeof *env);
	for (size_t i = 0; i < n; i++) {
		env[i] = malloc(PROTO_MAX_ENV_ENTRY + 1);
		int k = snprintf(env[i], PROTO_MAX_ENV_ENTRY + 1, "K%zu=", i);
		memset(env[i] + k, 'v', PROTO_MAX_ENV_ENTRY - (size_t)k);
		env[i][PROTO_MAX_ENV_ENTRY] = 0;
	}
	struct buf b = { 0 };
	struct agent_start s;
	cr_assert_eq(agent_start_encode(&b, secret, sizeof secret, NULL, env), 0);
	cr_assert_leq(b.len, PROTO_MAX_START_BYTES);
	cr_assert_eq(decode(&b, &s), 0);
	cr_assert_eq(s.n_env, n);
	cr_assert_str_eq(s.env[n - 1], env[n - 1]);
	agent_start_free(&s);
	buf_free(&b);
	env[n] = (char *)"ONE=more";
	cr_assert_eq(agent_start_encode(&b, secret, sizeof secret, NULL, env), -E2BIG);
	env[n] = NULL;
	for (size_t i = 0; i < n; i++)
		free(env[i]);
	free(env);
	buf_free(&b);
}

Test(start, encode_refuses)
{
	struct buf b = { 0 };
	char *bad_env[] = { (char *)"NOEQUALS", NULL };
	cr_assert_eq(agent_start_encode(&b, secret, 15, NULL, NULL), -EINVAL);
	cr_assert_eq(agent_start_encode(&b, secret, 65, NULL, NULL), -EINVAL);
	cr_assert_eq(agent_start_encode(&b, secret, 16, "relative", NULL), -EINVAL);
	cr_assert_eq(agent_start_encode(&b, secret, 16, NULL, bad_env), -EINVAL);
	buf_free(&b);
}

static void build_raw(struct buf *b, uint16_t type, const uint16_t *tags, const char **vals,
		      size_t n)
{
	size_t start;
	cr_assert_eq(frame_begin(b, &start, type, 0), 0);
	for (size_t i = 0; i < n; i++)
		cr_assert_eq(frame_put_str(b, tags[i], vals[i]), 0);
	cr_assert_eq(frame_end(b, start), 0);
}

static int decode_raw(uint16_t type, const uint16_t *tags, const char **vals, size_t n)
{
	struct buf b = { 0 };
	struct agent_start s;
	build_raw(&b, type, tags, vals, n);
	int r = decode(&b, &s);
	if (r == 0)
		agent_start_free(&s);
	buf_free(&b);
	return r;
}

Test(start, decode_refuses)
{
	const char *sec = "0123456789abcdef";
	uint16_t t_ok[] = { TAG_SECRET, TAG_ENV };
	const char *v_ok[] = { sec, "A=1" };
	cr_assert_eq(decode_raw(MSG_AGENT_START, t_ok, v_ok, 2), 0);
	cr_assert_eq(decode_raw(MSG_HELLO, t_ok, v_ok, 2), -EBADMSG, "wrong type");
	uint16_t t_two[] = { TAG_SECRET, TAG_SECRET };
	const char *v_two[] = { sec, sec };
	cr_assert_eq(decode_raw(MSG_AGENT_START, t_two, v_two, 2), -EBADMSG, "secret twice");
	uint16_t t_none[] = { TAG_ENV };
	const char *v_none[] = { "A=1" };
	cr_assert_eq(decode_raw(MSG_AGENT_START, t_none, v_none, 1), -EBADMSG, "no secret");
	const char *v_short[] = { "short", "A=1" };
	cr_assert_eq(decode_raw(MSG_AGENT_START, t_ok, v_short, 2), -EBADMSG, "short secret");
	const char *v_bad_env[] = { sec, "=1" };
	cr_assert_eq(decode_raw(MSG_AGENT_START, t_ok, v_bad_env, 2), -EBADMSG, "empty name");
	uint16_t t_wd[] = { TAG_SECRET, TAG_CWD, TAG_CWD };
	const char *v_wd[] = { sec, "/a", "/b" };
	cr_assert_eq(decode_raw(MSG_AGENT_START, t_wd, v_wd, 3), -EBADMSG, "workdir twice");
	const char *v_rel[] = { sec, "a" };
	uint16_t t_rel[] = { TAG_SECRET, TAG_CWD };
	cr_assert_eq(decode_raw(MSG_AGENT_START, t_rel, v_rel, 2), -EBADMSG, "relative workdir");
	uint16_t t_unknown[] = { TAG_SECRET, TAG_COMMAND };
	const char *v_unknown[] = { sec, "x" };
	cr_assert_eq(decode_raw(MSG_AGENT_START, t_unknown, v_unknown, 2), -EBADMSG, "unknown tag");

	/* trailing bytes, a truncated block */
	struct buf b = { 0 };
	struct agent_start s;
	build_raw(&b, MSG_AGENT_START, t_ok, v_ok, 2);
	cr_assert_eq(agent_start_decode(b.data, b.len - 1, &s), -EBADMSG, "truncated");
	cr_assert_eq(buf_append(&b, "x", 1), 0);
	cr_assert_eq(agent_start_decode(b.data, b.len, &s), -EBADMSG, "trailing byte");
	buf_free(&b);
}
