# shellcheck shell=bash
# Sourced by test-services.sh (host) and test-container-services.sh (container): the running
# attempt of a service is in `attempts`, last, with the byte counts it has written so far
# (docs/api.md, "Service"), and its ended form takes its place once it ends, never listed twice
# and never missing while one attempt ends and the next starts.

# The service writes exactly 100000 bytes to stdout and 7 to stderr, then waits for the file
# crash-now (made by a command in the same workspace), removes it and exits 1: on-failure
# starts attempt 2, which writes the same and waits again.
COUNTED_CMD='yes abcdefghi | head -c 100000; printf 1234567 >&2; while [ ! -e crash-now ]; do sleep 0.05; done; rm -f crash-now; exit 1'

# counted_get WS: GET the service "counted" into BODY.
counted_get() {
	api -q GET "/v1/workspaces/$1/services/counted"
	[[ $STATUS == 200 ]]
}

# counted_running WS N: attempt N is the last, running, and its counts reached 100000 and 7.
counted_running() {
	counted_get "$1" &&
		[[ $(j ".attempts[-1] | .number == $2 and .state == \"running\" and
			.stdoutBytes == 100000 and .stderrBytes == 7") == true ]]
}

# attempts_consistent: the attempts in BODY are numbered 1, 2, … without a gap or a repeat, at
# most one is running and it is the last.
attempts_consistent() {
	local numbers states
	numbers=$(j '[.attempts[].number]')
	states=$(j '[.attempts[].state]')
	if [[ $(j '[.attempts[].number] == [range(1; (.attempts | length) + 1)]') != true ]]; then
		_fail "attempt numbers $numbers (states $states)"
		return 1
	fi
	if [[ $(j '[.attempts[:-1][] | select(.state != "ended")] == []') != true ]]; then
		_fail "an attempt before the last is not ended: $states"
		return 1
	fi
}

# check_running_counts WS: the whole check in workspace WS (host or container).
check_running_counts() {
	local ws=$1 i done_polls=0
	api -q POST "/v1/workspaces/$ws/services" "$(jq -nc --arg c "$COUNTED_CMD" \
		'{name: "counted", command: $c, restart: {policy: "on-failure", maxRestarts: 1,
		delayMs: 0}}')"
	assert_status 201 "create the counted service" || return 1
	if ! wait_for -t 30 counted_running "$ws" 1; then
		_fail "attempt 1 never showed running with 100000 and 7 bytes: $BODY"
		return 1
	fi
	assert_eq '[{"number":1,"state":"running","stdoutBytes":100000,"stderrBytes":7}]' \
		"$(j '[.attempts[] | {number, state, stdoutBytes, stderrBytes}]')" \
		"one attempt, running, with exactly the bytes written"
	assert_eq "$(j .mainPid)" "$(j '.attempts[0].pid')" "the running attempt's pid is mainPid"
	assert_eq 1 "$(j .currentAttempt)" currentAttempt
	assert_eq '[]' "$(j '.attempts[0] | [keys[] | select(. == "endedAt" or . == "exitCode" or
		. == "signal" or . == "endReason" or . == "durationMs" or . == "stdout")]')" \
		"the running attempt has no end, exit or output fields"
	api -q GET "/v1/workspaces/$ws/services"
	assert_eq '[1,"running",100000]' \
		"$(j '.services[] | select(.name == "counted") | .attempts[-1] |
			[.number, .state, .stdoutBytes]')" "the list shows it too"

	# The crash: whatever moment each GET lands on, the attempts stay consistent, until attempt
	# 2 runs with its own counts.
	run_cmd "$ws" "touch crash-now" || return 1
	for ((i = 0; i < 600; i++)); do
		counted_get "$ws" || break
		attempts_consistent || return 1
		counted_running "$ws" 2 && break
		done_polls=$((done_polls + 1))
		sleep 0.05
	done
	counted_running "$ws" 2 || _fail "attempt 2 never ran with its counts: $(_short "$BODY")"
	attempts_consistent || return 1
	assert_eq '[[1,"ended","exited",1,100000,7],[2,"running",null,null,100000,7]]' \
		"$(j '[.attempts[] | [.number, .state, .endReason, .exitCode, .stdoutBytes,
			.stderrBytes]]')" "attempt 1 ended with its counts, attempt 2 running"
	assert_eq "$(printf 'abcdefghi\n%.0s' $(seq 10))" "$(j '.attempts[0].stdout[0:100]')" \
		"attempt 1's output is recorded"
	diag "GETs while attempt 1 ended and 2 started: $done_polls"

	api -q POST "/v1/workspaces/$ws/services/counted/stop"
	assert_eq stopped "$(j .state)" "stopped"
	assert_eq '[[1,"ended"],[2,"ended"]]' "$(j '[.attempts[] | [.number, .state]]')" \
		"both ended after the stop"
	assert_eq '[100000,7]' "$(j '[.attempts[1].stdoutBytes, .attempts[1].stderrBytes]')" \
		"the stopped attempt's recorded counts"
	api -q DELETE "/v1/workspaces/$ws/services/counted"
}
