/* SPDX-License-Identifier: MIT */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "agent/output.h"

/* Byte i of every test stream: a pattern whose period (251, prime) never lines up with the
 * buffer sizes, so a byte in the wrong place shows. */
static uint8_t pattern(uint64_t i)
{
	return (uint8_t)(i % 251);
}

static void fill(uint8_t *p, uint64_t offset, size_t n)
{
	for (size_t i = 0; i < n; i++)
		p[i] = pattern(offset + i);
}

static void feed(struct output_buffer *o, uint64_t *offset, size_t n)
{
	uint8_t *p = malloc(n ? n : 1);

	cr_assert_not_null(p);
	fill(p, *offset, n);
	output_buffer_append(o, p, n);
	*offset += n;
	free(p);
}

static void assert_pattern(const uint8_t *p, uint64_t offset, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != pattern(offset + i))
			cr_assert_fail("byte %zu (stream offset %llu) is %u, want %u", i,
				       (unsigned long long)(offset + i), p[i], pattern(offset + i));
}

/* Checks the exact outcome for a stream of `total` pattern bytes with limits h and t. */
static void assert_kept(struct output_buffer *o, size_t h, size_t t, uint64_t total)
{
	const uint8_t *head, *tail;
	size_t head_len, tail_len;
	uint64_t tail_off;
	uint64_t want_head = total < h ? total : h;
	uint64_t want_tail = total - want_head < t ? total - want_head : t;

	output_buffer_head(o, &head, &head_len);
	output_buffer_tail(o, &tail, &tail_len, &tail_off);
	cr_assert_eq(output_buffer_total(o), total);
	cr_assert_eq(head_len, want_head);
	cr_assert_eq(tail_len, want_tail);
	cr_assert_eq(tail_off, total - want_tail);
	cr_assert_eq(output_buffer_truncated(o), total > h + t);
	assert_pattern(head, 0, head_len);
	assert_pattern(tail, tail_off, tail_len);
	if (total <= h + t)
		cr_assert_eq(head_len + tail_len, total, "head + tail must be the whole stream");
}

static void run_sizes(size_t h, size_t t, uint64_t total, size_t chunk)
{
	struct output_buffer o;
	uint64_t off = 0;

	cr_assert_eq(output_buffer_init(&o, h, t), 0);
	while (off < total)
		feed(&o, &off, (size_t)(total - off < chunk ? total - off : chunk));
	assert_kept(&o, h, t, total);
	output_buffer_done(&o);
}

Test(output, empty)
{
	run_sizes(100, 50, 0, 1);
}

/* Nothing is allocated before the first byte; after it the buffer keeps as always. */
Test(output, allocated_at_first_byte)
{
	struct output_buffer o;
	const uint8_t *head, *tail;
	size_t head_len, tail_len;
	uint64_t off = 0, tail_off;

	cr_assert_eq(output_buffer_init(&o, 100, 50), 0);
	cr_assert_null(o.mem);
	output_buffer_append(&o, "", 0);
	cr_assert_null(o.mem, "an empty write allocates nothing");
	output_buffer_head(&o, &head, &head_len);
	output_buffer_tail(&o, &tail, &tail_len, &tail_off);
	cr_assert_eq(head_len, 0);
	cr_assert_eq(tail_len, 0);
	cr_assert_eq(tail_off, 0);
	cr_assert_not(output_buffer_truncated(&o));
	feed(&o, &off, 300);
	cr_assert_not_null(o.mem);
	assert_kept(&o, 100, 50, 300);
	output_buffer_done(&o);
}

Test(output, boundary_one_write)
{
	run_sizes(100, 50, 149, 1000);
	run_sizes(100, 50, 150, 1000);
	run_sizes(100, 50, 151, 1000);
}

Test(output, boundary_byte_by_byte)
{
	run_sizes(100, 50, 149, 1);
	run_sizes(100, 50, 150, 1);
	run_sizes(100, 50, 151, 1);
}

Test(output, boundary_exact_content)
{
	struct output_buffer o;
	const uint8_t *head, *tail;
	size_t hl, tl;
	uint64_t toff;

	/* H+T-1: nothing lost, tail is the 2 bytes after the head. */
	cr_assert_eq(output_buffer_init(&o, 3, 3), 0);
	output_buffer_append(&o, "abcde", 5);
	output_buffer_head(&o, &head, &hl);
	output_buffer_tail(&o, &tail, &tl, &toff);
	cr_assert(hl == 3 && memcmp(head, "abc", 3) == 0);
	cr_assert(tl == 2 && memcmp(tail, "de", 2) == 0 && toff == 3);
	cr_assert(!output_buffer_truncated(&o));
	/* H+T: still the whole stream. */
	output_buffer_append(&o, "f", 1);
	output_buffer_tail(&o, &tail, &tl, &toff);
	cr_assert(tl == 3 && memcmp(tail, "def", 3) == 0 && toff == 3);
	cr_assert(!output_buffer_truncated(&o));
	/* H+T+1: "d" is gone. */
	output_buffer_append(&o, "g", 1);
	output_buffer_head(&o, &head, &hl);
	output_buffer_tail(&o, &tail, &tl, &toff);
	cr_assert(hl == 3 && memcmp(head, "abc", 3) == 0);
	cr_assert(tl == 3 && memcmp(tail, "efg", 3) == 0 && toff == 4);
	cr_assert(output_buffer_truncated(&o));
	cr_assert_eq(output_buffer_total(&o), 7);
	output_buffer_done(&o);
}

Test(output, chunk_straddles_head)
{
	/* The head fills mid-chunk; the rest of the chunk starts the ring. */
	run_sizes(100, 50, 130, 70);
	run_sizes(100, 50, 151, 99);
	run_sizes(100, 50, 1000, 101);
	run_sizes(100, 50, 1000, 150);
	run_sizes(100, 50, 1000, 151);
	/* One write covering head, a whole ring and more. */
	run_sizes(100, 50, 100000, 100000);
}

