#!/bin/bash
# Attack: hostile HTTP through the preview listener (docs/api.md, "Previews"), at preview-app
# (test/helpers/preview-app.c) in a container workspace without a network. A request the
# listener and the app could frame differently must never reach the app as two requests: both
# Content-Length and Transfer-Encoding, two Content-Lengths (equal or not), a coding other than
# chunked, a malformed chunk size, an obs-fold header line, whitespace before a header's colon
# are refused (400, 501 for a coding it does not know) and the connection is closed after the
# answer, so the request sent behind the refused one in the same bytes is never read; a head
# over the limit is 431; a host with no exposure 404; bare LF or CR line ends 400; CONNECT 405;
# a second request on the connection for another preview with the first one's token 401 (a
# reverse proxy reuses its connections for any preview: with its own token it is that preview's).
# Each refusal has its positive control:
# the well-formed request succeeds, and pipelined behind it the next request is answered, so
# the missing answer after a refusal is the listener's doing. The app's request log (GET /log)
# shows at the end that no smuggled request ever reached it.
. "$(dirname "$0")/../integration/container-lib.sh"
. "$(dirname "$0")/../integration/preview-lib.sh"

# `{ ...bytes... } | send`: send sets its results in this shell
shopt -s lastpipe

preview_prereqs
container_build_image || {
	not_ok "busybox image builds" "see the diagnostics above"
	exit 1
}
require_container_controller --preview-listen "tcp:127.0.0.1:$PREVIEW_PORT"

WS=
H=
T=
t_setup() {
	new_cws WS '{"network":"none"}' || return 1
	start_apps "$WS" app 'preview-app 3000' 3000 || return 1
	expose "$WS" 3000 || return 1
	H=$PV_HOST T=$PV_TOKEN
}
run_test "setup: preview-app on the workspace's 127.0.0.1:3000, exposed" t_setup
[[ -n $H && -n $T ]] || exit 1

# head_of PATH [METHOD] [FIELDS]: a request head to H with the token (FIELDS: more lines, each
# ending in a written \r\n).
head_of() {
	printf '%s %s HTTP/1.1\r\nHost: %s:%s\r\nAuthorization: Bearer %s\r\n%b\r\n' \
		"${2:-GET}" "$1" "$H" "$PREVIEW_PORT" "$T" "${3:-}"
}

# smuggled N: the request hidden behind a hostile one (its path names the case).
smuggled() {
	head_of "/headers?smuggled-$1" GET 'Connection: close\r\n'
}

# send [RAW OPTIONS...]: stdin's bytes to the listener; RAW_OUT, and STATUSES (the answers'
# codes, space-separated) and CLOSED from it.
RAW_OUT=
STATUSES=
CLOSED=
send() {
	RAW_OUT=$(timeout 60 python3 "$PREVIEW_CLIENT" raw "$PREVIEW_PORT" "$@")
	STATUSES=$(awk -F= '$1 == "status" {printf "%s%s", s, $2; s = " "}' <<<"$RAW_OUT")
	CLOSED=$(awk -F= '$1 == "closed" {print $2}' <<<"$RAW_OUT")
}

# refused WHAT EXPECTED_RE: the last send got one answer matching EXPECTED_RE (e.g. 400) and
# the connection was closed after it.
refused() {
	[[ $STATUSES =~ ^($2)$ ]] || {
		_fail "$1: answers '$STATUSES', want one /$2/: $(_short "$RAW_OUT")"
		return 1
	}
	assert_eq 1 "$CLOSED" "$1: the connection closed after the refusal"
}

# control WHAT: the last send got two 200s (the request, and the one pipelined behind it).
control() {
	assert_eq "200 200" "$STATUSES" "$1 (control: it and the next request answered)" ||
		diag "$(_short "$RAW_OUT")"
}

# A request body case: the hostile head FIELDS and BODY, then the smuggled request in the same
# bytes.
hostile() {
	local n=$1 fields=$2 body=$3
	{
		head_of /sink POST "$fields"
		printf '%b' "$body"
		smuggled "$n"
	} | send --wait 10
}

