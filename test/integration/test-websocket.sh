#!/bin/bash
# WebSocket (RFC 6455) against a real client, the npm `ws` package (pinned in test/npm-tools):
# GET …/commands/{run}/output upgraded streams the exact bytes; protocol violations close with
# 1002 / 1007 / 1009 (each beside a positive control); ping, fragments and the closing
# handshake; a client that stops reading neither stalls the controller nor the run and later
# sees a marked gap; the handshake's errors; the bearer token over TCP.
. "$(dirname "$0")/lib.sh"

CLIENT=$SRC/test/integration/ws-client.mjs

# ws, pinned in test/npm-tools (lib.sh: npm_tools)
if ! npm_tools; then
	skip "$TEST_NAME" "$NPM_TOOLS_ERROR"
	exit 0
fi
export WS_MODULE_DIR=$NPM_TOOLS

PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
require_controller --listen "tcp:127.0.0.1:$PORT"
new_ws WS || exit 1
api -q GET "/v1/workspaces/$WS"
WS_HOME=$(j .home)

# wsc MODE PATH [ARGS...]: the client against PATH on the unix socket; its JSON result in R.
wsc() {
	local mode=$1 path=$2
	shift 2
	R=$(node "$CLIENT" "$mode" "ws+unix://$SOCK:$path" "$@" \
		2>"$TMP/client-err")
	[[ -n $R ]] || R='{}'
}

# output_bg RUN DIR [PAUSE_FILE]: the output client in the background (pid in BG), its result
# in DIR.json; returns once it is open.
BG=
output_bg() {
	mkdir -p "$2"
	node "$CLIENT" output "ws+unix://$SOCK:$(output_path "$1")" "$2" \
		${3:+"$3"} >"$2.json" 2>"$TMP/client-err" &
	BG=$!
	wait_for -t 10 test -e "$2/open" && return 0
	kill "$BG" 2>/dev/null
	_fail "the client did not open: $(cat "$2.json" "$TMP/client-err")"
}

# A run that waits for $HOME/go before it writes anything: the client is attached first.
gated_run() {
	rm -f "$WS_HOME/go"
	run_start "$WS" "$(json_cmd "while [ ! -e \"\$HOME/go\" ]; do sleep 0.02; done; $1" \
		'.timeoutMs = 120000')"
}

output_path() {
	echo "/v1/workspaces/$WS/commands/$1/output"
}

t_live_output_exact_bytes() {
	head -c 200000 /dev/urandom >"$WS_HOME/blob"
	{ printf 'hello\n'; cat "$WS_HOME/blob"; printf '\000\377end'; } >"$TMP/expected-stdout"
	gated_run "printf 'hello\\n'; printf 'warn\\n' >&2; cat \"\$HOME/blob\"; printf '\\000\\377end'" ||
		return 1
	local out=$TMP/live
	output_bg "$RUN" "$out" || return 1
	touch "$WS_HOME/go"
	wait "$BG"
	R=$(cat "$out.json")
	assert_eq 1000 "$(j .code "$R")" "close code" || { diag "$R"; return 1; }
	assert_eq "run finished" "$(j .reason "$R")" "close reason"
	assert_files_eq "$TMP/expected-stdout" "$out/stdout" "stdout bytes"
	printf 'warn\n' >"$TMP/expected-stderr"
	assert_files_eq "$TMP/expected-stderr" "$out/stderr" "stderr bytes"
	assert_eq '[]' "$(j .gaps "$R")" "no gaps"
	assert_eq '[]' "$(j .offsetErrors "$R")" "offsets contiguous"
	assert_eq '["end"]' "$(j .texts "$R")" "text messages"
	assert_eq exited "$(j .end.status "$R")" "end: status"
	assert_eq 200011 "$(j .end.stdoutBytes "$R")" "end: stdoutBytes"
	assert_eq null "$(j .end.stdout "$R")" "end: no output fields"
}

t_finished_run_replays() {
	run_cmd "$WS" "printf hi; printf oops >&2" || return 1
	mkdir -p "$TMP/done"
	wsc output "$(output_path "$RUN")" "$TMP/done"
	assert_eq 1000 "$(j .code "$R")" "close code" || { diag "$R"; return 1; }
	assert_eq hi "$(cat "$TMP/done/stdout")" stdout
	assert_eq oops "$(cat "$TMP/done/stderr")" stderr
	assert_eq '{"stdout":2,"stderr":4}' "$(j .bytes "$R")" "bytes"
	assert_eq 0 "$(j .end.exitCode "$R")" "end: exitCode"
}

