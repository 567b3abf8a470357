#!/bin/bash
# run-all: exclusive: net-world: the outside worlds of net-world.sh (documentation networks, routes, nft tables) are few per machine
# What the network refused, where the user looks (docs/api.md "Runs" network, "Refused
# destinations"; docs/cli.md "exec"), against the outside world of net-world.sh, each denial
# beside its positive control:
#   run        a run whose connection the policy refused has network.denied >= 1 and lastDenied
#              naming the address, port and protocol; a run that connects where it may, or does
#              nothing, has denied 0 and no lastDenied; a refused name shows up with its name
#   cli        exec prints one line on stderr naming the destination and the command that
#              allows it (the rules in force plus it); nothing with --json (the JSON has it);
#              nothing after a run without denials; a bridged workspace's line names the
#              --network-allow class
#   network    GET …/network lists the refused destinations, most recent first, with counts
#   none       a run on a workspace without a network has no network field
#   restart    a finished run's network survives a controller restart
# The probes run net-probe (test/helpers/net-probe.c) inside the busybox test image.
. "$(dirname "${BASH_SOURCE[0]}")/container-lib.sh"
. "$(dirname "${BASH_SOURCE[0]}")/net-world.sh"

NET_RANGE=${NET_RANGE:-10.$((212 + $$ % 8)).$((($$ / 8) % 250)).0/24}
NET_BRIDGE=stn$(($$ % 1000000))

net_prereqs "$NET_RANGE"
if ! world_up; then
	not_ok "world comes up" "see the diagnostics above"
	exit 1
fi
PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
NET_FLAGS=("$NET_FLAG_RANGE" "$NET_RANGE" "$NET_FLAG_BRIDGE" "$NET_BRIDGE" "$NET_FLAG_DNS" "$WORLD_DNS:53" "${NET_WORLD_FLAGS[@]}")
require_container_controller "${NET_FLAGS[@]}" --listen "tcp:127.0.0.1:$PORT"
CHROMIUM=${CHROMIUM:-/usr/bin/chromium}
ARTIFACTS=${STATION_TEST_ARTIFACTS:-$BUILD/test-artifacts}

# probe_run WS ARGS...: net-probe ARGS in WS, finished (BODY the run, RUN its id).
probe_run() {
	local ws=$1 q
	shift
	printf -v q '%q ' "$@"
	run_cmd "$ws" "net-probe $q" || return 1
	[[ $(j .status) == exited ]] || _fail "net-probe $*: $(j '{status, reason, stderr}')"
}

# expect_network WHAT JQ-FILTER EXPECTED: the run's network (BODY), filtered.
expect_network() {
	assert_eq "$3" "$(j ".network | $2")" "$1 (network: $(j .network))"
}

POLICY=
WS_R=
CLEAN_RUN=
REFUSED_RUN=
test_run_refused_address() {
	POLICY=$(jq -nc --arg e "$WORLD_ECHO/32" --argjson p "$WORLD_ECHO_PORT" \
		'{allow: [{cidr: $e, ports: [$p], proto: "tcp"}]}')
	net_ws WS_R restricted "$POLICY" || return 1
	# Positive controls: a run that does nothing, and one that connects where it may.
	run_cmd "$WS_R" true || return 1
	expect_network "a run that does nothing" '"\(.denied) \(.lastDenied)"' "0 null"
	probe_run "$WS_R" tcp "$WORLD_ECHO" "$WORLD_ECHO_PORT" || return 1
	assert_eq "connect=ok" "$(j .stdout | grep '^connect=')" "the allowed connection"
	expect_network "an allowed connection" '"\(.denied) \(.lastDenied)"' "0 null"
	# The refused one: the other host, which no rule allows.
	CLEAN_RUN=$RUN
	probe_run "$WS_R" tcp "$WORLD_OTHER" 80 || return 1
	REFUSED_RUN=$RUN
	assert_ne "connect=ok" "$(j .stdout | grep '^connect=')" "the refused connection"
	expect_network "a refused connection: denied" '.denied >= 1' true
	expect_network "a refused connection: lastDenied" \
		'.lastDenied | "\(.address) \(.port) \(.proto) \(.name)"' "$WORLD_OTHER 80 tcp null"
	expect_network "a refused connection: at" '.lastDenied.at | test("^[0-9-]+T")' true
	# The next run that does nothing does not inherit it.
	run_cmd "$WS_R" true || return 1
	expect_network "a later run that does nothing" '"\(.denied) \(.lastDenied)"' "0 null"
}

