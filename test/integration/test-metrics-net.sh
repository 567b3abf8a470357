#!/bin/bash
# run-all: exclusive: net-world: the outside worlds of net-world.sh (documentation networks, routes, nft tables) are few per machine
# GET /metrics (docs/operations.md, "Metrics"): the firewall's and the preview listener's series.
#   egress    a restricted workspace's station_egress_allowed_total moves by 1 for one allowed
#             TCP connection and its station_egress_denied_total not; one refused UDP datagram
#             moves denied by 1 and allowed not; both equal GET …/network's counters; a
#             workspace without a network has neither series
#   preview   a request with a wrong token moves station_preview_requests_total{result=
#             "unauthorized"} by 1 and proxied not; one with the right token moves proxied by 1
#             and unauthorized not; an unknown host moves not_found by 1; the exposures gauge
#             counts the exposure; every connection closed, connections open is 0
#   promtool  the scrape with all of these passes `promtool check metrics`
. "$(dirname "${BASH_SOURCE[0]}")/container-lib.sh"
. "$(dirname "${BASH_SOURCE[0]}")/net-world.sh"
. "$(dirname "${BASH_SOURCE[0]}")/preview-lib.sh"

NET_RANGE=${NET_RANGE:-10.$((212 + $$ % 8)).$((($$ / 8) % 250)).0/24}
NET_BRIDGE=stn$(($$ % 1000000))

if ! command -v promtool >/dev/null; then
	not_ok "promtool is installed" "apt-get install prometheus (scripts/install-deps)"
	exit 1
fi
net_prereqs "$NET_RANGE"
preview_prereqs
container_build_image || {
	not_ok "busybox image builds" "see the diagnostics above"
	exit 1
}
if ! world_up; then
	not_ok "world comes up" "see the diagnostics above"
	exit 1
fi
NET_FLAGS=("$NET_FLAG_RANGE" "$NET_RANGE" "$NET_FLAG_BRIDGE" "$NET_BRIDGE" "$NET_FLAG_DNS" "$WORLD_DNS:53" "${NET_WORLD_FLAGS[@]}")
require_container_controller "${NET_FLAGS[@]}" --preview-listen "tcp:127.0.0.1:$PREVIEW_PORT"

# scrape FILE: GET /metrics over the unix socket into FILE; STATUS.
scrape() {
	STATUS=$(curl -sS --max-time 30 -o "$1" -w '%{http_code}' --unix-socket "$SOCK" \
		http://station/metrics 2>/dev/null) || STATUS=000
	[[ $STATUS == 200 ]] || _fail "GET /metrics: HTTP $STATUS"
}

# val FILE SERIES: the value of the first sample whose name and labels begin with SERIES (a
# whole name, or a name and its first labels up to a comma), or "absent".
val() {
	awk -v s="$2" 'index($0, s) == 1 && substr($0, length(s) + 1, 1) ~ /[ {a-z]/ {
			print $NF; found = 1; exit }
		END { if (!found) print "absent" }' "$1"
}

# delta A B SERIES EXPECTED WHAT: SERIES moved by EXPECTED between scrapes A and B.
delta() {
	local a b
	a=$(val "$1" "$3") b=$(val "$2" "$3")
	if [[ $a == absent || $b == absent ]]; then
		_fail "$5: $3 absent (before: $a, after: $b)"
		return 1
	fi
	assert_eq "$4" "$((b - a))" "$5: $3 ($a then $b)"
}

WS_R=
t_egress() {
	local policy ws_none allowed denied
	policy=$(jq -nc --arg e "$WORLD_ECHO/32" --argjson p "$WORLD_ECHO_PORT" \
		'{allow: [{cidr: $e, ports: [$p], proto: "tcp"}]}')
	net_ws WS_R restricted "$policy" || return 1
	new_cws ws_none '{"network":"none"}' || return 1
	allowed="station_egress_allowed_total{workspace=\"$WS_R\","
	denied="station_egress_denied_total{workspace=\"$WS_R\","

	scrape "$TMP/e0.txt" || return 1
	nprobe "$WS_R" tcp "$WORLD_ECHO" "$WORLD_ECHO_PORT" || return 1
	assert_eq "connect=ok" "$(grep '^connect=' <<<"$PROBE_OUT")" "the allowed connection" || return 1
	scrape "$TMP/e1.txt" || return 1
	delta "$TMP/e0.txt" "$TMP/e1.txt" "$allowed" 1 "one allowed connection"
	delta "$TMP/e0.txt" "$TMP/e1.txt" "$denied" 0 "one allowed connection"

	nprobe "$WS_R" udp "$WORLD_OTHER" "$WORLD_UDP_PORT" refused-datagram || return 1
	scrape "$TMP/e2.txt" || return 1
	delta "$TMP/e1.txt" "$TMP/e2.txt" "$denied" 1 "one refused datagram"
	delta "$TMP/e1.txt" "$TMP/e2.txt" "$allowed" 0 "one refused datagram"

	# the same numbers as the workspace's own counters
	api -q GET "/v1/workspaces/$WS_R/network"
	assert_eq "$(j .counters.allowed) $(j .counters.denied)" \
		"$(val "$TMP/e2.txt" "$allowed") $(val "$TMP/e2.txt" "$denied")" \
		"GET …/network's counters against the scrape"
	# the control: a workspace without a network has no firewall counters
	assert_eq 0 "$(grep -c "workspace=\"$ws_none\"" <<<"$(grep '^station_egress_' "$TMP/e2.txt")")" \
		"egress series of a workspace without a network"
}
run_test "egress: one allowed connection and one refused datagram move their counters by 1" t_egress

