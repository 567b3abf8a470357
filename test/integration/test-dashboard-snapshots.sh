#!/bin/bash
# run-all: not under sanitizers: a browser drives the dashboard; the API paths it uses run in the other scripts
# The dashboard's pause/resume, Snapshots tab and Fork dialog in headless Chromium
# (dashboard-snapshots.mjs) against a container workspace holding a file in HOME: Pause turns
# the badge "paused" (a colour of its own, in the list too) and the API says paused, Resume
# says ready; paused again, a command is refused on the page in words with a Resume button and
# no run is made (the control: after that Resume the same command runs); the Snapshots tab
# takes a named snapshot, listed as the API lists it; Fork refuses 101 on the page and makes
# nothing, 2 gives two links, each opening a ready workspace that holds the file; deleting the
# fork's snapshot, which its forks run on, is refused on the page (the control: another
# snapshot is deleted); "Create workspace from it" and the create form (From snapshot,
# auto-resume, pause when idle) make workspaces from it, and a command on the paused
# auto-resume one runs and resumes it. No console error but the 409s the steps expect.
# Screenshots land in BUILD/test-artifacts/dashboard-snapshots/.
# shellcheck disable=SC2016 # "$HOME/marker": the workspace's HOME, expanded by its shell
. "$(dirname "$0")/container-lib.sh"

CHROMIUM=${CHROMIUM:-/usr/bin/chromium}
SHOTS=${STATION_TEST_ARTIFACTS:-$BUILD/test-artifacts}/dashboard-snapshots

