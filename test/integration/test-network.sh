#!/bin/bash
# run-all: exclusive: net-world: the outside worlds of net-world.sh (documentation networks, routes, nft tables) are few per machine
# run-all: slow: 100 to 240 s (100 create/delete cycles, every network mode)
# Container workspaces' network modes against the outside world of net-world.sh, each denial
# beside its positive control (the same probe from the host, from the namespace that plays a
# workspace, or from a workspace whose mode or policy allows it):
#   none        only lo; the outside unreachable; loopback between two runs works
#   bridge      the outside reachable, seeing the masquerade address; metadata, a private
#               address, the worker's own addresses and another workspace are not
#   restricted  allowed names and cidr/ports only; an allowed Host header to an address no
#               allowed name resolved to is refused; UDP to the outside dropped; direct DNS to
#               the outside dropped; IPv6 fails; a name not allowed gets NXDOMAIN/REFUSED from
#               the resolver (and never reaches the outside DNS); a replaced policy holds for
#               new connections at once
#   lifecycle   100 creates and deletes (bridge and restricted alternating) with a controller
#               SIGKILL in the middle leave no port, lease or nft chain/set behind (the
#               namespace is the container's: it ends with it)
# The probes run net-probe (test/helpers/net-probe.c) inside the busybox test image.
. "$(dirname "${BASH_SOURCE[0]}")/container-lib.sh"
. "$(dirname "${BASH_SOURCE[0]}")/net-world.sh"

# The controller's own range and bridge (unique to this script: other controllers may run).
NET_RANGE=${NET_RANGE:-10.$((212 + $$ % 8)).$((($$ / 8) % 250)).0/24}
NET_BRIDGE=stn$(($$ % 1000000))
NET_PROBE=$NET_PROBE_BIN
CYCLES=${NET_LIFECYCLE_CYCLES:-100}

net_prereqs "$NET_RANGE"
command -v sqlite3 >/dev/null || _container_skip_all "sqlite3 missing (the lease check)"

if ! world_up || ! world_play_up; then
	not_ok "world comes up" "see the diagnostics above"
	exit 1
fi
# Whatever the policy does, a workspace's packets to the metadata address reach our world only.
world_route_from "$NET_RANGE" || exit 1

NET_FLAGS=("$NET_FLAG_RANGE" "$NET_RANGE" "$NET_FLAG_BRIDGE" "$NET_BRIDGE" "$NET_FLAG_DNS" "$WORLD_DNS:53" "${NET_WORLD_FLAGS[@]}")
require_container_controller "${NET_FLAGS[@]}"

# ---------------------------------------------------------------------------------------------
# Helpers

# hprobe ARGS...: net-probe on the host (PROBE_OUT, PROBE_RC); pprobe: in the play namespace;
# oprobe: in the outside namespace.
hprobe() {
	PROBE_OUT=$("$NET_PROBE" "$@" 2>&1)
	PROBE_RC=$?
}
pprobe() {
	PROBE_OUT=$(world_play "$NET_PROBE" "$@" 2>&1)
	PROBE_RC=$?
}
oprobe() {
	PROBE_OUT=$(ip netns exec "$WORLD_NS" "$NET_PROBE" "$@" 2>&1)
	PROBE_RC=$?
}

# expect_reach WHAT: the last probe connected (rc 0, connect=ok).
expect_reach() {
	[[ $PROBE_RC == 0 && $(pval connect) == ok ]] && return 0
	_fail "$1: expected to connect, got rc $PROBE_RC: $(tr '\n' ' ' <<<"$PROBE_OUT")"
}
# expect_blocked WHAT: the last probe did not connect (rc 1, connect=<error> or no address).
expect_blocked() {
	[[ $PROBE_RC == 1 && $(pval connect) != ok ]] && return 0
	_fail "$1: expected no connection, got rc $PROBE_RC: $(tr '\n' ' ' <<<"$PROBE_OUT")"
}

