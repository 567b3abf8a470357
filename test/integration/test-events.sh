#!/bin/bash
# GET /v1/events (docs/api.md, "Events") against a real controller that keeps 64 events: each
# state change of a run and a service in order, with strictly growing seq, filtered by workspace
# and type; a client that closes its connection itself and comes back with Last-Event-ID gets
# the rest with no duplicate and no loss; events no longer kept come as one gap with their exact
# count; a client that reads next to nothing while a crash-looping service makes ~2000 events
# stays bounded (a gap, then the newest), and after a controller restart seq goes on above every
# earlier one (a gap of unknown count first). Bad parameters are 400 naming them.
. "$(dirname "$0")/lib.sh"

EC=$SRC/test/integration/events-client.py
KEPT=64

require_controller --events-kept "$KEPT"
new_ws W || exit 1

# ec NAME PATH ARGS...: one events connection; its JSON in R and $TMP/NAME.json.
ec() {
	local name=$1 path=$2
	shift 2
	R=$(python3 "$EC" "$SOCK" "$path" "$@" 2>"$TMP/ec-err")
	[[ -n $R ]] || R="{\"error\":$(jq -Rs . <"$TMP/ec-err")}"
	printf '%s\n' "$R" >"$TMP/$name.json"
}

svc_state() {
	api -q GET "/v1/workspaces/$W/services/$1"
	[[ $(j .state) == "$2" ]]
}

