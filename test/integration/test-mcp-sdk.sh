#!/bin/bash
# run-all: not under sanitizers: node tooling (npm ci, the official MCP TypeScript SDK)
# The MCP server as the official TypeScript SDK (test/mcp-tools, pinned, npm ci) drives it, on
# host workspaces: a cancel through the SDK's AbortSignal over Streamable HTTP cancels the run
# (and only that client's); every tool that refuses unknown arguments says so in its input
# schema; exec without a workspaceId makes a workspace with an idle timeout; a controller gone
# during an exec gives an error naming the run, which finishes under the next controller.
. "$(dirname "$0")/lib.sh"

TOOLS=$SRC/test/mcp-tools
SDK=$TOOLS/sdk-client.mjs

if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
	skip "$TEST_NAME" "node and npm are needed"
	exit 0
fi
if ! npm_ci "$TOOLS" --loglevel=error >"$TMP/npm.log" 2>&1; then
	skip "$TEST_NAME" "npm ci in test/mcp-tools failed: $(tail -n 1 "$TMP/npm.log")"
	exit 0
fi

PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
require_controller --listen "tcp:127.0.0.1:$PORT" --mcp --mcp-option=--adapters=host
TOKEN=$(cat "$ROOT/admin.token")
new_ws WS || exit 1
MARK=$((RANDOM * 32768 + RANDOM)) # this script's commands, apart from any other test's

# sdk MODE ARGS...: the SDK client; its JSON in OUT, its stderr in $TMP/sdk.err.
OUT=
sdk() {
	OUT=$(timeout 300 node "$SDK" "$@" 2>"$TMP/sdk.err") && return 0
	_fail "sdk-client $1 failed: $(tail -n 8 "$TMP/sdk.err")"
}

# A cancel over HTTP is the AbortSignal's notifications/cancelled, a POST of its own beside the
# request's open stream. Two clients whose execs have the same JSON-RPC id: only the cancelled
# one's run ends, cancelled, long before its 300 s timeout; the other finishes.
t_http_cancel() {
	sdk http-cancel "http://127.0.0.1:$PORT/mcp" "$TOKEN" "$WS" "$MARK" || return 1
	note "cancelled run ended $(jq -r .endedMs <<<"$OUT") ms after the abort"
	assert_eq cancelled "$(jq -r .statusA <<<"$OUT")" "the cancelled exec's run" || return 1
	assert_contains "the test cancels it" "$(jq -r .callA.rejected <<<"$OUT")" "the SDK's call"
	assert_eq exited "$(jq -r .resultB.status <<<"$OUT")" "the other client's exec"
	assert_eq "b-done" "$(jq -r .resultB.stdout.head <<<"$OUT")" "the other client's output"
	assert_eq exited "$(jq -r .statusB <<<"$OUT")" "the other client's run in the API"
}
run_test "sdk over http: an aborted exec's run is cancelled, another client's is not" t_http_cancel

# Arguments that satisfy each schema's required list, so an unknown argument is the only fault.
t_schemas_closed() {
	local tools calls results n i name refused=0
	run_cmd "$WS" "echo for-run-tools" || return 1
	sdk list "$CLI_BIN" "$SOCK" --adapters host || return 1
	tools=$OUT
	calls=$(jq -c --arg ws "$WS" --arg run "$RUN" '[.tools[] | [.name,
		((.inputSchema.required // []) | map({key: ., value: ({workspaceId: $ws, runId: $run,
		 name: "svc", command: "true", path: ".", content: "x"}[.])}) | from_entries)
		+ {zzUnknown: 1}]]' <<<"$tools")
	sdk calls "$CLI_BIN" "$SOCK" "$calls" --adapters host || return 1
	results=$OUT
	n=$(jq ".tools | length" <<<"$tools")
	assert_eq 25 "$n" "tools listed" || return 1
	for ((i = 0; i < n; i++)); do
		name=$(jq -r ".tools[$i].name" <<<"$tools")
		if [[ $(jq -r ".[$i].content[0].text" <<<"$results") == "unknown argument 'zzUnknown'" ]]; then
			refused=$((refused + 1))
			assert_eq false "$(jq -c ".tools[$i].inputSchema.additionalProperties" <<<"$tools")" \
				"$name refuses unknown arguments: its schema's additionalProperties"
		else
			assert_ne false "$(jq -c ".tools[$i].inputSchema.additionalProperties" <<<"$tools")" \
				"$name takes unknown arguments: its schema's additionalProperties"
		fi
	done
	assert_eq "$n" "$refused" "tools refusing an unknown argument"
	# Positive control: the same call without it is served.
	sdk calls "$CLI_BIN" "$SOCK" "[[\"workspace_get\",{\"workspaceId\":\"$WS\"}],[\"workspace_get\",{\"workspaceId\":\"$WS\",\"zzUnknown\":1}]]" \
		--adapters host || return 1
	assert_eq false "$(jq .[0].isError <<<"$OUT")" "workspace_get without the unknown argument"
	assert_eq "$WS" "$(jq -r .[0].structuredContent.id <<<"$OUT")" "workspace_get's workspace"
	assert_eq true "$(jq .[1].isError <<<"$OUT")" "workspace_get with it"
}
run_test "sdk over stdio: every tool refusing unknown arguments says additionalProperties false" t_schemas_closed

