#!/bin/bash
# run-all: not under sanitizers: a browser drives the dashboard; the API paths it uses run in the other scripts
# The dashboard as a place to work, in headless Chromium (dashboard-work.mjs): the walk-through's
# fixes, live resource use, the log viewer, a phone-sized window, a screenshot of every page at
# desktop size and at 390×844 (kept under the build directory), and no request to another
# origin. Facts the page saw are checked here, the rest through the API.
. "$(dirname "$0")/lib.sh"

CHROMIUM=${CHROMIUM:-/usr/bin/chromium}
SHOTS=$BUILD/test-artifacts/dashboard-work

PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
URL=http://127.0.0.1:$PORT
require_controller --listen "tcp:127.0.0.1:$PORT"
TOKEN=$(tr -d '\n' <"$ROOT/admin.token")

R=
t_browser() {
	local ws gone
	if [[ ! -x $CHROMIUM ]] || ! command -v node >/dev/null || ! command -v npm >/dev/null; then
		skip "$1" "chromium, node and npm are needed (scripts/install-deps)"
		return 2
	fi
	if ! npm_tools; then # playwright-core, pinned in test/npm-tools
		skip "$1" "$NPM_TOOLS_ERROR"
		return 2
	fi
	new_ws ws '{"adapter":"host","memoryMb":512}' || return 1
	new_ws gone '{"adapter":"host"}' || return 1
	WS=$ws
	rm -rf "$SHOTS"
	R=$(DEBUG=${DASH_DEBUG:-} PLAYWRIGHT_DIR=$NPM_TOOLS CHROMIUM=$CHROMIUM HOME=$TMP timeout 600 node \
		"$SRC/test/integration/dashboard-work.mjs" "$URL" "$TOKEN" "$ws" "$gone" "$SHOTS" \
		2>"$TMP/browser.err")
	[[ -n $R ]] || R="{\"error\":\"no result: $(tail -c 300 "$TMP/browser.err" | tr '\n"' ' ')\"}"
	cp "$TMP/browser.err" "$SHOTS/browser.log" 2>/dev/null
	note "screenshots: $SHOTS ($(j '.shots | length' "$R") pages)"
	if [[ $(j .ok "$R") != true ]]; then
		_fail "the session stopped at \"$(j .step "$R")\": $(j .error "$R")"
		diag "page: $(j .pageText "$R" | tr '\n' ' ' | cut -c 1-600)"
		diag "console: $(j .console "$R")"
		diag "output view: $(j .debug "$R")"
		diag "navigations: $(j .navigations "$R")"
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

t_origin() {
	browser_ran "$1" || return 2
	assert_eq '[]' "$(j .foreignRequests "$R")" "requests to another origin"
	assert_le 50 "$(j .requests "$R")" "requests seen (positive control)"
}

t_screenshots() {
	local name size
	browser_ran "$1" || return 2
	for name in worker-desktop workspace-commands-desktop workspace-services-desktop \
		workspace-terminal-desktop workspace-terminals-desktop workspace-gone-desktop \
		worker-phone workspace-commands-phone workspace-services-phone workspace-terminals-phone \
		workspace-terminal-phone workspace-gone-phone; do
		size=$(stat -c %s "$SHOTS/$name.png" 2>/dev/null || echo 0)
		assert_le 1000 "$size" "screenshot $name.png"
	done
}

t_timeouts_in_seconds() {
	browser_ran "$1" || return 2
	assert_eq "Timeout (s)" "$(j .timeoutLabel "$R")" "the field's label"
	assert_eq 'Timeout: "0" is not a number of seconds from 0.001 to 86400.' "$(j .badTimeoutError "$R")" \
		"a bad timeout is refused by name"
	api -q GET "/v1/workspaces/$WS/commands/$(j .timeoutRun "$R")"
	assert_eq 1500 "$(j .timeoutMs)" "1.5 s typed, 1500 ms sent"
	assert_eq timed_out "$(j .status)" "the run timed out"
	api -q GET "/v1/workspaces/$WS/services/alpha"
	assert_eq 250 "$(j .restart.delayMs)" "a service delay of 0.25 s is 250 ms"
	assert_match '^[0-9.]+ (s|min)' "$(j .workerTimeoutText "$R")" "the worker's default timeout in seconds"
}

# The create form's limits: empty means no CPU limit and the worker's defaults, as it says.
t_limit_placeholders() {
	browser_ran "$1" || return 2
	api -q GET /v1/worker
	assert_eq "[\"no limit\",\"worker default: $(j .limits.defaultMemoryMb) MiB\",\"worker default: $(j .limits.defaultPidsLimit)\"]" \
		"$(j .limitPlaceholders "$R")" "placeholders of CPUs, memory, processes"
}

t_elapsed() {
	browser_ran "$1" || return 2
	assert_match '^[0-9.]+ (ms|s)$' "$(j '.elapsed[0]' "$R")" "elapsed clock"
	assert_ne "$(j '.elapsed[0]' "$R")" "$(j '.elapsed[1]' "$R")" "the clock moves"
}

t_usage() {
	browser_ran "$1" || return 2
	assert_eq true "$(j '.runCpuGrew[1] > .runCpuGrew[0]' "$R")" "a busy command's cpu grows on the page"
	assert_match ' CPU.* · [0-9.]+ (B|KiB|MiB)$' "$(j .runUsageText "$R")" "the command's use"
	assert_match 'memory [0-9.]+ (B|KiB|MiB|GiB) of 512.0 MiB$' "$(j .wsUsageText "$R")" "the workspace's use"
	assert_eq true "$(j .historyUsage "$R")" "the history row of a running command shows its use"
	assert_match ' · [0-9.]+ (KiB|MiB)$' "$(j .serviceUsageText "$R")" "a service's use"
	assert_eq 0 "$(j .usageWhileHidden "$R")" "usage requests while the page was hidden"
	assert_le 1 "$(j .usageWhenShown "$R")" "a usage request once shown again (positive control)"
}

t_log_viewer() {
	browser_ran "$1" || return 2
	assert_eq '"out1\nout2\nout3\n"' "$(j '.filterStdout | tojson' "$R")" "stdout only"
	assert_eq '"err1\nerr2\nerr3\n"' "$(j '.filterStderr | tojson' "$R")" "stderr only"
	assert_eq '["","err1","err2","err3","out1","out2","out3"]' "$(j '.filterAll | split("\n") | sort' "$R")" "both streams"
	assert_eq 1/3 "$(j .searchCount "$R")" "search: count"
	assert_eq '["err","err","err"]' "$(j .searchMarks "$R")" "search: highlighted (case-insensitive)"
	assert_eq err1 "$(j .searchCurrent "$R")" "search: the first match is current"
	assert_eq '["2/3","err2"]' "$(j .searchNext "$R")" "search: next"
	assert_eq 3/3 "$(j .searchPrevWraps "$R")" "search: previous wraps around"
	assert_eq 'no match' "$(j .searchUnderFilter "$R")" "search: only what the filter shows"
	assert_eq '"out1\nout2\nout3\n"' "$(j '.copied | tojson' "$R")" "copy takes what is shown"
	assert_eq "run-$(j .streamsRun "$R").stderr.txt" "$(j .downloadName "$R")" "download name"
	assert_eq '"err1\nerr2\nerr3\n"' "$(j '.downloaded | tojson' "$R")" "download content"
	assert_eq 1 "$(j .followAtStart "$R")" "auto-scroll on at first"
	assert_eq 0 "$(j .followAfterPause "$R")" "paused"
	assert_eq true "$(j .pausedStays "$R")" "paused: new output does not move the view"
	assert_eq true "$(j .resumedAtBottom "$R")" "auto-scroll resumes at the bottom"
	assert_eq true "$(j .scrollUpPauses "$R")" "scrolling up pauses"
}

t_service_logs() {
	browser_ran "$1" || return 2
	assert_contains beta-line "$(j .betaLogs "$R")" "beta's logs (positive control)"
	[[ $(j .betaLogs "$R") == *alpha-line* ]] && _fail "beta's logs still hold alpha's lines"
	assert_eq '' "$(j .gammaLogs "$R")" "a stopped service shows nothing of the previous one's logs"
}

t_not_found() {
	browser_ran "$1" || return 2
	assert_eq 200 "$(j .deleteStatus "$R")" "the workspace was deleted"
	assert_eq true "$(j '.runningBefore.intervals > 0 and .runningBefore.streams > 0' "$R")" \
		"timers and a log stream ran before (positive control)"
	assert_eq '{"intervals":0,"sockets":0,"streams":0}' "$(j .runningAfter "$R")" "nothing runs after"
	assert_eq 0 "$(j .goneTabs "$R")" "no tabs or forms stay"
	assert_contains "Workspace not found" "$(j .goneText "$R")" "the page says so"
	assert_eq true "$(j .backWorks "$R")" "the way back works"
	assert_eq '{"intervals":0,"sockets":0,"streams":0}' "$(j .unknownRunning "$R")" "an unknown workspace polls nothing"
	assert_eq false "$(j .unknownLoading "$R")" "no never-ending Loading"
}

t_restart_confirm() {
	browser_ran "$1" || return 2
	assert_eq "Restart workspace $WS? Its processes are killed and its agent starts again. This ends 1 running command, 2 running services and 1 open terminal (services set to autostart start again)." \
		"$(j .restartQuestion "$R")" "the question names what ends"
	assert_eq running "$(j .afterDismiss "$R")" "dismissed: the command still runs"
	assert_ne running "$(j .afterAccept "$R")" "accepted: the restart ended it"
}

t_terminal() {
	browser_ran "$1" || return 2
	assert_eq xterm "$(j .terminalRenderer "$R")" "renderer"
	assert_eq "$(j .termSizeFitted.api "$R")" "$(j .termSizeFitted.shown "$R")" "the header's size is the fitted one"
	assert_ne 100×30 "$(j .termSizeFitted.shown "$R")" "fitted, not the size it was opened with"
	assert_eq "$(j .termSizeResized.api "$R")" "$(j .termSizeResized.shown "$R")" "the header follows a resize"
	assert_ne "$(j .termSizeFitted.shown "$R")" "$(j .termSizeResized.shown "$R")" "the size changed"
	assert_contains "exit code 7" "$(j .termEnded "$R")" "an ended terminal says how it ended"
	assert_eq true "$(j .termReattachHidden "$R")" "no reattach for an ended terminal"
	assert_eq true "$(j .termKeptOutput "$R")" "what it showed stays"
	assert_eq true "$(j .termReopenedReattachHidden "$R")" "opened again: no reattach"
	assert_eq ended "$(j .termReopenedConn "$R")" "opened again: not attached"
}

t_phone() {
	local name
	browser_ran "$1" || return 2
	for name in worker workspace-commands workspace-services workspace-terminals workspace-terminal workspace-gone; do
		assert_le "$(j ".phone[\"$name\"].scrollWidth" "$R")" 390 "$name: page width at 390×844"
		assert_eq '[]' "$(j ".phone[\"$name\"].headerOutside" "$R")" "$name: header controls inside the window"
	done
	assert_eq true "$(j .phoneTable.wrapped "$R")" "the history table is in a scroll box"
	assert_le "$(j .phoneTable.wrapRight "$R")" 390 "the scroll box fits the window"
	assert_eq auto "$(j .phoneTable.overflowX "$R")" "the box scrolls sideways"
}

run_or_skip "headless Chromium: a working session at desktop and phone size" t_browser
run_or_skip "no request leaves the controller's origin" t_origin
run_or_skip "a screenshot of every page at both sizes" t_screenshots
run_or_skip "timeouts and delays are typed in seconds" t_timeouts_in_seconds
run_or_skip "the create form's empty limits say what they mean" t_limit_placeholders
run_or_skip "a running command shows a live elapsed clock" t_elapsed
run_or_skip "live resource use of the workspace, a command and a service; none while hidden" t_usage
run_or_skip "log viewer: filter, search, copy, download, pause and resume" t_log_viewer
run_or_skip "service logs show the selected service only" t_service_logs
run_or_skip "a deleted or unknown workspace: not found, nothing left running" t_not_found
run_or_skip "restart asks first, naming what it ends" t_restart_confirm
run_or_skip "terminal: current size in the header; an ended one offers no reattach" t_terminal
run_or_skip "390×844: no horizontal scroll, header controls visible, tables scroll in cards" t_phone
