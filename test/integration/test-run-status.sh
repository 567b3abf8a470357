#!/bin/bash
# Every terminal status a run can reach, with the fields that go with it (docs/api.md "Run").
. "$(dirname "$0")/lib.sh"

require_controller
new_ws WS || exit 1

t_exited() {
	run_cmd "$WS" 'exit 7' || return 1
	assert_eq exited "$(j .status)" status
	assert_eq 7 "$(j .exitCode)" exitCode
	assert_eq null "$(j .signal)" signal
	assert_eq null "$(j .reason)" reason
	assert_eq false "$(j .truncated)" truncated
	assert_match '^r-[a-z2-7]{26}$' "$(j .id)" "run id"
	assert_eq "$WS" "$(j .workspaceId)" workspaceId
	assert_eq 'exit 7' "$(j .command)" command
	assert_match '^[0-9]+$' "$(j .durationMs)" durationMs
	assert_ne null "$(j .startedAt)" startedAt
	assert_ne null "$(j .endedAt)" endedAt
}

t_exited_zero() {
	run_cmd "$WS" 'true' || return 1
	assert_eq exited "$(j .status)" status
	assert_eq 0 "$(j .exitCode)" exitCode
	assert_eq '' "$(j .stdout)" stdout
	assert_eq 0 "$(j .stdoutBytes)" stdoutBytes
}

t_killed() {
	run_cmd "$WS" 'kill -9 $$' || return 1
	assert_eq killed "$(j .status)" status
	assert_eq 9 "$(j .signal)" signal
	assert_eq null "$(j .exitCode)" exitCode
	assert_eq false "$(j .oomKilled)" oomKilled
}

t_killed_term() {
	run_cmd "$WS" 'kill -TERM $$' || return 1
	assert_eq killed "$(j .status)" status
	assert_eq 15 "$(j .signal)" signal
}

t_timed_out() {
	run_cmd "$WS" 'sleep 1000.301' '.timeoutMs = 300' || return 1
	assert_eq timed_out "$(j .status)" status
	assert_eq null "$(j .exitCode)" exitCode
	assert_eq 300 "$(j .timeoutMs)" timeoutMs
	wait_for -t 3 no_process 'sleep 1000.301' || _fail "'sleep 1000.301' still running"
}

t_cancelled() {
	run_start "$WS" "$(json_cmd 'sleep 1000.302')" || return 1
	local run=$RUN
	assert_eq running "$(j .status)" "status before cancel"
	wait_for -t 5 pgrep -f 'sleep 1000.302' >/dev/null || _fail "the command never started"
	api -q POST "/v1/workspaces/$WS/commands/$run/cancel"
	assert_status 200 cancel || return 1
	assert_eq cancelled "$(j .status)" "status in the cancel response"
	run_get "$WS" "$run"
	assert_eq cancelled "$(j .status)" "status afterwards"
	assert_eq null "$(j .exitCode)" exitCode
	wait_for -t 3 no_process 'sleep 1000.302' || _fail "'sleep 1000.302' still running"
}

t_failed_to_start() {
	run_cmd "$WS" 'echo never' '.cwd = "/nonexistent-station-dir"' || return 1
	assert_eq failed_to_start "$(j .status)" status
	assert_eq null "$(j .exitCode)" exitCode
	assert_contains /nonexistent-station-dir "$(j .reason)" reason
	assert_eq '' "$(j .stdout)" stdout
}

t_lost() {
	local ws pid
	new_ws ws || return 1
	pid=$(agent_pid "$ws")
	assert_match '^[0-9]+$' "$pid" "agent pid of $ws" || return 1
	run_start "$ws" "$(json_cmd 'sleep 60.303')" || return 1
	local run=$RUN
	wait_for -t 5 pgrep -f 'sleep 60.303' >/dev/null || _fail "the command never started"
	kill -KILL "$pid"
	run_wait "$ws" "$run" 20 || return 1
	assert_eq lost "$(j .status)" status
	assert_ne null "$(j .reason)" reason
	assert_ne '' "$(j .reason)" reason
	api -q GET "/v1/workspaces/$ws"
	assert_eq stopped "$(j .state)" "workspace state"
	assert_ne null "$(j .reason)" "workspace reason"
	api -q DELETE "/v1/workspaces/$ws"
	assert_status 200 "delete the stopped workspace"
}

# The answer a waiting request gets when the run ends is exactly what a later GET reads back
# from the store: every field, for each way a run ends (and the cancel's answer too).
same_as_stored() { # WHAT: BODY holds the answer
	local answer=$BODY run
	run=$(j .id)
	run_get "$WS" "$run"
	assert_status 200 "GET $1" || return 1
	assert_eq "$(jq -Sc . <<<"$answer")" "$(jq -Sc . <<<"$BODY")" "$1: answer = stored run"
}

t_answer_is_stored_run() {
	local body what
	while IFS='|' read -r what body; do
		run_start "$WS" "$body" 30000 || return 1
		assert_ne running "$(j .status)" "$what: ended within the wait" || return 1
		same_as_stored "$what" || return 1
	done <<-'EOF'
		exit 3 with both streams|{"command":"echo out; echo err >&2; exit 3","env":{"K":"v"},"cwd":"/tmp"}
		binary output, truncated|{"command":"head -c 5000 /dev/urandom","maxOutputBytes":1000}
		killed|{"command":"kill -9 $$"}
		timed_out|{"command":"sleep 1000.304","timeoutMs":300}
		failed_to_start|{"command":"true","cwd":"/nonexistent-station-dir"}
	EOF
	run_start "$WS" "$(json_cmd 'sleep 1000.305')" || return 1
	wait_for -t 5 pgrep -f 'sleep 1000.305' >/dev/null || _fail "the command never started"
	api -q POST "/v1/workspaces/$WS/commands/$RUN/cancel"
	assert_status 200 cancel || return 1
	assert_eq cancelled "$(j .status)" "status in the cancel response"
	same_as_stored cancelled
}

run_test "exited with its exit code" t_exited
run_test "exited 0" t_exited_zero
run_test "killed by SIGKILL" t_killed
run_test "killed by SIGTERM" t_killed_term
run_test "timed_out" t_timed_out
run_test "cancelled through the API" t_cancelled
run_test "failed_to_start for a missing cwd" t_failed_to_start
run_test "lost when the agent is killed" t_lost
run_test "a waiting request's answer is the stored run" t_answer_is_stored_run
