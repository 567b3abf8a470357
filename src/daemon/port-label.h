/* SPDX-License-Identifier: MIT */
#pragma once

/* A preview's host label and token (docs/api.md, "Previews"): pure string work, unit-tested. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "daemon/manager.h"

/* "<port>-" and 26 of base32's lower-case alphabet (130 random bits from getrandom): one DNS
 * label of at most 32 characters. */
#define PORT_LABEL_RANDOM_CHARS 26
/* "sp_" and 32 random bytes as base64url without padding (43 characters). */
#define PORT_TOKEN_PREFIX "sp_"
#define PORT_TOKEN_BYTES 32
#define PORT_TOKEN_LEN (3 + 43)

int port_label_new(uint16_t port, char ret[PREVIEW_LABEL_MAX + 1]);
/* Whether s (n bytes) has the shape of a label port_label_new() makes for some port. */
bool port_label_valid(const char *s, size_t n);
/* ret holds PORT_TOKEN_LEN + 1 bytes; the caller wipes it after use. */
int port_token_new(char ret[PORT_TOKEN_LEN + 1]);
/* base64url of n bytes without padding into ret (4 * ceil(n / 3) + 1 bytes at least). */
void base64url_encode(const uint8_t *data, size_t n, char *ret);