free_port() {
	python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
PORT=$(free_port)
URL=http://127.0.0.1:$PORT
require_container_controller --listen "tcp:127.0.0.1:$PORT"
TOKEN=$(tr -d '\n' <"$ROOT/admin.token")

WS=
t_setup() {
	new_cws WS '{"network":"none"}' || return 1
	run_cmd "$WS" 'echo forked-content >"$HOME/marker"' || return 1
	assert_eq 0 "$(j .exitCode)" "a file written in HOME" || return 1
	api -q GET "/v1/snapshots"
	assert_status 200 "GET /v1/snapshots answers" || return 1
	api -q GET "/v1/workspaces/$WS"
	assert_eq ready "$(j .state)" "the workspace is ready"
}

R=
t_browser() {
	if [[ ! -x $CHROMIUM ]] || ! command -v node >/dev/null || ! command -v npm >/dev/null; then
		skip "$1" "chromium, node and npm are needed (scripts/install-deps)"
		return 2
	fi
	if ! npm_tools; then # playwright-core, pinned in test/npm-tools
		skip "$1" "$NPM_TOOLS_ERROR"
		return 2
	fi
	[[ -n $WS ]] || {
		skip "$1" "needs the workspace"
		return 2
	}
	rm -rf "$SHOTS"
	mkdir -p "$SHOTS"
	R=$(PLAYWRIGHT_DIR=$NPM_TOOLS CHROMIUM=$CHROMIUM HOME=$TMP timeout 600 node \
		"$SRC/test/integration/dashboard-snapshots.mjs" "$URL" "$TOKEN" "$WS" "$SHOTS" \
		2>"$TMP/browser.err")
	[[ -n $R ]] || R="{\"error\":\"no result: $(tail -c 300 "$TMP/browser.err" | tr '\n"' ' ')\"}"
	cp "$TMP/browser.err" "$SHOTS/browser.log" 2>/dev/null
	note "screenshots: $SHOTS"
	if [[ $(j .ok "$R") != true ]]; then
		_fail "the session stopped at \"$(j .step "$R")\": $(j .error "$R")"
		diag "page: $(j .pageText "$R" | tr '\n' ' ' | cut -c 1-600)"
		diag "console: $(j .console "$R") page errors: $(j .pageErrors "$R")"
		diag "last steps: $(grep '^# step' "$TMP/browser.err" | tail -n 4 | tr '\n' ' ')"
		return 1
	fi
	assert_eq '[]' "$(j .pageErrors "$R")" "no script error, no CSP refusal" || return 1
	assert_eq '[]' "$(j .console "$R")" "no console error" || return 1
	assert_eq 0 "$(j .unusedRefusals "$R")" "each expected refusal was the one console line it made"
}

browser_ran() {
	[[ -n $R && $(j .ok "$R") == true ]] || {
		skip "$1" "needs the browser session"
		return 1
	}
}

t_pause_resume() {
	browser_ran "$1" || return 2
	assert_eq true "$(j .pauseEnabledReady "$R")" "ready: Pause offered" || return 1
	assert_eq false "$(j .resumeShownReady "$R")" "ready: no Resume" || return 1
	assert_eq paused "$(j .pausedBadge.text "$R")" "Pause: the badge says paused" || return 1
	assert_eq 'badge paused' "$(j .pausedBadge.cls "$R")" "in the paused colour" || return 1
	assert_ne "$(j .readyBadgeColour "$R")" "$(j .pausedBadge.background "$R")" "not ready's" || return 1
	assert_match 'paused' "$(j .pausedBadge.title "$R")" "its title says what it means" || return 1
	assert_eq paused "$(j .apiPaused.state "$R")" "the API says paused" || return 1
	assert_ne null "$(j .apiPaused.pausedAt "$R")" "with pausedAt" || return 1
	assert_match '[0-9]' "$(j .pausedSince "$R")" "the page says since when" || return 1
	assert_eq false "$(j .pauseShownPaused "$R")" "paused: no Pause" || return 1
	assert_eq 'badge paused' "$(j .listBadge.cls "$R")" "the workspace list: paused too" || return 1
	assert_eq ready "$(j .apiResumed "$R")" "Resume: the API says ready"
}

t_paused_refusal() {
	browser_ran "$1" || return 2
	assert_match 'paused' "$(j .pausedRefusal "$R")" "a command on the paused workspace: refused in words" || return 1
	assert_match '409' "$(j .pausedRefusal "$R")" "409" || return 1
	assert_eq false "$(j .refusalWiderThanPage "$R")" "its words wrap inside the page" || return 1
	assert_eq 0 "$(j .runsWhilePaused "$R")" "no run made" || return 1
	assert_eq 1 "$(j '[.refusedConsole[] | select(startswith("[paused"))] | length' "$R")" \
		"the one 409 the browser logged there" || return 1
	assert_eq true "$(j .refusalHidden "$R")" "its Resume: the refusal goes" || return 1
	assert_eq ready "$(j .apiResumedFromNotice "$R")" "and the workspace is ready" || return 1
	assert_eq 0 "$(j .runAfterResume.exit "$R")" "the control: the same command then runs" || return 1
	assert_eq true "$(j .runAfterResume.shown "$R")" "its output shown"
}

t_snapshot() {
	browser_ran "$1" || return 2
	local id
	id=$(j .snapshot.id "$R")
	assert_match '^s-' "$id" "a snapshot taken on the tab, as the API lists it" || return 1
	assert_eq before-fork "$(j '.snapshotRow[0]' "$R")" "listed with its name" || return 1
	assert_eq "$id" "$(j '.snapshotRow[1]' "$R")" "its id" || return 1
	assert_match '[0-9]' "$(j '.snapshotRow[2]' "$R")" "when" || return 1
	assert_match '^[0-9.]+ (B|KiB|MiB|GiB)$' "$(j '.snapshotRow[3]' "$R")" "its size" || return 1
	assert_eq no "$(j '.snapshotRow[4]' "$R")" "no memory" || return 1
	assert_match 'sha256:[0-9a-f]{12}…$' "$(j '.snapshotRow[5]' "$R")" "its image, the digest short" || return 1
	assert_contains "${id}" "$(j .notice "$R")" "the page says it was taken" || return 1
	assert_eq ready "$(j .stateAfterSnapshot "$R")" "the workspace ready after it"
}

t_fork() {
	browser_ran "$1" || return 2
	local f n=0
	assert_match '1 to 100' "$(j .fork101 "$R")" "Fork 101: refused on the page" || return 1
	assert_eq 0 "$(j .madeBy101 "$R")" "nothing made" || return 1
	assert_eq true "$(j .forkErrorHidden "$R")" "the control: 2 goes, the refusal gone" || return 1
	assert_eq 2 "$(j '.forkLinks | length' "$R")" "two links" || return 1
	assert_eq '["ready","ready"]' "$(j '[.forks[].api]' "$R")" "each link opened a ready workspace" || return 1
	assert_eq '[true,true]' "$(j '[.forks[].dialogGone]' "$R")" "the dialog gone with the page" || return 1
	for f in $(j '.forkLinks[].id' "$R"); do
		assert_ne "$WS" "$f" "a new workspace" || return 1
		run_cmd "$f" 'cat "$HOME/marker"' || return 1
		assert_eq forked-content "$(j .stdout | tr -d '\n')" "fork $f holds the source's file" || return 1
		n=$((n + 1))
	done
	assert_eq 2 "$n" "both forks checked"
}

t_delete() {
	browser_ran "$1" || return 2
	assert_match '409' "$(j .deleteInUse "$R")" "deleting the fork's snapshot, which its forks run on: refused on the page" || return 1
	assert_eq 200 "$(j .inUseStillThere "$R")" "it stays" || return 1
	assert_eq 1 "$(j '[.refusedConsole[] | select(startswith("[the Snapshots tab"))] | length' "$R")" \
		"the one 409 the browser logged there" || return 1
	assert_eq 404 "$(j .deletedStatus "$R")" "the control: another snapshot is deleted (404 after)" || return 1
	assert_eq '' "$(j .snapErrorAfterDelete "$R")" "no refusal shown for it"
}

t_create() {
	browser_ran "$1" || return 2
	local snap
	snap=$(j .snapshot.id "$R")
	assert_eq ready "$(j .fromTab.state "$R")" "Create workspace from it: a ready workspace" || return 1
	assert_eq container "$(j .fromTab.adapter "$R")" "with the source's adapter" || return 1
	run_cmd "$(j .fromTab.id "$R")" 'cat "$HOME/marker"' || return 1
	assert_eq forked-content "$(j .stdout | tr -d '\n')" "holding the snapshot's file" || return 1
	assert_eq true "$(j .imageDisabled "$R")" "the form: a snapshot chosen, the image select gives way" || return 1
	assert_eq true "$(j .fromForm.autoResume "$R")" "the form's workspace: autoResume" || return 1
	assert_eq pause "$(j .fromForm.idleAction "$R")" "idleAction pause" || return 1
	assert_eq 600000 "$(j .fromForm.idleTimeoutMs "$R")" "idle after 600 s" || return 1
	assert_match 'pause after' "$(j .fromFormPage.idle "$R")" "its page says so" || return 1
	assert_match '^yes' "$(j .fromFormPage.autoResume "$R")" "and auto-resume" || return 1
	api -q GET "/v1/workspaces/$(j .fromForm.id "$R")"
	assert_eq "$snap" "$(j '.snapshot // empty')" "made from the snapshot" || return 1
	assert_eq true "$(j .autoResumed.output "$R")" "paused, a command ran: the snapshot's file ($(j .autoResumed.text "$R"))" || return 1
	assert_eq ready "$(j .autoResumed.api "$R")" "and resumed it"
}

run_or_skip "a container workspace with a file in HOME; GET /v1/snapshots" t_setup
run_or_skip "headless Chromium: pause, resume, snapshots, fork, create from a snapshot" t_browser
run_or_skip "Pause: the badge paused (its own colour, in the list too), the API paused; Resume: ready" t_pause_resume
run_or_skip "a command on a paused workspace: 409 in words with Resume, no run; then it runs" t_paused_refusal
run_or_skip "the Snapshots tab: take one, listed with name, size, memory, image" t_snapshot
run_or_skip "Fork: 101 refused, 2 gives two links to ready workspaces holding the file" t_fork
run_or_skip "Delete: the fork's snapshot in use refused, another deleted" t_delete
run_or_skip "Create workspace from it, and the create form: from the snapshot, auto-resume, pause when idle" t_create
