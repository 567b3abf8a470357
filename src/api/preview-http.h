/* SPDX-License-Identifier: MIT */
#pragma once

/* The preview listener's HTTP/1.1, strictly (api/preview.c uses it; RFC 9112): a head is
 * split into its start line and fields, refusing what two parsers could read two ways; a body's
 * framing is followed over the bytes as they arrive, so they can be passed on unchanged once
 * checked; the station's own parameter, cookie and an app's cookie Domain are taken out. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "daemon/manager.h" /* PREVIEW_LABEL_MAX */

#define PREVIEW_MAX_HEADERS 128
#define CHUNK_LINE_MAX 1024 /* a chunk-size line with its extensions */
#define TRAILER_MAX (16u << 10)
#define TOKEN_PARAM "station_preview_token"
#define TOKEN_COOKIE "station_preview"

enum body_kind {
	BODY_NONE,
	BODY_LENGTH,
	BODY_CHUNKED,
	BODY_CLOSE,  /* until the sender closes (a response only) */
	BODY_TUNNEL, /* after a 101: everything, both ways */
};

enum chunk_phase {
	CHUNK_SIZE,
	CHUNK_DATA,
	CHUNK_DATA_END,
	CHUNK_TRAILER,
};

struct framing {
	enum body_kind kind;
	enum chunk_phase phase;
	uint64_t remaining; /* BODY_LENGTH: of the body; BODY_CHUNKED: of the chunk */
	size_t trailer;	    /* trailer bytes so far */
	bool done;	    /* the message ended at buf + approved */
};

struct header {
	const char *name, *value;
	size_t name_len, value_len;
};

struct head {
	const char *line; /* the start line, without CRLF */
	size_t line_len;
	struct header h[PREVIEW_MAX_HEADERS];
	size_t n;
};

/* A growable text for a head of ours. */
struct text {
	char *p;
	size_t len, cap;
	bool failed;
};

bool preview_tchar(unsigned char ch);
/* s (n bytes) is lit, case-insensitively. */
bool preview_token_eq(const char *s, size_t n, const char *lit);
/* Whether the comma-separated list s (n bytes) holds the token lit (case-insensitive). */
bool preview_list_has(const char *s, size_t n, const char *lit);
/* Percent-decodes s (n bytes, '+' as space) into out (at most out_size - 1 bytes, NUL
 * ended); false when it does not fit. */
bool preview_percent_decode(const char *s, size_t n, char *out, size_t out_size);

/* The end of a head (the byte after its CRLF CRLF) in buf, or 0 while it is incomplete. */
size_t preview_head_end(const char *buf, size_t len);
/* Whether buf[from, len) holds a LF that no CR precedes (buf[from - 1] is looked at). */
bool preview_has_bare_lf(const char *buf, size_t from, size_t len);
/* Splits a complete head (ending in CRLF CRLF): every line ends in CRLF (no bare CR or LF, no
 * NUL), no folded line, a field name is a token followed at once by ':', values without
 * controls. -EBADMSG otherwise, -E2BIG past PREVIEW_MAX_HEADERS fields. */
int preview_head_parse(const char *buf, size_t len, struct head *h);
bool preview_header_is(const struct header *f, const char *name);
/* A Content-Length value: 1 to 16 digits, at most 2^53. */
int preview_parse_length(const char *s, size_t n, uint64_t *ret);

void preview_text_add(struct text *t, const char *s, size_t n);
void preview_text_str(struct text *t, const char *s);
void preview_text_field(struct text *t, const char *name, const char *value, size_t n);
/* "Name: value" CRLF, the field as parsed. */
void preview_header_add(struct text *t, const struct header *f);

/* A message's body: BODY_NONE and an empty BODY_LENGTH are done at once. */
void preview_framing_start(struct framing *f, enum body_kind kind, uint64_t length);
/* Moves *approved (an offset in buf, at most len) over the bytes the framing lets through:
 * a Content-Length's bytes, each chunk's size line (1 to 15 hex digits, extensions without
 * controls), data and CRLF, the trailer's fields and its end; f->done at the message's end.
 * -EBADMSG on a malformed chunked body. */
int preview_framing_scan(struct framing *f, const char *buf, size_t len, size_t *approved);

/* The label of a Host value (v, n bytes) under domain (lower case): lower-cased into label
 * (PREVIEW_LABEL_MAX + 1 bytes); false when the host is not <one label>.<domain>[.][:port]. */
bool preview_host_label(const char *domain, size_t domain_len, const char *v, size_t n,
			char *label);
/* The request target (n bytes) without the station's parameter, appended to t; the
 * parameter's (last) value into tok ("-" when present but empty or too long; "" when absent). */
void preview_target_strip(const char *target, size_t n, struct text *t, char *tok, size_t tok_size);
/* The station's cookie of a Cookie field into tok (kept as it was when absent), and the field
 * without it appended to t (nothing when no pair is left). */
void preview_cookie_strip(const struct header *f, struct text *t, char *tok, size_t tok_size);
/* A Set-Cookie field without its Domain attribute, appended to t. */
void preview_set_cookie_add(struct text *t, const struct header *f);
