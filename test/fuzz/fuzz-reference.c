/* SPDX-License-Identifier: MIT */
/* Image references: image_ref_parse() (src/image/reference.c) on any string, and the API's
 * check of a POST /v1/images body's "reference" (validate_image_request()) on the same bytes.
 * Beyond memory errors, an accepted reference must be what the parser promises: a valid
 * digest, a name of [a-z0-9._/-] (a registry host may also have upper case and a port) that with '@' and the
 * digest gives back the input, and a second parse of that gives the same result. The API must
 * accept a reference exactly when the parser does and it has a name, and reject one with a
 * message. */

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/validate.h"
#include "image/image.h"

#define CHECK(x)                                                                                   \
	do {                                                                                       \
		if (!(x))                                                                          \
			abort();                                                                   \
	} while (0)

static void check_message(const struct station_error *e)
{
	CHECK(memchr(e->message, '\0', sizeof e->message));
	CHECK(e->message[0] != '\0');
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct station_error e = {}, e2 = {};
	struct image_ref ref, again;
	char *s;
	int r;

	if (size > 4096)
		return 0;
	s = malloc(size + 1);
	CHECK(s);
	memcpy(s, data, size);
	s[size] = '\0';

	r = image_ref_parse(s, &ref, &e);
	if (r == 0) {
		char canon[IMAGE_NAME_MAX + IMAGE_DIGEST_MAX + 1];

		CHECK(image_digest_is_valid(ref.digest));
		CHECK(memchr(ref.name, '\0', sizeof ref.name));
		/* Upper case and ':' only in a registry host, before the first '/'. */
		const char *slash = strchr(ref.name, '/');
		for (const char *c = ref.name; *c; c++) {
			bool in_host = slash && c < slash;
			CHECK((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') ||
			      strchr("._/-", *c) ||
			      (in_host && (*c == ':' || (*c >= 'A' && *c <= 'Z'))));
		}
		if (ref.name[0])
			snprintf(canon, sizeof canon, "%s@%s", ref.name, ref.digest);
		else
			snprintf(canon, sizeof canon, "%s", ref.digest);
		CHECK(strcmp(canon, s) == 0);
		CHECK(image_ref_parse(canon, &again, &e2) == 0);
		CHECK(memcmp(&again, &ref, sizeof ref) == 0);
	} else {
		CHECK(r == -EINVAL);
		check_message(&e);
	}
	/* The digest check alone agrees with the parser on a bare digest. */
	if (image_digest_is_valid(s))
		CHECK(r == 0 && ref.name[0] == '\0');

	/* The same bytes as the API's "reference" (a JSON string may hold a NUL). */
	json_t *body = json_object();
	CHECK(body);
	json_t *str = json_stringn_nocheck(s, size);
	if (str && json_object_set_new(body, "reference", str) == 0) {
		struct image_request req;
		struct station_error ae = {};
		int ar = validate_image_request(body, &req, &ae);
		bool want = r == 0 && ref.name[0] != '\0' && size <= 512 && !memchr(data, 0, size);

		CHECK((ar == 0) == want);
		if (ar == 0) {
			CHECK(req.reference && strcmp(req.reference, s) == 0);
		} else {
			CHECK(ar < 0);
			check_message(&ae);
		}
	}
	json_decref(body);
	free(s);
	return 0;
}
