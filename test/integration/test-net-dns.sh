#!/bin/bash
# run-all: exclusive: net-world: the outside worlds of net-world.sh (documentation networks, routes, nft tables) are few per machine
# The workspaces' resolver as a boundary, from restricted container workspaces against the
# outside world's DNS (net-world.sh), whose dns-wire.log shows what each query it got held:
#   rebuilt   a query carrying an OPT of the sandbox's (size 4096, DO, an option) and header
#             flags (AA, AD, CD) is answered (the positive control), and the world's DNS got
#             the resolver's own query for it: RD alone, one question, an OPT of 1232 bytes
#             without options or DO
#   formerr   queries with two questions, an answer record, or an additional record beside
#             the OPT get FORMERR and never reach the world
#   flood     while one workspace floods a name the world answers 2 s late (500 queries a
#             second), another workspace's 7 lookups are all answered; the flood's excess is
#             SERVFAIL and counted in its counters.dnsShed, none in the other's
# The probes run net-probe (test/helpers/net-probe.c) inside the busybox test image.
. "$(dirname "${BASH_SOURCE[0]}")/container-lib.sh"
. "$(dirname "${BASH_SOURCE[0]}")/net-world.sh"

NET_RANGE=${NET_RANGE:-10.$((212 + $$ % 8)).$((($$ / 8) % 250)).0/24}
NET_BRIDGE=std$(($$ % 1000000))
SLOW_NAME=slow.example.test

net_prereqs "$NET_RANGE"

if ! world_up; then
	not_ok "world comes up" "see the diagnostics above"
	exit 1
fi
echo "$SLOW_NAME A $WORLD_ECHO" >>"$WORLD_DIR/zone"
WIRE_LOG=$WORLD_DIR/dns-wire.log

NET_FLAGS=("$NET_FLAG_RANGE" "$NET_RANGE" "$NET_FLAG_BRIDGE" "$NET_BRIDGE" "$NET_FLAG_DNS" "$WORLD_DNS:53" "${NET_WORLD_FLAGS[@]}")
require_container_controller "${NET_FLAGS[@]}"

POLICY=$(jq -nc --arg e "$WORLD_ECHO_NAME" --arg s "$SLOW_NAME" '{allow: [{domain: $e}, {domain: $s}]}')

# ---------------------------------------------------------------------------------------------
# Helpers

# wire_count NAME: the queries for NAME the world's DNS got.
wire_count() {
	awk -v n="$1" '$2 == n {c++} END {print c + 0}' "$WIRE_LOG"
}

# wire_at_least NAME N (a wait_for predicate)
wire_at_least() {
	(($(wire_count "$1") >= $2))
}

counters_of() {
	api -q GET "/v1/workspaces/$1/network"
	[[ $STATUS == 200 ]] || _fail "GET network: HTTP $STATUS $(_short "$BODY")"
	j .counters
}

# ---------------------------------------------------------------------------------------------

test_rebuilt() {
	local before line
	net_ws_restricted WS_A || return 1
	before=$(wire_count "$WORLD_ECHO_NAME")
	nprobe "$WS_A" dns-raw edns-options "$WORLD_ECHO_NAME" || return 1
	assert_eq 0 "$PROBE_RC" "dns-raw edns-options exit code ($PROBE_OUT)"
	assert_probe rcode NOERROR
	assert_probe answer "$WORLD_ECHO"
	assert_eq $((before + 1)) "$(wire_count "$WORLD_ECHO_NAME")" "queries the world got for $WORLD_ECHO_NAME"
	line=$(awk -v n="$WORLD_ECHO_NAME" '$2 == n' "$WIRE_LOG" | tail -n 1)
	assert_eq "$WORLD_HOST $WORLD_ECHO_NAME qd=1 an=0 ns=0 ar=1 flags=0x0100 edns=1232 do=0 opts=none" \
		"$line" "what the world's DNS got"
}

test_formerr() {
	local before kind
	[[ -n ${WS_A:-} ]] || net_ws_restricted WS_A || return 1
	before=$(wire_count "$WORLD_ECHO_NAME")
	for kind in two-questions answer-record extra-record; do
		nprobe "$WS_A" dns-raw "$kind" "$WORLD_ECHO_NAME" || return 1
		assert_probe rcode FORMERR
	done
	assert_eq "$before" "$(wire_count "$WORLD_ECHO_NAME")" "queries the world got for the FORMERR ones"
	# The positive control: the plain query, asked of the world.
	nprobe "$WS_A" dns "$WORLD_ECHO_NAME" || return 1
	assert_probe rcode NOERROR
	assert_probe answer "$WORLD_ECHO"
	assert_eq $((before + 1)) "$(wire_count "$WORLD_ECHO_NAME")" "queries the world got after the plain one"
}

test_flood() {
	local ws_f ws_b flood_run ok
	net_ws_restricted ws_f || return 1
	net_ws_restricted ws_b || return 1
	run_start "$ws_f" "$(json_cmd "net-probe dns-flood $SLOW_NAME 20000")" || return 1
	flood_run=$RUN
	# The flood has reached the world (the resolver is forwarding it, the world holds it).
	if ! wait_for -t 30 wire_at_least "$SLOW_NAME" 32; then
		_fail "the world saw $(wire_count "$SLOW_NAME") queries for $SLOW_NAME after 30 s"
		return 1
	fi
	run_cmd "$ws_b" "i=0; while [ \$i -lt 7 ]; do net-probe dns $WORLD_ECHO_NAME; i=\$((i + 1)); done" || return 1
	PROBE_OUT=$(j .stdout)
	ok=$(grep -c '^rcode=NOERROR$' <<<"$PROBE_OUT")
	assert_eq 7 "$ok" "lookups of the second workspace answered NOERROR during the flood ($(grep '^rcode=' <<<"$PROBE_OUT" | sort | uniq -c | tr '\n' ' '))"
	assert_eq 7 "$(grep -c "^answer=$WORLD_ECHO\$" <<<"$PROBE_OUT")" "answers with the echo's address"
	# The lookups overlapped the flood.
	run_is_running "$ws_f" "$flood_run" || _fail "the flood ended before the second workspace's lookups did"
	run_wait "$ws_f" "$flood_run" 60 || return 1
	PROBE_OUT=$(j .stdout)
	diag "flood: $(tr '\n' ' ' <<<"$PROBE_OUT")"
	assert_le 1 "$(pval servfail)" "the flood's SERVFAIL answers"
	assert_le 1 "$(pval noerror)" "the flood's answered queries"
	assert_le 1 "$(j .dnsShed "$(counters_of "$ws_f")")" "the flooding workspace's counters.dnsShed"
	assert_eq 0 "$(j .dnsShed "$(counters_of "$ws_b")")" "the other workspace's counters.dnsShed"
}

# net_ws_restricted VAR: a restricted container workspace allowed the echo and the slow names.
net_ws_restricted() {
	new_cws "$1" "$(jq -nc --argjson e "$POLICY" '{network: "restricted", egress: $e}')"
}

run_test net-dns-rebuilt test_rebuilt
run_test net-dns-formerr test_formerr
run_test net-dns-flood test_flood