t_cl_and_te() {
	hostile 1 'Content-Length: 5\r\nTransfer-Encoding: chunked\r\n' '0\r\n\r\n'
	refused "Content-Length and Transfer-Encoding" 400
	hostile 2 'Transfer-Encoding: chunked\r\nContent-Length: 3\r\n' '5\r\nhello\r\n0\r\n\r\n'
	refused "Transfer-Encoding then Content-Length" 400
	# controls: each alone, with the next request pipelined
	{
		head_of /sink POST 'Content-Length: 5\r\n'
		printf 'hello'
		head_of "/headers?control-1" GET 'Connection: close\r\n'
	} | send --wait 10
	control "Content-Length alone"
	assert_contains 'bytes=5 ' "$RAW_OUT" "the app's count of the body"
	{
		head_of /sink POST 'Transfer-Encoding: chunked\r\n'
		printf '5\r\nhello\r\n0\r\n\r\n'
		head_of "/headers?control-2" GET 'Connection: close\r\n'
	} | send --wait 10
	control "Transfer-Encoding chunked alone"
	assert_contains 'bytes=5 ' "$RAW_OUT" "the app's count of the chunked body"
}
run_test "Content-Length with Transfer-Encoding is 400 and closes the connection (control: each alone, pipelined)" t_cl_and_te

t_two_lengths() {
	hostile 3 'Content-Length: 5\r\nContent-Length: 5\r\n' 'hello'
	refused "two equal Content-Lengths" 400
	hostile 4 'Content-Length: 5\r\nContent-Length: 0\r\n' 'hello'
	refused "two Content-Lengths, 5 then 0" 400
	hostile 5 'Content-Length: 0\r\nContent-Length: 5\r\n' 'hello'
	refused "two Content-Lengths, 0 then 5" 400
	hostile 6 'Content-Length: +5\r\n' 'hello'
	refused "Content-Length +5" 400
	hostile 7 'Content-Length: 5 5\r\n' 'hello'
	refused "Content-Length '5 5'" 400
	hostile 8 'Content-Length: 0x5\r\n' 'hello'
	refused "Content-Length 0x5" 400
	# control
	{
		head_of /sink POST 'Content-Length: 5\r\n'
		printf 'hello'
		head_of "/headers?control-7" GET 'Connection: close\r\n'
	} | send --wait 10
	control "one Content-Length"
}
run_test "two Content-Length headers (equal or not) or a malformed one is 400 and closes the connection (control: one)" t_two_lengths

t_codings() {
	hostile 9 'Transfer-Encoding: gzip\r\n' 'hello'
	refused "Transfer-Encoding gzip" '400|501'
	hostile 10 'Transfer-Encoding: gzip, chunked\r\n' '5\r\nhello\r\n0\r\n\r\n'
	refused "Transfer-Encoding gzip, chunked" '400|501'
	hostile 11 'Transfer-Encoding: chunked, identity\r\n' '5\r\nhello\r\n0\r\n\r\n'
	refused "Transfer-Encoding chunked, identity" '400|501'
	hostile 12 'Transfer-Encoding: xchunked\r\n' '5\r\nhello\r\n0\r\n\r\n'
	refused "Transfer-Encoding xchunked" '400|501'
	hostile 13 'Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n' '5\r\nhello\r\n0\r\n\r\n'
	refused "two Transfer-Encoding: chunked lines" '400|501'
	hostile 14 'Transfer-Encoding : chunked\r\n' '5\r\nhello\r\n0\r\n\r\n'
	refused "whitespace before Transfer-Encoding's colon" 400
	# control: chunked in another case is chunked
	{
		head_of /sink POST 'Transfer-Encoding: Chunked\r\n'
		printf '5\r\nhello\r\n0\r\n\r\n'
		head_of "/headers?control-8" GET 'Connection: close\r\n'
	} | send --wait 10
	control "Transfer-Encoding Chunked"
}
run_test "a Transfer-Encoding other than chunked is 400 or 501, whitespace before a colon 400, and the connection closes (control: Chunked)" t_codings

t_chunk_sizes() {
	local bad n=15
	for bad in 'zz' '-5' '5 5' '0x5' '10000000000000000' ' 5' ''; do
		{
			head_of /sink POST 'Transfer-Encoding: chunked\r\n'
			printf '%s\r\nhello\r\n0\r\n\r\n' "$bad"
			smuggled "$n"
		} | send --wait 10
		refused "chunk size '$bad'" '400'
		n=$((n + 1))
	done
	# a chunk whose data runs past its size (no CRLF where the size ends it)
	{
		head_of /sink POST 'Transfer-Encoding: chunked\r\n'
		printf '3\r\nhello\r\n0\r\n\r\n'
		smuggled 30
	} | send --wait 10
	refused "a chunk longer than its size" '400'
	# controls: extensions and upper-case hex are chunk sizes
	{
		head_of /sink POST 'Transfer-Encoding: chunked\r\n'
		printf 'A;ext=1\r\n0123456789\r\n0\r\n\r\n'
		head_of "/headers?control-3" GET 'Connection: close\r\n'
	} | send --wait 10
	control "a chunk size with an extension"
	assert_contains 'bytes=10 ' "$RAW_OUT" "the app's count of it"
}
run_test "an invalid chunk size (or a chunk longer than its size) is 400 and closes the connection (control: 'A;ext=1')" t_chunk_sizes

