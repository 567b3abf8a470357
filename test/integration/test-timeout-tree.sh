#!/bin/bash
# A timeout kills the run's whole process tree, daemonized descendants included, and nothing
# else: a sibling run in the same workspace keeps running and exits normally.
. "$(dirname "$0")/lib.sh"

require_controller
new_ws WS || exit 1

t_timeout_kills_tree() {
	run_start "$WS" "$(json_cmd 'sleep 30.0451')" || return 1
	local sibling=$RUN
	wait_for -t 5 pgrep -f 'sleep 30.0451' >/dev/null || _fail "sibling never started"

	run_start "$WS" "$(json_cmd 'setsid sh -c "sleep 1000.123" & sleep 1000.123' '.timeoutMs = 3000')" ||
		return 1
	local run=$RUN
	# Positive control: both sleeps (the daemonized one and the main one) are there to find.
	wait_for -t 5 eval '(( $(process_count "sleep 1000.123") >= 2 ))' ||
		_fail "expected two 'sleep 1000.123' processes, found $(process_count 'sleep 1000.123')"

	run_wait "$WS" "$run" 20 || return 1
	assert_eq timed_out "$(j .status)" status
	assert_eq null "$(j .exitCode)" exitCode
	wait_for -t 3 no_process 'sleep 1000.123' ||
		_fail "left running: $(pgrep -af 'sleep 1000.123' | tr '\n' ';')"

	run_get "$WS" "$sibling"
	assert_eq running "$(j .status)" "sibling still running after the timeout"
	pgrep -f 'sleep 30.0451' >/dev/null || _fail "sibling process is gone"
	run_wait "$WS" "$sibling" 45 || return 1
	assert_eq exited "$(j .status)" "sibling status"
	assert_eq 0 "$(j .exitCode)" "sibling exitCode"
}

t_exit_kills_leftovers() {
	# Commands are bounded: what the main process leaves behind is killed when it exits.
	run_cmd "$WS" 'setsid sh -c "sleep 1000.124" >/dev/null 2>&1 & echo started' || return 1
	assert_eq exited "$(j .status)" status
	assert_eq '"started\n"' "$(j '.stdout | tojson')" stdout
	wait_for -t 3 no_process 'sleep 1000.124' ||
		_fail "left running: $(pgrep -af 'sleep 1000.124' | tr '\n' ';')"
}

run_test "timeout kills the whole tree, sibling run unharmed" t_timeout_kills_tree
run_test "leftover daemonized processes are killed when the command exits" t_exit_kills_leftovers