network_get() {
	api -q GET "/v1/workspaces/$1/network"
	[[ $STATUS == 200 ]] || _fail "GET network: HTTP $STATUS $(_short "$BODY")"
}

# ws_address WS: its address as GET …/network answers it.
ws_address() {
	network_get "$1" >/dev/null || return 1
	j .address
}

# in_range ADDR CIDR
in_range() {
	python3 -c 'import ipaddress, sys; sys.exit(ipaddress.ip_address(sys.argv[1]) not in ipaddress.ip_network(sys.argv[2]))' "$1" "$2" 2>/dev/null
}

# nprobe_until WS ARGS...: nprobe until it succeeds (a listener started by another run is up;
# a running run shows no output), 10 s at most.
_nprobe_ok() {
	nprobe "$@" && [[ $PROBE_RC == 0 ]]
}
nprobe_until() {
	wait_for -t 10 _nprobe_ok "$@"
}

# ---------------------------------------------------------------------------------------------
# none

test_none() {
	local ws
	net_ws ws none || return 1
	nprobe "$ws" ifaces || return 1
	assert_probe ifaces lo
	# The outside: blocked here, reachable from the host (the positive control).
	nprobe "$ws" tcp "$WORLD_ECHO" "$WORLD_ECHO_PORT" || return 1
	expect_blocked "none: the outside echo"
	hprobe tcp "$WORLD_ECHO" "$WORLD_ECHO_PORT"
	expect_reach "host: the outside echo"
	assert_probe recv "peer $WORLD_HOST"
	# Loopback between two runs of the workspace.
	run_start "$ws" "$(json_cmd "net-probe listen 7100 hello-loopback")" || return 1
	local listener=$RUN
	nprobe_until "$ws" tcp 127.0.0.1 7100
	expect_reach "none: loopback between two runs"
	assert_probe recv hello-loopback
	run_wait "$ws" "$listener" 35 || return 1
	assert_eq "exited 0" "$(j '"\(.status) \(.exitCode)"')" "the listener ($(j .stdout))"
	network_get "$ws" || return 1
	assert_eq none "$(j .mode)" "GET network mode"
}

# ---------------------------------------------------------------------------------------------
# bridge

WS_BRIDGE=
test_bridge_outside() {
	net_ws WS_BRIDGE bridge || return 1
	network_get "$WS_BRIDGE" || return 1
	assert_eq bridge "$(j .mode)" "mode"
	in_range "$(j .address)" "$NET_RANGE" || _fail "address $(j .address) is not in $NET_RANGE"
	in_range "$(j .gateway)" "$NET_RANGE" || _fail "gateway $(j .gateway) is not in $NET_RANGE"
	nprobe "$WS_BRIDGE" tcp "$WORLD_ECHO" "$WORLD_ECHO_PORT" || return 1
	expect_reach "bridge: the outside echo" || return 1
	assert_probe recv "peer $WORLD_HOST"
	# Names through the workspace's resolver (the controller's, forwarding to the world).
	nprobe "$WS_BRIDGE" http "$WORLD_OTHER_NAME" 80 "$WORLD_OTHER_NAME" / || return 1
	expect_reach "bridge: other.example.test by name"
	assert_probe body "other host=$WORLD_OTHER_NAME"
}

test_bridge_udp() {
	[[ -n $WS_BRIDGE ]] || return 1
	local before
	before=$(world_udp_count)
	nprobe "$WS_BRIDGE" udp "$WORLD_ECHO" "$WORLD_UDP_PORT" bridge-udp || return 1
	assert_probe send ok
	wait_for -t 3 world_udp_more_than "$before" || _fail "the UDP sink saw nothing from the bridge workspace"
	grep -q "^$WORLD_HOST 10 bridge-udp$" "$WORLD_DIR/udp.log" || _fail "udp.log: $(tail -n 3 "$WORLD_DIR/udp.log")"
}

