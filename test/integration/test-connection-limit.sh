#!/bin/bash
# The connection table (docs/operations.md, "Connections"): --max-connections bounds the open
# client connections of all listeners together; past it a new connection is answered 503 with
# Retry-After and a JSON error at once, never left in the listen backlog. Long-lived requests
# (waitMs long-polls, event streams, WebSockets) hold at most limit - reserve: past that share
# they are refused 503 while short requests and probes are still served. GET /v1/worker shows
# the limit and the counts.
. "$(dirname "$0")/lib.sh"

LIMIT=40
RESERVE=8
SHARE=$((LIMIT - RESERVE))
FILL=$SRC/test/helpers/conn-fill.py
require_controller --max-connections $LIMIT --reserved-connections $RESERVE --max-wait-ms 600000
new_ws WS || exit 1
POLLS=()

# worker_field JQ: the value in GET /v1/worker.
worker_field() {
	api -q GET /v1/worker
	[[ $STATUS == 200 ]] && j "$1"
}

long_lived_is() {
	[[ $(worker_field .connections.longLived) == "$1" ]]
}

t_worker_reports_table() {
	api -q GET /v1/worker
	assert_status 200 worker || return 1
	assert_eq $LIMIT "$(j .limits.maxConnections)" "limits.maxConnections"
	assert_eq $RESERVE "$(j .limits.reservedConnections)" "limits.reservedConnections"
	assert_eq $LIMIT "$(j .connections.limit)" "connections.limit"
	assert_eq $SHARE "$(j .connections.longLivedLimit)" "connections.longLivedLimit"
	# this request itself is open, and nothing long-lived
	assert_le 1 "$(j .connections.open)" "connections.open"
	assert_eq 0 "$(j .connections.longLived)" "connections.longLived"
}

t_long_lived_share() {
	run_start "$WS" "$(json_cmd 'sleep 600' '.timeoutMs=700000')" || return 1
	local run=$RUN i
	for i in $(seq $SHARE); do
		curl -sS --max-time 700 --unix-socket "$SOCK" -o "$TMP/poll-$i" \
			"http://station/v1/workspaces/$WS/commands/$run?waitMs=600000" &
		POLLS+=($!)
	done
	wait_for -t 60 long_lived_is $SHARE ||
		_fail "long-lived count: expected $SHARE, got $(worker_field .connections.longLived)"
	# one more long-poll: refused at once, to be retried
	api -q GET "/v1/workspaces/$WS/commands/$run?waitMs=600000"
	assert_status 503 "a long-poll past the long-lived share"
	assert_eq unavailable "$(j .error.code)" "error code"
	assert_contains "too many long-lived requests" "$(j .error.message)" "message"
	local headers
	headers=$(curl -sS --max-time 30 --unix-socket "$SOCK" -D - -o /dev/null \
		"http://station/v1/workspaces/$WS/commands/$run?waitMs=600000")
	assert_match $'Retry-After: 1\r' "$headers" "Retry-After on the refused long-poll"
	# an event stream is long-lived too
	api -q GET "/v1/workspaces/$WS/commands/$run/output"
	assert_status 503 "an event stream past the long-lived share"
	api -q GET /v1/events
	assert_status 503 "GET /v1/events past the long-lived share"
	# the reserve: probes and short requests are served (positive control for the above)
	api -q GET /v1/ready
	assert_status 200 "GET /v1/ready with the long-lived share full"
	api -q GET "/v1/workspaces/$WS/commands/$run"
	assert_status 200 "a GET without waitMs"
	assert_eq running "$(j .status)" "the run"
	api -q GET "/v1/workspaces/$WS/commands/$run?waitMs=0"
	assert_status 200 "waitMs=0 is not long-lived"
	assert_le 2 "$(worker_field .connections.refusedLongLived)" "refusedLongLived"
}

t_table_full() {
	local out=$TMP/fill.out
	mkfifo "$TMP/release"
	python3 "$FILL" "$SOCK" $((LIMIT + 5)) <"$TMP/release" >"$out" 2>"$TMP/fill.err" &
	local fill=$!
	exec 9>"$TMP/release"
	wait_for -t 120 grep -q '^end' "$out" || _fail "the filler did not finish: $(cat "$TMP/fill.err")"
	local held
	held=$(sed -n 's/^held //p' "$out")
	note "idle connections held with $SHARE long-polls open: $held"
	assert_match '^[0-9]+$' "$held" "the table was found full (not: '$held')"
	assert_le $((held + SHARE)) $LIMIT "connections open before the refusal"
	assert_le $((LIMIT - 2)) $((held + SHARE)) "the table was near its limit when refused"
	assert_contains "HTTP/1.1 503 Service Unavailable" "$(cat "$out")" "status line"
	assert_contains $'Retry-After: 1\r' "$(cat "$out")" "Retry-After"
	assert_contains '"code":"unavailable"' "$(cat "$out")" "error code"
	assert_contains "too many connections (limit $LIMIT)" "$(cat "$out")" "message"
	# from curl too, while the filler holds its connections
	api -q GET /v1/ready
	assert_status 503 "a probe with the whole table full"
	assert_contains "too many connections (limit $LIMIT)" "$(j .error.message)" message
	exec 9>&-
	wait "$fill"
	# positive control: the same probe is served again once the connections are gone
	wait_for -t 60 _controller_ready || _fail "ready again: $STATUS $BODY"
	assert_le 2 "$(worker_field .connections.refused)" "connections.refused"
}

t_long_polls_answered() {
	# ending the run answers every waiting long-poll
	api -q GET "/v1/workspaces/$WS/commands"
	local run
	run=$(j '.commands[0].id')
	api -q POST "/v1/workspaces/$WS/commands/$run/cancel"
	assert_status 200 cancel || return 1
	local pid i=0 bad=0
	for pid in "${POLLS[@]}"; do
		i=$((i + 1))
		wait "$pid"
		[[ $(jq -r .status "$TMP/poll-$i" 2>/dev/null) == cancelled ]] || bad=$((bad + 1))
	done
	POLLS=()
	assert_eq 0 "$bad" "long-polls without the cancelled run"
	wait_for -t 30 long_lived_is 0 || _fail "long-lived count after: $(worker_field .connections.longLived)"
}

run_test "GET /v1/worker shows the connection table" t_worker_reports_table
run_test "long-polls past limit - reserve: 503 with Retry-After; probes still served" \
	t_long_lived_share
run_test "a full table: 503 with Retry-After at once, served again after" t_table_full
run_test "the long-polls held are answered" t_long_polls_answered
for pid in "${POLLS[@]}"; do kill "$pid" 2>/dev/null; done
