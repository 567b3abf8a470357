#!/bin/bash
# The controller's open-files limit (docs/operations.md, "Limits"): each workspace holds open
# files in the controller (its agent's connection, a pidfd, the usage history's counter files). At start the soft limit is raised
# toward what --max-workspaces and the connection table need, never past the hard limit and never lowered; a hard limit
# too low for it is logged once. When the files run out, a create fails at once with 429 and a
# message naming the limit, the controller keeps answering, and a create succeeds again once a
# workspace is gone.
. "$(dirname "$0")/lib.sh"

# start_limited SOFT HARD MAX_WORKSPACES [FLAGS...]: the controller on ROOT under that
# RLIMIT_NOFILE (prlimit execs it: CONTROLLER_PID is the controller's own pid).
start_limited() {
	mapfile -d '' -t CONTROLLER_FLAGS < <(adapter_flags --max-workspaces "$3" "${@:4}")
	echo "=== start $(date +%T.%N) nofile $1:$2" >>"$CONTROLLER_LOG"
	prlimit --nofile="$1:$2" "$DAEMON" --root "$ROOT" --worker test --log-format text \
		"${CONTROLLER_FLAGS[@]}" >>"$CONTROLLER_LOG" 2>&1 </dev/null &
	CONTROLLER_PID=$!
	wait_for -t 10 _controller_ready || {
		diag "controller under nofile $1:$2 did not become ready"
		dump_controller_log 20
		return 1
	}
}

# nofile_limits: "SOFT HARD" of the running controller.
nofile_limits() {
	awk '/^Max open files/ {print $4, $5}' "/proc/$CONTROLLER_PID/limits"
}

if ! command -v prlimit >/dev/null; then
	skip "$TEST_NAME" "prlimit missing (apt-get install util-linux)"
	exit 0
fi

# Only lowering a hard limit needs no privilege: the tests stay at or below ours.
HARD=$(ulimit -Hn)

t_soft_raised_to_need() {
	if [[ $HARD != unlimited && $HARD -lt 3112 ]]; then
		note "our hard limit $HARD is below 3112: nothing to raise to"
		return 0
	fi
	start_limited 256 "$HARD" 100 || return 1
	# 1024 + 10 per workspace of --max-workspaces 100 + 1024 connections + 64 refused ones
	assert_eq "3112 $HARD" "$(nofile_limits)" "soft and hard limit"
	api -q GET /v1/worker
	assert_eq 1024 "$(j .limits.maxConnections)" "the default connection limit"
	stop_controller
}

t_high_soft_limit_kept() {
	start_limited 8000 8000 100 || return 1
	assert_eq "8000 8000" "$(nofile_limits)" "soft and hard limit (already enough: untouched)"
	assert_eq 0 "$(grep -c 'open-files limit' "$CONTROLLER_LOG")" "no warning"
	stop_controller
}

t_out_of_files_is_named() {
	: >"$CONTROLLER_LOG"
	# the usage history reads every 100 ms meanwhile: its counter files must not be what
	# runs out (it keeps a quarter of the limit at most)
	start_limited 64 64 100 --usage-interval-ms 100 || return 1
	assert_eq "64 64" "$(nofile_limits)" "soft and hard limit (the hard one bounds it)"
	assert_contains "open-files limit (RLIMIT_NOFILE hard limit) is below" \
		"$(cat "$CONTROLLER_LOG")" "the warning at start"
	local made=() _
	for _ in $(seq 40); do
		api -q POST /v1/workspaces '{"adapter":"host"}'
		[[ $STATUS == 201 || $STATUS == 200 ]] || break
		made+=("$(j .id)")
	done
	note "host workspaces made under 64 open files: ${#made[@]}"
	assert_le 1 "${#made[@]}" "workspaces made before the limit (positive control)"
	assert_eq 429 "$STATUS" "status of the create past the limit"
	assert_contains "out of open files with ${#made[@]} workspaces" "$(j .error.message)" message
	assert_contains "RLIMIT_NOFILE, is 64" "$(j .error.message)" "message names the limit"
	api -q GET /v1/ready
	assert_status 200 "still ready"
	api -q GET /v1/workspaces
	assert_eq "${#made[@]}" "$(j '.workspaces | length')" "no half-made workspace is listed"
	# one workspace fewer: a create fits again
	api -q DELETE "/v1/workspaces/${made[0]}"
	assert_status 200 "delete"
	api -q POST /v1/workspaces '{"adapter":"host"}'
	assert_match '^20[01]$' "$STATUS" "create after a delete"
	api -q POST "/v1/workspaces/$(j .id)/commands?waitMs=10000" '{"command":"echo fits"}'
	assert_eq fits "$(j .stdout | tr -d '\n')" "a command in it"
}

run_test "the soft open-files limit is raised to what --max-workspaces needs" t_soft_raised_to_need
run_test "a soft limit already high enough is kept" t_high_soft_limit_kept
run_test "out of open files: 429 naming the limit, the controller still serves" \
	t_out_of_files_is_named
