#!/bin/bash
# Runs survive the controller: a SIGKILLed controller's run is picked up by the next controller on
# the same root and recorded exactly once; a SIGTERMed controller stops cleanly and leaves
# agents and runs running.
. "$(dirname "$0")/lib.sh"

require_controller
new_ws WS || exit 1

t_sigkill() {
	local agent cmd='echo start; sleep 10.0461; echo end'
	agent=$(agent_pid "$WS")
	assert_match '^[0-9]+$' "$agent" "agent pid" || return 1
	run_start "$WS" "$(json_cmd "$cmd")" || return 1
	local run=$RUN
	wait_for -t 5 pgrep -f 'sleep 10.0461' >/dev/null || _fail "command never started"

	stop_controller KILL
	assert_eq 137 "$CONTROLLER_EXIT" "controller exit status (SIGKILL)"
	kill -0 "$agent" 2>/dev/null || _fail "agent $agent died with the controller"
	pgrep -f 'sleep 10.0461' >/dev/null || _fail "the run died with the controller"

	restart_controller || return 1
	run_wait "$WS" "$run" 40 || return 1
	assert_eq exited "$(j .status)" status
	assert_eq 0 "$(j .exitCode)" exitCode
	assert_eq '"start\nend\n"' "$(j '.stdout | tojson')" stdout
	assert_eq 10 "$(j .stdoutBytes)" stdoutBytes
	local first=$BODY
	run_get "$WS" "$run"
	assert_eq "$first" "$BODY" "second GET returns the same run"
	api -q GET "/v1/workspaces/$WS/commands"
	assert_eq 1 "$(jq -r --arg c "$cmd" '[.commands[] | select(.command == $c)] | length' \
		<<<"$BODY")" "runs listed with that command"
	assert_eq 1 "$(jq -r --arg r "$run" '[.commands[] | select(.id == $r)] | length' <<<"$BODY")" \
		"runs listed with that id"
	assert_eq "$agent" "$(agent_pid "$WS")" "the same agent serves the workspace"
	api -q GET "/v1/workspaces/$WS"
	assert_eq ready "$(j .state)" "workspace state"
	run_cmd "$WS" 'echo after' || return 1
	assert_eq '"after\n"' "$(j '.stdout | tojson')" "a new run after the restart"
}

t_sigterm() {
	local agent cmd='sleep 10.0462; echo done'
	agent=$(agent_pid "$WS")
	run_start "$WS" "$(json_cmd "$cmd")" || return 1
	local run=$RUN
	wait_for -t 5 pgrep -f 'sleep 10.0462' >/dev/null || _fail "command never started"

	stop_controller TERM
	assert_eq 0 "$CONTROLLER_EXIT" "controller exit status after SIGTERM"
	kill -0 "$agent" 2>/dev/null || _fail "agent $agent stopped with the controller"
	pgrep -f 'sleep 10.0462' >/dev/null || _fail "the run stopped with the controller"

	restart_controller || return 1
	run_wait "$WS" "$run" 40 || return 1
	assert_eq exited "$(j .status)" status
	assert_eq 0 "$(j .exitCode)" exitCode
	assert_eq '"done\n"' "$(j '.stdout | tojson')" stdout
	assert_eq "$agent" "$(agent_pid "$WS")" "the same agent serves the workspace"
}

t_finished_while_away() {
	# A run that finishes while no controller is running is reported to the next one.
	local cmd='sleep 4.0463; echo while-away'
	run_start "$WS" "$(json_cmd "$cmd")" || return 1
	local run=$RUN
	wait_for -t 5 pgrep -f 'sleep 4.0463' >/dev/null || _fail "command never started"
	stop_controller KILL
	wait_for -t 30 no_process 'sleep 4.0463' || _fail "command did not finish"
	restart_controller || return 1
	run_wait "$WS" "$run" 40 || return 1
	assert_eq exited "$(j .status)" status || diag "reason: $(j .reason)"
	assert_eq '"while-away\n"' "$(j '.stdout | tojson')" stdout
}

run_test "SIGKILLed controller: run picked up, recorded once" t_sigkill
run_test "SIGTERMed controller: run keeps going, picked up" t_sigterm
run_test "run that ends with no controller is reported later" t_finished_while_away