t_sse_without_upgrade() {
	run_cmd "$WS" "printf sse" || return 1
	local headers
	headers=$(curl -sS --max-time 10 --unix-socket "$SOCK" -D - -o "$TMP/sse" \
		"http://station$(output_path "$RUN")" | tr -d '\r')
	assert_contains "Content-Type: text/event-stream" "$headers" "SSE content type"
	assert_contains "event: end" "$(cat "$TMP/sse")" "SSE end event"
	assert_contains "\"data\":\"$(printf sse | base64)\"" "$(cat "$TMP/sse")" "SSE output event"
}

# A run that lasts: the violation tests need an open output stream.
LONG_RUN=
long_run() {
	[[ -n $LONG_RUN ]] && return 0
	run_start "$WS" "$(json_cmd 'sleep 600' '.timeoutMs = 700000')" || return 1
	LONG_RUN=$RUN
}

t_unmasked_frame_1002() {
	long_run || return 1
	wsc raw "$(output_path "$LONG_RUN")" 81026869 # FIN text "hi", no mask bit
	assert_eq 1002 "$(j .code "$R")" "close code" || diag "$R"
	assert_eq "client frames must be masked" "$(j .reason "$R")" "reason"
	assert_eq '[]' "$(j .pongs "$R")" "no pong after the violation"
	# Positive control: the same frame masked (key 0) is taken and the ping answered.
	wsc raw "$(output_path "$LONG_RUN")" 8182000000006869
	assert_eq 1000 "$(j .code "$R")" "masked: client's close" || diag "$R"
	assert_eq '["after"]' "$(j .pongs "$R")" "masked: ping answered"
}

t_invalid_utf8_1007() {
	long_run || return 1
	wsc text "$(output_path "$LONG_RUN")" c328
	assert_eq 1007 "$(j .code "$R")" "close code" || diag "$R"
	assert_eq '[]' "$(j .pongs "$R")" "no pong after the violation"
	wsc text "$(output_path "$LONG_RUN")" 6f6b20e282ac # "ok €"
	assert_eq 1000 "$(j .code "$R")" "valid UTF-8: client's close" || diag "$R"
	assert_eq '["after"]' "$(j .pongs "$R")" "valid UTF-8: ping answered"
}

t_oversized_frame_1009() {
	long_run || return 1
	wsc binary "$(output_path "$LONG_RUN")" 1048577
	assert_eq 1009 "$(j .code "$R")" "close code" || diag "$R"
	assert_eq '[]' "$(j .pongs "$R")" "no pong after the violation"
	wsc binary "$(output_path "$LONG_RUN")" 1048576
	assert_eq 1000 "$(j .code "$R")" "at the cap: client's close" || diag "$R"
	assert_eq '["after"]' "$(j .pongs "$R")" "at the cap: ping answered"
}

t_ping_fragments_close() {
	long_run || return 1
	wsc chat "$(output_path "$LONG_RUN")"
	assert_eq '["station-ping","in-between"]' "$(j .pongs "$R")" "pongs" || diag "$R"
	assert_eq 1000 "$(j .code "$R")" "closing handshake"
}

