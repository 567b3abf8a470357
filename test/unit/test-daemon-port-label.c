/* SPDX-License-Identifier: MIT */
/* Preview host labels and tokens (src/daemon/port-label.c): their shape, their randomness. */
#include <criterion/criterion.h>
#include <string.h>

#include "daemon/port-label.h"

Test(label, shape)
{
	char a[PREVIEW_LABEL_MAX + 1], b[PREVIEW_LABEL_MAX + 1];

	cr_assert_eq(port_label_new(3000, a), 0);
	cr_assert_eq(port_label_new(3000, b), 0);
	cr_assert_eq(strlen(a), 5 + PORT_LABEL_RANDOM_CHARS);
	cr_assert_eq(strncmp(a, "3000-", 5), 0, "%s", a);
	cr_assert(port_label_valid(a, strlen(a)), "%s", a);
	cr_assert_str_neq(a, b);
	cr_assert_eq(port_label_new(65535, a), 0);
	cr_assert_leq(strlen(a), PREVIEW_LABEL_MAX);
	cr_assert(port_label_valid(a, strlen(a)), "%s", a);
	cr_assert_eq(port_label_new(0, a), -EINVAL);
}

Test(label, valid_refuses)
{
	static const char *const bad[] = {
		"",
		"3000",
		"3000-",
		"03000-abcdefghijklmnopqrstuvwxyz",
		"70000-abcdefghijklmnopqrstuvwxyz",
		"3000-abcdefghijklmnopqrstuvwxy",
		"3000-abcdefghijklmnopqrstuvwxyz2",
		"3000-Abcdefghijklmnopqrstuvwxyz",
		"3000-abcdefghijklmnopqrstuvwxy1",
		"-abcdefghijklmnopqrstuvwxyz",
	};

	cr_assert(port_label_valid("3000-abcdefghijklmnopqrstuvwxyz", 31));
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
		cr_assert(!port_label_valid(bad[i], strlen(bad[i])), "%s", bad[i]);
}

Test(token, shape)
{
	char a[PORT_TOKEN_LEN + 1], b[PORT_TOKEN_LEN + 1];

	cr_assert_eq(port_token_new(a), 0);
	cr_assert_eq(port_token_new(b), 0);
	cr_assert_eq(strlen(a), PORT_TOKEN_LEN);
	cr_assert_eq(strncmp(a, "sp_", 3), 0);
	cr_assert_eq(strspn(a + 3,
			    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"),
		     43, "%s", a);
	cr_assert_str_neq(a, b);
}

Test(token, base64url)
{
	char out[16];

	base64url_encode((const uint8_t *)"\xfb\xff", 2, out);
	cr_assert_str_eq(out, "-_8");
	base64url_encode((const uint8_t *)"foo", 3, out);
	cr_assert_str_eq(out, "Zm9v");
	base64url_encode((const uint8_t *)"f", 1, out);
	cr_assert_str_eq(out, "Zg");
}
