#!/bin/bash
# Live resource use, GET /v1/workspaces/{id}/usage (docs/api.md, "Resource use"): the exact
# shape; a busy loop's cpu time grows while it runs; a command holding memory shows it; a
# service's attempt is listed; finished runs drop out; an unknown workspace is 404 and a
# workspace that is not ready 409.
. "$(dirname "$0")/lib.sh"

require_controller
new_ws WS '{"cpus":1.5,"memoryMb":512}' || exit 1

usage() {
	api -q GET "/v1/workspaces/$1/usage"
}

# usage_has WS JQ-PREDICATE: 200 and the predicate holds on the answer (for wait_for).
usage_has() {
	usage "$1"
	[[ $STATUS == 200 && $(j "$2") == true ]]
}

usage_wait() {
	if ! wait_for -t "${3:-15}" usage_has "$1" "$2"; then
		_fail "usage never satisfied '$2'; last: $STATUS $(_short "$BODY")"
		return 1
	fi
}

t_shape() {
	usage "$WS"
	assert_status 200 "GET usage" || return 1
	assert_eq '["commands","contexts","cpuMs","cpus","memoryBytes","memoryLimitBytes","sampledAt","services"]' \
		"$(j 'keys')" "the keys"
	assert_eq '[]' "$(j .commands)" "no command runs"
	assert_eq '[]' "$(j .services)" "no service runs"
	assert_eq '[]' "$(j .contexts)" "no code context"
	assert_eq 536870912 "$(j .memoryLimitBytes)" "memory limit in bytes"
	assert_eq 1.5 "$(j .cpus)" "cpus"
	assert_eq number,number "$(j '[.cpuMs, .memoryBytes | type] | join(",")')" "number types"
	assert_match '^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:.]+Z$' "$(j .sampledAt)" "sampledAt"
}

t_busy_loop() {
	local run first
	run_start "$WS" "$(json_cmd 'while :; do :; done' '.timeoutMs=60000')" || return 1
	run=$RUN
	usage_wait "$WS" "any(.commands[]; .id == \"$run\" and .cpuMs > 100)" || return 1
	first=$(j ".commands[] | select(.id == \"$run\") | .cpuMs")
	assert_eq 1 "$(j "[.commands[] | select(.id == \"$run\")] | length")" "the run is listed once"
	assert_eq '["cpuMs","id","memoryBytes"]' "$(j ".commands[] | select(.id == \"$run\") | keys")" \
		"a command's keys"
	assert_le "$first" "$(j .cpuMs)" "the workspace's cpu time includes the run's"
	usage_wait "$WS" "any(.commands[]; .id == \"$run\" and .cpuMs >= $first + 300)" || return 1
	note "busy loop: ${first} ms, then $(j ".commands[] | select(.id == \"$run\") | .cpuMs") ms"
	api -q POST "/v1/workspaces/$WS/commands/$run/cancel"
	run_wait "$WS" "$run" || return 1
	usage "$WS"
	assert_eq 0 "$(j "[.commands[] | select(.id == \"$run\")] | length")" "a finished run drops out"
}

t_memory() {
	local run
	run_start "$WS" "$(json_cmd 'exec python3 -c "import sys, time; b = b\"x\" * (96 << 20); print(\"held\", flush=True); time.sleep(60)"')" || return 1
	run=$RUN
	usage_wait "$WS" "any(.commands[]; .id == \"$run\" and .memoryBytes >= 96 * 1048576)" || return 1
	note "memory of the run: $(j ".commands[] | select(.id == \"$run\") | .memoryBytes") bytes"
	assert_le $((96 * 1048576)) "$(j .memoryBytes)" "the workspace is charged for it too"
	api -q POST "/v1/workspaces/$WS/commands/$run/cancel"
	run_wait "$WS" "$run"
}

t_service() {
	api -q POST "/v1/workspaces/$WS/services" '{"name":"spin","command":"while :; do :; done"}'
	assert_status 201 "start a service" || return 1
	usage_wait "$WS" 'any(.services[]; .name == "spin" and .attempt == 1 and .cpuMs > 50)' || return 1
	assert_eq '["attempt","cpuMs","memoryBytes","name"]' "$(j '.services[0] | keys')" "a service's keys"
	api -q DELETE "/v1/workspaces/$WS/services/spin"
	assert_status 200 "delete the service"
	usage_wait "$WS" '.services == []' || return 1
}

t_unknown_workspace() {
	usage nope-nope
	assert_status 404 "an unknown workspace"
	assert_eq not_found "$(j .error.code)" "error code"
	assert_eq 'workspace "nope-nope" not found' "$(j .error.message)" "error message"
}

ws_not_ready() {
	api -q GET "/v1/workspaces/$1"
	[[ $STATUS == 200 && $(j .state) != ready ]]
}

t_not_ready() {
	local ws pid
	new_ws ws || return 1
	usage "$ws"
	assert_status 200 "usage of the ready workspace (positive control)" || return 1
	pid=$(agent_pid "$ws")
	assert_match '^[0-9]+$' "$pid" "its agent" || return 1
	kill -KILL "$pid"
	wait_for -t 10 ws_not_ready "$ws" || {
		_fail "the workspace stayed ready after its agent was killed"
		return 1
	}
	note "state after the agent died: $(j .state)"
	usage "$ws"
	assert_status 409 "usage of a workspace that is not ready"
	assert_eq conflict "$(j .error.code)" "error code"
	assert_contains "not ready" "$(j .error.message)" "error message"
}

# The agent stopped (SIGSTOP): the request waits without holding up the controller, then ends
# with 503 naming the agent.
t_agent_silent() {
	local ws pid bg
	new_ws ws || return 1
	pid=$(agent_pid "$ws")
	assert_match '^[0-9]+$' "$pid" "its agent" || return 1
	kill -STOP "$pid"
	curl -sS --max-time 30 --unix-socket "$SOCK" -o "$TMP/usage-silent" -w '%{http_code}' \
		"http://station/v1/workspaces/$ws/usage" >"$TMP/usage-silent-status" 2>/dev/null &
	bg=$!
	api -q GET /v1/worker
	assert_status 200 "another request is answered while the usage request waits"
	kill -0 "$bg" 2>/dev/null || _fail "the usage request did not wait for the agent"
	wait "$bg"
	kill -CONT "$pid"
	assert_eq 503 "$(cat "$TMP/usage-silent-status")" "status when the agent does not answer"
	assert_eq unavailable "$(j .error.code "$(cat "$TMP/usage-silent")")" "error code"
	assert_eq "the agent of workspace \"$ws\" did not report its resource use within 3000 ms" \
		"$(j .error.message "$(cat "$TMP/usage-silent")")" "error message"
	usage "$ws"
	assert_status 200 "the agent answers again once continued"
}

run_test "usage: the exact shape with nothing running" t_shape
run_test "usage: a busy loop's cpu time grows, a finished run drops out" t_busy_loop
run_test "usage: a command holding 96 MiB shows it" t_memory
run_test "usage: a running service attempt is listed" t_service
run_test "usage: an unknown workspace is 404" t_unknown_workspace
run_test "usage: a workspace that is not ready is 409" t_not_ready
run_test "usage: a silent agent gives 503 after the bound, the loop goes on meanwhile" t_agent_silent