preview_result() { printf 'station_preview_requests_total{result="%s"}' "$1"; }

t_preview() {
	local ws
	new_cws ws '{"network":"none"}' || return 1
	run_cmd "$ws" 'mkdir -p www && echo metrics-preview-ok >www/index.html' >/dev/null
	start_apps "$ws" httpd 'httpd -f -p 127.0.0.1:3000 -h "$PWD/www"' 3000 || return 1
	expose "$ws" 3000 '{"access":"token"}' || return 1
	[[ -n $PV_TOKEN ]] || {
		_fail "the exposure has no token: $(_short "$BODY")"
		return 1
	}

	scrape "$TMP/p0.txt" || return 1
	assert_eq 1 "$(val "$TMP/p0.txt" station_preview_exposures)" "station_preview_exposures"
	pv "$PV_HOST" / -H "Authorization: Bearer wrong-token"
	assert_code 401 "a wrong token" || return 1
	scrape "$TMP/p1.txt" || return 1
	delta "$TMP/p0.txt" "$TMP/p1.txt" "$(preview_result unauthorized)" 1 "a wrong token"
	delta "$TMP/p0.txt" "$TMP/p1.txt" "$(preview_result proxied)" 0 "a wrong token"

	pv "$PV_HOST" / -H "Authorization: Bearer $PV_TOKEN"
	assert_code 200 "the right token" || return 1
	assert_eq metrics-preview-ok "$PV_BODY" "the page through the listener"
	scrape "$TMP/p2.txt" || return 1
	delta "$TMP/p1.txt" "$TMP/p2.txt" "$(preview_result proxied)" 1 "the right token"
	delta "$TMP/p1.txt" "$TMP/p2.txt" "$(preview_result unauthorized)" 0 "the right token"

	pv "nosuchlabel.preview.localhost" /
	assert_code 404 "an unknown host" || return 1
	scrape "$TMP/p3.txt" || return 1
	delta "$TMP/p2.txt" "$TMP/p3.txt" "$(preview_result not_found)" 1 "an unknown host"
	delta "$TMP/p2.txt" "$TMP/p3.txt" "$(preview_result proxied)" 0 "an unknown host"

	_preview_closed() {
		scrape "$TMP/p4.txt" && [[ $(val "$TMP/p4.txt" station_preview_connections_open) == 0 ]]
	}
	wait_for -t 10 _preview_closed ||
		_fail "station_preview_connections_open: $(val "$TMP/p4.txt" station_preview_connections_open) after every client closed"
	assert_eq 0 "$(val "$TMP/p4.txt" station_preview_websockets_open)" "station_preview_websockets_open"
}
run_test "preview: a wrong token, the right one and an unknown host each move their result by 1" t_preview

t_promtool() {
	scrape "$TMP/all.txt" || return 1
	local out
	out=$(promtool check metrics <"$TMP/all.txt" 2>&1) || {
		_fail "promtool check metrics: $out"
		return 1
	}
	assert_eq "" "$out" "promtool check metrics' remarks"
}
run_test "promtool check metrics passes on a scrape with egress and preview series" t_promtool

# Every metric the shipped Grafana dashboard queries is in this scrape (which has a preview
# listener and a network, unlike test-metrics').
t_grafana() {
	python3 - "$SRC/deploy/grafana/station-sandbox.json" "$TMP/all.txt" <<'PY'
import json, re, sys
board = json.load(open(sys.argv[1]))
names = set()
for line in open(sys.argv[2]):
    m = re.match(r'# TYPE (\S+) (\S+)', line)
    if m:
        names.add(m.group(1))
        if m.group(2) == 'histogram':
            names.update(m.group(1) + s for s in ('_bucket', '_sum', '_count'))
exprs = [t['expr'] for p in board['panels'] for t in p.get('targets', []) if 'expr' in t]
queried = {m for e in exprs for m in re.findall(r'\bstation_[a-z0-9_]+', e)}
for want in ('station_egress_allowed_total', 'station_egress_denied_total',
             'station_preview_requests_total', 'station_preview_connections_open',
             'station_preview_websockets_open', 'station_preview_exposures'):
    if want not in queried:
        sys.exit('the dashboard does not query ' + want)
missing = sorted(queried - names)
if missing:
    sys.exit('queried but not in a scrape: ' + ', '.join(missing))
print('# %d queries, every metric in the scrape' % len(exprs))
PY
}
run_test "the Grafana dashboard's egress and preview panels query metrics a real scrape has" t_grafana

exit $((_n_fail > 0))