test_bridge_metadata() {
	[[ -n $WS_BRIDGE ]] || return 1
	nprobe "$WS_BRIDGE" http "$WORLD_META" 80 metadata /latest/meta-data/ || return 1
	expect_blocked "bridge: metadata $WORLD_META"
	# Positive control: the same request from the namespace that plays a workspace, routed the
	# same way (world_route_from).
	pprobe http "$WORLD_META" 80 metadata /latest/meta-data/
	expect_reach "play namespace: metadata"
	assert_probe body "meta host=metadata"
}

test_bridge_private() {
	[[ -n $WS_BRIDGE ]] || return 1
	nprobe "$WS_BRIDGE" tcp "$WORLD_PRIVATE" "$WORLD_ECHO_PORT" || return 1
	expect_blocked "bridge: the private address $WORLD_PRIVATE"
	hprobe tcp "$WORLD_PRIVATE" "$WORLD_ECHO_PORT"
	expect_reach "host: the private address"
	pprobe tcp "$WORLD_PRIVATE" "$WORLD_ECHO_PORT"
	expect_reach "play namespace: the private address"
}

test_bridge_worker() {
	[[ -n $WS_BRIDGE ]] || return 1
	local gw
	network_get "$WS_BRIDGE" || return 1
	gw=$(j .gateway)
	# A service of the host on its address toward the world and on the bridge's address.
	python3 "$NET_WORLD_PY" serve --echo "$gw:7004" --ready "$TMP/ready-gw" >"$TMP/serve-gw.log" 2>&1 </dev/null &
	_WORLD_PIDS+=($!)
	wait_for -t 90 test -s "$TMP/ready-gw" || _fail "echo on the gateway $gw: $(cat "$TMP/serve-gw.log")" || return 1
	nprobe "$WS_BRIDGE" tcp "$WORLD_HOST" "$WORLD_HOST_PORT" || return 1
	expect_blocked "bridge: the worker's address $WORLD_HOST"
	nprobe "$WS_BRIDGE" tcp "$gw" 7004 || return 1
	expect_blocked "bridge: the worker's bridge address $gw"
	oprobe tcp "$WORLD_HOST" "$WORLD_HOST_PORT"
	expect_reach "outside namespace: the worker's address"
	hprobe tcp "$gw" 7004
	expect_reach "host: its own bridge address"
}

test_bridge_other_workspace() {
	[[ -n $WS_BRIDGE ]] || return 1
	local ws2 addr2 listener
	net_ws ws2 bridge || return 1
	addr2=$(ws_address "$ws2") || return 1
	run_start "$ws2" "$(json_cmd "net-probe listen 7200 ws2-here any 2")" || return 1
	listener=$RUN
	# Positive control: the listener answers on that address (from its own workspace).
	nprobe_until "$ws2" tcp "$addr2" 7200
	expect_reach "the other workspace itself: its address" || return 1
	assert_probe recv ws2-here
	nprobe "$WS_BRIDGE" tcp "$addr2" 7200 || return 1
	expect_blocked "bridge: another workspace's address $addr2"
}

# ---------------------------------------------------------------------------------------------
# restricted

WS_R=
POLICY1=
test_restricted_allowed() {
	POLICY1=$(jq -nc --arg g "$WORLD_GIT_NAME" --arg e "$WORLD_ECHO/32" --argjson p "$WORLD_ECHO_PORT" \
		'{allow: [{domain: $g}, {cidr: $e, ports: [$p], proto: "tcp"}]}')
	net_ws WS_R restricted "$POLICY1" || return 1
	network_get "$WS_R" || return 1
	assert_eq restricted "$(j .mode)" "mode"
	assert_eq "$WORLD_GIT_NAME" "$(j '.egress.allow[0].domain')" "egress as given"
	# An allowed name: resolved through the resolver, then reachable.
	nprobe "$WS_R" http "$WORLD_GIT_NAME" 80 "$WORLD_GIT_NAME" "/repo.git/info/refs?service=git-upload-pack" || return 1
	expect_reach "restricted: $WORLD_GIT_NAME" || return 1
	assert_probe resolved "$WORLD_GIT"
	assert_probe status 200
	world_dns_asked "$WORLD_GIT_NAME" || _fail "the outside DNS was not asked for $WORLD_GIT_NAME"
	# An allowed cidr and port.
	nprobe "$WS_R" tcp "$WORLD_ECHO" "$WORLD_ECHO_PORT" || return 1
	expect_reach "restricted: the allowed cidr and port"
	assert_probe recv "peer $WORLD_HOST"
}

