/* SPDX-License-Identifier: MIT */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "proto/agent-proto.h"
#include "proto/frame.h"

static struct buf build(uint16_t type, uint64_t seq)
{
	struct buf b = { 0 };
	size_t start;
	cr_assert_eq(frame_begin(&b, &start, type, seq), 0);
	cr_assert_eq(frame_put_str(&b, TAG_RUN_ID, "r-abc"), 0);
	cr_assert_eq(frame_put_u64(&b, TAG_TIMEOUT_MS, 123456789012ull), 0);
	cr_assert_eq(frame_put_bytes(&b, TAG_DATA, "a\0b", 3), 0);
	cr_assert_eq(frame_end(&b, start), 0);
	return b;
}

Test(frame, round_trip)
{
	struct buf b = build(MSG_RUN_START, 42);
	struct frame f;
	long n = frame_parse(b.data, b.len, PROTO_MAX_PAYLOAD, &f);
	cr_assert_eq(n, (long)b.len);
	cr_assert_eq(f.type, MSG_RUN_START);
	cr_assert_eq(f.seq, 42);

	struct frame_iter it;
	uint16_t tag;
	const uint8_t *v;
	size_t len;
	frame_iter_init(&it, &f);
	cr_assert_eq(frame_iter_next(&it, &tag, &v, &len), 1);
	char *s = NULL;
	cr_assert_eq(tag, TAG_RUN_ID);
	cr_assert_eq(frame_val_strdup(v, len, 64, &s), 0);
	cr_assert_str_eq(s, "r-abc");
	free(s);
	cr_assert_eq(frame_iter_next(&it, &tag, &v, &len), 1);
	uint64_t u;
	cr_assert_eq(frame_val_u64(v, len, &u), 0);
	cr_assert_eq(u, 123456789012ull);
	cr_assert_eq(frame_iter_next(&it, &tag, &v, &len), 1);
	cr_assert_eq(len, 3);
	cr_assert_eq(memcmp(v, "a\0b", 3), 0);
	cr_assert_eq(frame_val_strdup(v, len, 64, &s), -EBADMSG, "NUL inside a string");
	cr_assert_eq(frame_iter_next(&it, &tag, &v, &len), 0);
	buf_free(&b);
}

Test(frame, partial_input_needs_more)
{
	struct buf b = build(MSG_ACK, 1);
	struct frame f;
	for (size_t i = 0; i < b.len; i++)
		cr_assert_eq(frame_parse(b.data, i, PROTO_MAX_PAYLOAD, &f), 0, "at %zu", i);
	buf_free(&b);
}

Test(frame, oversized_payload_refused_before_it_arrives)
{
	struct buf b = build(MSG_ACK, 1);
	struct frame f;
	cr_assert_eq(frame_parse(b.data, 16, 10, &f), -EMSGSIZE);
	cr_assert_gt(frame_parse(b.data, b.len, b.len - 16, &f), 0, "exactly the cap is fine");
	buf_free(&b);
}

Test(frame, bad_version)
{
	struct buf b = build(MSG_ACK, 1);
	b.data[6] = 99;
	struct frame f;
	cr_assert_eq(frame_parse(b.data, b.len, PROTO_MAX_PAYLOAD, &f), -EPROTO);
	buf_free(&b);
}

Test(frame, field_length_beyond_payload_is_malformed)
{
	struct buf b = build(MSG_ACK, 1);
	struct frame f;
	cr_assert_gt(frame_parse(b.data, b.len, PROTO_MAX_PAYLOAD, &f), 0);
	/* the first field's length claims more than the payload holds */
	b.data[16 + 2] = 0xff;
	struct frame_iter it;
	uint16_t tag;
	const uint8_t *v;
	size_t len;
	frame_iter_init(&it, &f);
	cr_assert_eq(frame_iter_next(&it, &tag, &v, &len), -EBADMSG);
	buf_free(&b);
}

Test(frame, u64_must_be_eight_bytes)
{
	uint64_t u = 7;
	cr_assert_eq(frame_val_u64((const uint8_t *)"1234567", 7, &u), -EBADMSG);
	cr_assert_eq(u, 7, "output untouched on failure");
}

