/* SPDX-License-Identifier: MIT */
/* What the CLI prints of names a sandbox chose: escaped so a terminal shows them and never acts
 * on them. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "cli/output.h"

static void expect_escaped(const char *in, const char *want)
{
	char *got = output_escape(in);

	cr_assert_not_null(got);
	cr_expect_str_eq(got, want, "escape of \"%s\"", in);
	free(got);
}

Test(output_escape, printable_text_and_utf8_stay)
{
	expect_escaped("", "");
	expect_escaped("a.txt", "a.txt");
	expect_escaped("dir name/ü €😀", "dir name/ü €😀");
}

Test(output_escape, control_characters_become_hex)
{
	expect_escaped("a\033]0;pwned\007b", "a\\x1b]0;pwned\\x07b");
	expect_escaped("two\nlines\r", "two\\x0alines\\x0d");
	expect_escaped("tab\there", "tab\\x09here");
	expect_escaped("del\177", "del\\x7f");
}

Test(output_escape, c1_controls_and_bad_utf8_become_hex)
{
	expect_escaped("csi\xc2\x9b"
		       "2J",
		       "csi\\xc2\\x9b2J");		  /* U+009B, a one-byte CSI */
	expect_escaped("nbsp\xc2\xa0.", "nbsp\xc2\xa0."); /* U+00A0 is printable */
	expect_escaped("\xff\xfe", "\\xff\\xfe");
	expect_escaped("over\xc0\xaflong", "over\\xc0\\xaflong");
	expect_escaped("sur\xed\xa0\x80", "sur\\xed\\xa0\\x80");
	expect_escaped("cut\xe2\x82", "cut\\xe2\\x82"); /* a sequence the string ends inside */
}

Test(output_escape, a_backslash_is_doubled_so_the_output_is_unambiguous)
{
	expect_escaped("a\\x1b", "a\\\\x1b");
}
