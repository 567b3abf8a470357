#!/bin/bash
# One controller owns a root: a second one on the same root refuses to start and names the
# owner's pid. The first start writes the admin token (mode 0600).
. "$(dirname "$0")/lib.sh"

require_controller

t_second_controller_refused() {
	local out=$TMP/second.out rc pid
	"$DAEMON" --root "$ROOT" --worker test --log-format text --network-range none >"$out" 2>&1 </dev/null &
	pid=$!
	if ! wait_for -t 10 _pid_gone "$pid"; then
		kill -KILL "$pid" 2>/dev/null
		wait "$pid" 2>/dev/null
		_fail "second controller still running after 10 s"
		return 1
	fi
	wait "$pid"
	rc=$?
	assert_ne 0 "$rc" "exit status of the second controller"
	assert_match "(^|[^0-9])$CONTROLLER_PID([^0-9]|$)" "$(cat "$out")" \
		"second controller's message names the owner's pid $CONTROLLER_PID"
	# Positive control: the owner is unharmed and still answers.
	api -q GET /v1/ready
	assert_status 200 "owner still ready"
	kill -0 "$CONTROLLER_PID" 2>/dev/null || _fail "owner died"
}

t_admin_token() {
	assert_eq 600 "$(stat -c %a "$ROOT/admin.token" 2>/dev/null)" "admin.token mode"
	assert_match '^[^[:space:]]{20,}$' "$(head -n 1 "$ROOT/admin.token" 2>/dev/null)" "token"
}

t_root_reusable_after_stop() {
	local token
	token=$(cat "$ROOT/admin.token")
	stop_controller TERM
	assert_eq 0 "$CONTROLLER_EXIT" "exit status after SIGTERM"
	restart_controller || return 1
	assert_eq "$token" "$(cat "$ROOT/admin.token")" "admin token kept across restarts"
}

t_ready_and_worker() {
	api -q GET /v1/ready
	assert_status 200 ready || return 1
	assert_eq true "$(j .ready)" ready
	# checkpoint (memory snapshots) never decides ready: it says whether this worker can.
	assert_eq true "$(j '[.checks[] | select(.name != "checkpoint") | .ok] | all')" \
		"every check ok but checkpoint ($(j .checks))"
	assert_eq '["agent","cgroup","checkpoint","images","lxcfs","runtime","seccompProfile","store"]' \
		"$(j '[.checks[].name] | sort')" "check names"
	assert_eq true "$(j '.checks[] | select(.name == "checkpoint") | (.ok | type) == "boolean" and (.message | length) > 0')" \
		"the checkpoint check says whether, and why"
	api -q GET /v1/worker
	assert_status 200 worker || return 1
	assert_eq test "$(j .name)" "worker name"
	assert_eq '["host","container"]' "$(j .adapters)" adapters
	assert_match '^v[12]$' "$(j .cgroup)" cgroup
	assert_eq 64 "$(j .limits.maxRunningPerWorkspace)" maxRunningPerWorkspace
	assert_eq 60000 "$(j .limits.maxWaitMs)" maxWaitMs
	assert_eq 2097152 "$(j .limits.maxBodyBytes)" maxBodyBytes
	assert_eq 131072 "$(j .limits.defaultOutputBytes)" defaultOutputBytes
}

run_test "second controller on the same root is refused, naming the owner" t_second_controller_refused
run_test "admin.token written with mode 0600" t_admin_token
run_test "root reusable after a clean stop, token kept" t_root_reusable_after_stop
run_test "ready and worker endpoints" t_ready_and_worker