Test(output, wraparound_small_and_large)
{
	static const size_t chunks[] = { 1, 2, 7, 49, 50, 51, 99, 4096 };

	for (size_t i = 0; i < sizeof chunks / sizeof chunks[0]; i++)
		for (uint64_t total = 140; total < 400; total += 37)
			run_sizes(100, 50, total, chunks[i]);
}

Test(output, mixed_chunk_sizes)
{
	struct output_buffer o;
	uint64_t off = 0;
	unsigned seed = 12345;

	cr_assert_eq(output_buffer_init(&o, 1000, 777), 0);
	for (int i = 0; i < 5000; i++) {
		seed = seed * 1103515245 + 12345;
		feed(&o, &off, (seed >> 16) % 2000);
		if (i % 97 == 0)
			assert_kept(&o, 1000, 777, off); /* snapshots in between change nothing */
	}
	assert_kept(&o, 1000, 777, off);
	output_buffer_done(&o);
}

Test(output, no_head_or_no_tail)
{
	run_sizes(0, 50, 0, 7);
	run_sizes(0, 50, 49, 7);
	run_sizes(0, 50, 51, 7);
	run_sizes(0, 50, 1000, 7);
	run_sizes(100, 0, 99, 7);
	run_sizes(100, 0, 101, 7);
	run_sizes(0, 0, 1000, 7);
}

Test(output, one_gib, .timeout = 60)
{
	enum { CHUNK = 64 * 1024, H = 1024 * 1024, T = 1024 * 1024 + 3 };
	const uint64_t total = 1ull << 30;
	struct output_buffer o;
	uint8_t *chunk = malloc(CHUNK + 251);

	cr_assert_not_null(chunk);
	/* Chunks are windows into a longer copy of the pattern, so no per-chunk refill. */
	fill(chunk, 0, CHUNK + 251);
	cr_assert_eq(output_buffer_init(&o, H, T), 0);
	for (uint64_t off = 0; off < total; off += CHUNK)
		output_buffer_append(&o, chunk + off % 251, CHUNK);
	assert_kept(&o, H, T, total);
	output_buffer_done(&o);
	free(chunk);
}

Test(output, watcher_snapshot)
{
	struct output_buffer o;
	const uint8_t *head, *tail;
	size_t hl, tl;
	uint64_t toff, off = 0;

	cr_assert_eq(output_buffer_init(&o, 10, 20), 0);
	feed(&o, &off, 5);
	output_buffer_head(&o, &head, &hl);
	output_buffer_tail(&o, &tail, &tl, &toff);
	cr_assert(hl == 5 && tl == 0 && toff == 5);
	/* A watcher joining late gets head then tail at their offsets; live chunks follow. */
	feed(&o, &off, 97);
	output_buffer_head(&o, &head, &hl);
	output_buffer_tail(&o, &tail, &tl, &toff);
	cr_assert(hl == 10 && tl == 20 && toff == 82);
	assert_pattern(head, 0, hl);
	assert_pattern(tail, toff, tl);
	/* The snapshot reordered the ring in place; appending afterwards still works. */
	feed(&o, &off, 3);
	assert_kept(&o, 10, 20, off);
	feed(&o, &off, 13);
	assert_kept(&o, 10, 20, off);
	output_buffer_done(&o);
}

/* Walks the kept bytes with output_buffer_piece() from `from` (<= total), as a paced resend
 * does: the pattern bytes at each piece's offset, the head and then the tail from max(from, the
 * tail's first offset), contiguous but for the one jump over what is not kept, to the end. */
static void assert_pieces(struct output_buffer *o, uint64_t from)
{
	uint64_t total = output_buffer_total(o), at = from, offset;
	uint64_t tail_start = total - o->tail_len;
	const uint8_t *p;
	size_t len, pieces = 0, sent = 0;

	for (;;) {
		output_buffer_piece(o, at, &p, &len, &offset);
		if (len == 0)
			break;
		cr_assert_eq(offset, at < o->head_len || at >= tail_start ? at : tail_start,
			     "the piece for %llu", (unsigned long long)at);
		assert_pattern(p, offset, len);
		at = offset + len;
		sent += len;
		cr_assert_leq(++pieces, 3, "the head and at most two pieces of the ring");
	}
	cr_assert_eq(offset, total, "nothing kept at or after %llu", (unsigned long long)at);
	cr_assert_eq(at, total, "walked from %llu to the end", (unsigned long long)from);
	if (from == 0)
		cr_assert_eq(sent, o->head_len + o->tail_len, "every kept byte");
}

/* For the sizes that matter: nothing kept yet, the head alone, a ring not yet wrapped, wrapped
 * once or many times, with the walk starting at 0, in the head, in the lost middle and in the
 * tail. */
Test(output, pieces_from_any_offset)
{
	static const uint64_t totals[] = { 0, 5, 100, 150, 199, 200, 201, 250, 1000, 1037 };
	static const size_t chunks[] = { 1, 7, 64, 1000 };

	for (size_t c = 0; c < sizeof chunks / sizeof *chunks; c++)
		for (size_t i = 0; i < sizeof totals / sizeof *totals; i++) {
			struct output_buffer o;
			uint64_t off = 0;

			cr_assert_eq(output_buffer_init(&o, 100, 100), 0);
			while (off < totals[i])
				feed(&o, &off,
				     totals[i] - off < chunks[c] ? totals[i] - off : chunks[c]);
			for (uint64_t from = 0; from <= totals[i]; from++)
				assert_pieces(&o, from);
			output_buffer_done(&o);
		}
}
