#!/bin/bash
# Terminals inside a container (the agent is PID 1 there): the login shell from the image's
# /etc/passwd on a PTY of the container's own devpts, typing and output, the size, and a
# force-close that kills a daemonized descendant but not the container (a sibling run lives).
. "$(dirname "$0")/container-lib.sh"

CLIENT=$SRC/test/integration/term-client.mjs

# ws, pinned in test/npm-tools (lib.sh: npm_tools)
if ! npm_tools; then
	skip "$TEST_NAME" "$NPM_TOOLS_ERROR"
	exit 0
fi
export WS_MODULE_DIR=$NPM_TOOLS

require_container_controller
new_cws WS || exit 1

tc() {
	mkdir -p "$TMP/$1"
	R=$(node "$CLIENT" \
		"ws+unix://$SOCK:/v1/workspaces/$WS/terminals/$2/attach" "$3" "$TMP/$1" 2>&1)
	[[ -n $R ]] || R='{"error":"no result"}'
}

T=
t_shell_in_container() {
	api -q POST "/v1/workspaces/$WS/terminals" '{"cols":90,"rows":25}'
	assert_status 201 "open terminal" || return 1
	T=$(j .id)
	assert_eq running "$(j .state)" "state" || diag "$BODY"
	assert_eq /bin/sh "$(j .command)" "the image's login shell"
	tc sh "$T" '[{"send":"echo hi-$((1+1)); stty size; tty\n"},{"expect":"\\r\\nhi-2\\r\\n25 90\\r\\n/dev/pts/[0-9]+"}]'
	assert_eq null "$(j .error "$R")" "typing into the container's shell" || diag "$R"
}

t_force_close_in_container() {
	run_start "$WS" "$(json_cmd 'sleep 3')" || return 1
	local sibling=$RUN
	tc fc "$T" '[{"send":"setsid sleep 1000.93 & echo BG-$((2*2))\n"},{"expect":"BG-4\\r\\n"}]'
	assert_eq null "$(j .error "$R")" "the shell started the sleep" || return 1
	wait_for -t 5 pgrep -f 'sleep 1000.93' >/dev/null || _fail "positive control: no sleep"
	api -q DELETE "/v1/workspaces/$WS/terminals/$T"
	assert_status 200 "DELETE" || return 1
	assert_eq closed "$(j .state)" "state"
	wait_for -t 5 no_process 'sleep 1000.93' || _fail "the daemonized sleep survived"
	run_wait "$WS" "$sibling" || return 1
	assert_eq exited "$(j .status)" "sibling run"
	assert_eq 0 "$(j .exitCode)" "sibling exit code"
}

run_test "a login shell on a PTY inside the container" t_shell_in_container
run_test "force-close inside the container kills only the terminal's tree" t_force_close_in_container
