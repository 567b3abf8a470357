#!/bin/bash
# run-all: exclusive: net-world: the outside worlds of net-world.sh (documentation networks, routes, nft tables) are few per machine
# The worker's own networks are closed to its workspaces (docs/operations.md "Network"), against
# the outside world of net-world.sh and a LAN of the test's own: a namespace joined to the host
# by a veth (the host LAN_NET.1/24, LAN_HOST .2 and LAN_ROUTER .3 in the namespace, DOC_HOST a
# documentation address behind LAN_ROUTER). Each refusal is counted (counters.denied) and
# logged by the controller, beside its positive control:
#   worker      WORLD_HOST's echo and the host's LAN address refused, from bridge and from
#               restricted (a cidr rule naming the worker's address does not open it)
#   connected   LAN_HOST refused; reached with --network-allow connected (though it is private)
#   gateways    WORLD_ROUTER (the world's router, a gateway of the host's routes) refused;
#               reached with --network-allow gateways (though it is a documentation address)
#   change      a route added while the controller runs makes DOC_HOST a gateway: refused; the
#               route removed: reached again
#   documentation  DOC_HOST refused when documentation is not opened, reached when it is
#   restricted  a cidr rule (the tenant's policy) opens a closed fixed range (WORLD_PRIVATE)
#               for its workspace, never the worker's own networks: its addresses, a
#               connected host, a gateway
# The probes run net-probe (test/helpers/net-probe.c) inside the busybox test image.
. "$(dirname "${BASH_SOURCE[0]}")/container-lib.sh"
. "$(dirname "${BASH_SOURCE[0]}")/net-world.sh"

NET_RANGE=${NET_RANGE:-10.$((228 + $$ % 8)).$((($$ / 8) % 250)).0/24}
NET_BRIDGE=stn$(($$ % 1000000))
LAN_NET=10.$((252 + $$ % 4)).$((($$ / 4) % 250))
LAN_NS=nwl$$
LAN_IF=nwm$$
LAN_WORKER=$LAN_NET.1
LAN_HOST=$LAN_NET.2
LAN_ROUTER=$LAN_NET.3
DOC_HOST= # a documentation address no one routes (lan_up)
ADDED=198.18.0.$((1 + $$ % 250)) # the destination of the route added while running
PORT=7300

net_prereqs "$NET_RANGE" "$LAN_NET.0/24" "$ADDED/32"