test_restricted_denied() {
	[[ -n $WS_R && -n $WS_BRIDGE ]] || return 1
	# The allowed cidr on another port.
	nprobe "$WS_R" tcp "$WORLD_ECHO" "$WORLD_ECHO_PORT2" || return 1
	expect_blocked "restricted: port $WORLD_ECHO_PORT2 of the allowed cidr"
	nprobe "$WS_BRIDGE" tcp "$WORLD_ECHO" "$WORLD_ECHO_PORT2" || return 1
	expect_reach "bridge: port $WORLD_ECHO_PORT2"
	# An address no allowed name resolved to (the registry's), by address.
	nprobe "$WS_R" http "$WORLD_REGISTRY" 80 "$WORLD_REGISTRY_NAME" "/$WORLD_PKG" || return 1
	expect_blocked "restricted: the registry's address"
	nprobe "$WS_BRIDGE" http "$WORLD_REGISTRY" 80 "$WORLD_REGISTRY_NAME" "/$WORLD_PKG" || return 1
	expect_reach "bridge: the registry's address"
	assert_probe status 200
}

# An allowed Host header sent to an address that no allowed name resolved to.
test_restricted_host_header() {
	[[ -n $WS_R ]] || return 1
	nprobe "$WS_R" http "$WORLD_OTHER" 80 "$WORLD_GIT_NAME" / || return 1
	expect_blocked "restricted: Host $WORLD_GIT_NAME to $WORLD_OTHER"
	grep -q "^other .* $WORLD_GIT_NAME " "$WORLD_DIR/http.log" &&
		_fail "the other host saw a request with Host $WORLD_GIT_NAME"
	# Positive controls: the same request to the allowed name's address from the workspace, and
	# to the other address from the host.
	nprobe "$WS_R" http "$WORLD_GIT" 80 "$WORLD_GIT_NAME" "/repo.git/info/refs?service=git-upload-pack" || return 1
	expect_reach "restricted: Host $WORLD_GIT_NAME to $WORLD_GIT"
	hprobe http "$WORLD_OTHER" 80 "$WORLD_GIT_NAME" /
	expect_reach "host: Host $WORLD_GIT_NAME to $WORLD_OTHER"
	assert_probe body "other host=$WORLD_GIT_NAME"
}

test_restricted_udp() {
	[[ -n $WS_R && -n $WS_BRIDGE ]] || return 1
	nprobe "$WS_R" udp "$WORLD_ECHO" "$WORLD_UDP_PORT" restricted-udp || return 1
	# Positive control after it: the bridge workspace's datagram arrives, so the restricted one
	# (sent first) would have been logged before it.
	nprobe "$WS_BRIDGE" udp "$WORLD_ECHO" "$WORLD_UDP_PORT" bridge-udp-2 || return 1
	wait_for -t 3 grep -q ' bridge-udp-2$' "$WORLD_DIR/udp.log" || _fail "the positive control never arrived" || return 1
	sleep 0.5
	grep -q 'restricted-udp' "$WORLD_DIR/udp.log" && _fail "the UDP sink got the restricted workspace's datagram"
	# DNS straight to the outside server (not the workspace's resolver) is UDP too.
	nprobe "$WS_R" dns "$WORLD_GIT_NAME" "$WORLD_DNS" || return 1
	assert_probe rcode timeout
	nprobe "$WS_BRIDGE" dns "$WORLD_GIT_NAME" "$WORLD_DNS" || return 1
	assert_probe rcode NOERROR
	assert_probe answer "$WORLD_GIT"
}

