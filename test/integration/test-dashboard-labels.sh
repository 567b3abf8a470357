#!/bin/bash
# run-all: not under sanitizers: a browser drives the dashboard; the API paths it uses run in the other scripts
# Names and labels in the dashboard, in headless Chromium (dashboard-labels.mjs): the list shows
# each workspace's name, labels and network; it filters by label (KEY=VALUE and KEY), by name
# and by state through GET /v1/workspaces' own filters; a workspace's page shows them and edits
# them (PATCH): a taken name (409) and a bad label key (400) are refused in the form, a rename
# with a label changed, one removed and one added reaches the API. A label whose value is
# markup shows as text and runs nothing. No console error. Screenshots under the build
# directory (their paths are printed).
. "$(dirname "$0")/lib.sh"

CHROMIUM=${CHROMIUM:-/usr/bin/chromium}
SHOTS=$BUILD/test-artifacts/dashboard-labels
MARKUP='<img src=x onerror=alert(1)>'

PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
URL=http://127.0.0.1:$PORT
require_controller --listen "tcp:127.0.0.1:$PORT"
TOKEN=$(tr -d '\n' <"$ROOT/admin.token")

R=
A= B= C=
t_browser() {
	if [[ ! -x $CHROMIUM ]] || ! command -v node >/dev/null || ! command -v npm >/dev/null; then
		skip "$1" "chromium, node and npm are needed (scripts/install-deps)"
		return 2
	fi
	if ! npm_tools; then # playwright-core, pinned in test/npm-tools
		skip "$1" "$NPM_TOOLS_ERROR"
		return 2
	fi
	new_ws A "$(jq -nc --arg m "$MARKUP" '{adapter: "host", name: "web-a", labels: {team: "x", tier: "db", note: $m}}')" || return 1
	new_ws B '{"adapter":"host","name":"web-b","labels":{"team":"y"}}' || return 1
	new_ws C '{"adapter":"host"}' || return 1
	api -q POST "/v1/workspaces/$C/pause"
	assert_eq 200 "$STATUS" "C paused: $(_short "$BODY")" || return 1
	rm -rf "$SHOTS"
	R=$(PLAYWRIGHT_DIR=$NPM_TOOLS CHROMIUM=$CHROMIUM HOME=$TMP timeout 600 node \
		"$SRC/test/integration/dashboard-labels.mjs" "$URL" "$TOKEN" "$A" "$B" "$C" "$SHOTS" \
		2>"$TMP/browser.err")
	[[ -n $R ]] || R="{\"error\":\"no result: $(tail -c 300 "$TMP/browser.err" | tr '\n"' ' ')\"}"
	cp "$TMP/browser.err" "$SHOTS/browser.log" 2>/dev/null
	note "screenshots: $(j '.shots | join(" ")' "$R")"
	if [[ $(j .ok "$R") != true ]]; then
		_fail "the session stopped at \"$(j .step "$R")\": $(j .error "$R")"
		diag "console: $(j .console "$R")"
		return 1
	fi
	assert_eq '[]' "$(j .console "$R")" "no console errors or CSP reports"
	assert_eq '["409","400"]' "$(j '[.refusals[] | capture("status of (?<s>[0-9]+)").s]' "$R")" \
		"the browser's log of failed loads: the two refusals the editor met, nothing else"
}

browser_ran() {
	[[ -n $R && $(j .ok "$R") == true ]] || {
		skip "$1" "needs the browser session"
		return 1
	}
}

t_list() {
	browser_ran "$1" || return 2
	assert_eq '["web-a","web-b","—"]' "$(j '[.rows[].name]' "$R")" "the names (none: a dash)"
	assert_eq "$(jq -nc --arg m "$MARKUP" '["note=" + $m, "team=x", "tier=db"]')" "$(j '.rows[0].labels' "$R")" \
		"A's labels as text, the markup among them literally"
	assert_eq '["team=y"]' "$(j '.rows[1].labels' "$R")" "B's"
	assert_eq '[]' "$(j '.rows[2].labels' "$R")" "C has none"
	assert_eq '["host","host","host"]' "$(j '[.rows[].network]' "$R")" "the network column"
	assert_eq true "$(j '.headers | index("Network") != null' "$R")" "a Network column"
	assert_eq 0 "$(j .imgsInList "$R")" "no img element made from the label"
	assert_eq '[]' "$(j .dialogs "$R")" "nothing ran (no alert)"
}

t_filters() {
	browser_ran "$1" || return 2
	assert_eq "[\"$A\"]" "$(j .byLabel "$R")" "label team=x"
	assert_eq "[\"$B\"]" "$(j .byName "$R")" "name web-b"
	assert_eq "[\"$C\"]" "$(j .byState "$R")" "state paused"
	assert_eq "No workspace matches these filters." "$(j .noneText "$R")" "none matching, said so"
	# The filters are the API's: the page asked the list with them.
	local lists
	lists=$(j '.lists' "$R")
	assert_eq true "$(jq 'index("?label=team%3Dx") != null' <<<"$lists")" "GET /v1/workspaces?label=team=x asked: $lists"
	assert_eq true "$(jq 'index("?label=team%3Dy&label=tier") != null' <<<"$lists")" "two labels, both asked"
	assert_eq true "$(jq 'index("?name=web-b") != null' <<<"$lists")" "?name=web-b asked"
	assert_eq true "$(jq 'index("?state=paused") != null' <<<"$lists")" "?state=paused asked"
	# The control: the API itself answers the same (A's team is z since the edit).
	api -q GET '/v1/workspaces?label=team%3Dy'
	assert_eq "[\"$B\"]" "$(j '[.workspaces[].id]')" "the API's label filter"
}

t_detail() {
	browser_ran "$1" || return 2
	assert_eq web-a "$(j .detail.name "$R")" "the name on the page"
	assert_eq "$(jq -nc --arg m "$MARKUP" '["note=" + $m, "team=x", "tier=db"]')" "$(j .detail.labels "$R")" "the labels on the page"
	assert_match '^host' "$(j .detail.network "$R")" "the network on the page"
	assert_eq 0 "$(j .detail.imgs "$R")" "no img element on the page"
}

t_edit() {
	browser_ran "$1" || return 2
	assert_contains "name \"web-b\" is taken by workspace \"$B\"" "$(j .takenError "$R")" \
		"a taken name: the 409's message in the form"
	assert_contains "HTTP 409" "$(j .takenError "$R")" "with its status"
	assert_match 'Bad Key.*HTTP 400' "$(j .badKeyError "$R")" "a bad key: the 400 naming it in the form"
	api -q GET "/v1/workspaces/$A"
	assert_eq web-new "$(j .name)" "the API has the new name"
	assert_eq "$(jq -nc --arg m "$MARKUP" '{env: "prod", note: $m, team: "z"}')" "$(jq -Sc .labels <<<"$BODY")" \
		"the API has team changed, tier removed, env added, note kept"
	api -q GET /v1/workspaces/web-new
	assert_eq "$A" "$(j .id)" "the new name finds it"
	assert_eq '["env=prod","note=<img src=x onerror=alert(1)>","team=z"]' "$(j .edited.labels "$R")" "the page after the edit"
}

run_or_skip "headless Chromium: names, labels, filters and the editor" t_browser
run_or_skip "the list: names, labels as text, the network column" t_list
run_or_skip "the list filters by label, name and state through the API's filters" t_filters
run_or_skip "a workspace's page: its name, labels and network" t_detail
run_or_skip "the editor: a taken name and a bad key refused in the form; a rename and label changes reach the API" t_edit
