#!/bin/bash
# Attack: an agent reports results for another workspace. Container root may control its agent
# connection, so every agent frame is hostile; what the controller records on an agent's word
# must be keyed by the workspace that agent serves. A completion (RUN_DONE) or a terminal exit
# (TERM_EXIT) naming a run or terminal of another workspace is ignored and changes nothing.
#
# The hostile agent is test/helpers/agent-impostor, which the controller starts as its agent:
# in the workspace whose env has STATION_TEST_IMPOSTOR=1 it answers HELLO and turns each command
# into forged reports; in every other workspace it execs the real agent. Positive control: the
# same connection's report for its own run is recorded (exit 0, stdout "reported").
# A SERVICE_PROGRESS (a running attempt's byte counts) is only the sandbox's word too: absurd
# counts are clamped to 2^53 - 1, counts for an attempt that is not the running one or going
# back change nothing, a name the workspace does not have is ignored; the positive control is
# the same frame's sane counts shown exactly.
. "$(dirname "$0")/../integration/lib.sh"

IMPOSTOR=$BUILD/test/helpers/agent-impostor
[[ -x $IMPOSTOR ]] || {
	skip "$TEST_NAME" "$IMPOSTOR not built"
	exit 0
}
# Under sanitizers the impostor execs the sanitized agent, and the controller must start the
# impostor itself rather than the sanitized agent it would put in place of the shipped one.
export STATION_TEST_REAL_AGENT=${STATION_TEST_HOST_AGENT:-$AGENT}
unset STATION_TEST_HOST_AGENT
require_controller --agent "$IMPOSTOR"
new_ws VICTIM || exit 1
new_ws EVIL '{"env":{"STATION_TEST_IMPOSTOR":"1"}}' || exit 1

term_state() {
	api -q GET "/v1/workspaces/$VICTIM/terminals/$1"
	j .state
}

t_foreign_run_done() {
	local victim_run
	run_start "$VICTIM" "$(json_cmd 'sleep 1000.61')" || return 1
	victim_run=$RUN
	wait_for -t 10 run_is_running "$VICTIM" "$victim_run" || _fail "the victim's run never ran"

	run_cmd "$EVIL" "forge run $victim_run" || return 1
	# control: the impostor's report for its own run, on the same connection, is recorded
	assert_eq "exited 0 reported" "$(j '"\(.status) \(.exitCode) \(.stdout)"')" \
		"the impostor's own run"

	run_get "$VICTIM" "$victim_run"
	assert_eq "running null " "$(j '"\(.status) \(.exitCode) \(.stdout)"')" \
		"the victim's run after a foreign RUN_DONE"
	wait_for -t 5 grep -q "ignored an agent report.*$victim_run" "$CONTROLLER_LOG" ||
		_fail "the controller did not log the ignored report"
	# the victim's run is still the real one: it cancels as usual
	api -q POST "/v1/workspaces/$VICTIM/commands/$victim_run/cancel"
	run_wait "$VICTIM" "$victim_run" 20 || return 1
	assert_eq cancelled "$(j .status)" "the victim's run after cancel"
}

t_foreign_term_exit() {
	local t
	api -q POST "/v1/workspaces/$VICTIM/terminals" '{"command":"sleep 1000.62","cols":80,"rows":24}'
	assert_status 201 "open a terminal in the victim" || return 1
	t=$(j .id)
	wait_for -t 10 eval '[[ $(term_state "$t") == running ]]' ||
		_fail "the victim's terminal never ran ($(term_state "$t"))"
	run_cmd "$EVIL" "forge term $t" || return 1
	assert_eq "exited 0 reported" "$(j '"\(.status) \(.exitCode) \(.stdout)"')" \
		"the impostor's own run (control)"
	assert_eq running "$(term_state "$t")" "the victim's terminal after a foreign TERM_EXIT"
	api -q GET "/v1/workspaces/$VICTIM/terminals/$t"
	assert_eq null "$(j .exitCode)" "the victim's terminal exitCode"
}

svc_running_attempt() {
	api -q GET "/v1/workspaces/$EVIL/services/$1"
	j '[.attempts[] | {number, state, pid, stdoutBytes, stderrBytes}]'
}

t_service_progress() {
	local max=9007199254740991 EVIL
	# a workspace of its own: the log of ignored reports is rate limited per workspace
	new_ws EVIL '{"env":{"STATION_TEST_IMPOSTOR":"1"}}' || return 1
	api -q POST "/v1/workspaces/$EVIL/services" '{"name":"honest","command":"progress 123 45"}'
	assert_status 201 "start the honest service" || return 1
	wait_for -t 10 eval '[[ $(svc_running_attempt honest) == *123* ]]' ||
		_fail "the honest counts never showed ($(svc_running_attempt honest))"
	# control: the sane counts exactly; the later reports for attempt 2 and going back do nothing
	assert_eq '[{"number":1,"state":"running","pid":4242,"stdoutBytes":123,"stderrBytes":45}]' \
		"$(svc_running_attempt honest)" "the honest service's running attempt"
	wait_for -t 5 grep -q "ignored an agent report.*no-such-service" "$CONTROLLER_LOG" ||
		_fail "the controller did not log the report for a service it does not have"

	api -q POST "/v1/workspaces/$EVIL/services" \
		'{"name":"liar","command":"progress 18446744073709551615 9007199254740992"}'
	assert_status 201 "start the lying service" || return 1
	wait_for -t 10 eval '[[ $(svc_running_attempt liar) == *$max* ]]' ||
		_fail "the lying counts never showed ($(svc_running_attempt liar))"
	assert_eq "[{\"number\":1,\"state\":\"running\",\"pid\":4242,\"stdoutBytes\":$max,\"stderrBytes\":$max}]" \
		"$(svc_running_attempt liar)" "the lying service's counts, clamped"
	# the controller still serves the workspace: the link was not closed over it
	run_cmd "$EVIL" "forge run nothing" || return 1
	assert_eq "exited 0 reported" "$(j '"\(.status) \(.exitCode) \(.stdout)"')" \
		"the impostor's own run after the reports"
}

run_test "a RUN_DONE naming another workspace's run changes nothing; its own is recorded" \
	t_foreign_run_done
run_test "a TERM_EXIT naming another workspace's terminal changes nothing" t_foreign_term_exit
run_test "a running attempt's byte counts from the agent are clamped and kept per attempt" \
	t_service_progress