lan_down() {
	ip link del "$LAN_IF" 2>/dev/null
	ip netns del "$LAN_NS" 2>/dev/null
	return 0
}
_LAN_PREV_EXIT=$(trap -p EXIT)
_LAN_PREV_EXIT=${_LAN_PREV_EXIT#trap -- \'}
_LAN_PREV_EXIT=${_LAN_PREV_EXIT%\' EXIT}
_lan_exit() {
	local rc=$?
	lan_down
	(exit "$rc")
	eval "$_LAN_PREV_EXIT"
}
trap _lan_exit EXIT

# lan_up: the LAN namespace, its routes on the host, and echo services on LAN_HOST, DOC_HOST,
# WORLD_ROUTER (in the world) and LAN_WORKER (on the host).
lan_up() {
	local net
	# In the world's own /24 when it is a documentation one (a /32 route wins over its /24),
	# else in one no one routes.
	for net in "$WORLD_NET" 203.0.113 198.51.100; do
		[[ $net == 203.0.113 || $net == 198.51.100 ]] || continue
		if [[ $net == "$WORLD_NET" ]] || ! _world_routed "$net.0/24"; then
			DOC_HOST=$net.$((200 + $$ % 50))
			break
		fi
	done
	[[ -n $DOC_HOST ]] || { diag "lan: every documentation /24 is routed here"; return 1; }
	_world_run ip netns add "$LAN_NS" || return 1
	_world_run ip link add "$LAN_IF" type veth peer name eth0 netns "$LAN_NS" || return 1
	_world_run ip addr add "$LAN_WORKER/24" dev "$LAN_IF" || return 1
	_world_run ip link set "$LAN_IF" up || return 1
	local in=(ip -n "$LAN_NS")
	_world_run "${in[@]}" link set lo up || return 1
	_world_run "${in[@]}" addr add "$LAN_HOST/24" dev eth0 || return 1
	_world_run "${in[@]}" addr add "$LAN_ROUTER/24" dev eth0 || return 1
	_world_run "${in[@]}" addr add "$DOC_HOST/32" dev eth0 || return 1
	_world_run "${in[@]}" link set eth0 up || return 1
	# The LAN answers workspaces (masqueraded to LAN_WORKER) on its own /24.
	_world_run ip route add "$DOC_HOST/32" via "$LAN_ROUTER" dev "$LAN_IF" || return 1
	ip netns exec "$LAN_NS" python3 "$NET_WORLD_PY" serve --echo "$LAN_HOST:$PORT" \
		--echo "$DOC_HOST:$PORT" --ready "$TMP/ready-lan" >"$TMP/serve-lan.log" 2>&1 </dev/null &
	_WORLD_PIDS+=($!)
	ip netns exec "$WORLD_NS" python3 "$NET_WORLD_PY" serve --echo "$WORLD_ROUTER:$PORT" \
		--ready "$TMP/ready-router" >"$TMP/serve-router.log" 2>&1 </dev/null &
	_WORLD_PIDS+=($!)
	python3 "$NET_WORLD_PY" serve --echo "$LAN_WORKER:$PORT" --ready "$TMP/ready-lanw" \
		>"$TMP/serve-lanw.log" 2>&1 </dev/null &
	_WORLD_PIDS+=($!)
	local f
	for f in ready-lan ready-router ready-lanw; do
		wait_for -t 90 test -s "$TMP/$f" ||
			{ diag "lan: $f: $(cat "$TMP"/serve-lan*.log "$TMP/serve-router.log")"; return 1; }
	done
}

if ! world_up || ! lan_up; then
	not_ok "world and LAN come up" "see the diagnostics above"
	exit 1
fi

NET_FLAGS=("$NET_FLAG_RANGE" "$NET_RANGE" "$NET_FLAG_BRIDGE" "$NET_BRIDGE" "$NET_FLAG_DNS" "$WORLD_DNS:53")
require_container_controller "${NET_FLAGS[@]}" "${NET_WORLD_FLAGS[@]}"

# ---------------------------------------------------------------------------------------------
# Helpers

denied_count() {
	api -q GET "/v1/workspaces/$1/network"
	[[ $STATUS == 200 ]] || { _fail "GET network: HTTP $STATUS $(_short "$BODY")"; return 1; }
	j .counters.denied
}

_denied_above() { (($(denied_count "$1") > $2)); }
_denial_logged() {
	grep -F 'egress denied' "$CONTROLLER_LOG" | grep -F -- "$1" | grep -F -- "$2" |
		grep -qE -- "port=\"?$3\"?( |\$)"
}

# expect_reached WS ADDR WHAT: a TCP connection from WS to ADDR:PORT gets the echo.
expect_reached() {
	nprobe "$1" tcp "$2" "$PORT" || return 1
	[[ $PROBE_RC == 0 && $(pval connect) == ok ]] ||
		_fail "$3: expected to connect to $2:$PORT, got rc $PROBE_RC: $(tr '\n' ' ' <<<"$PROBE_OUT")"
}

# expect_denied WS ADDR WHAT [PORT]: no connection from WS to ADDR:PORT, counted in
# counters.denied and logged by the controller with the workspace, the address and the port.
expect_denied() {
	local before port=${4:-$PORT}
	before=$(denied_count "$1") || return 1
	nprobe "$1" tcp "$2" "$port" || return 1
	[[ $PROBE_RC == 1 && $(pval connect) != ok ]] ||
		{ _fail "$3: expected no connection to $2:$port, got rc $PROBE_RC: $(tr '\n' ' ' <<<"$PROBE_OUT")"; return 1; }
	wait_for -t 10 _denied_above "$1" "$before" ||
		{ _fail "$3: counters.denied stayed $(denied_count "$1") (was $before)"; return 1; }
	wait_for -t 10 _denial_logged "$1" "$2" "$port" ||
		_fail "$3: no 'egress denied' line for $1 to $2 port $port:" \
			"$(grep -F 'egress denied' "$CONTROLLER_LOG" | tail -n 3)"
}

# ---------------------------------------------------------------------------------------------
# Cases

WS_B=
test_bridge_worker() {
	net_ws WS_B bridge || return 1
	expect_denied "$WS_B" "$WORLD_HOST" "the worker's address toward the world" "$WORLD_HOST_PORT" ||
		return 1
	expect_denied "$WS_B" "$LAN_WORKER" "the worker's LAN address"
}

test_bridge_connected() {
	[[ -n $WS_B ]] || return 1
	expect_denied "$WS_B" "$LAN_HOST" "a host of the worker's connected LAN"
}

test_bridge_gateway() {
	[[ -n $WS_B ]] || return 1
	expect_denied "$WS_B" "$WORLD_ROUTER" "the gateway of the world's routes"
}

# Positive controls: the world's echo and a documentation host behind the LAN's router.
test_bridge_outside() {
	[[ -n $WS_B ]] || return 1
	nprobe "$WS_B" tcp "$WORLD_ECHO" "$WORLD_ECHO_PORT" || return 1
	[[ $PROBE_RC == 0 && $(pval connect) == ok ]] ||
		{ _fail "the world's echo: rc $PROBE_RC: $(tr '\n' ' ' <<<"$PROBE_OUT")"; return 1; }
	expect_reached "$WS_B" "$DOC_HOST" "a documentation host routed through the LAN"
}

_reached() { nprobe "$1" tcp "$2" "$PORT" >/dev/null && [[ $PROBE_RC == 0 ]]; }
_refused() { nprobe "$1" tcp "$2" "$PORT" >/dev/null && [[ $PROBE_RC == 1 ]]; }

# A route added while the controller runs makes DOC_HOST a gateway; removed, it is not.
test_bridge_route_change() {
	[[ -n $WS_B ]] || return 1
	_world_run ip route add "$ADDED/32" via "$DOC_HOST" dev "$LAN_IF" onlink || return 1
	wait_for -t 20 _refused "$WS_B" "$DOC_HOST" ||
		{ _fail "DOC_HOST still reached 20 s after it became a gateway: $(tr '\n' ' ' <<<"$PROBE_OUT")"; return 1; }
	expect_denied "$WS_B" "$DOC_HOST" "a gateway since a route was added" || return 1
	_world_run ip route del "$ADDED/32" via "$DOC_HOST" dev "$LAN_IF" onlink || return 1
	wait_for -t 20 _reached "$WS_B" "$DOC_HOST" ||
		_fail "DOC_HOST still refused 20 s after the route went: $(tr '\n' ' ' <<<"$PROBE_OUT")"
}

# Restricted: the policy is the tenant's, the worker's networks the operator's: a cidr rule
# opens a closed fixed range for its workspace (WORLD_PRIVATE, private; positive control) and
# never the worker's address, a connected host or a gateway (docs/operations.md).
WS_R=
test_restricted() {
	local allow
	allow=$(jq -nc --arg w "$WORLD_HOST" --arg l "$LAN_HOST" --arg g "$WORLD_ROUTER" \
		--arg e "$WORLD_ECHO" --arg p "$WORLD_PRIVATE" \
		'{allow: [{cidr: $w}, {cidr: $l}, {cidr: $g}, {cidr: $e}, {cidr: $p}]}')
	net_ws WS_R restricted "$allow" || return 1
	expect_denied "$WS_R" "$WORLD_HOST" "restricted: the worker's address under a cidr rule" \
		"$WORLD_HOST_PORT" || return 1
	expect_denied "$WS_R" "$WORLD_ROUTER" "restricted: the gateway under a cidr rule" || return 1
	expect_denied "$WS_R" "$LAN_HOST" "restricted: a connected host under a cidr rule" || return 1
	nprobe "$WS_R" tcp "$WORLD_ECHO" "$WORLD_ECHO_PORT" || return 1
	[[ $PROBE_RC == 0 ]] || { _fail "restricted: the allowed echo: $(tr '\n' ' ' <<<"$PROBE_OUT")"; return 1; }
	nprobe "$WS_R" tcp "$WORLD_PRIVATE" "$WORLD_ECHO_PORT" || return 1
	[[ $PROBE_RC == 0 ]] ||
		_fail "restricted: a private address under its cidr rule: $(tr '\n' ' ' <<<"$PROBE_OUT")"
}

# Another controller (same root, its workspaces kept) with connected and gateways open and
# documentation closed.
test_opened_classes() {
	[[ -n $WS_B ]] || return 1
	stop_controller
	start_container_controller "${NET_FLAGS[@]}" "$NET_FLAG_ALLOW" benchmarking,connected,gateways ||
		{ _fail "the controller did not start with connected,gateways"; return 1; }
	expect_reached "$WS_B" "$LAN_HOST" "--network-allow connected: the LAN host" || return 1
	expect_reached "$WS_B" "$WORLD_ROUTER" "--network-allow gateways: the world's router" || return 1
	expect_denied "$WS_B" "$DOC_HOST" "documentation not opened" || return 1
	expect_denied "$WS_B" "$LAN_WORKER" "the worker's LAN address, connected opened"
}

run_test net-worker-bridge-worker test_bridge_worker
run_test net-worker-bridge-connected test_bridge_connected
run_test net-worker-bridge-gateway test_bridge_gateway
run_test net-worker-bridge-outside test_bridge_outside
run_test net-worker-bridge-route-change test_bridge_route_change
run_test net-worker-restricted test_restricted
run_test net-worker-opened-classes test_opened_classes
