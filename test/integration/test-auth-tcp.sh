#!/bin/bash
# TCP listeners always need the bearer token: none or a wrong one is 401 with
# WWW-Authenticate: Bearer; the admin token from <root>/admin.token is 200. The unix socket
# needs no token.
. "$(dirname "$0")/lib.sh"

PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
URL=http://127.0.0.1:$PORT

require_controller --listen "tcp:127.0.0.1:$PORT"

# tcp_get PATH [TOKEN]: sets STATUS, BODY and HEADERS.
tcp_get() {
	local auth=()
	[[ $# -ge 2 ]] && auth=(-H "Authorization: Bearer $2")
	HEADERS=$(curl -sS --max-time 10 -o "$TMP/body" -D - "${auth[@]}" "$URL$1" 2>/dev/null | tr -d '\r')
	STATUS=$(awk 'NR == 1 {print $2}' <<<"$HEADERS")
	[[ -n $STATUS ]] || STATUS=000
	BODY=$(cat "$TMP/body" 2>/dev/null)
}

t_no_token() {
	tcp_get /v1/worker
	assert_status 401 "no token" || return 1
	assert_eq unauthorized "$(j .error.code)" "error code"
	assert_match '^[Ww][Ww][Ww]-[Aa]uthenticate: Bearer' "$(grep -i '^www-authenticate:' <<<"$HEADERS")" \
		"WWW-Authenticate header"
}

t_wrong_token() {
	tcp_get /v1/worker "not-the-token"
	assert_status 401 "wrong token"
	tcp_get /v1/worker "$(cat "$ROOT/admin.token")x"
	assert_status 401 "token with an extra character"
}

t_admin_token() {
	local token
	token=$(tr -d '\n' <"$ROOT/admin.token")
	tcp_get /v1/worker "$token"
	assert_status 200 "admin token" || return 1
	assert_eq test "$(j .name)" "worker name"
	# A whole exchange over TCP.
	local ws
	ws=$(curl -sS --max-time 10 -H "Authorization: Bearer $token" -H 'Content-Type: application/json' \
		--data-binary '{}' "$URL/v1/workspaces" | jq -r .id)
	assert_match '^test-[a-z2-7]{26}$' "$ws" "workspace created over TCP" || return 1
	local run
	run=$(curl -sS --max-time 70 -H "Authorization: Bearer $token" -H 'Content-Type: application/json' \
		--data-binary '{"command":"echo tcp"}' "$URL/v1/workspaces/$ws/commands?waitMs=60000")
	assert_eq '"tcp\n"' "$(jq -c .stdout <<<"$run")" "output over TCP"
}

t_unix_needs_no_token() {
	api -q GET /v1/worker
	assert_status 200 "unix socket without a token"
}

t_unix_socket_mode() {
	assert_eq 600 "$(stat -c %a "$SOCK")" "socket mode"
}

run_test "TCP without a token is 401 with WWW-Authenticate" t_no_token
run_test "TCP with a wrong token is 401" t_wrong_token
run_test "TCP with the admin token is 200" t_admin_token
run_test "unix socket needs no token" t_unix_needs_no_token
run_test "unix socket is mode 0600" t_unix_socket_mode
