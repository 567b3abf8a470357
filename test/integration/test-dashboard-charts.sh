#!/bin/bash
# run-all: not under sanitizers: a browser drives the dashboard; the API paths it uses run in the other scripts
# The dashboard's usage charts in headless Chromium (dashboard-charts.mjs), against a controller
# sampling every 200 ms: each chart shows the API's own points (compared with the history asked
# again), a workspace running a CPU loop charts above an idle one (the control, near 0) with its
# limits drawn, whatever share of a CPU the loop gets on a loaded machine; the worker's totals;
# a sparkline per workspace in the list; a bar per run on the timeline; the live output of a run started from the form in view;
# a running service's byte count moving while shown; nothing asked while the page is hidden; no
# console error. Screenshots under the build directory (their paths are printed).
. "$(dirname "$0")/lib.sh"

CHROMIUM=${CHROMIUM:-/usr/bin/chromium}
SHOTS=$BUILD/test-artifacts/dashboard-charts

PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
URL=http://127.0.0.1:$PORT
require_controller --listen "tcp:127.0.0.1:$PORT" --usage-interval-ms 200
TOKEN=$(tr -d '\n' <"$ROOT/admin.token")

R=
RUNS=()
t_browser() {
	local busy idle body
	if [[ ! -x $CHROMIUM ]] || ! command -v node >/dev/null || ! command -v npm >/dev/null; then
		skip "$1" "chromium, node and npm are needed (scripts/install-deps)"
		return 2
	fi
	if ! npm_tools; then # playwright-core, pinned in test/npm-tools
		skip "$1" "$NPM_TOOLS_ERROR"
		return 2
	fi
	new_ws busy '{"adapter":"host","cpus":1,"memoryMb":256}' || return 1
	new_ws idle '{"adapter":"host"}' || return 1
	BUSY=$busy IDLE=$idle
	for body in '{"command":"true"}' '{"command":"exit 3"}' '{"command":"sleep 0.3"}'; do
		run_start "$busy" "$body" 5000 || return 1
		RUNS+=("$RUN")
	done
	# Two loops under a 1 CPU limit: a whole CPU when the machine is free, and twice one
	# thread's share when other work is contending for it.
	api -q POST "/v1/workspaces/$busy/services" '{"name":"spin","command":"sh -c \"while :; do :; done\" & while :; do :; done"}'
	assert_eq 201 "$STATUS" "the CPU loop starts" || return 1
	api -q POST "/v1/workspaces/$busy/services" '{"name":"ticker","command":"while :; do echo tick; sleep 0.2; done"}'
	assert_eq 201 "$STATUS" "the ticker starts" || return 1
	rm -rf "$SHOTS"
	R=$(PLAYWRIGHT_DIR=$NPM_TOOLS CHROMIUM=$CHROMIUM HOME=$TMP timeout 600 node \
		"$SRC/test/integration/dashboard-charts.mjs" "$URL" "$TOKEN" "$busy" "$idle" "$SHOTS" \
		2>"$TMP/browser.err")
	[[ -n $R ]] || R="{\"error\":\"no result: $(tail -c 300 "$TMP/browser.err" | tr '\n"' ' ')\"}"
	cp "$TMP/browser.err" "$SHOTS/browser.log" 2>/dev/null
	note "screenshots: $(j '.shots | join(" ")' "$R")"
	if [[ $(j .ok "$R") != true ]]; then
		_fail "the session stopped at \"$(j .step "$R")\": $(j .error "$R")"
		diag "console: $(j .console "$R")"
		diag "last steps: $(grep '^# step' "$TMP/browser.err" | tail -n 4 | tr '\n' ' ')"
		return 1
	fi
	assert_eq '[]' "$(j .console "$R")" "no console errors or CSP reports"
}

browser_ran() {
	[[ -n $R && $(j .ok "$R") == true ]] || {
		skip "$1" "needs the browser session"
		return 1
	}
}

t_workspace_chart() {
	browser_ran "$1" || return 2
	note "busy: $(j '.busyCpu.values | map(. * 100 | round / 100) | .[-8:]' "$R") cores, idle: $(j '.idleCpu.values | map(. * 100 | round / 100) | .[-8:]' "$R")"
	# What a loop gets of a CPU depends on the machine's other work: asserted are the chart's
	# points (the API's own, the workspace's and no other's) and busy against idle.
	note "busy against the API: $(j .busyMatch "$R"), idle: $(j .idleMatch "$R")"
	assert_le 3 "$(j .busyMatch.compared "$R")" "busy points compared with the API's"
	assert_eq '[]' "$(j .busyMatch.mismatches "$R")" "the busy chart's points are the API's"
	assert_le 1 "$(j .idleMatch.compared "$R")" "idle points compared with the API's"
	assert_eq '[]' "$(j .idleMatch.mismatches "$R")" "the idle chart's points are the API's"
	assert_eq true "$(j '(.busyCpu.values[-3:] | min) > (.idleCpu.values | max)' "$R")" \
		"the loop's newest 3 points above every idle point"
	assert_eq "$(j '.busyCpu.x | length' "$R")" "$(j '.busyCpu.values | length' "$R")" "a value per time"
	assert_eq true "$(j '.busyCpu.x == (.busyCpu.x | sort)' "$R")" "times in order"
	assert_eq 1 "$(j .busyCpu.limit "$R")" "the cpus limit line"
	assert_eq $((256 * 1024 * 1024)) "$(j .busyMemory.limit "$R")" "the memory limit line"
	assert_eq true "$(j '[.busyMemory.values[] | select(. > 0)] | length > 0' "$R")" "memory in use"
	assert_eq 2 "$(j '.busyCanvas | length' "$R")" "two charts drawn"
	assert_contains "limit" "$(j '.busyLegend | join(" ")' "$R")" "the legend names the limit"
	# The control: a workspace running nothing charts near 0 and has no limit lines.
	assert_le 3 "$(j '.idleCpu.values | length' "$R")" "idle points"
	assert_eq 0 "$(j '[.idleCpu.values[] | select(. > 0.1)] | length' "$R")" "idle points above 0.1 cores"
	assert_eq null "$(j .idleCpu.limit "$R")" "no cpus limit, no line"
}