Test(frame, string_cap)
{
	char *s = NULL;
	cr_assert_eq(frame_val_strdup((const uint8_t *)"abcdef", 6, 5, &s), -E2BIG);
	cr_assert_null(s);
	cr_assert_eq(frame_val_strdup((const uint8_t *)"abcde", 5, 5, &s), 0);
	cr_assert_str_eq(s, "abcde");
	free(s);
}

Test(run_status, names_round_trip)
{
	for (int i = 0; i < _RUN_STATUS_MAX; i++)
		cr_assert_eq(run_status_from_string(run_status_to_string(i)), i);
	cr_assert_eq(run_status_from_string("finished"), -EINVAL);
	cr_assert_str_eq(run_status_to_string(RUN_TIMED_OUT), "timed_out");
}

static int count_field(void *userdata, uint16_t tag, const uint8_t *val, size_t len)
{
	unsigned *n = userdata;

	if (tag == TAG_DATA)
		return -E2BIG;
	++*n;
	return 0;
}

Test(frame, for_each_field_stops_at_the_first_error)
{
	struct buf b = build(MSG_RUN_START, 1);
	unsigned n = 0;
	struct frame f;

	cr_assert_eq(frame_parse(b.data, b.len, PROTO_MAX_PAYLOAD, &f), (long)b.len);
	cr_assert_eq(frame_for_each_field(&f, count_field, &n), -E2BIG);
	cr_assert_eq(n, 2, "RUN_ID and TIMEOUT_MS before DATA");
	buf_free(&b);
}

Test(proto_id, valid_ids)
{
	cr_assert(proto_id_valid("r-abc"));
	cr_assert(proto_id_valid("A.b_c:9-"));
	cr_assert_not(proto_id_valid(""));
	cr_assert_not(proto_id_valid("a/b"));
	cr_assert_not(proto_id_valid("a b"));
}

Test(proto_id, read_checks_length_and_characters)
{
	char id[PROTO_MAX_ID + 2], *s = NULL;

	memset(id, 'a', sizeof id - 1);
	id[sizeof id - 1] = '\0';
	cr_assert_eq(proto_id_read((const uint8_t *)id, PROTO_MAX_ID, &s), 0);
	cr_assert_eq(strlen(s), PROTO_MAX_ID);
	free(s);
	cr_assert_lt(proto_id_read((const uint8_t *)id, PROTO_MAX_ID + 1, &s), 0, "too long");
	cr_assert_eq(proto_id_read((const uint8_t *)"x/y", 3, &s), -EBADMSG);
}

static struct frame key_frame(struct buf *b, bool with_watch, uint64_t watch)
{
	struct frame f;
	size_t start;

	*b = (struct buf){ 0 };
	cr_assert_eq(frame_begin(b, &start, MSG_RUN_WATCH, 0), 0);
	cr_assert_eq(frame_put_str(b, TAG_RUN_ID, "r-1"), 0);
	if (with_watch)
		cr_assert_eq(frame_put_u64(b, TAG_WATCH, watch), 0);
	cr_assert_eq(frame_end(b, start), 0);
	cr_assert_eq(frame_parse(b->data, b->len, PROTO_MAX_PAYLOAD, &f), (long)b->len);
	return f;
}

Test(proto_id, key_and_flag)
{
	struct buf b;
	struct frame f = key_frame(&b, true, 1);
	bool flag = false;
	char *id = NULL;

	cr_assert_eq(proto_parse_key_flag(&f, TAG_RUN_ID, proto_id_read, true, &id, &flag), 0);
	cr_assert_str_eq(id, "r-1");
	cr_assert(flag);
	free(id);
	cr_assert_eq(proto_parse_key_flag(&f, TAG_RUN_ID, proto_id_read, false, &id, NULL),
		     -EBADMSG, "WATCH where none is wanted");
	buf_free(&b);
	f = key_frame(&b, false, 0);
	cr_assert_eq(proto_parse_key_flag(&f, TAG_RUN_ID, proto_id_read, true, &id, &flag),
		     -EBADMSG, "WATCH missing");
	buf_free(&b);
	f = key_frame(&b, true, 2);
	cr_assert_eq(proto_parse_key_flag(&f, TAG_RUN_ID, proto_id_read, true, &id, &flag),
		     -EBADMSG, "WATCH of 2");
	buf_free(&b);
}