test_restricted_ipv6() {
	[[ -n $WS_R ]] || return 1
	nprobe "$WS_R" tcp6 "$WORLD_V6" "$WORLD_ECHO_PORT" || return 1
	expect_blocked "restricted: IPv6 $WORLD_V6"
	hprobe tcp6 "$WORLD_V6" "$WORLD_ECHO_PORT"
	expect_reach "host: IPv6 $WORLD_V6"
	assert_probe recv "peer $WORLD_V6_HOST"
}

test_restricted_nxdomain() {
	[[ -n $WS_R ]] || return 1
	local before refused
	before=$(grep -c " $WORLD_OTHER_NAME " "$WORLD_DIR/dns.log")
	network_get "$WS_R" || return 1
	refused=$(j .counters.dnsRefused)
	nprobe "$WS_R" dns "$WORLD_OTHER_NAME" || return 1
	assert_match '^(NXDOMAIN|REFUSED)$' "$(pval rcode)" "resolver's answer for $WORLD_OTHER_NAME" || return 1
	assert_eq "$before" "$(grep -c " $WORLD_OTHER_NAME " "$WORLD_DIR/dns.log")" \
		"queries for $WORLD_OTHER_NAME that reached the outside DNS"
	network_get "$WS_R" || return 1
	assert_le $((refused + 1)) "$(j .counters.dnsRefused)" "counters.dnsRefused"
	# Positive controls: the resolver answers an allowed name; the outside DNS has this one.
	nprobe "$WS_R" dns "$WORLD_GIT_NAME" || return 1
	assert_probe rcode NOERROR
	assert_probe answer "$WORLD_GIT"
	pprobe dns "$WORLD_OTHER_NAME"
	assert_probe rcode NOERROR
	assert_probe answer "$WORLD_OTHER"
}

test_restricted_counters() {
	[[ -n $WS_R ]] || return 1
	network_get "$WS_R" || return 1
	assert_le 1 "$(j .counters.allowed)" "counters.allowed"
	assert_le 1 "$(j .counters.denied)" "counters.denied"
	assert_le 1 "$(j .counters.dnsAllowed)" "counters.dnsAllowed"
	# Each denial is logged with the workspace, the destination and the port (the refused
	# connection to the allowed cidr's other port, test_restricted_denied).
	grep -F -- "$WS_R" "$CONTROLLER_LOG" | grep -i 'den' | grep -F -- "$WORLD_ECHO" |
		grep -q -- "$WORLD_ECHO_PORT2" ||
		_fail "no denial of $WS_R to $WORLD_ECHO port $WORLD_ECHO_PORT2 in the controller's log:" \
			"$(grep -i 'den' "$CONTROLLER_LOG" | tail -n 3)"
}

