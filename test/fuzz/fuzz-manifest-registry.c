/* SPDX-License-Identifier: MIT */
/* What a registry answers around a manifest pull, as src/image/pull.c reads it: the response
 * header lines (Content-Type, which picks the document kind, and WWW-Authenticate), the
 * parameters of a bearer challenge, a token service's JSON answer and a registry's JSON error
 * body. The input is cut at each LF into header lines handed over as libcurl does (not
 * NUL-terminated, the LF included); the whole input is also the challenge and the bodies.
 * Beyond memory errors: the content type holds no ';', CR or LF and fits its buffer; a
 * challenge parameter is a quote-free part of the challenge; a token is non-empty and free of
 * control characters (it is sent back in an Authorization header); the error text fits and is
 * empty or starts with ", ". */

#include <errno.h>
#include <stdio.h>

#include "fuzz-harness.h"
#include "image/image-internal.h"

static void check_param(const char *challenge, const char *key)
{
	char *v = registry_challenge_param(challenge, key);

	if (!v)
		return;
	FUZZ_CHECK(!strchr(v, '"'));
	FUZZ_CHECK(strstr(challenge, v));
	free(v);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct registry_headers h = {};
	char *copy, *token = NULL, text[256];
	size_t start = 0;
	int r;

	if (size > 65536)
		return 0;
	/* Header lines, each in a buffer of its own size (ASan sees a read past it). */
	for (size_t i = 0; i <= size; i++) {
		if (i < size && data[i] != '\n')
			continue;
		size_t len = i - start + (i < size);
		char *line = malloc(len ? len : 1);
		FUZZ_CHECK(line);
		memcpy(line, data + start, len);
		registry_header_line(&h, line, len);
		free(line);
		start = i + 1;
	}
	FUZZ_CHECK(memchr(h.content_type, '\0', sizeof h.content_type));
	FUZZ_CHECK(!strpbrk(h.content_type, ";\r\n"));
	if (h.www_authenticate) {
		FUZZ_CHECK(strlen(h.www_authenticate) <= size);
		check_param(h.www_authenticate, "realm");
		check_param(h.www_authenticate, "service");
		check_param(h.www_authenticate, "scope");
	}
	(void)media_kind_from_string(h.content_type);
	registry_headers_done(&h);

	copy = malloc(size + 1);
	FUZZ_CHECK(copy);
	memcpy(copy, data, size);
	copy[size] = '\0';
	check_param(copy, "realm");
	check_param(copy, "scope");

	r = registry_token_parse(copy, size, &token);
	if (r == 0) {
		FUZZ_CHECK(token && token[0]);
		for (const char *c = token; *c; c++)
			FUZZ_CHECK((unsigned char)*c >= 0x20 && *c != 0x7f);
		free(token);
	} else {
		FUZZ_CHECK(r == -EPROTO);
	}

	registry_error_text(copy, size, text, sizeof text);
	FUZZ_CHECK(memchr(text, '\0', sizeof text));
	FUZZ_CHECK(text[0] == '\0' || strncmp(text, ", ", 2) == 0);
	registry_error_text(NULL, 0, text, sizeof text);
	FUZZ_CHECK(text[0] == '\0');
	free(copy);
	return 0;
}
