/* SPDX-License-Identifier: MIT */
/* Host labels and tokens of previews: what makes them unguessable and what shape they take. */

#include "daemon/port-label.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "basic/util.h"

int port_label_new(uint16_t port, char ret[PREVIEW_LABEL_MAX + 1])
{
	char prefix[8];

	if (port == 0)
		return -EINVAL;
	snprintf(prefix, sizeof prefix, "%u-", (unsigned)port);
	return random_id(prefix, PORT_LABEL_RANDOM_CHARS, ret, PREVIEW_LABEL_MAX + 1);
}

bool port_label_valid(const char *s, size_t n)
{
	size_t digits = 0;
	unsigned port = 0;

	while (digits < n && digits < 5 && s[digits] >= '0' && s[digits] <= '9')
		port = port * 10 + (unsigned)(s[digits++] - '0');
	if (digits == 0 || s[0] == '0' || port > 65535 || digits >= n || s[digits] != '-' ||
	    n != digits + 1 + PORT_LABEL_RANDOM_CHARS)
		return false;
	for (size_t i = digits + 1; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '2' && s[i] <= '7')))
			return false;
	return true;
}

void base64url_encode(const uint8_t *data, size_t n, char *ret)
{
	static const char alphabet[] =
		"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
	size_t o = 0;

	for (size_t i = 0; i < n; i += 3) {
		uint32_t v = (uint32_t)data[i] << 16;
		size_t left = n - i;

		if (left > 1)
			v |= (uint32_t)data[i + 1] << 8;
		if (left > 2)
			v |= data[i + 2];
		ret[o++] = alphabet[(v >> 18) & 63];
		ret[o++] = alphabet[(v >> 12) & 63];
		if (left > 1)
			ret[o++] = alphabet[(v >> 6) & 63];
		if (left > 2)
			ret[o++] = alphabet[v & 63];
	}
	ret[o] = '\0';
}

int port_token_new(char ret[PORT_TOKEN_LEN + 1])
{
	uint8_t raw[PORT_TOKEN_BYTES];
	int r = random_bytes(raw, sizeof raw);

	if (r < 0)
		return r;
	memcpy(ret, PORT_TOKEN_PREFIX, strlen(PORT_TOKEN_PREFIX));
	base64url_encode(raw, sizeof raw, ret + strlen(PORT_TOKEN_PREFIX));
	explicit_bzero(raw, sizeof raw);
	return 0;
}
