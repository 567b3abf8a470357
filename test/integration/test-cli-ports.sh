#!/bin/bash
# `station-sandbox port expose|ls|rm` against a controller with a preview listener: a container
# workspace without a network runs busybox httpd on its own 127.0.0.1:3000; `port expose` prints
# the URL, the token and the URL that opens it (the token said to be shown once), and the URL
# answers through the listener with the token (401 without: the control); `--json` is the API's
# answer; `port ls` lists it exposed (never the token) and listening with its pid and command;
# `--public --expires 1h` needs no token and expires within the hour; `port rm` ends it (404).
# Refusals read clearly: a second expose of the port, a host workspace (no network of its own:
# 409 in the controller's words, exit 1), a port not exposed (404), and usage errors (exit 64:
# bad ports, unknown options, bad durations, missing arguments) with the valid form as control.
. "$(dirname "$0")/container-lib.sh"

free_port() {
	python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
PREVIEW_PORT=$(free_port)
require_container_controller --preview-listen "tcp:127.0.0.1:$PREVIEW_PORT"

# clirun ARGS...: runs the CLI, sets RC, OUT (stdout) and ERR (stderr).
clirun() {
	cli "$@" >"$TMP/cli.out" 2>"$TMP/cli.err" </dev/null
	RC=$?
	OUT=$(cat "$TMP/cli.out")
	ERR=$(cat "$TMP/cli.err")
}

# field NAME: the value after "NAME:" on its line of OUT (port expose's output).
field() {
	awk -v k="$1:" '$1 == k {print $2; exit}' <<<"$OUT"
}

# preview URL [CURL ARGS...]: a request to a preview URL through the listener on loopback (its
# host resolved to 127.0.0.1 as a browser resolves *.localhost); sets CODE, the body in
# $TMP/preview.body, the head in $TMP/preview.head.
CODE=
preview() {
	local url=$1 host
	shift
	host=${url#http://}
	host=${host%%/*}
	host=${host%:*}
	CODE=$(curl -sS --max-time 20 --resolve "$host:$PREVIEW_PORT:127.0.0.1" -D "$TMP/preview.head" \
		-o "$TMP/preview.body" -w '%{http_code}' "$@" "$url" 2>"$TMP/curl.err") || CODE=000
}

httpd_answers() {
	run_cmd "$1" 'wget -q -O - http://127.0.0.1:3000/ | grep -c preview-ok' >/dev/null 2>&1 &&
		[[ $(j .exitCode) == 0 ]]
}

WS=
HOST_WS=
t_setup() {
	new_cws WS '{"network":"none"}' || return 1
	run_cmd "$WS" 'mkdir -p www && echo preview-ok >www/index.html' >/dev/null
	assert_eq 0 "$(j .exitCode)" "write the page" || return 1
	# shellcheck disable=SC2016 # expanded by the workspace's shell
	clirun service start "$WS" web -- 'httpd -f -p 127.0.0.1:3000 -h "$PWD/www"'
	assert_eq 0 "$RC" "service start httpd: $ERR" || return 1
	wait_for -t 30 httpd_answers "$WS" || {
		_fail "httpd does not answer in the workspace: $(_short "$BODY")"
		return 1
	}
	new_ws HOST_WS '{"adapter":"host"}'
}

URL=
TOKEN=
t_expose_token() {
	local open
	clirun port expose "$WS" 3000
	assert_eq 0 "$RC" "exit status (stderr: $ERR)" || return 1
	URL=$(field url)
	TOKEN=$(field token)
	open=$(field open)
	assert_match "^http://[a-z0-9-]{1,63}\.preview\.localhost:$PREVIEW_PORT/$" "$URL" "url line" || return 1
	assert_match '^[A-Za-z0-9_-]{16,}$' "$TOKEN" "token line" || return 1
	assert_eq "${URL}?station_preview_token=$TOKEN" "$open" "open line: the URL with the token" || return 1
	assert_match '^port 3000: token access, expires 20[0-9-]+T' "$(head -n 1 <<<"$OUT")" "first line" || return 1
	assert_match 'shown only this once' "$ERR" "stderr says the token is shown once" || return 1
	# Through the listener: 401 without the token (the control), the page with it.
	preview "$URL"
	assert_eq 401 "$CODE" "the URL without the token" || return 1
	preview "$URL" -H "Authorization: Bearer $TOKEN"
	assert_eq 200 "$CODE" "the URL with the token ($(cat "$TMP/curl.err"))" || return 1
	assert_eq preview-ok "$(cat "$TMP/preview.body")" "httpd's page" || return 1
	# The open line hands the token over once: a cookie for this host and a redirect to the URL.
	preview "$open"
	assert_match '^30[0-9]$' "$CODE" "the open URL redirects" || return 1
	assert_match "station_preview=" "$(grep -i '^set-cookie:' "$TMP/preview.head")" "and sets the cookie"
}

t_expose_again() {
	clirun port expose "$WS" 3000
	assert_eq 1 "$RC" "exit status of a second expose" || return 1
	assert_match '^station-sandbox: .*3000' "$ERR" "the controller's message names the port" || return 1
	assert_match 'expos' "$ERR" "and says it is exposed already" || return 1
	assert_contains "port rm $WS 3000" "$ERR" "and how to with the CLI" || return 1
	assert_eq '' "$OUT" "nothing on stdout"
}

t_ls() {
	local row
	clirun port ls "$WS"
	assert_eq 0 "$RC" "exit status (stderr: $ERR)" || return 1
	assert_eq exposed: "$(sed -n 1p <<<"$OUT")" "the exposed section first" || return 1
	assert_match '^PORT +ACCESS +URL +EXPIRES$' "$(sed -n 2p <<<"$OUT")" "its header" || return 1
	row=$(awk '$1 == "3000" && $2 == "token"' <<<"$OUT")
	assert_eq "$URL" "$(awk '{print $3}' <<<"$row")" "port 3000's row: its URL" || return 1
	assert_match '^20[0-9-]+T' "$(awk '{print $4}' <<<"$row")" "and its expiry" || return 1
	assert_match '^PORT +ADDRESS +PID +COMMAND$' "$(sed -n '/^listening:$/{n;p}' <<<"$OUT")" \
		"the listening section's header" || return 1
	row=$(sed -n '/^listening:$/,$p' <<<"$OUT" | awk '$1 == "3000"')
	assert_match '^3000 +127\.0\.0\.1 +[0-9]+ +httpd' "$row" "httpd listening on 127.0.0.1:3000" || return 1
	assert_eq '' "$(grep -F -- "$TOKEN" <<<"$OUT")" "the token is not listed" || return 1
	clirun port ls --json "$WS"
	assert_eq 0 "$RC" "--json exit status" || return 1
	assert_eq "$URL" "$(j '.exposed[] | select(.port == 3000) | .url' "$OUT")" "--json: the exposure" || return 1
	assert_eq null "$(j '.exposed[0].token' "$OUT")" "--json: no token" || return 1
	assert_eq httpd "$(j '.listening[] | select(.port == 3000) | .command' "$OUT")" "--json: listening"
}

t_public_json() {
	local now exp
	now=$(date +%s)
	clirun port expose --public --expires 1h --json "$WS" 3001
	assert_eq 0 "$RC" "exit status (stderr: $ERR)" || return 1
	assert_eq 'public 3001 null' "$(j '"\(.access) \(.port) \(.token)"' "$OUT")" "the API's answer" || return 1
	assert_eq '' "$ERR" "no token note" || return 1
	exp=$(date -d "$(j .expiresAt "$OUT")" +%s)
	assert_le $((now + 3600 - 5)) "$exp" "expires in 1 h (not before)" || return 1
	assert_le "$exp" $((now + 3600 + 60)) "expires in 1 h (not after)" || return 1
	# Nothing listens on 3001: an exposure does not need a server yet.
	clirun port ls "$WS"
	assert_match '^3001 +public ' "$(awk '$1 == "3001"' <<<"$OUT")" "port ls: 3001 public"
}

t_rm() {
	clirun port rm "$WS" 3000
	assert_eq 0 "$RC" "exit status (stderr: $ERR)" || return 1
	assert_eq 'port 3000 no longer exposed' "$OUT" "stdout" || return 1
	preview "$URL" -H "Authorization: Bearer $TOKEN"
	assert_eq 404 "$CODE" "its URL answers 404" || return 1
	clirun port rm "$WS" 3000
	assert_eq 1 "$RC" "exit status of a second rm" || return 1
	assert_match '^station-sandbox: .*3000' "$ERR" "the message names the port" || return 1
	clirun port ls --json "$WS"
	assert_eq '[3001]' "$(j '[.exposed[].port]' "$OUT")" "only 3001 is left"
}

t_host_refused() {
	[[ -n $HOST_WS ]] || return 1
	clirun port expose "$HOST_WS" 3000
	assert_eq 1 "$RC" "exit status" || return 1
	assert_match '^station-sandbox: ' "$ERR" "one line naming the program" || return 1
	assert_eq 1 "$(wc -l <<<"$ERR")" "one line" || return 1
	assert_match 'host' "$ERR" "the controller's message: the host adapter" || return 1
	assert_match 'network' "$ERR" "and why: the network" || return 1
	assert_eq '' "$OUT" "nothing on stdout"
}

# usage_error MESSAGE-REGEX ARGS...: exit 64, the message and the usage line on stderr.
usage_error() {
	local want=$1
	shift
	clirun "$@"
	assert_eq 64 "$RC" "exit status of 'port ${*:2}'" || return 1
	assert_match "$want" "$(head -n 1 <<<"$ERR")" "message of 'port ${*:2}'" || return 1
	assert_match '^usage: station-sandbox port' "$(tail -n 1 <<<"$ERR")" "usage line" || return 1
	assert_eq '' "$OUT" "nothing on stdout"
}

t_usage() {
	usage_error 'PORT 0: out of range \(want 1-65535\)' port expose "$WS" 0 || return 1
	usage_error 'PORT 65536: out of range' port expose "$WS" 65536 || return 1
	usage_error "PORT wants a non-negative integer, not 'http'" port expose "$WS" http || return 1
	usage_error "PORT wants a non-negative integer, not '3000x'" port rm "$WS" 3000x || return 1
	usage_error "unknown option '--private'" port expose --private "$WS" 3002 || return 1
	usage_error "--expires '1w': a duration" port expose --expires 1w "$WS" 3002 || return 1
	usage_error "--expires '0': a duration above 0" port expose --expires 0 "$WS" 3002 || return 1
	usage_error "option '--expires' needs a value" port expose "$WS" 3002 --expires || return 1
	usage_error 'WS and PORT are needed' port expose "$WS" || return 1
	usage_error "unexpected argument '3003'" port expose "$WS" 3002 3003 || return 1
	usage_error "unknown option '--json'" port rm --json "$WS" 3001 || return 1
	usage_error 'no workspace given' port ls || return 1
	usage_error "unknown port command 'open'" port open "$WS" 3002 || return 1
	# The control: the same command well formed reaches the controller and is done.
	clirun port expose --expires 90000 "$WS" 3002
	assert_eq 0 "$RC" "a well-formed expose (stderr: $ERR)" || return 1
	clirun port rm "$WS" 3002
	assert_eq 0 "$RC" "a well-formed rm"
}

run_test "a container workspace (network none) runs httpd on its own 127.0.0.1:3000" t_setup
run_test "port expose: URL, token and open URL; the token is needed and opens the page" t_expose_token
run_test "port expose of an exposed port: exit 1, the controller's 409 in words" t_expose_again
run_test "port ls: exposed (no token) and listening with address, pid, command; --json" t_ls
run_test "port expose --public --expires 1h --json: the API's answer, no token" t_public_json
run_test "port rm: the URL answers 404; a second rm fails naming the port" t_rm
run_test "port expose on a host workspace: exit 1 with the controller's 409 in words" t_host_refused
run_test "usage errors exit 64 with a message and the usage line; the well-formed control works" t_usage