t_head_limits() {
	local big
	big=$(head -c 20000 /dev/zero | tr '\0' a)
	{
		head_of /headers GET "X-Big: $big\\r\\n"
		smuggled 31
	} | send --wait 10
	refused "a 20000-byte header line" 431
	{
		head_of /headers GET "$(for i in $(seq 1 200); do printf 'X-N%d: %d\\r\\n' "$i" "$i"; done)"
		smuggled 32
	} | send --wait 10
	refused "200 header lines" '431'
	# control: 8000 bytes and 100 lines pass
	{
		head_of /headers GET "X-Big: ${big:0:8000}\\r\\n$(for i in $(seq 1 100); do printf 'X-N%d: %d\\r\\n' "$i" "$i"; done)"
		head_of "/headers?control-4" GET 'Connection: close\r\n'
	} | send --wait 10
	control "an 8000-byte header and 100 lines"
}
run_test "a request head over the limit (one long line, or too many lines) is 431 and closes the connection (control: 8000 bytes, 100 lines)" t_head_limits

t_fold() {
	{
		head_of /headers GET 'X-A: 1\r\n  folded\r\n'
		smuggled 33
	} | send --wait 10
	refused "an obs-fold line (spaces)" 400
	{
		head_of /headers GET 'X-A: 1\r\n\tfolded\r\n'
		smuggled 34
	} | send --wait 10
	refused "an obs-fold line (a tab)" 400
	{
		head_of /headers GET 'X-A: 1\r\n Transfer-Encoding: chunked\r\n'
		smuggled 35
	} | send --wait 10
	refused "a folded Transfer-Encoding" 400
	{
		head_of /headers GET 'X-A: 1\r\nX-B: 2\r\n'
		head_of "/headers?control-5" GET 'Connection: close\r\n'
	} | send --wait 10
	control "the same lines unfolded"
}
run_test "a header line with obs-fold is 400 and closes the connection (control: unfolded)" t_fold

t_line_ends() {
	printf 'GET /headers?smuggled-41 HTTP/1.1\nHost: %s:%s\nAuthorization: Bearer %s\n\n' \
		"$H" "$PREVIEW_PORT" "$T" | send --wait 5
	refused "a head with bare LF line ends only" 400
	{
		printf 'GET /headers?smuggled-42 HTTP/1.1\r\nHost: %s:%s\r\nX-A: 1\nAuthorization: Bearer %s\r\n\r\n' \
			"$H" "$PREVIEW_PORT" "$T"
		smuggled 43
	} | send --wait 5
	refused "a bare LF inside a CRLF head" 400
	{
		printf 'GET /headers?smuggled-44 HTTP/1.1\r\nHost: %s:%s\r\nX-A: 1\rX-B: 2\r\nAuthorization: Bearer %s\r\n\r\n' \
			"$H" "$PREVIEW_PORT" "$T"
		smuggled 45
	} | send --wait 5
	refused "a bare CR inside a header line" 400
	{
		head_of /headers GET 'X-A: 1\r\nX-B: 2\r\n'
		head_of "/headers?control-9" GET 'Connection: close\r\n'
	} | send --wait 10
	control "the same lines with CRLF"
}
run_test "bare LF or CR line ends are 400 at once and close the connection (control: CRLF)" t_line_ends

