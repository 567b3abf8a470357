#!/bin/bash
# run-all: not under sanitizers: node tooling (npm ci, the official MCP TypeScript SDK)
# code_execute as the official MCP TypeScript SDK (test/mcp-tools/sdk-client.mjs) calls it over
# stdio, on a host workspace (the host's python3-ipykernel and python3-matplotlib): x = 41 then
# x + 1 gives 42 in the one context kept for the workspace and language (the second call, and
# another session's, reuse it); a matplotlib plot comes back as MCP image content (image/png,
# strict base64 of a PNG of the figure's size); ZeroDivisionError is isError with the
# traceback; javascript keeps its own context (const y = 2, then y * 21).
. "$(dirname "$0")/lib.sh"

TOOLS=$SRC/test/mcp-tools
SDK=$TOOLS/sdk-client.mjs

if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
	skip "$TEST_NAME" "node and npm are needed"
	exit 0
fi
if ! /usr/bin/python3 -c 'import ipykernel, matplotlib' 2>/dev/null; then
	skip "$TEST_NAME" "python3-ipykernel and python3-matplotlib are needed (scripts/install-deps)"
	exit 0
fi
if ! npm_ci "$TOOLS" --loglevel=error >"$TMP/npm.log" 2>&1; then
	skip "$TEST_NAME" "npm ci in test/mcp-tools failed: $(tail -n 1 "$TMP/npm.log")"
	exit 0
fi

require_controller
new_ws WS || exit 1

# calls CALLS-JSON: each [TOOL, ARGS] through one SDK client over stdio; the results in OUT.
OUT=
calls() {
	OUT=$(timeout 600 node "$SDK" calls "$CLI_BIN" "$SOCK" "$1" --adapters host 2>"$TMP/sdk.err") &&
		return 0
	_fail "sdk-client calls failed: $(tail -n 8 "$TMP/sdk.err")"
}

# code CODE [LANGUAGE]: one code_execute call's [TOOL, ARGS].
code() {
	jq -nc --arg ws "$WS" --arg c "$1" --arg l "${2:-python}" \
		'["code_execute", {workspaceId: $ws, code: $c, language: $l}]'
}

PY_CTX=
t_state() {
	calls "[$(code 'x = 41'),$(code 'x + 1')]" || return 1
	assert_eq '[false,false]' "$(jq -c '[.[].isError]' <<<"$OUT")" "isError of both calls" || return 1
	assert_eq '["ok","ok"]' "$(jq -c '[.[].structuredContent.status]' <<<"$OUT")" "their status" || return 1
	assert_eq '{"type":"text","text":"42"}' "$(jq -c '.[1].content[0]' <<<"$OUT")" \
		"x + 1's first content" || return 1
	assert_eq 42 "$(jq -r '.[1].structuredContent.results[0].text' <<<"$OUT")" "its result in structuredContent"
	assert_eq execute_result "$(jq -r '.[1].structuredContent.results[0].type' <<<"$OUT")" "its type"
	PY_CTX=$(jq -r '.[0].structuredContent.contextId' <<<"$OUT")
	assert_match '^c-' "$PY_CTX" "the first call's contextId" || return 1
	assert_eq "$PY_CTX" "$(jq -r '.[1].structuredContent.contextId' <<<"$OUT")" "the second call's (reused)"
	assert_eq 2 "$(jq -r '.[1].structuredContent.executionCount' <<<"$OUT")" "the second cell's count"
	api -q GET "/v1/workspaces/$WS/contexts"
	assert_eq "[\"$PY_CTX\"]" "$(j '[.contexts[] | select(.language == "python") | .id]')" \
		"the workspace's python contexts"
}
run_test "code_execute: x = 41 then x + 1 gives 42 in the one python context of the workspace" t_state

