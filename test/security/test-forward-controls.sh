#!/bin/bash
# Attack: control characters through the forward to another worker (docs/api.md, "Workers").
# w1 forwards to w8, a recorder (test/integration/forward-recorder.py) that writes down the
# head of every request reaching it. Sent as raw bytes to w1: a bare CR inside a forwarded
# header's value (Accept, Idempotency-Key, a WebSocket's Sec-WebSocket-Protocol), a path
# holding %00 or %0D (libmicrohttpd decodes the path before any route reads it: %00 cut it
# short, /v1/workers/w8/v1/x%00y reached w8 as GET /v1/x) and a query holding %00. Each is
# refused 400 naming the problem, and w8 records nothing; each has its positive control (the
# same request with clean values reaches w8 as sent). The %00 cut is refused on every route:
# /v1/workspaces/ID%00x does not reach ID (control: /v1/workspaces/ID does).
. "$(dirname "$0")/../integration/lib.sh"

free_port() {
	python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

P1=$(free_port)
P8=$(free_port)
REC_LOG=$TMP/recorder.log
: >"$REC_LOG"
python3 "$SRC/test/integration/forward-recorder.py" "$P8" "$REC_LOG" &
REC_PID=$!
trap '_rc=$?; kill "$REC_PID" 2>/dev/null; wait "$REC_PID" 2>/dev/null; (exit $_rc); _cleanup' EXIT
rec_listening() {
	grep -q listening "$REC_LOG"
}
wait_for -t 30 rec_listening || {
	not_ok "the recorder listens"
	exit 1
}

require_controller --worker w1 --adapters host --listen "tcp:127.0.0.1:$P1" \
	--workers "w1=http://127.0.0.1:$P1,w8=http://127.0.0.1:$P8"
TOKEN=$(tr -d '\n' <"$ROOT/admin.token")

# raw FORMAT [ARGS...]: the printf-formatted request head (and body) sent to w1 as bytes; its
# answer's STATUS and BODY.
raw() {
	local out
	# shellcheck disable=SC2059
	out=$(printf "$@" | timeout 60 python3 -c '
import socket, sys
data = sys.stdin.buffer.read()
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=30)
s.sendall(data)
got = b""
while b"\r\n\r\n" not in got:
    chunk = s.recv(65536)
    if not chunk:
        break
    got += chunk
head, _, body = got.partition(b"\r\n\r\n")
length = [int(l.split(b":", 1)[1]) for l in head.split(b"\r\n")[1:]
          if l.lower().startswith(b"content-length:")]
while length and len(body) < length[0]:
    chunk = s.recv(65536)
    if not chunk:
        break
    body += chunk
line = head.split(b"\r\n", 1)[0].split(b" ")
print(line[1].decode() if len(line) > 1 else "000")
sys.stdout.write(body.decode("latin-1"))
' "$P1")
	STATUS=$(head -n 1 <<<"$out")
	BODY=$(tail -n +2 <<<"$out")
}

# The head of the request line and headers every case shares.
HEAD="Host: 127.0.0.1\r\nAuthorization: Bearer $TOKEN\r\nConnection: close\r\n"

recorded() {
	grep -c '"head"' "$REC_LOG"
}
# last_head: the head of the last request w8 recorded.
last_head() {
	tail -n 1 "$REC_LOG" | jq -r .head
}

t_header_cr() {
	local before
	# Positive control: clean values reach w8 as sent.
	before=$(recorded)
	raw "GET /v1/workers/w8/v1/x HTTP/1.1\r\n${HEAD}Accept: application/json\r\n\r\n"
	assert_eq 200 "$STATUS" "a clean Accept is forwarded: $BODY" || return 1
	assert_eq $((before + 1)) "$(recorded)" "w8 got it"
	assert_eq "GET /v1/x HTTP/1.1" "$(last_head | head -n 1 | tr -d '\r')" "its request line"
	assert_contains "Accept: application/json" "$(last_head)" "its Accept"
	before=$(recorded)
	raw "GET /v1/workers/w8/v1/x HTTP/1.1\r\n${HEAD}Accept: text/plain\rX-Injected: 1\r\n\r\n"
	assert_eq 400 "$STATUS" "a bare CR in Accept: $BODY"
	assert_eq "header Accept holds a control character (0x0D): nothing is forwarded to worker w8" \
		"$(j .error.message)" "the message names it"
	assert_eq "$before" "$(recorded)" "w8 got nothing"
}

t_idempotency_cr() {
	local before body='{"adapter":"host"}'
	before=$(recorded)
	raw "POST /v1/workers/w8/v1/workspaces HTTP/1.1\r\n${HEAD}Content-Type: application/json\r\nIdempotency-Key: k-1\r\nContent-Length: ${#body}\r\n\r\n$body"
	assert_eq 200 "$STATUS" "a clean Idempotency-Key is forwarded: $BODY" || return 1
	assert_eq $((before + 1)) "$(recorded)" "w8 got it"
	assert_contains "Idempotency-Key: k-1" "$(last_head)" "its Idempotency-Key"
	before=$(recorded)
	raw "POST /v1/workers/w8/v1/workspaces HTTP/1.1\r\n${HEAD}Content-Type: application/json\r\nIdempotency-Key: k-2\rX: y\r\nContent-Length: ${#body}\r\n\r\n$body"
	assert_eq 400 "$STATUS" "a bare CR in Idempotency-Key: $BODY"
	assert_eq "header Idempotency-Key holds a control character (0x0D): nothing is forwarded to worker w8" \
		"$(j .error.message)" "the message names it"
	assert_eq "$before" "$(recorded)" "w8 got nothing"
}

WS_HEAD="Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
t_websocket_cr() {
	local before
	before=$(recorded)
	raw "GET /v1/workers/w8/v1/events HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer $TOKEN\r\n${WS_HEAD}Sec-WebSocket-Protocol: station-sandbox\r\n\r\n"
	# w8 answers 200, not 101: its answer comes back as it is.
	assert_eq 200 "$STATUS" "a clean upgrade reaches w8: $BODY" || return 1
	assert_eq $((before + 1)) "$(recorded)" "w8 got it"
	assert_contains "Sec-WebSocket-Protocol: station-sandbox" "$(last_head)" "its offer"
	before=$(recorded)
	raw "GET /v1/workers/w8/v1/events HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer $TOKEN\r\n${WS_HEAD}Sec-WebSocket-Protocol: station-sandbox\rX-Injected: 1\r\n\r\n"
	assert_eq 400 "$STATUS" "a bare CR in Sec-WebSocket-Protocol: $BODY"
	assert_eq "header Sec-WebSocket-Protocol holds a control character (0x0D): nothing is forwarded to worker w8" \
		"$(j .error.message)" "the message names it"
	assert_eq "$before" "$(recorded)" "w8 got nothing"
}

t_path_nul() {
	local before
	before=$(recorded)
	raw "GET /v1/workers/w8/v1/x%%41y HTTP/1.1\r\n${HEAD}\r\n"
	assert_eq 200 "$STATUS" "an escaped letter is forwarded decoded: $BODY" || return 1
	assert_eq $((before + 1)) "$(recorded)" "w8 got it"
	assert_eq "GET /v1/xAy HTTP/1.1" "$(last_head | head -n 1 | tr -d '\r')" "the path w8 got"
	before=$(recorded)
	raw "GET /v1/workers/w8/v1/x%%00y HTTP/1.1\r\n${HEAD}\r\n"
	assert_eq 400 "$STATUS" "%00 in the path: $BODY"
	assert_eq "the path holds a control character (%00)" "$(j .error.message)" "the message"
	raw "GET /v1/workers/w8/v1/x%%0d%%0aX:%%20y HTTP/1.1\r\n${HEAD}\r\n"
	assert_eq 400 "$STATUS" "%0d%0a in the path: $BODY"
	assert_eq "the path holds a control character (%0D)" "$(j .error.message)" "the message"
	assert_eq "$before" "$(recorded)" "w8 got nothing"
}

t_query_nul() {
	local before
	before=$(recorded)
	raw "GET /v1/workers/w8/v1/x?a=b%%01c HTTP/1.1\r\n${HEAD}\r\n"
	assert_eq 200 "$STATUS" "a query with %01 is forwarded: $BODY" || return 1
	assert_eq $((before + 1)) "$(recorded)" "w8 got it"
	assert_eq "GET /v1/x?a=b%01c HTTP/1.1" "$(last_head | head -n 1 | tr -d '\r')" "the query w8 got, escaped"
	before=$(recorded)
	raw "GET /v1/workers/w8/v1/x?a=b%%00c HTTP/1.1\r\n${HEAD}\r\n"
	assert_eq 400 "$STATUS" "%00 in the query: $BODY"
	assert_eq 'query parameter "a" holds a NUL (%00)' "$(j .error.message)" "the message"
	assert_eq a "$(j .error.field)" "the field"
	assert_eq "$before" "$(recorded)" "w8 got nothing"
}

t_local_nul() {
	local id
	api -q POST /v1/workspaces '{"adapter":"host"}'
	assert_eq 201 "$STATUS" "a workspace on w1: $BODY" || return 1
	id=$(j .id)
	raw "GET /v1/workspaces/$id HTTP/1.1\r\n${HEAD}\r\n"
	assert_eq 200 "$STATUS" "GET /v1/workspaces/$id (control)"
	assert_eq "$id" "$(j .id)" "the workspace"
	raw "GET /v1/workspaces/$id%%00x HTTP/1.1\r\n${HEAD}\r\n"
	assert_eq 400 "$STATUS" "GET /v1/workspaces/$id%00x does not reach $id: $BODY"
	assert_eq "the path holds a control character (%00)" "$(j .error.message)" "the message"
	raw "DELETE /v1/workspaces/$id%%00x HTTP/1.1\r\n${HEAD}\r\n"
	assert_eq 400 "$STATUS" "nor does DELETE"
	api -q GET "/v1/workspaces/$id"
	assert_eq 200 "$STATUS" "the workspace is still there"
	api -q DELETE "/v1/workspaces/$id"
	assert_eq 200 "$STATUS" "removed"
}

run_test "a bare CR in a forwarded Accept is refused, nothing reaches the worker" t_header_cr
run_test "a bare CR in a forwarded Idempotency-Key is refused" t_idempotency_cr
run_test "a bare CR in a relayed WebSocket's offer is refused" t_websocket_cr
run_test "a control character in a forwarded path is refused (%00 no longer cuts it)" t_path_nul
run_test "a NUL in a forwarded query is refused" t_query_nul
run_test "a %00 cuts no route's path: /v1/workspaces/ID%00x is not ID's" t_local_nul