test_restricted_replace() {
	[[ -n $WS_R ]] || return 1
	local p2
	p2=$(jq -nc --arg o "$WORLD_OTHER_NAME" --arg e "$WORLD_ECHO/32" --argjson p "$WORLD_ECHO_PORT2" \
		'{allow: [{domain: $o}, {cidr: $e, ports: [$p], proto: "tcp"}]}')
	# A bad policy is refused and changes nothing.
	api -q PUT "/v1/workspaces/$WS_R/network" '{"egress":{"allow":[{"cidr":"300.0.0.0/8"}]}}'
	assert_status 400 "PUT a bad policy"
	network_get "$WS_R" || return 1
	assert_eq "$(jq -c . <<<"$POLICY1" | jq -c '.allow | length')" "$(j '.egress.allow | length')" "policy after a bad PUT"
	api -q PUT "/v1/workspaces/$WS_R/network" "$(jq -nc --argjson e "$p2" '{egress: $e}')"
	assert_status 200 "PUT a new policy" || return 1
	assert_eq "$WORLD_OTHER_NAME" "$(j '.egress.allow[0].domain')" "PUT's answer"
	# New connections see it at once: the new port open, the old one closed, the new name
	# resolved and reachable, the old name refused.
	nprobe "$WS_R" tcp "$WORLD_ECHO" "$WORLD_ECHO_PORT2" || return 1
	expect_reach "after PUT: port $WORLD_ECHO_PORT2"
	nprobe "$WS_R" tcp "$WORLD_ECHO" "$WORLD_ECHO_PORT" || return 1
	expect_blocked "after PUT: port $WORLD_ECHO_PORT"
	nprobe "$WS_R" http "$WORLD_OTHER_NAME" 80 "$WORLD_OTHER_NAME" / || return 1
	expect_reach "after PUT: $WORLD_OTHER_NAME"
	assert_probe body "other host=$WORLD_OTHER_NAME"
	nprobe "$WS_R" dns "$WORLD_GIT_NAME" || return 1
	assert_match '^(NXDOMAIN|REFUSED)$' "$(pval rcode)" "after PUT: $WORLD_GIT_NAME"
	# Only restricted workspaces have a policy to replace.
	[[ -n $WS_BRIDGE ]] || return 1
	api -q PUT "/v1/workspaces/$WS_BRIDGE/network" "$(jq -nc --argjson e "$p2" '{egress: $e}')"
	assert_status 409 "PUT on a bridge workspace"
}

# ---------------------------------------------------------------------------------------------
# Lifecycle

cycle_ws() {
	if [[ $2 == restricted ]]; then
		net_ws "$1" restricted "$(jq -nc --arg g "$WORLD_GIT_NAME" '{allow: [{domain: $g}]}')"
	else
		net_ws "$1" bridge
	fi
}

