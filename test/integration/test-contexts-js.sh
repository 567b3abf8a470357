#!/bin/bash
# JavaScript code contexts through the API on a host workspace (station-kernel-js under the
# workspace's agent; node is the host's): variables persist from cell to cell, a cell's output
# and result come back, an error carries its name and traceback, `while (true) {}` is
# interrupted and the context keeps its variables, a timed-out cell leaves no child process.
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

if ! command -v node >/dev/null; then
	skip contexts-js "node is not installed"
	exit 0
fi

start_controller || exit 1

WS=
CTX=

# execute CODE [TIMEOUT_MS]: one cell, waited for (60 s at most); the execution in BODY.
execute() {
	local body
	body=$(jq -nc --arg c "$1" --argjson t "${2:-30000}" '{code: $c, timeoutMs: $t}')
	api -q POST "/v1/workspaces/$WS/contexts/$CTX/execute?waitMs=60000" "$body"
	assert_status 201 "execute $(_short "$1")" || return 1
	[[ $(j .status) != running ]] || { _fail "cell still running after 60 s: $(_short "$BODY")"; return 1; }
}
result() { j '.results[0].data."text/plain"'; }

test_state() {
	new_ws WS '{"adapter": "host"}' || return 1
	api -q POST "/v1/workspaces/$WS/contexts" '{"language": "javascript"}'
	assert_status 201 "create a javascript context" || return 1
	CTX=$(j .id)
	assert_eq "javascript idle 0" "$(j '"\(.language) \(.state) \(.executionCount)"')" "the new context: $BODY"
	execute 'let x = 41' || return 1
	assert_eq "ok 1" "$(j '"\(.status) \(.executionCount)"')" "let x = 41: $(_short "$BODY")"
	execute 'console.log("out", x); console.error("err"); x + 1' || return 1
	assert_eq "ok 42 2" "$(j '"\(.status) \(.results[0].data."text/plain") \(.executionCount)"')" \
		"x + 1 in the second cell: $(_short "$BODY")"
	assert_eq $'out 41\n|err' "$(j '"\(.stdout)|\(.stderr)"')" "the cell's stdout and stderr"
	execute 'const y = await Promise.resolve(1); x + y' || return 1
	assert_eq "42" "$(result)" "top-level await: $(_short "$BODY")"
	api -q GET "/v1/workspaces/$WS/contexts/$CTX"
	assert_eq "idle 3" "$(j '"\(.state) \(.executionCount)"')" "the context after three cells"
}

test_errors() {
	[[ -n $CTX ]] || { _fail "no context"; return 1; }
	execute 'null.foo' || return 1
	assert_eq "error TypeError" "$(j '"\(.status) \(.error.name)"')" "null.foo: $(_short "$BODY")"
	assert_eq "Cannot read properties of null (reading 'foo')" "$(j .error.value)" "its message"
	assert_match 'at cell-[0-9]+:1:6' "$(j '.error.traceback | join("|")')" "its traceback"
	execute 'x' || return 1
	assert_eq "ok 41" "$(j '"\(.status) \(.results[0].data."text/plain")"')" "x after the error"
}

# the cell wrote ~/started (a command in the workspace looks)
_started() {
	run_cmd "$WS" 'test -e "$HOME/started"' >/dev/null && [[ $(j .exitCode) == 0 ]]
}

test_interrupt() {
	[[ -n $CTX ]] || { _fail "no context"; return 1; }
	api -q POST "/v1/workspaces/$WS/contexts/$CTX/interrupt"
	assert_status 409 "interrupt with nothing running"
	api -q POST "/v1/workspaces/$WS/contexts/$CTX/execute" \
		'{"code": "require(\"fs\").writeFileSync(process.env.HOME + \"/started\", \"\"); while (true) {}", "timeoutMs": 120000}'
	assert_status 201 "execute while (true) {}" || return 1
	local eid
	eid=$(j .id)
	wait_for -t 30 _started || { _fail "the cell did not start"; return 1; }
	api -q POST "/v1/workspaces/$WS/contexts/$CTX/execute" '{"code": "1"}'
	assert_status 409 "a second cell while one runs"
	assert_contains busy "$BODY" "the 409 says busy"
	api -q POST "/v1/workspaces/$WS/contexts/$CTX/interrupt"
	assert_status 200 "interrupt" || return 1
	assert_eq "$eid interrupted" "$(j '"\(.id) \(.status)"')" "the interrupted execution: $(_short "$BODY")"
	execute 'x + 1' || return 1
	assert_eq "ok 42" "$(j '"\(.status) \(.results[0].data."text/plain")"')" "x after the interrupt"
}

sleeper_gone() { no_process "sleep $1"; }

test_timeout() {
	[[ -n $CTX ]] || { _fail "no context"; return 1; }
	local s=1000.$RANDOM$RANDOM
	execute "require('child_process').spawn('sleep', ['$s']); await new Promise(() => {})" 1000 || return 1
	assert_eq "timed_out" "$(j .status)" "a cell past its timeoutMs: $(_short "$BODY")"
	wait_for -t 10 sleeper_gone "$s" || _fail "sleep $s outlived its cell: $(pgrep -af "sleep $s")"
	# a detached one (its shell exited, the agent reaped it): in the kernel's cgroup still
	local d=1001.$RANDOM$RANDOM
	execute "require('child_process').spawnSync('sh', ['-c', 'sleep $d >/dev/null 2>&1 &']); await new Promise(() => {})" 1000 || return 1
	assert_eq "timed_out" "$(j .status)" "the detaching cell: $(_short "$BODY")"
	wait_for -t 10 sleeper_gone "$d" || _fail "the detached sleep $d outlived its cell: $(pgrep -af "sleep $d")"
	execute 'x * 2' || return 1
	assert_eq "ok 82" "$(j '"\(.status) \(.results[0].data."text/plain")"')" "x after the timeout"
	api -q DELETE "/v1/workspaces/$WS/contexts/$CTX"
	assert_status 204 "delete the context"
}

run_test contexts-js-state test_state
run_test contexts-js-errors test_errors
run_test contexts-js-interrupt test_interrupt
run_test contexts-js-timeout test_timeout