t_plot() {
	local png=$TMP/plot.png data
	# bbox_inches None: the inline backend's default ("tight") crops the figure
	calls "[$(code '%config InlineBackend.print_figure_kwargs = {"bbox_inches": None}
import matplotlib.pyplot as plt
fig = plt.figure(figsize=(4, 3), dpi=50)
plt.plot([1, 2, 3])
plt.show()'),$(code 'x')]" || return 1
	assert_eq false "$(jq '.[0].isError' <<<"$OUT")" "the plot's isError" || return 1
	assert_eq '["image/png"]' "$(jq -c '[.[0].content[] | select(.type == "image") | .mimeType]' <<<"$OUT")" \
		"the plot's image content: $(jq -c '[.[0].content[] | .type]' <<<"$OUT")" || return 1
	data=$(jq -r '.[0].content[] | select(.type == "image") | .data' <<<"$OUT")
	assert_match '^[A-Za-z0-9+/]+={0,2}$' "$data" "the image's data is base64 without line breaks" || return 1
	base64 -d <<<"$data" >"$png" || { _fail "the image's data did not decode"; return 1; }
	assert_eq 89504e470d0a1a0a "$(head -c 8 "$png" | od -An -tx1 | tr -d ' \n')" "the PNG signature" || return 1
	# IHDR: width and height, big-endian, at bytes 16-23: figsize 4x3 at 50 dpi
	assert_eq "200 150" "$(/usr/bin/python3 -c 'import struct,sys; d=open(sys.argv[1],"rb").read(); print(*struct.unpack(">II", d[16:24]))' "$png")" \
		"the image's size" || return 1
	assert_eq '["image/png","text/plain"]' \
		"$(jq -c '.[0].structuredContent.results[0].mimeTypes | sort' <<<"$OUT")" \
		"structuredContent names the result's types" || return 1
	assert_eq 0 "$(jq '[.[0].structuredContent | .. | strings | select(startswith("iVBOR"))] | length' <<<"$OUT")" \
		"structuredContent has no image bytes"
	# Another session reuses the context: x is still there.
	assert_eq "$PY_CTX" "$(jq -r '.[1].structuredContent.contextId' <<<"$OUT")" "another session's context"
	assert_eq 41 "$(jq -r '.[1].content[0].text' <<<"$OUT")" "x in another session"
}
run_test "code_execute: a matplotlib plot is MCP image content, a PNG of the figure's size" t_plot

t_error() {
	local text
	calls "[$(code '1 / 0'),$(code 'x + 1')]" || return 1
	assert_eq true "$(jq '.[0].isError' <<<"$OUT")" "isError of a cell that raised" || return 1
	assert_eq error "$(jq -r '.[0].structuredContent.status' <<<"$OUT")" "its status"
	assert_eq ZeroDivisionError "$(jq -r '.[0].structuredContent.error.name' <<<"$OUT")" "the error's name"
	text=$(jq -r '[.[0].content[] | select(.type == "text") | .text] | join("\n")' <<<"$OUT")
	assert_contains "ZeroDivisionError: division by zero" "$text" "the traceback as text" || return 1
	assert_contains "----> 1 1 / 0" "$text" "the traceback's line"
	[[ $text != *$'\033'* ]] || _fail "the traceback has terminal colours: $(printf %q "$text")"
	# Positive control: the next cell is fine.
	assert_eq false "$(jq '.[1].isError' <<<"$OUT")" "the next cell's isError"
	assert_eq 42 "$(jq -r '.[1].content[0].text' <<<"$OUT")" "the next cell's value"
}
run_test "code_execute: ZeroDivisionError is isError with the traceback" t_error

t_javascript() {
	local js
	calls "[$(code 'const y = 2' javascript),$(code 'y * 21' javascript),$(code 'y' python)]" || return 1
	assert_eq '[false,false,true]' "$(jq -c '[.[].isError]' <<<"$OUT")" \
		"isError: const y = 2, y * 21, then y in python ($(jq -c '[.[].content]' <<<"$OUT"))" || return 1
	assert_eq '{"type":"text","text":"42"}' "$(jq -c '.[1].content[0]' <<<"$OUT")" "y * 21's first content"
	js=$(jq -r '.[0].structuredContent.contextId' <<<"$OUT")
	assert_match '^c-' "$js" "the javascript context" || return 1
	assert_ne "$PY_CTX" "$js" "the javascript context is not the python one"
	assert_eq "$js" "$(jq -r '.[1].structuredContent.contextId' <<<"$OUT")" "the second javascript call's"
	assert_eq NameError "$(jq -r '.[2].structuredContent.error.name' <<<"$OUT")" "python does not see y"
	api -q GET "/v1/workspaces/$WS/contexts"
	assert_eq '["javascript","python"]' "$(j '[.contexts[].language] | sort')" "the workspace's contexts"
}
run_test "code_execute: javascript in a context of its own: const y = 2, then y * 21 gives 42" t_javascript
((_n_fail == 0))
