#!/bin/bash
# station-sandbox mcp (issue 18): the stdio MCP server driven by JSON-RPC from mcp-stdio.py,
# both protocol revisions, every tool against a real controller and real container workspaces
# (the busybox image built here), a long command returning a handle, cancellation killing the
# tree, huge and binary output, a port exposed and opened through the preview listener, the
# JSON-RPC errors, the operator's limits, exit on EOF.
. "$(dirname "$0")/container-lib.sh"

command -v python3 >/dev/null || {
	skip "$TEST_NAME" "python3 missing"
	exit 0
}
free_port() {
	python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
PORT=$(free_port)
PREVIEW_PORT=$(free_port)
require_container_controller --listen "tcp:127.0.0.1:$PORT" --mcp --mcp-allow-host sandbox.example \
	--preview-listen "tcp:127.0.0.1:$PREVIEW_PORT"
new_ws HWS '{"adapter":"host"}' || {
	not_ok "host workspace for the limits tests"
	exit 1
}

export TMP
# py SCRIPT ARGS...: runs a test script, its result lines counted as ours.
py() {
	local line
	while IFS= read -r line; do
		echo "$line"
		case $line in
		"not ok "*) _n_fail=$((_n_fail + 1)) ;;
		esac
	done < <(python3 "$SRC/test/integration/$1" "${@:2}" 2>&1)
}
py mcp-stdio.py "$CLI_BIN" "$SOCK" "$IMAGE" "$HWS" "$PREVIEW_PORT"
py mcp-http.py "$PORT" "$(cat "$ROOT/admin.token")" "$SOCK" "$IMAGE"
if ((_n_fail > 0)); then
	if [[ -s $TMP/mcp-stderr.log ]]; then
		diag "server stderr:"
		tail -n 20 "$TMP/mcp-stderr.log" | sed 's/^/#   /'
	fi
	dump_controller_log 30
fi