# The run writes 64 MiB while the client reads nothing: the connection's queue (16 MiB for
# output) and the sockets' buffers hold what the client gets once it reads again, the rest is a
# gap.
t_slow_client_gets_a_gap() {
	local total=67108864 out=$TMP/slow
	gated_run "head -c $total /dev/zero; printf done >&2" || return 1
	# The client reads nothing from its open on, until $TMP/resume exists.
	output_bg "$RUN" "$out" "$TMP/resume" || return 1
	touch "$WS_HOME/go"
	run_wait "$WS" "$RUN" 60 || { touch "$TMP/resume"; wait "$BG"; return 1; }
	assert_eq exited "$(j .status)" "the run finished while the client was stalled"
	assert_eq "$total" "$(j .stdoutBytes)" "stdoutBytes"
	local status
	status=$(curl -sS --max-time 5 -o /dev/null -w '%{http_code}' --unix-socket "$SOCK" \
		http://station/v1/ready)
	assert_eq 200 "$status" "another request answers meanwhile"
	touch "$TMP/resume"
	wait "$BG"
	R=$(cat "$out.json")
	assert_eq 1000 "$(j .code "$R")" "close code" || { diag "$(head -c 300 <<<"$R")"; return 1; }
	assert_eq '[]' "$(j .offsetErrors "$R")" "gaps and data account for every offset"
	local gaps missed got
	gaps=$(j '[.gaps[] | select(.stream == "stdout")] | length' "$R")
	missed=$(j '[.gaps[] | select(.stream == "stdout") | .bytes] | add // 0' "$R")
	got=$(j .bytes.stdout "$R")
	assert_le 1 "$gaps" "at least one gap"
	assert_eq "$total" "$((got + missed))" "bytes received + bytes in gaps"
	assert_le "$got" 24000000 "the stalled client did not get everything"
	assert_eq 0 "$(tr -d '\000' <"$out/stdout" | wc -c)" "what arrived is the command's zeros"
	assert_eq end "$(j '.texts[-1]' "$R")" "end comes last"
	assert_eq exited "$(j .end.status "$R")" "end: status"
}

# hs PATH VERSION KEY [CONNECTION]: a hand-made opening handshake with curl; STATUS, BODY, HEADERS.
hs() {
	HEADERS=$(curl -sS --max-time 10 --unix-socket "$SOCK" -D - -o "$TMP/hs-body" \
		-H 'Upgrade: websocket' -H "Connection: ${4:-Upgrade}" \
		-H "Sec-WebSocket-Version: $2" -H "Sec-WebSocket-Key: $3" "http://station$1" |
		tr -d '\r')
	STATUS=$(awk 'NR == 1 {print $2}' <<<"$HEADERS")
	BODY=$(cat "$TMP/hs-body")
}

# hs_101 PATH KEY: a right opening handshake over the unix socket; prints the answer's head and
# hangs up as soon as it has it (curl, which knows no WebSocket, would wait for a body that
# never comes until its --max-time).
hs_101() {
	python3 - "$SOCK" "$1" "$2" <<'PY'
import socket, sys
sock, path, key = sys.argv[1:]
s = socket.socket(socket.AF_UNIX)
s.settimeout(10)
s.connect(sock)
s.sendall((f"GET {path} HTTP/1.1\r\nHost: station\r\nUpgrade: websocket\r\n"
           f"Connection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"
           f"Sec-WebSocket-Key: {key}\r\n\r\n").encode())
head = b""
while b"\r\n\r\n" not in head and len(head) < 65536:
    chunk = s.recv(4096)
    if not chunk:
        break
    head += chunk
print(head.split(b"\r\n\r\n")[0].decode("latin-1"))
PY
}

t_handshake_errors() {
	long_run || return 1
	local p key=dGhlIHNhbXBsZSBub25jZQ==
	p=$(output_path "$LONG_RUN")
	hs "$p" 8 "$key"
	assert_status 426 "version 8"
	assert_eq upgrade_required "$(j .error.code)" "426 error code"
	assert_contains "Sec-WebSocket-Version: 13" "$HEADERS" "426 names version 13"
	hs "$p" 13 "not-base64-16-bytes"
	assert_status 400 "bad key"
	assert_eq invalid_argument "$(j .error.code)" "bad key: error code"
	hs "$p" 13 "$key" keep-alive
	assert_status 400 "no Connection: Upgrade"
	hs "/v1/workspaces/$WS" 13 "$key"
	assert_status 400 "endpoint without a WebSocket variant"
	wsc status "/v1/workspaces/$WS/commands/r-nosuchrun/output"
	assert_eq 404 "$(j .status "$R")" "unknown run: 404 before any upgrade"
	# Positive control: the same handshake, right, is answered 101 with the RFC's accept value.
	HEADERS=$(hs_101 "$p" "$key" 2>&1 | tr -d '\r')
	assert_contains "HTTP/1.1 101" "$HEADERS" "101 Switching Protocols"
	assert_contains "Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=" "$HEADERS" "accept value"
}

t_bearer_token_over_tcp() {
	long_run || return 1
	local token url
	token=$(tr -d '\n' <"$ROOT/admin.token")
	url="ws://127.0.0.1:$PORT$(output_path "$LONG_RUN")"
	R=$(node "$CLIENT" status "$url" 2>/dev/null)
	assert_eq 401 "$(j .status "$R")" "no token" || diag "$R"
	R=$(node "$CLIENT" status "$url" wrong-token 2>/dev/null)
	assert_eq 401 "$(j .status "$R")" "wrong token"
	R=$(node "$CLIENT" status "$url" "$token" 2>/dev/null)
	assert_eq true "$(j .open "$R")" "admin token: upgraded" || diag "$R"
}

run_test "live output: exact stdout and stderr bytes, then end and close 1000" \
	t_live_output_exact_bytes
run_test "finished run: replay, end, close 1000" t_finished_run_replays
run_test "SSE still served without an upgrade" t_sse_without_upgrade
run_test "unmasked client frame: close 1002 (masked: accepted)" t_unmasked_frame_1002
run_test "invalid UTF-8 text: close 1007 (valid: accepted)" t_invalid_utf8_1007
run_test "frame over 1 MiB: close 1009 (at 1 MiB: accepted)" t_oversized_frame_1009
run_test "ping, fragments with a ping inside, closing handshake" t_ping_fragments_close
run_test "a client that stops reading stalls nothing and sees a gap" t_slow_client_gets_a_gap
run_test "handshake errors: 426, 400, 404; a right one: 101" t_handshake_errors
run_test "bearer token on upgrades over TCP" t_bearer_token_over_tcp