# our_veths: host links named like the controller's ports (sv<8 hex>) whose address is in
# NET_RANGE, with or without a master.
our_veths() {
	ip -j link show 2>/dev/null | jq -r '.[].ifname' | grep -E '^sv[0-9a-f]{8}$' | while read -r l; do
		local h=${l#sv} a
		a=$((16#${h:0:2})).$((16#${h:2:2})).$((16#${h:4:2})).$((16#${h:6:2}))
		in_range "$a" "$NET_RANGE" && echo "$l"
	done
	net_ports
}

# net_state: ports, leases, per-workspace nft objects and elements, one a line.
net_state() {
	our_veths | sort -u | sed 's/^/port /'
	local rows
	if rows=$(sqlite3 -batch "$ROOT/station.db" 'SELECT * FROM workspace_networks' 2>&1); then
		[[ -z $rows ]] || sed 's/^/lease /' <<<"$rows"
	else
		echo "lease ? (the leases cannot be read: $rows)"
	fi
	net_nft_objects | sed 's/^/nft /'
}

# The ids of workspaces named in STATE lines.
_ids_in() { grep -oE "$WORKER-[A-Za-z0-9_-]+" | sort -u; }

test_lifecycle() {
	local i mode ws t0=$SECONDS state left
	for ((i = 1; i <= CYCLES; i++)); do
		mode=bridge
		((i % 2)) || mode=restricted
		if ((i == CYCLES / 2)); then
			# A workspace alive and a create in flight when the controller dies.
			cycle_ws ws "$mode" || return 1
			(api -q POST /v1/workspaces "$(cws_body '{"network":"restricted","egress":{"allow":[]}}')") &
			local creator=$!
			sleep 0.$((RANDOM % 5))
			stop_controller KILL
			wait "$creator" 2>/dev/null
			restart_controller || _fail "the controller did not restart after SIGKILL" || return 1
			api -q GET /v1/workspaces
			local id
			for id in $(j '.workspaces[].id'); do
				api -q DELETE "/v1/workspaces/$id"
				assert_status 200 "DELETE $id after the restart" || return 1
			done
			continue
		fi
		cycle_ws ws "$mode" || return 1
		if ((i <= 2)); then
			# Positive control: each kind of object is there to find while the workspace lives.
			state=$(net_state)
			grep -q "^lease .*$ws" <<<"$state" || _fail "$mode workspace's lease: $state" || return 1
			assert_match 'port sv' "$state" "$mode workspace's port" || return 1
			assert_contains "inet chain ws_${ws//-/_}" "$state" "$mode workspace's chain" || return 1
			nprobe "$ws" tcp "$WORLD_ECHO" "$WORLD_ECHO_PORT" || return 1
			[[ $mode == bridge ]] && { expect_reach "cycle $i: bridge reaches the echo" || return 1; }
		fi
		api -q DELETE "/v1/workspaces/$ws"
		assert_status 200 "DELETE $ws (cycle $i)" || return 1
	done
	note "$CYCLES create/delete cycles (one SIGKILL) in $((SECONDS - t0)) s"
	api -q GET /v1/workspaces
	assert_eq 0 "$(j '.workspaces | length')" "workspaces left" || return 1
	left=$(net_state)
	[[ -z $left ]] || _fail "left behind: $(tr '\n' ';' <<<"$left")"
	# The worker's own objects stay: the bridge and its table.
	ip link show "$NET_BRIDGE" >/dev/null 2>&1 || _fail "the bridge $NET_BRIDGE is gone"
	nft list table inet "$NET_BRIDGE" >/dev/null 2>&1 || _fail "the table inet $NET_BRIDGE is gone"
}

# A controller SIGKILLed and started again: the workspace keeps its network, its resolver knows
# it again (allowed names answered and reachable, others refused), and its policy still holds.
test_restricted_controller_restart() {
	local ws
	net_ws ws restricted "$(jq -nc --arg g "$WORLD_GIT_NAME" '{allow: [{domain: $g}]}')" || return 1
	stop_controller KILL
	restart_controller || _fail "the controller did not start again" || return 1
	nprobe "$ws" http "$WORLD_GIT_NAME" 80 "$WORLD_GIT_NAME" "/repo.git/info/refs?service=git-upload-pack" || return 1
	expect_reach "after the restart: $WORLD_GIT_NAME" || return 1
	assert_probe status 200
	nprobe "$ws" dns "$WORLD_OTHER_NAME" || return 1
	assert_match '^(NXDOMAIN|REFUSED)$' "$(pval rcode)" "after the restart: $WORLD_OTHER_NAME" || return 1
	nprobe "$ws" http "$WORLD_OTHER" 80 "$WORLD_GIT_NAME" / || return 1
	expect_blocked "after the restart: an address no allowed name resolved to" || return 1
	network_get "$ws" || return 1
	assert_eq restricted "$(j .mode)" "mode after the restart"
	assert_le 1 "$(j .counters.dnsRefused)" "counters.dnsRefused after the restart"
	api -q DELETE "/v1/workspaces/$ws"
	assert_status 200 "DELETE $ws"
}

run_test net-none test_none
run_test net-bridge-outside test_bridge_outside
run_test net-bridge-udp test_bridge_udp
run_test net-bridge-metadata test_bridge_metadata
run_test net-bridge-private test_bridge_private
run_test net-bridge-worker test_bridge_worker
run_test net-bridge-other-workspace test_bridge_other_workspace
run_test net-restricted-allowed test_restricted_allowed
run_test net-restricted-denied test_restricted_denied
run_test net-restricted-host-header test_restricted_host_header
run_test net-restricted-udp test_restricted_udp
run_test net-restricted-ipv6 test_restricted_ipv6
run_test net-restricted-nxdomain test_restricted_nxdomain
run_test net-restricted-counters test_restricted_counters
run_test net-restricted-replace test_restricted_replace
run_test net-restricted-controller-restart test_restricted_controller_restart
for ws in "${WORKSPACES[@]}"; do
	api -q DELETE "/v1/workspaces/$ws"
done
WORKSPACES=()
run_test net-lifecycle test_lifecycle
