#!/bin/bash
# Names and labels (docs/api.md, "Names and labels"): a create with a name and labels shows
# them; a name is unique per tenant (409 naming the holder) while another tenant may use it;
# bad names and labels are 400 naming the problem; PATCH merges labels (null removes) and
# renames, with an event and an audit row; GET /v1/workspaces filters by label, name and state;
# every route takes a name (exec by name), never another tenant's (404, beside the owner's 200);
# names survive a restart; the CLI creates, lists, labels and renames. Then three workers and a
# CLI with a worker list: ls --label lists the matching workspaces of all three, a name is
# routed to the worker that has it, one held on two workers is an error naming both.
. "$(dirname "$0")/container-lib.sh"

PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
URL=http://127.0.0.1:$PORT

container_prereqs
container_build_image || {
	not_ok "busybox image builds" "see the diagnostics above"
	exit 1
}
require_container_controller --listen "tcp:127.0.0.1:$PORT" --default-adapter host \
	--tenant-images 'busybox@*' --tenant-networks none

# tapi TOKEN METHOD PATH [BODY]: one request over TCP with TOKEN; sets STATUS and BODY.
tapi() {
	local token=$1 method=$2 path=$3 args
	args=(-sS --max-time 90 -X "$method" -o "$TMP/tbody" -w '%{http_code}'
		-H "Authorization: Bearer $token")
	if [[ $# -ge 4 ]]; then
		printf '%s' "$4" >"$TMP/treq"
		args+=(-H 'Content-Type: application/json' --data-binary "@$TMP/treq")
	fi
	: >"$TMP/tbody"
	STATUS=$(curl "${args[@]}" "$URL$path" 2>/dev/null) || STATUS=000
	BODY=$(cat "$TMP/tbody")
}

new_token() {
	api -q POST /v1/tokens "$2"
	[[ $STATUS == 201 ]] || {
		diag "token create: HTTP $STATUS $(_short "$BODY")"
		return 1
	}
	printf -v "$1" '%s' "$(j .token)"
}

new_token TA '{"name":"a","scope":"tenant","tenant":"tenant-a"}' &&
	new_token TB '{"name":"b","scope":"tenant","tenant":"tenant-b"}' || {
	not_ok "tokens are made" "see the diagnostics above"
	exit 1
}

W1=
t_create() {
	api -q POST /v1/workspaces '{"name":"web-1","labels":{"team":"x","tier":"db"}}'
	assert_status 201 "create with a name and labels" || return 1
	W1=$(j .id)
	WORKSPACES+=("$W1")
	assert_eq web-1 "$(j .name)" "name shown"
	assert_eq '{"team":"x","tier":"db"}' "$(j .labels)" "labels shown"
	api -q GET "/v1/workspaces/$W1"
	assert_eq web-1 "$(j .name)" "GET shows the name"
	api -q POST /v1/workspaces '{}'
	assert_status 201 "create without" || return 1
	WORKSPACES+=("$(j .id)")
	assert_eq 'null {}' "$(j '.name, .labels' | tr '\n' ' ' | sed 's/ $//')" "none: null and {}"
}

t_unique() {
	api -q POST /v1/workspaces '{"name":"web-1"}'
	assert_eq 409 "$STATUS" "the same name again" || return 1
	assert_contains "name \"web-1\" is taken by workspace \"$W1\"" "$(j .error.message)" \
		"409 names the holder"
	api -q GET /v1/workspaces
	assert_eq 2 "$(j '.workspaces | length')" "the refused create made nothing"
}

# bad BODY FIELD MESSAGE-PART: a create refused 400 naming field and what.
bad() {
	api -q POST /v1/workspaces "$1"
	assert_eq 400 "$STATUS" "refused: $1" || return 1
	assert_eq "$2" "$(j .error.field)" "field of $1" &&
		assert_contains "$3" "$(j .error.message)" "message of $1"
}

t_bad() {
	bad '{"name":"Web"}' name 'name "Web" is not' &&
		bad '{"name":"-web"}' name 'is not [a-z0-9]' &&
		bad "{\"name\":\"$(printf 'a%.0s' {1..64})\"}" name 'is not' &&
		bad '{"name":"test-abcdefghijklmnopqrstuvwxyz"}' name 'shape of a workspace id' &&
		bad '{"name":7}' name 'must be a string' &&
		bad '{"labels":{"Team":"x"}}' labels 'label key "Team"' &&
		bad '{"labels":{"team":"a\u0007b"}}' labels 'label "team": the value holds a control' &&
		bad '{"labels":{"team":3}}' labels 'label "team": the value must be a string' &&
		bad "{\"labels\":{\"v\":\"$(printf 'x%.0s' {1..257})\"}}" labels 'over 256 bytes' &&
		bad "$(jq -nc '{labels: ([range(33)] | map({key: "k\(.)", value: "v"}) | from_entries)}')" \
			labels '33 labels: at most 32' &&
		bad '{"labels":["a"]}' labels 'must be an object'
	# the control: 32 labels and a name of 63 characters are taken
	local name
	name=$(printf 'a%.0s' {1..63})
	api -q POST /v1/workspaces "$(jq -nc --arg n "$name" \
		'{name: $n, labels: ([range(32)] | map({key: "k\(.)", value: "v"}) | from_entries)}')"
	assert_status 201 "32 labels and a name of 63" || return 1
	WORKSPACES+=("$(j .id)")
	assert_eq 32 "$(j '.labels | length')" "32 labels kept"
	api -q DELETE "/v1/workspaces/$(j .id)"
}

t_patch() {
	api -q PATCH "/v1/workspaces/$W1" '{"labels":{"tier":null,"env":"prod"}}'
	assert_status 200 "PATCH labels" || return 1
	assert_eq '{"env":"prod","team":"x"}' "$(jq -Sc .labels <<<"$BODY")" "merged: tier removed, env added"
	api -q PATCH "/v1/workspaces/$W1" '{"name":"web-2"}'
	assert_eq web-2 "$(j .name)" "renamed" || return 1
	api -q GET "/v1/workspaces/web-1"
	assert_eq 404 "$STATUS" "the old name is free" || return 1
	api -q PATCH "/v1/workspaces/$W1" '{"image":"x"}'
	assert_eq 400 "$STATUS" "PATCH of another field" &&
		assert_eq image "$(j .error.field)" "names it" || return 1
	api -q PATCH "/v1/workspaces/$W1" '{"labels":{"Bad":"x"}}'
	assert_eq 400 "$STATUS" "PATCH with a bad key" || return 1
	api -q POST /v1/workspaces '{"name":"other"}'
	assert_status 201 "another named one" || return 1
	local other
	other=$(j .id)
	WORKSPACES+=("$other")
	api -q PATCH "/v1/workspaces/$other" '{"name":"web-2"}'
	assert_eq 409 "$STATUS" "PATCH to a taken name" &&
		assert_contains "taken by workspace \"$W1\"" "$(j .error.message)" "names the holder"
	api -q PATCH "/v1/workspaces/$other" '{"name":null,"labels":null}'
	assert_eq 'null {}' "$(j '.name, .labels' | tr '\n' ' ' | sed 's/ $//')" "name and labels removed"
	api -q DELETE "/v1/workspaces/$other"
	# an event and an audit row
	api -q GET "/v1/events?since=0&workspace=$W1&types=workspace"
	assert_contains '"change":"updated"' "$BODY" "workspace updated event" || return 1
	api -q GET "/v1/audit?workspace=$W1&limit=100"
	assert_eq true "$(j '[.entries[] | select(.method == "PATCH" and .status == 200)] | length >= 2')" \
		"audit rows of the PATCHes"
}

# ids QUERY: the sorted ids GET /v1/workspaces?QUERY lists.
ids() {
	api -q GET "/v1/workspaces?$1"
	j '[.workspaces[].id] | sort | join(" ")'
}

t_filters() {
	api -q POST /v1/workspaces '{"labels":{"team":"y"}}'
	assert_status 201 "create team y" || return 1
	local wy
	wy=$(j .id)
	WORKSPACES+=("$wy")
	assert_eq "$W1" "$(ids label=team=x)" "label=team=x" &&
		assert_eq "$(printf '%s\n' "$W1" "$wy" | sort | tr '\n' ' ' | sed 's/ $//')" \
			"$(ids label=team)" "label=team (present)" &&
		assert_eq "$W1" "$(ids 'label=team=x&label=env=prod')" "two selectors: both hold" &&
		assert_eq "" "$(ids 'label=team=x&label=env=dev')" "two selectors: one fails" &&
		assert_eq "$W1" "$(ids name=web-2)" "name=" &&
		assert_eq "$W1" "$(ids 'name=web-2&state=ready')" "name= and state=" &&
		assert_eq "" "$(ids 'name=web-2&state=stopped')" "state=stopped" || return 1
	api -q GET "/v1/workspaces?state=bogus"
	assert_eq 400 "$STATUS" "a bad state" && assert_eq state "$(j .error.field)" "names state"
	api -q GET "/v1/workspaces?label=Team=x"
	assert_eq 400 "$STATUS" "a bad selector" && assert_eq label "$(j .error.field)" "names label"
	api -q GET "/v1/workspaces?name=Bad"
	assert_eq 400 "$STATUS" "a bad name" && assert_eq name "$(j .error.field)" "names name"
	api -q GET "/v1/workspaces?label=team%3Dx%0a"
	assert_eq 400 "$STATUS" "a control character in a selector"
}

t_lookup() {
	api -q GET /v1/workspaces/web-2
	assert_status 200 "GET by name" && assert_eq "$W1" "$(j .id)" "the named one" || return 1
	api -q POST "/v1/workspaces/web-2/commands?waitMs=30000" '{"command":"echo by-name"}'
	assert_status 201 "exec by name" || return 1
	assert_eq "by-name" "$(j .stdout | tr -d '\n')" "its output"
	assert_eq "$W1" "$(j .workspaceId)" "ran in the named workspace"
	api -q GET "/v1/workspaces/web-2/commands/$(j .id)"
	assert_status 200 "a run by the workspace's name"
	api -q GET "/v1/workspaces/nobody"
	assert_eq 404 "$STATUS" "an unknown name" &&
		assert_contains 'workspace "nobody" not found' "$(j .error.message)" "says so"
}

t_tenants() {
	local body wa wb
	body=$(jq -nc --arg i "$IMAGE" '{image: $i, adapter: "container", name: "shared"}')
	tapi "$TA" POST /v1/workspaces "$body"
	assert_status 201 "tenant A names one shared" || return 1
	wa=$(j .id)
	WORKSPACES+=("$wa")
	tapi "$TB" POST /v1/workspaces "$body"
	assert_status 201 "tenant B may use the same name" || return 1
	wb=$(j .id)
	WORKSPACES+=("$wb")
	tapi "$TA" POST /v1/workspaces "$body"
	assert_eq 409 "$STATUS" "tenant A twice" || return 1
	tapi "$TA" PATCH "/v1/workspaces/$wa" '{"name":"only-a"}'
	assert_status 200 "A renames its own" || return 1
	tapi "$TA" GET /v1/workspaces/only-a
	assert_status 200 "A gets it by name (the control)" && assert_eq "$wa" "$(j .id)" "A's" || return 1
	tapi "$TB" GET /v1/workspaces/only-a
	assert_eq 404 "$STATUS" "B with A's name: 404" || return 1
	tapi "$TB" POST "/v1/workspaces/only-a/commands?waitMs=10000" '{"command":"true"}'
	assert_eq 404 "$STATUS" "B's exec by A's name: 404" || return 1
	api -q GET /v1/workspaces/only-a
	assert_eq 404 "$STATUS" "the operator's names are its own: 404" || return 1
	tapi "$TB" GET /v1/workspaces/shared
	assert_eq "$wb" "$(j .id)" "B's shared is B's own" || return 1
	tapi "$TB" GET "/v1/workspaces?name=only-a"
	assert_eq 0 "$(j '.workspaces | length')" "B's filter by A's name finds nothing"
	tapi "$TA" GET "/v1/workspaces?name=only-a"
	assert_eq "$wa" "$(j '.workspaces[0].id')" "A's filter finds it"
	# The events stream takes a name too, of the caller's tenant only.
	local r
	r=$(python3 "$SRC/test/integration/events-client.py" "tcp:$PORT" \
		"/v1/events?workspace=only-a&types=workspace&since=0" --token "$TA" --count 2 --timeout 10)
	assert_eq "200 [\"$wa\"]" "$(jq -rc '"\(.status) \([.events[].workspaceId] | unique)"' <<<"$r")" \
		"A's events by its name: A's workspace's"
	r=$(python3 "$SRC/test/integration/events-client.py" "tcp:$PORT" \
		"/v1/events?workspace=only-a&since=0" --token "$TB" --count 1 --timeout 3)
	assert_eq "200 0" "$(jq -r '"\(.status) \(.events | length)"' <<<"$r")" "B's events by A's name: none"
	r=$(python3 "$SRC/test/integration/events-client.py" "tcp:$PORT" \
		"/v1/events?workspace=shared&types=workspace&since=0" --token "$TB" --count 1 --timeout 10)
	assert_eq "200 [\"$wb\"]" "$(jq -rc '"\(.status) \([.events[].workspaceId] | unique)"' <<<"$r")" \
		"B's events by its shared name: B's own"
}

t_restart() {
	stop_controller && restart_controller || return 1
	api -q GET /v1/workspaces/web-2
	assert_status 200 "the name after a restart" || return 1
	assert_eq '{"env":"prod","team":"x"}' "$(jq -Sc .labels <<<"$BODY")" "the labels after a restart"
}

t_cli() {
	local ws out
	ws=$(cli create --name cli-ws --label team=z --label app=a) || { _fail "create failed"; return 1; }
	WORKSPACES+=("$ws")
	out=$(cli ls --label team=z --json)
	assert_eq "$ws" "$(jq -r '.[].id' <<<"$out")" "ls --label team=z" || return 1
	out=$(cli ls --name cli-ws)
	assert_match "^ID +STATE +ADAPTER +CREATED +NAME" "$(head -n1 <<<"$out")" "a NAME column"
	assert_match "^$ws +ready .* cli-ws$" "$(grep "^$ws" <<<"$out")" "its row"
	out=$(cli label cli-ws team=q app- --json) || { _fail "label failed"; return 1; }
	assert_eq '{"team":"q"}' "$(jq -c .labels <<<"$out")" "label set and removed by name"
	out=$(cli update --name cli-renamed cli-ws) || { _fail "update failed"; return 1; }
	assert_eq "$ws" "$out" "update prints the id"
	out=$(cli exec cli-renamed -- echo hi)
	assert_eq hi "$out" "exec by the new name"
	cli ls --state bogus >/dev/null 2>"$TMP/err"
	assert_eq 1 "$?" "ls --state bogus fails"
	assert_contains "not a workspace state" "$(cat "$TMP/err")" "names why"
}

run_test create t_create
run_test unique-per-tenant t_unique
run_test bad-names-and-labels t_bad
run_test patch t_patch
run_test filters t_filters
run_test lookup-by-name t_lookup
run_test tenant-names t_tenants
run_test restart t_restart
run_test cli t_cli

# ---- three workers ----------------------------------------------------------------------------

free_port() {
	python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

declare -A W_PID W_PORT

w_start() {
	local name=$1 root=$TMP/$1
	mkdir -p "$root"
	W_PORT[$name]=$(free_port)
	"$DAEMON" --root "$root" --worker "$name" --log-format text --network-range none \
		--adapters host --default-adapter host --listen "tcp:127.0.0.1:${W_PORT[$name]}" \
		>>"$root/controller.log" 2>&1 </dev/null &
	W_PID[$name]=$!
	wait_for -t 30 w_ready "$name"
}

w_ready() {
	kill -0 "${W_PID[$1]}" 2>/dev/null || return 1
	[[ $(curl -s -o /dev/null -w '%{http_code}' --max-time 5 --unix-socket "$TMP/$1/station.sock" \
		http://x/v1/ready) == 200 ]]
}

w_cleanup() {
	local name id
	for name in w1 w2 w3; do
		[[ -n ${W_PID[$name]:-} ]] || continue
		for id in $(curl -s --unix-socket "$TMP/$name/station.sock" http://x/v1/workspaces |
			jq -r '.workspaces[]?.id'); do
			curl -s -o /dev/null --unix-socket "$TMP/$name/station.sock" -X DELETE \
				"http://x/v1/workspaces/$id"
		done
		kill -TERM "${W_PID[$name]}" 2>/dev/null
		wait_for -t 30 _pid_gone "${W_PID[$name]}" || kill -KILL "${W_PID[$name]}" 2>/dev/null
	done
}
trap 'rc=$?; w_cleanup; (exit $rc); _cleanup' EXIT

wcli() {
	STATION_WORKERS_FILE=$TMP/workers HOME=$TMP "$CLI_BIN" "$@"
}

declare -A TEAM_X
t_three_workers() {
	local name ws out
	for name in w1 w2 w3; do
		w_start "$name" || { _fail "worker $name did not start"; return 1; }
		echo "$name http://127.0.0.1:${W_PORT[$name]} $TMP/$name/admin.token" >>"$TMP/workers"
	done
	for name in w1 w2 w3; do
		ws=$(wcli create --worker "$name" --label team=x --name "x-$name") ||
			{ _fail "create on $name"; return 1; }
		TEAM_X[$name]=$ws
		wcli create --worker "$name" --label team=y >/dev/null || { _fail "create y"; return 1; }
	done
	out=$(wcli ls --label team=x --json) || { _fail "ls failed"; return 1; }
	assert_eq "$(printf '%s\n' "${TEAM_X[@]}" | sort | tr '\n' ' ')" \
		"$(jq -r '.[].id' <<<"$out" | sort | tr '\n' ' ')" "ls --label team=x: one from each" ||
		return 1
	assert_eq "w1 w2 w3" "$(jq -r '[.[].worker] | sort | join(" ")' <<<"$out")" "on all three"
	out=$(wcli ls --name x-w2 --json)
	assert_eq "${TEAM_X[w2]}" "$(jq -r '.[].id' <<<"$out")" "ls --name across workers"
	out=$(wcli exec x-w3 -- echo routed)
	assert_eq routed "$out" "exec by name goes to the worker that has it" || return 1
	out=$(wcli label x-w2 team=z --json)
	assert_eq "${TEAM_X[w2]}" "$(jq -r .id <<<"$out")" "label by name on w2"
	assert_eq 2 "$(wcli ls --label team=x --json | jq length)" "w2's moved out of team x"
	# a name on two workers is ambiguous: the error names both
	wcli create --worker w1 --name twice >/dev/null && wcli create --worker w2 --name twice >/dev/null ||
		{ _fail "create twice"; return 1; }
	wcli exec twice -- true 2>"$TMP/err"
	assert_eq 1 "$?" "a name on two workers fails"
	assert_match "workspace name 'twice' is on several workers: w1 \(w1-[a-z2-7]+\), w2 \(w2-" \
		"$(cat "$TMP/err")" "naming both"
	wcli exec nobody -- true 2>"$TMP/err"
	assert_contains "no worker has a workspace named 'nobody'" "$(cat "$TMP/err")" "an unknown name"
}

run_test three-workers t_three_workers