t_no_exposure() {
	{
		printf 'GET /headers HTTP/1.1\r\nHost: nosuchlabel.preview.localhost:%s\r\nAuthorization: Bearer %s\r\n\r\n' \
			"$PREVIEW_PORT" "$T"
		smuggled 36
	} | send --wait 10
	refused "a host with no exposure" 404
	{
		printf 'GET /headers HTTP/1.1\r\nAuthorization: Bearer %s\r\n\r\n' "$T"
		smuggled 37
	} | send --wait 10
	refused "no Host" '400|404'
	{
		printf 'GET /headers HTTP/1.1\r\nHost: %s:%s\r\nHost: nosuchlabel.preview.localhost\r\nAuthorization: Bearer %s\r\n\r\n' \
			"$H" "$PREVIEW_PORT" "$T"
		smuggled 38
	} | send --wait 10
	refused "two Hosts" 400
	{
		printf 'GET /headers HTTP/1.1\r\nHost: %s:%s\r\n\r\n' "$H" "$PREVIEW_PORT"
		smuggled 39
	} | send --wait 10
	refused "no token" 401
	{
		printf 'CONNECT %s:%s HTTP/1.1\r\nHost: %s:%s\r\nAuthorization: Bearer %s\r\n\r\n' \
			"$H" "$PREVIEW_PORT" "$H" "$PREVIEW_PORT" "$T"
		smuggled 46
	} | send --wait 10
	refused "CONNECT" 405
	# a second request on the connection for another preview goes to that one (a reverse proxy
	# in front reuses its connections for any) and needs that one's token: the first one's is
	# not carried over
	start_apps "$WS" app2 'preview-app 3001' 3001 || return 1
	expose "$WS" 3001 || return 1
	local h2=$PV_HOST t2=$PV_TOKEN
	{
		head_of /headers
		printf 'GET /headers?smuggled-47 HTTP/1.1\r\nHost: %s:%s\r\nAuthorization: Bearer %s\r\n\r\n' \
			"$h2" "$PREVIEW_PORT" "$T"
		smuggled 48
	} | send --wait 10
	refused "another preview's host on the connection with the first one's token" '200 401' || return 1
	{
		head_of /headers
		printf 'GET /headers?control-10 HTTP/1.1\r\nHost: %s:%s\r\nAuthorization: Bearer %s\r\nConnection: close\r\n\r\n' \
			"$h2" "$PREVIEW_PORT" "$t2"
	} | send --wait 10
	assert_eq "200 200" "$STATUSES" \
		"another preview's host on the connection with its own token, after one answer of the first" || return 1
	app_log "$h2" "$t2" || return 1
	assert_eq 1 "$(grep -c 'control-10' <<<"$APP_LOG")" "port 3001's app answered the second request" || return 1
	assert_eq 0 "$(grep -c 'smuggled-47' <<<"$APP_LOG")" "nor saw the one with the other's token" || return 1
	{
		head_of /headers
		head_of "/headers?control-6" GET 'Connection: close\r\n'
	} | send --wait 10
	control "the exposure's host"
}
run_test "a host with no exposure is 404, no Host or two 400, no token 401 (another preview's token on a kept connection too), CONNECT 405, and each closes the connection (control: the exposure's host; another preview with its own token on the same connection)" t_no_exposure

t_closed_without_eof() {
	# the refused client keeps its side open: the listener still closes within its bound
	{
		head_of /sink POST 'Content-Length: 5\r\nTransfer-Encoding: chunked\r\n'
		printf '0\r\n\r\n'
		smuggled 40
	} | send --wait 15
	refused "Content-Length and Transfer-Encoding, the client silent after" 400
}
run_test "after a refusal the listener closes the connection while the client keeps its side open" t_closed_without_eof

t_silent() {
	# a client that connects and says nothing holds a connection for the head's time (10 s),
	# not the idle time (5 minutes): 1024 of them would hold the listener
	local t0=$SECONDS
	send --wait 20 </dev/null
	note "a silent connection closed after $((SECONDS - t0)) s"
	assert_eq 1 "$CLOSED" "the silent connection closed by the listener" || return 1
	assert_eq '' "$STATUSES" "nothing answered to a request never sent" || return 1
	assert_le $((SECONDS - t0)) 15 "seconds until the silent connection closed"
}
run_test "a connection that never sends a request is closed at the head's time limit" t_silent

t_app_log() {
	app_log "$H" "$T" || return 1
	local smuggled controls
	smuggled=$(grep -c 'smuggled-' <<<"$APP_LOG")
	controls=$(grep -c 'control-' <<<"$APP_LOG")
	note "the app saw $(wc -l <<<"$APP_LOG") requests: $controls controls, $smuggled smuggled"
	assert_eq 0 "$smuggled" "smuggled requests the app saw" ||
		grep 'smuggled-' <<<"$APP_LOG" | head -n 5 | sed 's/^/#   /'
	assert_eq 9 "$controls" "control requests the app saw (the control of the count)"
}
run_test "no smuggled request ever reached the app (its request log; the pipelined controls did)" t_app_log
