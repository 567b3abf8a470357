#!/bin/bash
# An idle agent keeps no spare run group (BENCHMARKS.md, density): after a command, the agent
# keeps its pool of ready groups (the positive control: they are there to find, below the
# container's group W/c); once no command has finished for 30 s they are removed, so an idle
# workspace holds only W and W/c, and the next command still runs (it makes its group itself)
# and the pool comes back.
. "$(dirname "$0")/container-lib.sh"

require_container_controller
new_cws WS || exit 1

# The container's group W/c: the memory hierarchy's (cgroup v1), else the only one (v2).
CG=$(cgroup_dirs "$WS" | grep -m1 '/memory/' || cgroup_dirs "$WS" | head -n 1)
CG=${CG:+$CG/c}

# run_groups: the groups below W/c (the runs' and the pool's), one a line.
run_groups() {
	find "$CG" -mindepth 1 -maxdepth 1 -type d 2>/dev/null
}
has_groups() { [[ -n $(run_groups) ]]; }
no_groups() { [[ -z $(run_groups) ]]; }

t_spare_groups() {
	[[ -n $CG && -d $CG ]] || {
		_fail "no W/c group for $WS among: $(cgroup_dirs "$WS" | tr '\n' ' ')"
		return 1
	}
	run_cmd "$WS" "true" || return 1
	assert_eq exited "$(j .status)" "the first command ran"
	# positive control: the pool is filled after the result went out
	wait_for -t 60 has_groups || _fail "no run group below $CG after a command"
	wait_for -t 180 no_groups ||
		_fail "spare run groups kept while idle: $(run_groups | tr '\n' ' ')"
	run_cmd "$WS" "echo again" || return 1
	assert_eq exited "$(j .status)" "a command after the pool went"
	assert_eq 0 "$(j .exitCode)" "its exit code"
	assert_eq "again" "$(j .stdout | tr -d '\n')" "its output"
	wait_for -t 60 has_groups || _fail "the pool did not come back after a command"
}

run_test "an idle agent removes its spare run groups; the next command runs" t_spare_groups
