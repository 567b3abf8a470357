#!/bin/bash
# Server-side limits: --max-running (429 past it, freed when a run ends) and --max-wait-ms
# (long-polls return at the cap with the run still running).
. "$(dirname "$0")/lib.sh"

require_controller --max-running 2 --max-wait-ms 300
new_ws WS || exit 1
CMDS=/v1/workspaces/$WS/commands

t_worker_reports_limits() {
	api -q GET /v1/worker
	assert_status 200 worker || return 1
	assert_eq 2 "$(j .limits.maxRunningPerWorkspace)" maxRunningPerWorkspace
	assert_eq 300 "$(j .limits.maxWaitMs)" maxWaitMs
}

t_max_running() {
	local a b
	run_start "$WS" "$(json_cmd 'sleep 5.0453')" || return 1
	a=$RUN
	run_start "$WS" "$(json_cmd 'sleep 5.0453')" || return 1
	b=$RUN
	api -q POST "$CMDS" "$(json_cmd 'sleep 5.0453')"
	assert_status 429 "third running command" || return 1
	assert_eq too_many_requests "$(j .error.code)" "error code"
	# Another workspace has its own budget.
	local other
	new_ws other || return 1
	api -q POST "/v1/workspaces/$other/commands?waitMs=300" "$(json_cmd 'true')"
	assert_status 201 "a command in another workspace"
	# Freed when one ends.
	api -q POST "$CMDS/$a/cancel"
	assert_status 200 "cancel the first"
	api -q POST "$CMDS" "$(json_cmd 'echo again')"
	assert_status 201 "a command after one ended"
	local c
	c=$(j .id)
	api -q POST "$CMDS/$b/cancel"
	run_wait "$WS" "$c" 10
	assert_eq exited "$(j .status)" "status of the command started after"
}

t_long_poll_capped() {
	run_start "$WS" "$(json_cmd 'sleep 5.0454')" || return 1
	local run=$RUN
	# Bounded by curl's own timeout: a poll that ignored the cap would hold for 5 s and fail.
	STATUS=$(curl -sS --max-time 4 --unix-socket "$SOCK" -o "$TMP/body" -w '%{http_code}' \
		"http://station$CMDS/$run?waitMs=60000") || STATUS=000
	BODY=$(cat "$TMP/body")
	assert_status 200 "GET with waitMs=60000" || return 1
	assert_eq running "$(j .status)" "status when the capped wait returns"
	# The same on POST.
	STATUS=$(curl -sS --max-time 4 --unix-socket "$SOCK" -o "$TMP/body" -w '%{http_code}' \
		-H 'Content-Type: application/json' --data-binary "$(json_cmd 'sleep 5.0455')" \
		"http://station$CMDS?waitMs=60000") || STATUS=000
	BODY=$(cat "$TMP/body")
	assert_status 201 "POST with waitMs=60000"
	assert_eq running "$(j .status)" "status when the capped POST wait returns"
	local second
	second=$(j .id)
	api -q POST "$CMDS/$run/cancel"
	[[ -n $second ]] && api -q POST "$CMDS/$second/cancel"
	return 0
}

t_bad_wait() {
	run_cmd "$WS" true || return 1
	api -q GET "$CMDS/$RUN?waitMs=abc"
	assert_status 400 "waitMs=abc"
	assert_eq invalid_argument "$(j .error.code)" "error code"
}

run_test "worker reports the configured limits" t_worker_reports_limits
run_test "--max-running 2: third command is 429, freed when one ends" t_max_running
run_test "--max-wait-ms 300 caps long-polls" t_long_poll_capped
run_test "bad waitMs is 400" t_bad_wait
