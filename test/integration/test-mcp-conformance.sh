#!/bin/bash
# run-all: not under sanitizers: node tooling (npm ci, the MCP inspector and conformance suite)
# The official MCP tooling from npm (test/mcp-tools, pinned in its package-lock.json, installed
# here with npm ci): the inspector in CLI mode calling tools/list and exec on the stdio server,
# and the conformance suite in server mode against POST /mcp through a header-adding proxy on
# loopback (the suite sends no token), with test/mcp-tools/expected-failures.yml naming each
# scenario left out and why. Skips when node/npm are missing or the tools cannot be installed.
. "$(dirname "$0")/container-lib.sh"

TOOLS=$SRC/test/mcp-tools

if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
	skip "$TEST_NAME" "node and npm are needed"
	exit 0
fi
if [[ ! -f $TOOLS/package-lock.json ]]; then
	skip "$TEST_NAME" "test/mcp-tools/package-lock.json is missing (npm install --package-lock-only there, with the npm registry reachable)"
	exit 0
fi
if ! npm_ci "$TOOLS" >"$TMP/npm.log" 2>&1; then
	skip "$TEST_NAME" "npm ci in test/mcp-tools failed: $(tail -n 1 "$TMP/npm.log")"
	exit 0
fi
INSPECTOR=$TOOLS/node_modules/.bin/mcp-inspector
CONFORMANCE=$TOOLS/node_modules/.bin/conformance

PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
require_container_controller --listen "tcp:127.0.0.1:$PORT" --mcp
new_cws WS || exit 1

# The inspector starts `station-sandbox mcp` itself, over stdio.
t_inspector_tools_list() {
	local out
	out=$(timeout 120 "$INSPECTOR" --cli "$CLI_BIN" --socket "$SOCK" mcp --method tools/list 2>"$TMP/inspector.err") || {
		_fail "inspector tools/list failed: $(tail -n 5 "$TMP/inspector.err")"
		return 1
	}
	assert_eq 25 "$(jq '.tools | length' <<<"$out")" "tools listed"
	assert_eq exec "$(jq -r '.tools[] | select(.name == "exec") | .name' <<<"$out")" "exec listed"
}
run_test "inspector --cli: tools/list" t_inspector_tools_list

t_inspector_exec() {
	local out
	out=$(timeout 120 "$INSPECTOR" --cli "$CLI_BIN" --socket "$SOCK" mcp --method tools/call \
		--tool-name exec --tool-arg "workspaceId=$WS" --tool-arg 'command=echo from-inspector; exit 4' \
		2>"$TMP/inspector.err") || {
		_fail "inspector tools/call exec failed: $(tail -n 5 "$TMP/inspector.err")"
		return 1
	}
	assert_eq exited "$(jq -r .structuredContent.status <<<"$out")" status
	assert_eq 4 "$(jq -r .structuredContent.exitCode <<<"$out")" exitCode
	assert_eq "from-inspector" "$(jq -r .structuredContent.stdout.head <<<"$out")" stdout
}
run_test "inspector --cli: exec in a container workspace" t_inspector_exec

# The acceptance's one call: exec without a workspace makes a container workspace for it.
t_inspector_exec_new_workspace() {
	local out ws
	out=$(timeout 120 "$INSPECTOR" --cli "$CLI_BIN" --socket "$SOCK" mcp --image "$IMAGE" \
		--method tools/call --tool-name exec --tool-arg 'command=echo new; id -u' \
		2>"$TMP/inspector.err") || {
		_fail "inspector tools/call exec failed: $(tail -n 5 "$TMP/inspector.err")"
		return 1
	}
	assert_eq "new"$'\n'"0" "$(jq -r .structuredContent.stdout.head <<<"$out")" stdout
	ws=$(jq -r .structuredContent.workspaceId <<<"$out")
	api -q GET "/v1/workspaces/$ws"
	assert_eq container "$(j .adapter)" "the new workspace's adapter"
}
run_test "inspector --cli: exec in a new container workspace" t_inspector_exec_new_workspace

PROXY_PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
python3 "$TOOLS/token-proxy.py" "$PROXY_PORT" "$PORT" "$ROOT/admin.token" &
PROXY_PID=$!
trap 'kill $PROXY_PID 2>/dev/null; _cleanup' EXIT
_proxy_up() { curl -s -o /dev/null "http://127.0.0.1:$PROXY_PORT/mcp" -X GET; }
wait_for -t 20 _proxy_up || not_ok "token proxy starts"

t_conformance() {
	local log=$TMP/conformance.log
	if ! timeout 900 "$CONFORMANCE" server --url "http://localhost:$PROXY_PORT/mcp" \
		--expected-failures "$TOOLS/expected-failures.yml" --output-dir "$TMP/conformance" \
		>"$log" 2>&1; then
		_fail "the conformance suite reported unexpected failures:"
		grep -iE 'fail|error|stale' "$log" | tail -n 30 | sed 's/^/#   /'
		return 1
	fi
	note "conformance: $(grep -iE 'passed|total' "$log" | tail -n 2 | tr '\n' ' ')"
}
run_test "conformance 0.1.13 against /mcp: no unexpected failure" t_conformance