t_events_in_order() {
	run_cmd "$W" 'echo hi' || return 1
	RUN1=$RUN
	api -q POST "/v1/workspaces/$W/services" \
		'{"name":"s1","command":"echo up; exec sleep 600","restart":{"policy":"no"}}'
	assert_eq 201 "$STATUS" "service created" || return 1
	wait_for -t 60 svc_state s1 running || { _fail "s1 not running: $BODY"; return 1; }
	api -q POST "/v1/workspaces/$W/services/s1/stop"
	wait_for -t 60 svc_state s1 stopped || { _fail "s1 not stopped: $BODY"; return 1; }
	ec all "/v1/events?workspace=$W&since=0" --until service:s1:stopped
	assert_eq 200 "$(j .status "$R")" "200" || { diag "$R"; return 1; }
	assert_eq '["created:running","ended:exited"]' \
		"$(j "[.events[] | select(.type == \"run\" and .id == \"$RUN1\") | \"\(.change):\(.state)\"]" "$R")" \
		"the run: created, then ended"
	local svc
	svc=$(j '[.events[] | select(.type == "service") | "\(.change):\(.state)"]' "$R")
	diag "service events: $svc"
	assert_match '^\["created:[a-z]+",.*"state:running",.*"state:stopped"\]$' "$svc" \
		"the service: created, running, stopped, in this order"
	assert_eq true "$(j '[.events[].seq] as $s | $s == ($s | sort | unique)' "$R")" \
		"seq strictly increasing"
	assert_eq "[\"$W\"]" "$(j '[.events[].workspaceId] | unique' "$R")" "only this workspace"
	assert_eq true "$(j '[.events[] | has("at") and has("change") and has("id")] | all' "$R")" \
		"each event has at, change, id"
	assert_eq '"workspace"' "$(j '.events[0].type' "$R" | jq -R .)" "the workspace's own first"

	ec runs "/v1/events?workspace=$W&types=run&since=0" --count 2
	assert_eq '["run","run"]' "$(j '[.events[].type]' "$R")" "types=run: runs only"
	ec none "/v1/events?workspace=${W%-*}-aaaaaaaaaaaaaaaaaaaaaaaaaa&since=0" --count 1 --timeout 2
	assert_eq 200 "$(j .status "$R")" "an id that names no workspace: 200"
	assert_eq 0 "$(j '.events | length' "$R")" "another workspace's filter: nothing"
}

# workspace= takes a name as every {id} of a path does: the events of the workspace holding it.
t_events_by_name() {
	api -q PATCH "/v1/workspaces/$W" '{"name":"ev-web"}'
	assert_eq 200 "$STATUS" "the workspace named" || return 1
	ec byid "/v1/events?workspace=$W&types=workspace,run&since=0" --count 3 --timeout 10
	ec byname "/v1/events?workspace=ev-web&types=workspace,run&since=0" --count 3 --timeout 10
	assert_eq 200 "$(j .status "$R")" "by name: 200" || { diag "$R"; return 1; }
	assert_eq "[\"$W\"]" "$(j '[.events[] | select(.type != "gap") | .workspaceId] | unique' "$R")" "only the named workspace's"
	assert_eq "$(jq -c '[.events[].seq]' "$TMP/byid.json")" "$(j '[.events[].seq]' "$R")" \
		"the same events as by its id"
	ec unknown "/v1/events?workspace=ev-none&since=0" --count 1 --timeout 3
	assert_eq "200 0" "$(j '"\(.status) \(.events | length)"' "$R")" \
		"a name no workspace holds: nothing, as an unknown id"
}

t_events_resume() {
	ec full "/v1/events?workspace=$W&since=0" --until service:s1:stopped
	local n
	n=$(j '.events | length' "$R")
	ec part1 "/v1/events?workspace=$W&since=0" --count 3
	assert_eq 3 "$(j '.events | length' "$R")" "first connection: 3 events, then closed"
	ec part2 "/v1/events?workspace=$W" --last-event-id "$(j .lastId "$R")" \
		--until service:s1:stopped
	assert_eq "$(jq -c '[.events[].seq]' "$TMP/full.json")" \
		"$(jq -sc '[.[].events[].seq]' "$TMP/part1.json" "$TMP/part2.json")" \
		"3 + the rest after Last-Event-ID = all $n, none twice, none lost"
	assert_eq 0 "$(jq '[.events[] | select(.event == "gap")] | length' "$TMP/part2.json")" "no gap"
}

t_events_gap() {
	local since last
	since=$(jq '.events[-1].seq' "$TMP/full.json")
	for i in $(seq 1 40); do
		run_cmd "$W" true || return 1
	done
	ec after "/v1/events?workspace=$W&types=run&since=0" --count "$KEPT" --timeout 5
	last=$(j '.events[-1].seq' "$R")
	ec gap "/v1/events?workspace=$W&since=$since" --count "$((KEPT + 1))" --timeout 10
	assert_eq gap "$(j '.events[0].event' "$R")" "first a gap" || { diag "$(_short "$R")"; return 1; }
	assert_eq "$((since + 1))" "$(j '.events[0].from' "$R")" "the gap starts after since"
	assert_eq "$((last - since - KEPT))" "$(j '.events[0].missed' "$R")" \
		"missed: every event not kept, exactly"
	assert_eq "$KEPT" "$(j '[.events[] | select(.event != "gap")] | length' "$R")" \
		"then the $KEPT kept"
	assert_eq "$last" "$(j '.events[-1].seq' "$R")" "up to the newest"
}

t_events_slow_client() {
	local since total p=$TMP/go-read
	ec now "/v1/events?workspace=$W&since=0" --count 200 --timeout 3
	since=$(j '.events[-1].seq' "$R")
	rm -f "$p"
	(python3 "$EC" "$SOCK" "/v1/events?workspace=$W&since=$since" --pause-file "$p" \
		--rcvbuf 4096 --until service:crash:exhausted --timeout 300 >"$TMP/slow.json") &
	local bg=$!
	api -q POST "/v1/workspaces/$W/services" \
		'{"name":"crash","command":"exit 1","restart":{"policy":"on-failure","maxRestarts":800,"delayMs":0}}'
	assert_eq 201 "$STATUS" "crash-looping service created" || return 1
	local t0=$SECONDS
	wait_for -t 240 svc_state crash exhausted || { _fail "crash not exhausted: $(_short "$BODY")"; return 1; }
	ec last "/v1/events?workspace=$W&types=service&since=0" --until service:crash:exhausted --timeout 10
	total=$(($(j '.events[-1].seq' "$R") - since))
	diag "events made while the client read next to nothing: $total in $((SECONDS - t0)) s; controller VmHWM $(vmhwm_kb "$CONTROLLER_PID") kB"
	touch "$p"
	wait "$bg"
	R=$(cat "$TMP/slow.json")
	assert_eq "service:crash:exhausted" "$(j '.events[-1] | "\(.type):\(.id):\(.state)"' "$R")" \
		"the slow client gets to the newest event" || { diag "$(_short "$R")"; return 1; }
	assert_le 1 "$(j '[.events[] | select(.event == "gap")] | length' "$R")" \
		"a gap each time it fell out of what is kept"
	assert_eq true "$(j '[.events[].seq] as $s | $s == ($s | sort | unique)' "$R")" \
		"no event twice, in order"
	assert_eq "$total" "$(j '([.events[] | select(.event == "gap") | .missed] | add) + ([.events[] | select(.event != "gap")] | length)' "$R")" \
		"delivered + missed = every event made"
	assert_le "$(j '[.events[] | select(.event != "gap")] | length' "$R")" "$((total - KEPT))" \
		"not every event was held for it"
}

t_events_restart() {
	local before cli_pid
	ec b "/v1/events?since=0" --count 1000 --timeout 3
	before=$(j '.events[-1].seq' "$R")
	# The CLI follows across the restart: its connection drops, it connects again by itself.
	cli events --workspace "$W" --types run --since "$before" --count 3 >"$TMP/cli-events" 2>"$TMP/cli-err" &
	cli_pid=$!
	stop_controller
	restart_controller || return 1
	run_cmd "$W" 'echo again' || return 1
	wait "$cli_pid"
	assert_eq 0 "$?" "cli events: exit 0 after 3 events" || diag "$(cat "$TMP/cli-err")"
	assert_eq "gap run:created run:ended" \
		"$(jq -r 'if .type == "gap" then "gap" else "\(.type):\(.change)" end' "$TMP/cli-events" | xargs)" \
		"cli events across the restart: the gap, then the run"
	ec after "/v1/events?workspace=$W&since=$before" --count 2 --timeout 10
	assert_eq gap "$(j '.events[0].event' "$R")" "after a restart: a gap first" || { diag "$R"; return 1; }
	assert_eq null "$(j '.events[0].missed' "$R")" "of unknown count"
	assert_le "$((before + 1))" "$(j '.events[1].seq' "$R")" "seq goes on above every earlier one"
}

t_events_bad() {
	ec b1 "/v1/events?types=run,bogus"
	assert_eq 400 "$(j .status "$R")" "unknown type: 400"
	assert_contains '"field":"types"' "$(j .body "$R")" "names types"
	ec b2 "/v1/events?since=x"
	assert_eq 400 "$(j .status "$R")" "bad since: 400"
	assert_contains '"field":"since"' "$(j .body "$R")" "names since"
	ec b3 "/v1/events?since=9007199254740992"
	assert_eq 400 "$(j .status "$R")" "since beyond the newest: 400"
	assert_contains 'beyond the newest event' "$(j .body "$R")" "says why"
	ec b4 "/v1/events" --last-event-id "abc"
	assert_eq 400 "$(j .status "$R")" "bad Last-Event-ID: 400"
	ec b5 "/v1/events?types=run&since=0" --count 1 --timeout 10
	assert_eq "200 run" "$(j '"\(.status) \(.events[0].type)"' "$R")" "positive control: 200"
}

run_test "events: each state change of a run and a service, in order" t_events_in_order
run_test "events: a workspace named instead of its id; a name none holds gives nothing" t_events_by_name
run_test "events: resumed with Last-Event-ID, no duplicate, no loss" t_events_resume
run_test "events: what is no longer kept is one gap with its count" t_events_gap
run_test "events: a client that reads next to nothing stays bounded" t_events_slow_client
run_test "events: seq grows across a controller restart" t_events_restart
run_test "events: bad parameters are 400 naming them" t_events_bad
