#!/bin/bash
# The usage history's clients (docs/cli.md, "usage"): `station-sandbox usage WS` prints a table
# whose rows show a host workspace's CPU loop (cpu > 0 in at least 2 of them) and its --json is
# the API's answer (GET /v1/workspaces/{id}/usage with the same since and step); `usage --worker
# NAME` the worker's totals, as GET /v1/worker/usage; a malformed --since or --step is a usage
# error (exit 64) naming it, with a well-formed one as control; through a worker list the
# workspace's id routes to its worker (a second, down worker in the list is never asked) and
# --worker names one of the list.
. "$(dirname "$0")/lib.sh"

PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
DEAD_PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
require_controller --worker u1 --listen "tcp:127.0.0.1:$PORT" --usage-interval-ms 200

new_ws BUSY '{"adapter":"host"}' || exit 1
run_start "$BUSY" "$(json_cmd 'while :; do :; done')" || exit 1

# The API's history of the last minute, 200 ms a point, into BODY.
history() {
	api -q GET "/v1/workspaces/$BUSY/usage?since=${1:-60s}&step=200ms"
	[[ $STATUS == 200 ]]
}

_busy_seen() {
	history && (($(j '[.samples[] | select(.cpu > 0)] | length') >= 10))
}
if ! wait_for -t 30 _busy_seen; then
	not_ok "the CPU loop shows in the history" "HTTP $STATUS: $(j '[.samples[-5:][]? | {t, cpu}]')"
	exit 1
fi

# A time in the API's form (RFC 3339, milliseconds, UTC) MS milliseconds since the epoch.
iso_ms() {
	date -u -d "@$(($1 / 1000)).$(printf '%03d' $(($1 % 1000)))" +%Y-%m-%dT%H:%M:%S.%3NZ
}

# JSON with only the points that began before the time CUT (ISO): those a later sample can no
# longer change.
settled() {
	jq -S --arg cut "$1" '.samples |= map(select(.t < $cut))' <<<"$2"
}

t_table() {
	local out rows busy
	out=$(cli usage "$BUSY" --since 60s --step 200ms) || {
		_fail "usage exited $?"
		return 1
	}
	assert_match '^TIME +CPU +MEM +PIDS +RX +TX$' "$(head -n 1 <<<"$out")" "the header" || return 1
	rows=$(tail -n +2 <<<"$out")
	assert_match '^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:.]+Z +[0-9]+\.[0-9]{2} +[0-9.]+(B|KiB|MiB|GiB) +[0-9]+ +[0-9.]+(B|KiB|MiB) +[0-9.]+(B|KiB|MiB)$' \
		"$(tail -n 1 <<<"$rows")" "a row" || return 1
	busy=$(awk '$2 > 0' <<<"$rows" | wc -l)
	note "usage: $(wc -l <<<"$rows") rows, $busy with cpu > 0; the last: $(tail -n 1 <<<"$rows")"
	assert_le 2 "$busy" "rows with cpu > 0"
}
run_test "usage WS prints a table with the CPU loop in it" t_table

# --json against the API, both asked from the same absolute since, compared on the points that
# began at least a second before either was asked.
t_json() {
	local now since cut mine
	now=$(date +%s%3N)
	since=$((now - 20000))
	cut=$(iso_ms $((now - 1000)))
	mine=$(cli usage "$BUSY" --since "$since" --step 200ms --json) || {
		_fail "usage --json exited $?"
		return 1
	}
	history "$since" || return 1
	assert_le 2 "$(j '[.samples[] | select(.cpu > 0)] | length' "$(settled "$cut" "$mine")")" \
		"settled points with cpu > 0" || return 1
	assert_eq "$(settled "$cut" "$BODY")" "$(settled "$cut" "$mine")" "usage --json and the API" ||
		return 1
	assert_eq "$BUSY" "$(j .workspaceId "$mine")" "workspaceId"
}
run_test "usage WS --json is the API's answer" t_json