test_run_refused_name() {
	[[ -n $WS_R ]] || return 1
	probe_run "$WS_R" dns "$WORLD_OTHER_NAME" || return 1
	assert_match '^rcode=(NXDOMAIN|REFUSED)$' "$(j .stdout | grep '^rcode=')" "the refused name" || return 1
	expect_network "a refused name: denied" '.denied' 1
	expect_network "a refused name: lastDenied" '.lastDenied | "\(.name) \(.port) \(.proto)"' \
		"$WORLD_OTHER_NAME 53 udp"
	# Positive control: the same query in a bridged workspace is answered.
	local wb
	net_ws wb bridge || return 1
	probe_run "$wb" dns "$WORLD_OTHER_NAME" || return 1
	assert_eq "rcode=NOERROR" "$(j .stdout | grep '^rcode=')" "bridge: the name"
	expect_network "bridge: an answered name" '"\(.denied) \(.lastDenied)"' "0 null"
}

test_cli_line() {
	[[ -n $WS_R ]] || return 1
	local err rc
	err=$(cli exec "$WS_R" -- net-probe tcp "$WORLD_OTHER" 80 2>&1 >/dev/null)
	rc=$?
	assert_eq 1 "$rc" "exec's exit status (net-probe's)"
	assert_eq 1 "$(grep -c '^station-sandbox: the network refused' <<<"$err")" "lines on stderr: $err" || return 1
	assert_contains "while this ran, the last to $WORLD_OTHER:80/tcp (network restricted" "$err" "the destination"
	assert_contains "station-sandbox network $WS_R --allow $WORLD_ECHO/32:$WORLD_ECHO_PORT/tcp --allow $WORLD_OTHER:80/tcp)" \
		"$err" "the command that allows it"
	# A refused name: named, and the hint allows the name.
	err=$(cli exec "$WS_R" -- net-probe dns "$WORLD_OTHER_NAME" 2>&1 >/dev/null)
	assert_contains "the last a lookup of $WORLD_OTHER_NAME (" "$err" "the refused name"
	assert_contains "--allow $WORLD_OTHER_NAME)" "$err" "the name's hint"
	# --json: no line; the JSON has the count.
	local out
	out=$(cli exec --json "$WS_R" -- net-probe tcp "$WORLD_OTHER" 80 2>"$TMP/json-err")
	assert_eq "" "$(grep 'network refused' "$TMP/json-err")" "--json's stderr"
	assert_eq true "$(j '.network.denied >= 1' "$out")" "--json's network.denied"
	# Positive control: nothing after a run without denials.
	err=$(cli exec "$WS_R" -- net-probe tcp "$WORLD_ECHO" "$WORLD_ECHO_PORT" 2>&1 >/dev/null)
	assert_eq "" "$(grep 'network refused' <<<"$err")" "stderr after an allowed connection"
	# A bridged workspace: the worker blocks the metadata range; the line names its class.
	local wb
	net_ws wb bridge || return 1
	err=$(cli exec "$wb" -- net-probe tcp 169.254.169.254 80 2>&1 >/dev/null)
	assert_contains "the last to 169.254.169.254:80/tcp" "$err" "bridge: the destination"
	assert_contains "--network-allow link-local)" "$err" "bridge: the class"
	# The world's router is a gateway of the worker's routes: its class, read from the kernel.
	err=$(cli exec "$wb" -- net-probe tcp "$WORLD_ROUTER" 80 2>&1 >/dev/null)
	assert_contains "the last to $WORLD_ROUTER:80/tcp (network bridge" "$err" "bridge: the router"
	assert_contains "--network-allow gateways)" "$err" "bridge: the router's class"
	api -q GET "/v1/workspaces/$wb/network"
	assert_eq gateways "$(j "[.refused[] | select(.address == \"$WORLD_ROUTER\")][0].class")" \
		"GET network: the router's class"
	# Restricted: no egress rule opens the worker's own classes, so the hint is the operator's.
	err=$(cli exec "$WS_R" -- net-probe tcp 169.254.169.254 80 2>&1 >/dev/null)
	assert_contains "(network restricted: the worker blocks this address for workspaces; an operator opens the link-local class with station-sandboxd --network-allow link-local)" \
		"$err" "restricted: a fenced class's hint"
	err=$(cli exec "$wb" -- net-probe tcp "$WORLD_ECHO" "$WORLD_ECHO_PORT" 2>&1 >/dev/null)
	assert_eq "" "$(grep 'network refused' <<<"$err")" "bridge: stderr after an allowed connection"
}

test_network_refused_list() {
	[[ -n $WS_R ]] || return 1
	local before after
	api -q GET "/v1/workspaces/$WS_R/network"
	assert_status 200 "GET network" || return 1
	before=$(j "[.refused[] | select(.address == \"$WORLD_OTHER\" and .port == 80)][0].count // 0")
	probe_run "$WS_R" tcp "$WORLD_OTHER" 80 || return 1
	expect_network "the refused connection: denied" '.denied >= 1' true || return 1
	api -q GET "/v1/workspaces/$WS_R/network"
	assert_status 200 "GET network" || return 1
	# Most recent first: this connection.
	assert_eq "$WORLD_OTHER 80 tcp null" "$(j '.refused[0] | "\(.address) \(.port) \(.proto) \(.name)"')" \
		"the most recent refused destination ($(j '.refused[0]'))"
	after=$(j '.refused[0].count')
	assert_eq 1 "$((after > before))" "its count went from $before to $after"
	assert_eq true "$(j '.refused[0] | (.firstAt <= .lastAt) and (.lastAt | test("^[0-9-]+T"))')" "its times"
	assert_eq 1 "$(j "[.refused[] | select(.name == \"$WORLD_OTHER_NAME\")] | length")" \
		"the refused name is listed once ($(j .refused))"
	# Positive control: the allowed destination is not listed.
	assert_eq 0 "$(j "[.refused[] | select(.address == \"$WORLD_ECHO\" and .port == $WORLD_ECHO_PORT)] | length")" \
		"the allowed destination"
}

test_none_no_field() {
	local wn
	net_ws wn none || return 1
	run_cmd "$wn" "wget -T 1 -q -O /dev/null http://$WORLD_OTHER/ || true" || return 1
	assert_eq false "$(j 'has("network")')" "a run without a network: $(j .network)"
}

test_restart_keeps() {
	[[ -n $WS_R ]] || return 1
	local run want
	probe_run "$WS_R" tcp "$WORLD_OTHER" 80 || return 1
	run=$RUN
	want=$(j .network)
	[[ $want != null ]] || _fail "no network before the restart" || return 1
	stop_controller
	restart_controller || _fail "the controller did not start again" || return 1
	run_get "$WS_R" "$run"
	assert_eq "$want" "$(j .network)" "the run's network after a restart"
	api -q GET "/v1/workspaces/$WS_R/commands"
	assert_eq "$want" "$(j ".commands[] | select(.id == \"$run\") | .network")" "in the list"
}

# The dashboard's workspace page: the refused destination in its summary, each run's count in
# the history (0 for the allowed connection: the positive control), the run's facts.
t_dashboard() {
	[[ -n $REFUSED_RUN && -n $CLEAN_RUN ]] || { _fail "no runs from denials-run-refused-address"; return 1; }
	local R shot=$ARTIFACTS/dashboard-denials.png
	if [[ ! -x $CHROMIUM ]] || ! command -v node >/dev/null || ! command -v npm >/dev/null; then
		skip "$1" "chromium, node and npm are needed (scripts/install-deps)"
		return 2
	fi
	if ! npm_tools; then # playwright-core, pinned in test/npm-tools
		skip "$1" "$NPM_TOOLS_ERROR"
		return 2
	fi
	mkdir -p "$ARTIFACTS"
	rm -f "$shot"
	R=$(PLAYWRIGHT_DIR=$NPM_TOOLS CHROMIUM=$CHROMIUM HOME=$TMP timeout 240 node \
		"$SRC/test/integration/dashboard-denials.mjs" "http://127.0.0.1:$PORT" "$(tr -d '\n' <"$ROOT/admin.token")" \
		"$shot" "$WS_R" "$WORLD_OTHER:80/tcp" "$REFUSED_RUN" "$CLEAN_RUN" 2>"$TMP/browser.err")
	[[ -n $R ]] || R="{\"error\":\"no result: $(tail -c 300 "$TMP/browser.err" | tr '\n"' ' ')\"}"
	if [[ $(j .ok "$R") != true ]]; then
		_fail "the session stopped at \"$(j .step "$R")\": $(j .error "$R")"
		diag "page: $(j .pageText "$R" | tr '\n' ' ' | cut -c 1-600)"
		return 1
	fi
	assert_eq true "$(j ".refusedDests | index(\"$WORLD_OTHER:80/tcp\") != null" "$R")" "the summary's refused list: $(j .refusedDests "$R")"
	assert_eq true "$(j '.refusedCell | tonumber >= 1' "$R")" "the refused run's cell ($(j .refusedCell "$R"))"
	assert_contains "the last $WORLD_OTHER:80/tcp" "$(j .refusedCellTitle "$R")" "its title"
	assert_eq 0 "$(j .cleanCell "$R")" "the allowed connection's cell"
	assert_contains "the last $WORLD_OTHER:80/tcp" "$(j .runDenied "$R")" "the run's facts"
	assert_eq '[]' "$(j .pageErrors "$R")" "no script error"
	[[ -s $shot ]] && note "screenshot: $shot"
}

run_test denials-run-refused-address test_run_refused_address
run_test denials-run-refused-name test_run_refused_name
run_test denials-cli-line test_cli_line
run_test denials-network-refused test_network_refused_list
run_test denials-none test_none_no_field
run_or_skip denials-dashboard t_dashboard
run_test denials-restart test_restart_keeps