# exec_new_ws [MCP-FLAG...]: an exec without workspaceId; NEW_WS is the workspace it made.
NEW_WS=
exec_new_ws() {
	sdk calls "$CLI_BIN" "$SOCK" '[["exec",{"command":"echo made"}]]' --adapters host "$@" || return 1
	assert_eq "made" "$(jq -r '.[0].structuredContent.stdout.head' <<<"$OUT")" "exec's output" || return 1
	NEW_WS=$(jq -r '.[0].structuredContent.workspaceId' <<<"$OUT")
	WORKSPACES+=("$NEW_WS")
	api -q GET "/v1/workspaces/$NEW_WS"
	assert_status 200 "the new workspace"
}

t_exec_idle_default() {
	exec_new_ws || return 1
	assert_eq 1800000 "$(j .idleTimeoutMs)" "idleTimeoutMs of the workspace exec made"
	exec_new_ws --exec-idle-timeout-ms 120000 || return 1
	assert_eq 120000 "$(j .idleTimeoutMs)" "with --exec-idle-timeout-ms 120000"
	exec_new_ws --exec-idle-timeout-ms 0 || return 1
	assert_eq 0 "$(j .idleTimeoutMs)" "with --exec-idle-timeout-ms 0 (never)"
	# A workspace named by the call is left as it was.
	api -q GET "/v1/workspaces/$WS"
	assert_eq 0 "$(j .idleTimeoutMs)" "idleTimeoutMs of a workspace exec was given"
	sdk list "$CLI_BIN" "$SOCK" --adapters host || return 1
	assert_contains "pass the workspaceId" \
		"$(jq -r '.tools[] | select(.name == "exec") | .description' <<<"$OUT")" "exec's description"
}
run_test "sdk over stdio: exec without workspaceId makes a workspace with a 30 min idle timeout" t_exec_idle_default

_sdk_done() { ! kill -0 "$1" 2>/dev/null; }

# The controller dies while exec follows its run: the answer is an error naming the run (it
# goes on in the workspace's agent), which the next controller reports finished.
t_controller_gone() {
	local cmd="sleep 4.${MARK}3; echo finished" pid text run
	node "$SDK" calls "$CLI_BIN" "$SOCK" \
		"[[\"exec\",{\"workspaceId\":\"$WS\",\"command\":\"$cmd\",\"waitMs\":120000}]]" \
		--adapters host >"$TMP/gone.json" 2>"$TMP/sdk.err" &
	pid=$!
	wait_for -t 30 pgrep -f "^sleep 4.${MARK}3" >/dev/null || _fail "the command never started"
	stop_controller KILL
	wait_for -t 60 _sdk_done "$pid" || {
		kill "$pid"
		_fail "the exec did not end within 60 s of the controller's death"
	}
	wait "$pid" || _fail "sdk-client failed: $(tail -n 8 "$TMP/sdk.err")"
	restart_controller || return 1
	api -q GET "/v1/workspaces/$WS/commands"
	run=$(j ".commands[] | select(.command == \"$cmd\") | .id")
	assert_match '^[a-z0-9_-]+$' "$run" "the run in the API" || {
		diag "exec's answer: $(cat "$TMP/gone.json")"
		diag "the workspace's runs: $(_short "$BODY")"
		return 1
	}
	text=$(jq -r '.[0].content[0].text' "$TMP/gone.json")
	assert_eq true "$(jq '.[0].isError' "$TMP/gone.json")" "exec's isError"
	assert_contains "$run" "$text" "exec's error names the run"
	assert_contains "run_wait" "$text" "exec's error says how to find it"
	run_wait "$WS" "$run" 60 || return 1
	assert_eq exited "$(j .status)" "the run under the next controller"
	assert_eq '"finished\n"' "$(j '.stdout | tojson')" "its output"
}
run_test "sdk over stdio: a controller gone during exec gives an error naming the run" t_controller_gone
