/* SPDX-License-Identifier: MIT */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "basic/placement.h"

#define SHARED(n, f, m)                                                                            \
	{                                                                                          \
		.name = n, .free = f, .memory_available = m                                        \
	}
#define PRIVATE(n, t, f)                                                                           \
	{                                                                                          \
		.name = n, .tenant = t, .free = f, .memory_available = 1                           \
	}

static void as_tenant(struct placement_worker *v, size_t n, const char *tenant)
{
	for (size_t i = 0; i < n; i++)
		v[i].caller_tenant = tenant;
}

Test(placement, most_free_then_memory_then_first_listed)
{
	struct placement_worker v[] = { SHARED("w1", 3, 100), SHARED("w2", 5, 10),
					SHARED("w3", 5, 20), SHARED("w4", 5, 20) };

	cr_assert_eq(placement_choose(v, 4, NULL, 0), 2);
	v[1].memory_available = 30;
	cr_assert_eq(placement_choose(v, 4, NULL, 0), 1);
}

Test(placement, another_tenants_private_worker_is_skipped_however_free)
{
	struct placement_worker v[] = { SHARED("w1", 1, 1), PRIVATE("w2", "b", 900) };

	as_tenant(v, 2, "a");
	cr_assert_eq(placement_choose(v, 2, NULL, 0), 0);
	cr_assert_str_eq(placement_skip_reason(&v[1]), "private to another tenant");
	/* the control: the same list for tenant b puts it on its own */
	as_tenant(v, 2, "b");
	cr_assert_eq(placement_choose(v, 2, NULL, 0), 1);
}

Test(placement, own_private_worker_first_even_with_less_room)
{
	struct placement_worker v[] = { SHARED("w1", 500, 1000), PRIVATE("w2", "b", 1) };

	as_tenant(v, 2, "b");
	cr_assert_eq(placement_choose(v, 2, NULL, 0), 1);
	v[1].free = 0; /* full: the shared one then */
	cr_assert_eq(placement_choose(v, 2, NULL, 0), 0);
}

Test(placement, the_operator_may_use_any_but_has_no_own)
{
	struct placement_worker v[] = { SHARED("w1", 1, 1), PRIVATE("w2", "b", 9) };

	v[0].caller_admin = v[1].caller_admin = true;
	cr_assert_eq(placement_choose(v, 2, NULL, 0), 1);
	cr_assert_null(placement_skip_reason(&v[1]));
}

Test(placement, none_left_says_why_each_was_skipped)
{
	struct placement_worker v[] = {
		{ .name = "w1",
		  .error = "worker w1 (http://h1) did not answer: connection refused" },
		PRIVATE("w2", "b", 9),
		SHARED("w3", 0, 100),
	};
	char why[256];

	as_tenant(v, 3, "a");
	cr_assert_eq(placement_choose(v, 3, why, sizeof why), -EAGAIN);
	cr_assert_str_eq(why, "worker w1 (http://h1) did not answer: connection refused; worker "
			      "w2 is private to another tenant; worker w3 is full");
	cr_assert_eq(placement_choose(v, 3, why, 8), -EAGAIN);
	cr_assert_str_eq(why, "worker ");
	cr_assert_eq(placement_choose(v, 0, why, sizeof why), -EAGAIN);
	cr_assert_str_eq(why, "");
}

Test(placement, a_worker_that_does_not_say_its_free_room_is_full)
{
	struct placement_worker v[] = { SHARED("w1", -1, 5) };

	cr_assert_str_eq(placement_skip_reason(&v[0]), "full");
}
