/* SPDX-License-Identifier: MIT */
/* The memory-snapshot probe's verdict and message from made-up facts (checkpoint_status_from):
 * each missing piece named, the vDSO hint only where it applies, and ok only when criu check
 * passes under a runtime that checkpoints through CRIU. */
#include <criterion/criterion.h>
#include <string.h>

#include "adapter/checkpoint.h"

static const struct checkpoint_facts good = { .criu_version = "4.1",
					      .criu_check_status = 0,
					      .criu_check_error = "",
					      .kernel = "6.18.0",
					      .runtime_name = "runc",
					      .runtime_version = "1.1.5" };

static struct checkpoint_status verdict(struct checkpoint_facts f)
{
	struct checkpoint_status s;
	memset(&s, 0x55, sizeof s);
	checkpoint_status_from(&f, &s);
	return s;
}

Test(checkpoint, everything_there)
{
	struct checkpoint_status s = verdict(good);
	cr_assert(s.ok);
	cr_assert_str_eq(s.message, "criu 4.1 via runc 1.1.5");
	struct checkpoint_facts f = good;
	f.runtime_name = "crun";
	f.runtime_version = "1.14";
	f.runtime_criu = true;
	s = verdict(f);
	cr_assert(s.ok);
	cr_assert_str_eq(s.message, "criu 4.1 via crun 1.14");
}

Test(checkpoint, criu_missing)
{
	struct checkpoint_facts f = good;
	f.criu_version = NULL;
	struct checkpoint_status s = verdict(f);
	cr_assert_not(s.ok);
	cr_assert_str_eq(s.message, "memory snapshots unavailable: criu is not installed (install "
				    "criu; kernels 6.13 and later need criu 4.1 or newer)");
}

Test(checkpoint, old_criu_on_a_split_vdso_gets_the_hint)
{
	struct checkpoint_facts f = good;
	f.criu_version = "3.17.1";
	f.criu_check_status = 1;
	f.criu_check_error = "vdso: Unexpected rt vDSO area bounds";
	struct checkpoint_status s = verdict(f);
	cr_assert_not(s.ok);
	cr_assert_str_eq(s.message,
			 "memory snapshots unavailable: criu 3.17.1: 'criu check' fails on kernel "
			 "6.18.0: vdso: Unexpected rt vDSO area bounds (kernels 6.13 and later map "
			 "the vDSO's clock pages apart, which criu reads from 4.1 on: install criu "
			 "4.1 or newer)");
}

Test(checkpoint, other_check_failures_are_quoted_without_the_hint)
{
	struct checkpoint_facts f = good;
	f.criu_check_status = 1;
	f.criu_check_error = "Kernel doesn't support PTRACE_O_SUSPEND_SECCOMP";
	struct checkpoint_status s = verdict(f);
	cr_assert_not(s.ok);
	cr_assert_str_eq(s.message, "memory snapshots unavailable: criu 4.1: 'criu check' fails "
				    "on kernel 6.18.0: Kernel doesn't support "
				    "PTRACE_O_SUSPEND_SECCOMP");
	/* a vDSO error from a criu that knows the split layout: no advice to upgrade to it */
	f.criu_check_error = "vdso: Unexpected rt vDSO area bounds";
	s = verdict(f);
	cr_assert_null(strstr(s.message, "install criu 4.1"), "%s", s.message);
	f.criu_check_status = -1;
	s = verdict(f);
	cr_assert_not(s.ok);
	cr_assert(strstr(s.message, "'criu check' fails on kernel 6.18.0: it did not finish"), "%s",
		  s.message);
}

Test(checkpoint, runtimes)
{
	struct checkpoint_facts f = good;
	f.runtime_name = "crun";
	f.runtime_version = "1.8.1";
	struct checkpoint_status s = verdict(f);
	cr_assert_not(s.ok);
	cr_assert_str_eq(s.message, "memory snapshots unavailable: crun 1.8.1 was built without "
				    "CRIU (no +CRIU in 'crun --version'): use --runtime runc or a "
				    "crun built with criu");
	f.runtime_name = "runsc";
	s = verdict(f);
	cr_assert_not(s.ok);
	cr_assert(strstr(s.message, "runsc does not checkpoint through CRIU"), "%s", s.message);
	f.runtime_name = "youki";
	s = verdict(f);
	cr_assert_not(s.ok);
	cr_assert(strstr(s.message, "\"youki\" is not one known to checkpoint"), "%s", s.message);
	f.runtime_name = "runc";
	f.runtime_version = NULL;
	s = verdict(f);
	cr_assert_not(s.ok);
	cr_assert(strstr(s.message, "\"runc\" is not installed or does not run"), "%s", s.message);
}

Test(checkpoint, both_pieces_missing_are_both_named)
{
	struct checkpoint_facts f = good;
	f.criu_version = NULL;
	f.runtime_name = "crun";
	f.runtime_version = "1.8.1";
	struct checkpoint_status s = verdict(f);
	cr_assert_not(s.ok);
	cr_assert(strstr(s.message, ": criu is not installed"), "%s", s.message);
	cr_assert(strstr(s.message, "); crun 1.8.1 was built without CRIU"), "%s", s.message);
}

/* The probe itself, on this machine: whatever it finds, it names criu's state. */
Test(checkpoint, probe_names_criu)
{
	struct checkpoint_status s;
	checkpoint_probe("runc", NULL, &s);
	cr_assert(strstr(s.message, "criu"), "%s", s.message);
	cr_assert(s.ok == (strncmp(s.message, "criu ", 5) == 0), "%d %s", s.ok, s.message);
}
