#!/bin/bash
# GET /metrics (docs/operations.md, "Metrics"): a scrape taken while a run, a service and a
# create are in flight passes `promtool check metrics`; each counter moves by the expected
# amount after a known sequence of calls; a tenant's token sees its own workspaces' series and
# nothing worker-wide (two tenants, the admin's scrape with both as control); the
# per-workspace series stop at --metrics-max-workspaces, the rest counted; HEAD and the
# content type; every metric the shipped Grafana dashboard queries is in a real scrape.
. "$(dirname "$0")/container-lib.sh"

PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
URL=http://127.0.0.1:$PORT
MAX_WS=3

if ! command -v promtool >/dev/null; then
	not_ok "promtool is installed" "apt-get install prometheus (scripts/install-deps)"
	exit 1
fi
require_container_controller --listen "tcp:127.0.0.1:$PORT" --tenant-images 'busybox@*' \
	--tenant-networks none --metrics-max-workspaces "$MAX_WS"

# scrape FILE [TOKEN]: GET /metrics into FILE (the unix socket, or TCP with TOKEN); STATUS.
scrape() {
	local out=$1 token=${2-}
	if [[ -n $token ]]; then
		STATUS=$(curl -sS --max-time 30 -o "$out" -w '%{http_code}' \
			-H "Authorization: Bearer $token" "$URL/metrics" 2>/dev/null) || STATUS=000
	else
		STATUS=$(curl -sS --max-time 30 -o "$out" -w '%{http_code}' --unix-socket "$SOCK" \
			http://station/metrics 2>/dev/null) || STATUS=000
	fi
}

# val FILE SERIES: the value of the sample SERIES (name and labels as written), or "absent".
val() {
	awk -v s="$2" 'index($0, s " ") == 1 { print substr($0, length(s) + 2); found = 1; exit }
		END { if (!found) print "absent" }' "$1"
}

# delta NAME A B SERIES EXPECTED: SERIES moved by EXPECTED between scrapes A and B (a request
# series appears at its first request: absent before counts as 0).
delta() {
	local a b
	a=$(val "$2" "$4") b=$(val "$3" "$4")
	[[ $a == absent && $4 == station_http_* ]] && a=0
	if [[ $a == absent || $b == absent ]]; then
		_fail "$1: $4 absent (before: $a, after: $b)"
		return 1
	fi
	assert_eq "$5" "$(python3 -c "print(round($b - $a, 6))" | sed 's/\.0$//')" "$1: $4"
}

# tapi TOKEN METHOD PATH [BODY]: one request over TCP with TOKEN; sets STATUS and BODY.
tapi() {
	local args=(-sS --max-time 90 -X "$2" -o "$TMP/tbody" -w '%{http_code}'
		-H "Authorization: Bearer $1")
	if [[ $# -ge 4 ]]; then
		printf '%s' "$4" >"$TMP/treq"
		args+=(-H 'Content-Type: application/json' --data-binary "@$TMP/treq")
	fi
	STATUS=$(curl "${args[@]}" "$URL$3" 2>/dev/null) || STATUS=000
	BODY=$(cat "$TMP/tbody")
}

new_token() {
	api -q POST /v1/tokens "$2"
	[[ $STATUS == 201 ]] || {
		diag "token create: HTTP $STATUS $(_short "$BODY")"
		return 1
	}
	printf -v "$1" '%s' "$(j .token)"
}

new_ws WH || exit 1

# A run and a service on WH, and a container create under way, all at the time of one scrape.
_inflight_seen() {
	scrape "$TMP/inflight.txt"
	[[ $STATUS == 200 ]] || return 1
	[[ $(val "$TMP/inflight.txt" 'station_workspaces{state="creating",adapter="container"}') == 1 ]] &&
		(($(val "$TMP/inflight.txt" station_commands_running) >= 1)) &&
		(($(val "$TMP/inflight.txt" station_services) >= 1))
}
t_promtool_in_flight() {
	run_start "$WH" '{"command":"sleep 60"}' || return 1
	RUN_LONG=$RUN
	api -q POST "/v1/workspaces/$WH/services" '{"name":"svc","command":"sleep 1000"}'
	assert_eq 201 "$STATUS" "service create" || return 1
	curl -sS --max-time 120 --unix-socket "$SOCK" -o "$TMP/bg-create" -H 'Content-Type: application/json' \
		--data-binary "$(cws_body)" http://station/v1/workspaces &
	local bg=$!
	if ! wait_for -t 60 _inflight_seen; then
		_fail "no scrape showed a create, a run and a service in flight at once"
		diag "$(grep -E '^station_(workspaces|commands_running|services) ' "$TMP/inflight.txt")"
		wait "$bg"
		return 1
	fi
	wait "$bg"
	WC=$(jq -r .id "$TMP/bg-create")
	[[ $WC == "$WORKER"-* ]] || _fail "the background create: $(cat "$TMP/bg-create")"
	WORKSPACES+=("$WC")
	local out
	out=$(promtool check metrics <"$TMP/inflight.txt" 2>&1)
	assert_eq 0 "$?" "promtool check metrics exit status" || diag "$out"
	assert_eq "" "$out" "promtool check metrics says nothing"
}
run_test "promtool check metrics passes on a scrape with a run, a service and a create in flight" \
	t_promtool_in_flight

t_counters() {
	local a=$TMP/a.txt b=$TMP/b.txt
	scrape "$a"
	run_cmd "$WH" 'echo -n hello' || return 1
	run_cmd "$WH" 'echo -n abc >&2; exit 3' || return 1
	run_cmd "$WH" 'sleep 5' '.timeoutMs=300' || return 1
	assert_eq timed_out "$(j .status)" "the run with timeoutMs 300"
	run_start "$WH" '{"command":"sleep 60"}' || return 1
	api -q POST "/v1/workspaces/$WH/commands/$RUN/cancel"
	run_wait "$WH" "$RUN" || return 1
	assert_eq cancelled "$(j .status)" "the cancelled run"
	api -q GET "/v1/workspaces/$WORKER-nosuchworkspace"
	assert_eq 404 "$STATUS" "GET of a missing workspace"
	new_ws WH2 || return 1
	scrape "$b"
	delta counters "$a" "$b" station_runs_started_total 4
	delta counters "$a" "$b" 'station_runs_ended_total{status="exited"}' 2
	delta counters "$a" "$b" 'station_runs_ended_total{status="timed_out"}' 1
	delta counters "$a" "$b" 'station_runs_ended_total{status="cancelled"}' 1
	delta counters "$a" "$b" 'station_runs_ended_total{status="lost"}' 0
	delta counters "$a" "$b" station_run_duration_seconds_count 4
	delta counters "$a" "$b" 'station_run_output_bytes_total{stream="stdout"}' 5
	delta counters "$a" "$b" 'station_run_output_bytes_total{stream="stderr"}' 3
	delta counters "$a" "$b" 'station_workspace_creates_total{result="ready"}' 1
	delta counters "$a" "$b" 'station_workspace_creates_total{result="failed"}' 0
	delta counters "$a" "$b" station_workspace_create_duration_seconds_count 1
	delta counters "$a" "$b" \
		'station_http_requests_total{route="/v1/workspaces/{id}/commands",method="POST",code="2xx"}' 4
	delta counters "$a" "$b" \
		'station_http_requests_total{route="/v1/workspaces/{id}/commands/{name}/cancel",method="POST",code="2xx"}' 1
	delta counters "$a" "$b" \
		'station_http_request_duration_seconds_count{route="/v1/workspaces/{id}/commands",method="POST"}' 4
	# the scrape before was counted once it ended; this one is not yet
	delta counters "$a" "$b" 'station_http_requests_total{route="/metrics",method="GET",code="2xx"}' 1
	assert_eq 1 "$(val "$b" 'station_http_requests_total{route="/v1/workspaces/{id}",method="GET",code="4xx"}')" \
		"the 404 counted under its route template"
	if grep -q "$WH" <(grep '^station_http' "$b"); then
		_fail "a request series names a workspace id"
	fi
}
run_test "each counter moves by the expected amount after a known sequence of calls" t_counters

new_token TA '{"name":"a","scope":"tenant","tenant":"tenant-a"}' &&
	new_token TB '{"name":"b","scope":"tenant","tenant":"tenant-b"}' &&
	new_token TR '{"name":"r","scope":"read"}' || {
	not_ok "tokens are made" "see the diagnostics above"
	exit 1
}
tapi "$TA" POST /v1/workspaces "$(jq -nc --arg i "$IMAGE" '{image: $i}')"
WA=$(j .id)
[[ $STATUS == 201 ]] && WORKSPACES+=("$WA") || not_ok "tenant a creates" "HTTP $STATUS $(_short "$BODY")"
tapi "$TB" POST /v1/workspaces "$(jq -nc --arg i "$IMAGE" '{image: $i}')"
WB=$(j .id)
[[ $STATUS == 201 ]] && WORKSPACES+=("$WB") || not_ok "tenant b creates" "HTTP $STATUS $(_short "$BODY")"
tapi "$TB" POST "/v1/workspaces/$WB/commands?waitMs=60000" '{"command":"echo b"}'

# tenant_view NAME TOKEN OWN OTHER TENANT: the token's scrape has OWN's series, not OTHER's,
# nothing worker-wide, and counts one workspace of its own.
tenant_view() {
	local f=$TMP/$1.txt labels
	scrape "$f" "$2"
	assert_eq 200 "$STATUS" "$1: GET /metrics" || return 1
	labels="workspace=\"$3\",tenant=\"$5\",worker=\"$WORKER\""
	assert_ne absent "$(val "$f" "station_workspace_cpu_seconds_total{$labels}")" "$1: its CPU"
	assert_ne absent "$(val "$f" "station_workspace_memory_bytes{$labels}")" "$1: its memory"
	assert_ne absent "$(val "$f" "station_workspace_pids{$labels}")" "$1: its pids"
	if grep -q -e "$4" -e "$WH" -e "$WC" "$f"; then
		_fail "$1: another's workspace shows: $(grep -e "$4" -e "$WH" -e "$WC" "$f" | head -3)"
	fi
	local wide
	wide=$(grep -E '^station_(runs_|run_|http_|websockets|event_loop|workspace_create|pool_|image_store|agent_reconnects|snapshots|fork)' "$f" | head -3)
	assert_eq "" "$wide" "$1: no worker-wide series"
	assert_eq 1 "$(awk '/^station_workspaces\{/ { n += $2 } END { print n }' "$f")" \
		"$1: station_workspaces counts its own"
	assert_eq "" "$(promtool check metrics <"$f" 2>&1)" "$1: promtool check metrics"
}
t_tenants() {
	tenant_view tenant-a "$TA" "$WA" "$WB" tenant-a
	tenant_view tenant-b "$TB" "$WB" "$WA" tenant-b
	# control: the operator's view (the unix socket, and a read token) has both, and more
	local f
	for f in admin read; do
		if [[ $f == admin ]]; then scrape "$TMP/$f.txt"; else scrape "$TMP/$f.txt" "$TR"; fi
		assert_eq 200 "$STATUS" "$f: GET /metrics"
		assert_ne absent "$(val "$TMP/$f.txt" "station_workspace_pids{workspace=\"$WA\",tenant=\"tenant-a\",worker=\"$WORKER\"}")" "$f sees a's"
		assert_ne absent "$(val "$TMP/$f.txt" "station_workspace_pids{workspace=\"$WB\",tenant=\"tenant-b\",worker=\"$WORKER\"}")" "$f sees b's"
		assert_ne absent "$(val "$TMP/$f.txt" station_runs_started_total)" "$f sees worker-wide series"
	done
}
run_test "a tenant's token sees only its workspaces' series (two tenants, the operator's as control)" t_tenants

t_bounded() {
	local f=$TMP/bounded.txt n shown
	api -q GET /v1/workspaces
	n=$(j '.workspaces | length')
	assert_eq 5 "$n" "workspaces made" || return 1
	scrape "$f"
	shown=$(grep -c '^station_workspace_cpu_seconds_total{' "$f")
	assert_eq "$MAX_WS" "$shown" "per-workspace CPU series (--metrics-max-workspaces $MAX_WS)"
	assert_eq $((n - MAX_WS)) "$(val "$f" station_metrics_workspaces_omitted)" "omitted counted"
}
run_test "per-workspace series stop at --metrics-max-workspaces, the rest counted" t_bounded

t_head() {
	local h=$TMP/head.txt
	curl -sS --max-time 30 -I -o "$h" --unix-socket "$SOCK" http://station/metrics
	assert_match '^HTTP/1.1 200' "$(head -n 1 "$h")" "HEAD /metrics"
	assert_match '^Content-Type: text/plain; version=0.0.4' "$(grep -i '^content-type' "$h" | tr -d '\r')" \
		"content type"
	STATUS=$(curl -sS -o /dev/null -w '%{http_code}' "$URL/metrics")
	assert_eq 401 "$STATUS" "TCP without a token"
	STATUS=$(curl -sS -o /dev/null -w '%{http_code}' -X POST -H "Authorization: Bearer $TR" "$URL/metrics")
	assert_eq 405 "$STATUS" "POST /metrics"
}
run_test "HEAD /metrics, its content type, a token over TCP" t_head

t_grafana() {
	python3 - "$SRC/deploy/grafana/station-sandbox.json" "$TMP/admin.txt" <<'PY'
import json, re, sys
board = json.load(open(sys.argv[1]))
# a sample's name, or a family the scrape declares (# TYPE) with no sample here (pools, when
# none is configured; network bytes, of bridged workspaces only)
names = set()
for line in open(sys.argv[2]):
    m = re.match(r'# TYPE (\S+) (\S+)', line)
    if m:
        names.add(m.group(1))
        if m.group(2) == 'histogram':
            names.update(m.group(1) + s for s in ('_bucket', '_sum', '_count'))
    elif line and not line.startswith('#'):
        names.add(re.match(r'[a-zA-Z_:][a-zA-Z0-9_:]*', line).group(0))
def panels(ps):
    for p in ps:
        yield p
        yield from panels(p.get('panels', []))
exprs = [t['expr'] for p in panels(board['panels']) for t in p.get('targets', []) if 'expr' in t]
assert len(exprs) >= 10, 'only %d queries' % len(exprs)
# the preview listener's series: this controller has none (test-metrics-net checks them)
missing = sorted({m for e in exprs for m in re.findall(r'\bstation_[a-z0-9_]+', e)
                  if not m.startswith('station_preview_')} - names)
if missing:
    sys.exit('queried but not in a scrape: ' + ', '.join(missing))
print('# %d queries, every metric in the scrape' % len(exprs))
PY
}
run_test "the Grafana dashboard queries only metrics a real scrape has" t_grafana

api -q POST "/v1/workspaces/$WH/commands/$RUN_LONG/cancel"
exit $((_n_fail > 0))
