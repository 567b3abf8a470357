#!/bin/bash
# Cancel kills the run's whole process tree (daemonized descendants included) and nothing else;
# cancelling a finished run is a conflict.
. "$(dirname "$0")/lib.sh"

require_controller
new_ws WS || exit 1

t_cancel_kills_tree() {
	# the sibling runs until we say (a file in its workdir), however slow the machine
	run_start "$WS" "$(json_cmd 'until [ -e sibling.go ]; do sleep 0.05; done')" || return 1
	local sibling=$RUN
	run_start "$WS" "$(json_cmd 'setsid sh -c "sleep 1000.456" & sleep 1000.456; echo never')" ||
		return 1
	local run=$RUN
	wait_for -t 5 eval '(( $(process_count "sleep 1000.456") >= 2 ))' ||
		_fail "expected two 'sleep 1000.456' processes, found $(process_count 'sleep 1000.456')"
	wait_for -t 5 run_is_running "$WS" "$sibling" || _fail "sibling never started"

	api -q POST "/v1/workspaces/$WS/commands/$run/cancel"
	assert_status 200 cancel || return 1
	assert_eq cancelled "$(j .status)" "status in the cancel response"
	assert_eq "$run" "$(j .id)" "run id in the cancel response"
	wait_for -t 3 no_process 'sleep 1000.456' ||
		_fail "left running: $(pgrep -af 'sleep 1000.456' | tr '\n' ';')"
	run_get "$WS" "$run"
	assert_eq cancelled "$(j .status)" "status afterwards"
	assert_eq '' "$(j .stdout)" "no output after the cancel"

	run_get "$WS" "$sibling"
	assert_eq running "$(j .status)" "sibling still running after the cancel"
	touch "$ROOT/workspaces/$WS/home/workspace/sibling.go"
	run_wait "$WS" "$sibling" 20 || return 1
	assert_eq exited "$(j .status)" "sibling status"
	assert_eq 0 "$(j .exitCode)" "sibling exitCode"
}

t_cancel_finished() {
	run_cmd "$WS" 'true' || return 1
	local run=$RUN
	api -q POST "/v1/workspaces/$WS/commands/$run/cancel"
	assert_status 409 "cancel a finished run"
	assert_eq conflict "$(j .error.code)" "error code"
	run_get "$WS" "$run"
	assert_eq exited "$(j .status)" "status unchanged"
}

t_cancel_twice() {
	run_start "$WS" "$(json_cmd 'sleep 1000.457')" || return 1
	local run=$RUN
	api -q POST "/v1/workspaces/$WS/commands/$run/cancel"
	assert_status 200 "first cancel" || return 1
	api -q POST "/v1/workspaces/$WS/commands/$run/cancel"
	assert_status 409 "second cancel"
	run_get "$WS" "$run"
	assert_eq cancelled "$(j .status)" "status"
}

run_test "cancel kills the whole tree, sibling run unharmed" t_cancel_kills_tree
run_test "cancel of a finished run is 409" t_cancel_finished
run_test "second cancel is 409, status stays cancelled" t_cancel_twice
