/* SPDX-License-Identifier: MIT */
/* How station-sandbox mcp shows a run's output to a model (src/cli/mcp-output.c): head and tail
 * within a budget, characters never cut in two, base64 with lengths for bytes that are not
 * text, the counts of what was left out, and output followed live kept the same way. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "cli/mcp.h"

/* mcp-output.c reports progress; nothing to report to here. */
void mcp_progress(struct mcp_server *s, double value, const char *message)
{
}

static json_int_t num(json_t *o, const char *key)
{
	return json_integer_value(json_object_get(o, key));
}

static const char *str(json_t *o, const char *key)
{
	return json_string_value(json_object_get(o, key));
}

Test(mcp_utf8, valid_and_invalid)
{
	cr_expect(mcp_utf8_valid("", 0));
	cr_expect(mcp_utf8_valid("abc\n", 4));
	cr_expect(mcp_utf8_valid("\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80", 9)); /* é € 😀 */
	cr_expect(!mcp_utf8_valid("a\0b", 3), "NUL is not text here");
	cr_expect(!mcp_utf8_valid("\xc0\xaf", 2), "overlong");
	cr_expect(!mcp_utf8_valid("\xed\xa0\x80", 3), "a surrogate");
	cr_expect(!mcp_utf8_valid("\xc3", 1), "cut");
	cr_expect(!mcp_utf8_valid("\xff", 1));
}

Test(mcp_stream, small_output_whole)
{
	struct mcp_stream_view v = { .name = "stdout", .total = 3, .head = "hi\n", .head_len = 3 };
	char *more = (char *)1;
	json_t *o = mcp_stream_json(&v, 100, "w", "r", &more);

	cr_assert_not_null(o);
	cr_expect_str_eq(str(o, "head"), "hi\n");
	cr_expect_str_eq(str(o, "tail"), "");
	cr_expect_str_eq(str(o, "encoding"), "utf-8");
	cr_expect(json_is_false(json_object_get(o, "truncated")));
	cr_expect_eq(num(o, "omittedBytes"), 0);
	cr_expect_null(more);
	json_decref(o);
}

Test(mcp_stream, one_kept_part_beyond_the_budget)
{
	char buf[100];
	struct mcp_stream_view v = { .name = "stdout", .total = 100, .head = buf, .head_len = 100 };
	char *more = NULL;
	json_t *o;

	for (int i = 0; i < 100; i++)
		buf[i] = (char)('a' + i % 26);
	o = mcp_stream_json(&v, 20, "w1-x", "r-y", &more);
	cr_assert_not_null(o);
	cr_expect_eq(num(o, "headBytes"), 10);
	cr_expect_eq(num(o, "tailBytes"), 10);
	cr_expect_eq(num(o, "omittedBytes"), 80);
	cr_expect_eq(num(o, "omittedFrom"), 10);
	cr_expect_eq(strncmp(str(o, "head"), buf, 10), 0);
	cr_expect_eq(strncmp(str(o, "tail"), buf + 90, 10), 0);
	cr_assert_not_null(more);
	cr_expect(strstr(more, "run_output") && strstr(more, "\"offset\":10") &&
			  strstr(more, "\"runId\":\"r-y\""),
		  "%s", more);
	free(more);
	json_decref(o);
}

Test(mcp_stream, head_and_tail_of_a_truncated_run)
{
	char head[50], tail[50];
	struct mcp_stream_view v = { .name = "stderr",
				     .total = 1000,
				     .head = head,
				     .head_len = 50,
				     .tail = tail,
				     .tail_len = 50 };
	char *more = NULL;
	json_t *o;

	memset(head, 'h', sizeof head);
	memset(tail, 't', sizeof tail);
	o = mcp_stream_json(&v, 40, "w", "r", &more);
	cr_assert_not_null(o);
	cr_expect_eq(num(o, "bytes"), 1000);
	cr_expect_eq(num(o, "headBytes"), 20);
	cr_expect_eq(num(o, "tailBytes"), 20);
	cr_expect_eq(num(o, "omittedBytes"), 960);
	cr_expect(json_is_true(json_object_get(o, "truncated")));
	free(more);
	json_decref(o);
}

Test(mcp_stream, characters_are_not_cut)
{
	/* five é: 10 bytes; a budget of 6 would cut the head at byte 3 and start the tail at 7 */
	const char *s = "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9";
	struct mcp_stream_view v = { .name = "stdout", .total = 10, .head = s, .head_len = 10 };
	char *more = NULL;
	json_t *o = mcp_stream_json(&v, 6, "w", "r", &more);

	cr_assert_not_null(o);
	cr_expect_str_eq(str(o, "encoding"), "utf-8");
	cr_expect_str_eq(str(o, "head"), "\xc3\xa9");
	cr_expect_str_eq(str(o, "tail"), "\xc3\xa9");
	cr_expect_eq(num(o, "omittedBytes"), 6);
	free(more);
	json_decref(o);
}

Test(mcp_stream, binary_is_base64_with_its_length)
{
	struct mcp_stream_view v = { .name = "stdout",
				     .total = 6,
				     .head = "\0\1\xff"
					     "abc",
				     .head_len = 6 };
	char *more = NULL;
	json_t *o = mcp_stream_json(&v, 100, "w", "r", &more);

	cr_assert_not_null(o);
	cr_expect_str_eq(str(o, "encoding"), "base64");
	cr_expect_str_eq(str(o, "head"), "AAH/YWJj");
	cr_expect_eq(num(o, "headBytes"), 6);
	json_decref(o);
}

Test(mcp_collect, live_output_head_ring_and_gap)
{
	struct mcp_collect c = {};
	json_t *res = json_object(), *out;
	char chunk[7];

	cr_assert_eq(mcp_collect_init(&c, 20), 0);
	for (int i = 0; i < 14; i++) { /* 98 bytes in chunks of 7: "0123456" … */
		for (int k = 0; k < 7; k++)
			chunk[k] = (char)('0' + (i * 7 + k) % 10);
		mcp_collect_add(&c, STATION_STREAM_STDOUT, (uint64_t)i * 7, chunk, 7);
	}
	mcp_collect_add(&c, STATION_STREAM_STDOUT, 0, chunk, 7); /* replayed: ignored */
	cr_assert_eq(mcp_collect_result(&c, res, "w", "r", 20), 0);
	out = json_object_get(res, "stdout");
	cr_expect_eq(num(out, "bytes"), 98);
	cr_expect_str_eq(str(out, "head"), "0123456789");
	cr_expect_str_eq(str(out, "tail"), "8901234567");
	cr_expect_eq(num(out, "omittedBytes"), 78);
	/* bytes the watcher never saw: the count moves on, the tail starts again after them */
	mcp_collect_add(&c, STATION_STREAM_STDOUT, 198, NULL, 0);
	mcp_collect_add(&c, STATION_STREAM_STDOUT, 198, "xy", 2);
	cr_assert_eq(mcp_collect_result(&c, res, "w", "r", 20), 0);
	out = json_object_get(res, "stdout");
	cr_expect_eq(num(out, "bytes"), 200);
	cr_expect_str_eq(str(out, "tail"), "xy");
	cr_expect_eq(num(json_object_get(res, "stderr"), "bytes"), 0);
	mcp_collect_done(&c);
	json_decref(res);
}