t_worker_chart() {
	browser_ran "$1" || return 2
	assert_le 3 "$(j '.worker.values | length' "$R")" "the worker's points"
	assert_eq true "$(j '.worker.values[-3:] | all(. > 0)' "$R")" "the worker's total holds the loop"
	assert_le 3 "$(j .workerMatch.compared "$R")" "worker points compared with the API's"
	assert_eq '[]' "$(j .workerMatch.mismatches "$R")" "the worker chart's points are the API's"
	api -q GET /v1/worker
	assert_eq "$(j .capacity.cpus)" "$(j .worker.limit "$R")" "the worker's CPUs as its line"
	assert_eq "$(j .capacity.memoryBytes.total)" "$(j .workerMemory.limit "$R")" "the host's memory as its line"
}

t_sparklines() {
	browser_ran "$1" || return 2
	assert_eq true "$(j '.sparks | all(.svg and .points > 0)' "$R")" "a sparkline per workspace"
	assert_eq true "$(j '.sparks[0].last > .sparks[1].last' "$R")" "the busy workspace's ends above the idle one's"
	assert_eq true "$(j '.sparks[1].last < 0.1' "$R")" "the idle one's near 0"
}

t_timeline() {
	browser_ran "$1" || return 2
	assert_eq "$(printf '%s\n' "${RUNS[@]}" | sort | jq -Rsc 'split("\n") | map(select(. != ""))')" \
		"$(j '[.bars[].id] | sort' "$R")" "a bar per run"
	assert_eq '["exited","exited","exited"]' "$(j '[.bars[].status]' "$R")" "their statuses"
	assert_eq 2 "$(j '[.bars[] | select(.cls | test("\\bok\\b"))] | length' "$R")" "exit 0 drawn as ok"
	assert_eq 1 "$(j '[.bars[] | select(.cls | test("\\bbad\\b"))] | length' "$R")" "exit 3 drawn as bad"
	assert_eq true "$(j '.bars | all(.width >= 3)' "$R")" "every bar visible"
	assert_eq 4 "$(j .barsAfterRun "$R")" "a run started from the page adds its bar"
	assert_eq 0 "$(j .idleRuns "$R")" "no runs, no bars"
}

t_live_output_in_view() {
	browser_ran "$1" || return 2
	note "output at $(j .outputRect "$R")"
	assert_eq true "$(j '.outputRect.top >= 0 and .outputRect.top + 300 <= .outputRect.innerHeight' "$R")" \
		"the live output's top in the window, 300 px of room below it"
	assert_match '^stdout [0-9.]+ (B|KiB), stderr 0 B so far$' "$(j .runBytesLive "$R")" "the byte count while it runs"
}

t_service_counts() {
	browser_ran "$1" || return 2
	note "seen: $(j .serviceCounts "$R")"
	# The ticker writes 5 lines a second; over 8 s the shown count changes every poll (2 s),
	# where a count refreshed with the list every 10 s shows at most two values.
	assert_le 3 "$(j '.serviceCounts | length' "$R")" "distinct counts shown in 8 s"
	note "service logs at $(j .serviceLogsRect "$R")"
	assert_eq true "$(j '.serviceLogsRect.top >= 0 and .serviceLogsRect.bottom <= .serviceLogsRect.innerHeight' "$R")" \
		"a started service's live logs wholly in the window"
}

t_hidden() {
	browser_ran "$1" || return 2
	assert_eq 0 "$(j .historyWhileHidden "$R")" "history requests while hidden"
	assert_eq true "$(j .historyWhenShown "$R")" "asked again when shown"
	assert_eq '[]' "$(j .chartsAfterLeaving "$R")" "a left workspace's charts are gone"
}

run_or_skip "headless Chromium: the charts, the timeline, the sparklines" t_browser
run_or_skip "a workspace's CPU and memory with their limits; an idle one near 0" t_workspace_chart
run_or_skip "the worker's totals with its CPUs and memory" t_worker_chart
run_or_skip "a CPU sparkline per workspace in the list" t_sparklines
run_or_skip "the runs timeline: a bar per run, coloured by status" t_timeline
run_or_skip "a started run's live output opens in view, its byte count current" t_live_output_in_view
run_or_skip "a running service's byte count stays current while shown; a started one's logs in view" t_service_counts
run_or_skip "nothing asked while hidden; nothing left after leaving" t_hidden