t_worker() {
	local now cut mine out
	now=$(date +%s%3N)
	cut=$(iso_ms $((now - 1000)))
	mine=$(cli usage --worker u1 --since "$((now - 20000))" --step 1s --json) || {
		_fail "usage --worker u1 --json exited $?"
		return 1
	}
	api -q GET "/v1/worker/usage?since=$((now - 20000))&step=1s"
	assert_status 200 "GET /v1/worker/usage" || return 1
	assert_eq "$(settled "$cut" "$BODY")" "$(settled "$cut" "$mine")" "usage --worker --json and the API" ||
		return 1
	assert_le 2 "$(j '[.samples[] | select(.cpu > 0)] | length' "$mine")" "worker points with cpu > 0" ||
		return 1
	out=$(cli usage --worker u1 --since 30s) || {
		_fail "usage --worker u1 exited $?"
		return 1
	}
	assert_match '^TIME +CPU' "$out" "the worker's table" || return 1
	# A name that is not this controller's
	out=$(cli usage --worker u9 2>&1)
	assert_eq 1 "$?" "usage --worker u9 on worker u1" || return 1
	assert_contains "--worker u9: the controller at unix:$SOCK is worker 'u1'" "$out"
}
run_test "usage --worker NAME is the worker's totals, as GET /v1/worker/usage" t_worker

# usage_error WHAT ARGS...: the CLI exits 64 naming WHAT, and sends nothing.
usage_error() {
	local what=$1 out rc
	shift
	out=$(cli usage "$@" 2>&1)
	rc=$?
	assert_eq 64 "$rc" "usage $* exit status" || return 1
	assert_contains "station-sandbox usage: $what" "$out" "usage $*" || return 1
	assert_contains "usage: station-sandbox usage (WS | --worker NAME)" "$out" "the usage line"
}

t_bad_since() {
	usage_error "--since '2x': want an RFC 3339 time" "$BUSY" --since 2x || return 1
	usage_error "--since '2026-13-01T00:00:00Z'" "$BUSY" --since 2026-13-01T00:00:00Z || return 1
	usage_error "--since '1d'" --worker u1 --since 1d || return 1
	usage_error "--step '50ms': want a duration from 100ms to 24h" "$BUSY" --step 50ms || return 1
	usage_error "--step '25h'" "$BUSY" --step 25h || return 1
	usage_error "WS or --worker NAME is needed" --since 1h || return 1
	usage_error "WS or --worker NAME, not both" "$BUSY" --worker u1 || return 1
	# the controls: each form the API takes
	local t
	for t in 30m 90s "$(iso_ms $(($(date +%s%3N) - 5000)))" "$(($(date +%s%3N) - 5000))"; do
		cli usage "$BUSY" --since "$t" --step 1m >/dev/null || {
			_fail "usage --since $t exited $?"
			return 1
		}
	done
}
run_test "a malformed --since or --step is a usage error naming it" t_bad_since

# A worker list: u1 (this controller, over TCP with its token) and u2, which nothing answers.
printf 'u1 http://127.0.0.1:%s %s\nu2 http://127.0.0.1:%s\n' "$PORT" "$ROOT/admin.token" \
	"$DEAD_PORT" >"$TMP/workers"
listed() {
	STATION_WORKERS_FILE=$TMP/workers "$CLI_BIN" "$@"
}

t_workers() {
	local out
	assert_match '^u1-' "$BUSY" "the workspace's id names its worker" || return 1
	out=$(listed usage "$BUSY" --since 10s --json) || {
		_fail "usage through the worker list exited $?"
		return 1
	}
	assert_eq "$BUSY" "$(j .workspaceId "$out")" "the history through the list" || return 1
	out=$(listed usage --worker u1 --since 10s) || {
		_fail "usage --worker u1 through the worker list exited $?"
		return 1
	}
	assert_match '^TIME +CPU' "$out" "u1's totals through the list" || return 1
	out=$(listed usage --worker u3 2>&1)
	assert_eq 64 "$?" "usage --worker u3, not in the list" || return 1
	assert_contains "--worker u3: no such worker in the worker list (workers:u1,u2)" "$out" || return 1
	out=$(listed usage --worker u2 2>&1)
	assert_eq 2 "$?" "usage --worker u2, down" || return 1
	assert_contains "worker u2 (http://127.0.0.1:$DEAD_PORT)" "$out"
}
run_test "through a worker list, WS routes to its worker and --worker picks one" t_workers

api -q POST "/v1/workspaces/$BUSY/commands/$RUN/cancel"
