/* SPDX-License-Identifier: MIT */
/* Workspace names and labels (domain/labels.h). */
#include "domain/labels.h"

#include <errno.h>
#include <string.h>

#include "basic/workers.h"

static bool lower_alnum(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

/* s: first lower_alnum, then up to max - 1 of lower_alnum or one of extra. */
static bool word_valid(const char *s, size_t max, const char *extra)
{
	size_t n = 0;

	if (!s || !lower_alnum(s[0]))
		return false;
	for (; s[n]; n++)
		if (n >= max || !(lower_alnum(s[n]) || strchr(extra, s[n])))
			return false;
	return true;
}

int workspace_name_check(const char *name, struct station_error *e)
{
	if (!word_valid(name, WORKSPACE_NAME_MAX, "._-"))
		return station_error_set(e, -EINVAL, "name",
					 "name \"%.80s\" is not [a-z0-9][a-z0-9._-]{0,62}",
					 name ? name : "");
	if (workspace_id_shaped(name))
		return station_error_set(e, -EINVAL, "name",
					 "name \"%s\" has the shape of a workspace id "
					 "(WORKER-26 characters of [a-z2-7]): choose another",
					 name);
	return 0;
}

bool label_key_valid(const char *key)
{
	return word_valid(key, LABEL_KEY_MAX, "._/-");
}

/* The length of the UTF-8 sequence at s (a well-formed one, shortest form, no surrogates), or
 * 0 when it is not one. */
static size_t utf8_one(const unsigned char *s)
{
	size_t n;
	unsigned cp;

	if (s[0] < 0x80)
		return 1;
	if (s[0] >= 0xc2 && s[0] <= 0xdf)
		n = 2, cp = s[0] & 0x1f;
	else if (s[0] >= 0xe0 && s[0] <= 0xef)
		n = 3, cp = s[0] & 0x0f;
	else if (s[0] >= 0xf0 && s[0] <= 0xf4)
		n = 4, cp = s[0] & 0x07;
	else
		return 0;
	for (size_t i = 1; i < n; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (s[i] & 0x3f);
	}
	if ((n == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
	    (n == 4 && (cp < 0x10000 || cp > 0x10ffff)))
		return 0;
	/* C1 controls (U+0080 … U+009F) are control characters too */
	return n == 2 && cp <= 0x9f ? 0 : n;
}

int label_check(const char *key, const char *value, struct station_error *e)
{
	const unsigned char *p = (const unsigned char *)value;

	if (!label_key_valid(key))
		return station_error_set(e, -EINVAL, "labels",
					 "label key \"%.80s\" is not [a-z0-9][a-z0-9._/-]{0,62}",
					 key ? key : "");
	if (!value)
		return station_error_set(e, -EINVAL, "labels",
					 "label \"%s\": the value must be a string", key);
	if (strlen(value) > LABEL_VALUE_MAX)
		return station_error_set(e, -EINVAL, "labels",
					 "label \"%s\": the value is over %d bytes", key,
					 LABEL_VALUE_MAX);
	while (*p) {
		size_t n = *p < 0x20 || *p == 0x7f ? 0 : utf8_one(p);

		if (n == 0)
			return station_error_set(e, -EINVAL, "labels",
						 "label \"%s\": the value holds a control "
						 "character or is not UTF-8",
						 key);
		p += n;
	}
	return 0;
}
