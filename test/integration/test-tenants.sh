#!/bin/bash
# Tenants (docs/security.md, "The tenant boundary"): tenant A's token on every endpoint with
# tenant B's ids answers byte for byte what a missing id of the same shape answers, while B's
# own token succeeds on the same request; lists and the event stream show one's own only; a
# tenant's creates stay within the operator's allow lists and the token's limits (each refusal
# names what it refused, beside a create within them); a private worker refuses another tenant
# and serves its own and the admin.
. "$(dirname "$0")/container-lib.sh"

PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
URL=http://127.0.0.1:$PORT

container_prereqs
container_build_image || {
	not_ok "busybox image builds" "see the diagnostics above"
	exit 1
}
require_container_controller --listen "tcp:127.0.0.1:$PORT" --default-adapter container \
	--tenant-images 'busybox@*' --tenant-networks none

# tapi TOKEN METHOD PATH [BODY]: one request over TCP with TOKEN; sets STATUS and BODY.
tapi() {
	local token=$1 method=$2 path=$3 args
	args=(-sS --max-time 90 -X "$method" -o "$TMP/tbody" -w '%{http_code}'
		-H "Authorization: Bearer $token")
	[[ -n ${TAPI_HEADER-} ]] && args+=(-H "$TAPI_HEADER")
	if [[ $# -ge 4 ]]; then
		printf '%s' "$4" >"$TMP/treq"
		args+=(-H 'Content-Type: application/json' --data-binary "@$TMP/treq")
	fi
	: >"$TMP/tbody"
	STATUS=$(curl "${args[@]}" "$URL$path" 2>/dev/null) || STATUS=000
	BODY=$(cat "$TMP/tbody")
}

# new_token VAR BODY: an admin-made token's secret into VAR.
new_token() {
	api -q POST /v1/tokens "$2"
	[[ $STATUS == 201 ]] || {
		diag "token create: HTTP $STATUS $(_short "$BODY")"
		return 1
	}
	printf -v "$1" '%s' "$(j .token)"
}

new_token TA '{"name":"a","scope":"tenant","tenant":"tenant-a","limits":{"cpus":1,"memoryMb":256,"pidsLimit":256,"workspaces":2}}' &&
	new_token TB '{"name":"b","scope":"tenant","tenant":"tenant-b"}' &&
	new_token TR '{"name":"r","scope":"read","tenant":"tenant-a"}' || {
	not_ok "tokens are made" "see the diagnostics above"
	exit 1
}

# B's objects: a workspace with a run, a service, a terminal, a file and a secret.
tapi "$TB" POST /v1/workspaces "$(jq -nc --arg i "$IMAGE" '{image: $i}')"
WB=$(j .id)
[[ $STATUS == 201 && $(j .tenant) == tenant-b ]] || {
	not_ok "tenant B creates a workspace" "HTTP $STATUS $(_short "$BODY")"
	exit 1
}
WORKSPACES+=("$WB")
tapi "$TB" POST "/v1/workspaces/$WB/commands?waitMs=60000" '{"command":"echo b"}'
RB=$(j .id)
tapi "$TB" POST "/v1/workspaces/$WB/services" '{"name":"svc","command":"sleep 1000"}'
tapi "$TB" POST "/v1/workspaces/$WB/terminals" '{"cols":80,"rows":24}'
TTB=$(j .id)
tapi "$TB" PUT "/v1/workspaces/$WB/files?path=f.txt" 'hello'
tapi "$TB" PUT "/v1/workspaces/$WB/secrets/gh" '{"value":"s3cret","host":"github.com"}'
# Missing ids of the same shapes as B's.
WM=${WB%-*}-$(printf 'a%.0s' {1..26})
RM=run-$(printf 'a%.0s' {1..26})
[[ ${#RM} == "${#RB}" ]] || RM=${RB:0:${#RB}-4}aaaa
TTM=${TTB:0:${#TTB}-4}aaaa

# same_as_missing NAME METHOD PATH [BODY]: A's answer with B's ids (PATH as written) equals A's
# answer with the missing ids, B's ids replaced by them in the answer; B's own token gets
# something other than a not-found.
same_as_missing() {
	local name=$1 method=$2 path=$3 body=${4-} foreign missing fstatus
	local mpath=${path//$WB/$WM}
	mpath=${mpath//$RB/$RM}
	mpath=${mpath//$TTB/$TTM}
	tapi "$TA" "$method" "$path" ${body:+"$body"}
	fstatus=$STATUS
	foreign=${BODY//$WB/$WM}
	foreign=${foreign//$RB/$RM}
	foreign=${foreign//$TTB/$TTM}
	tapi "$TA" "$method" "$mpath" ${body:+"$body"}
	missing=$BODY
	assert_eq "$STATUS" "$fstatus" "$name: status with B's id vs a missing id" || return 1
	assert_eq 404 "$fstatus" "$name: status" || return 1
	assert_eq "$missing" "$foreign" "$name: body with B's id vs a missing id" || return 1
	tapi "$TB" "$method" "$path" ${body:+"$body"}
	assert_ne 404 "$STATUS" "$name: B's own token ($(_short "$BODY"))"
}

t_every_endpoint_answers_as_missing() {
	local w=/v1/workspaces/$WB
	same_as_missing workspace-get GET "$w"
	same_as_missing network-get GET "$w/network"
	same_as_missing network-set PUT "$w/network" '{"egress":{"allow":[]}}'
	same_as_missing usage GET "$w/usage"
	same_as_missing command-list GET "$w/commands"
	same_as_missing command-start POST "$w/commands" '{"command":"echo a"}'
	same_as_missing command-get GET "$w/commands/$RB"
	same_as_missing command-cancel POST "$w/commands/$RB/cancel"
	same_as_missing command-output GET "$w/commands/$RB/output"
	same_as_missing service-list GET "$w/services"
	same_as_missing service-create POST "$w/services" '{"name":"svc2","command":"sleep 1000"}'
	same_as_missing service-get GET "$w/services/svc"
	same_as_missing service-logs GET "$w/services/svc/logs"
	same_as_missing service-restart POST "$w/services/svc/restart"
	same_as_missing service-stop POST "$w/services/svc/stop"
	same_as_missing terminal-list GET "$w/terminals"
	same_as_missing terminal-create POST "$w/terminals" '{"cols":80,"rows":24}'
	same_as_missing terminal-get GET "$w/terminals/$TTB"
	same_as_missing terminal-resize POST "$w/terminals/$TTB/resize" '{"cols":100,"rows":30}'
	same_as_missing secret-list GET "$w/secrets"
	same_as_missing secret-get GET "$w/secrets/gh"
	same_as_missing secret-put PUT "$w/secrets/gh2" '{"value":"x"}'
	same_as_missing file-read GET "$w/files?path=f.txt"
	same_as_missing file-stat GET "$w/files/stat?path=f.txt"
	same_as_missing file-list GET "$w/files/list?path=."
	same_as_missing file-write PUT "$w/files?path=g.txt" 'data'
	same_as_missing file-mkdir POST "$w/files/mkdir" '{"path":"d"}'
	same_as_missing file-rename POST "$w/files/rename" '{"from":"g.txt","to":"h.txt"}'
	same_as_missing file-delete DELETE "$w/files?path=h.txt"
	same_as_missing secret-delete DELETE "$w/secrets/gh2"
	same_as_missing service-delete DELETE "$w/services/svc"
	same_as_missing terminal-delete DELETE "$w/terminals/$TTB"
	same_as_missing workspace-restart POST "$w/restart"
	# B's Idempotency-Key on B's workspace: A's request with it tells nothing of B's run
	TAPI_HEADER='Idempotency-Key: k-b' tapi "$TB" POST "$w/commands" '{"command":"true"}'
	assert_eq 201 "$STATUS" "B's keyed run ($(_short "$BODY"))"
	TAPI_HEADER='Idempotency-Key: k-b' same_as_missing idempotency-key POST "$w/commands" \
		'{"command":"true"}'
}

t_lists_show_ones_own() {
	tapi "$TA" POST /v1/workspaces "$(jq -nc --arg i "$IMAGE" '{image: $i}')"
	assert_eq 201 "$STATUS" "A creates within its caps ($(_short "$BODY"))" || return 1
	local wa
	wa=$(j .id)
	WORKSPACES+=("$wa")
	assert_eq tenant-a "$(j .tenant)" "A's workspace records its tenant"
	tapi "$TA" GET /v1/workspaces
	assert_eq "[\"$wa\"]" "$(j '[.workspaces[].id]')" "A's list"
	tapi "$TR" GET /v1/workspaces
	assert_eq "[\"$wa\"]" "$(j '[.workspaces[].id]')" "A's read token's list"
	tapi "$TB" GET /v1/workspaces
	assert_eq "[\"$WB\"]" "$(j '[.workspaces[].id]')" "B's list"
	api -q GET /v1/workspaces
	assert_eq 2 "$(j '[.workspaces[] | select(.id == "'"$wa"'" or .id == "'"$WB"'")] | length')" \
		"the admin's list has both"
	# the operator's image is seen by both; usedBy shows one's own workspaces only
	tapi "$TA" GET /v1/images
	assert_eq "[[\"$wa\"]]" "$(j '[.images[] | select(.digest == "'"$IMAGE_DIGEST"'") | .usedBy]')" \
		"A's image list: the operator's image, used by A's workspace only"
	# events: A's stream has A's workspace's events and none of B's
	# (the stream replays what is kept at once and then waits: read it for a bounded while)
	curl -sSN --max-time 15 -H "Authorization: Bearer $TA" "$URL/v1/events?since=0" \
		>"$TMP/events" 2>/dev/null
	local ids
	ids=$(grep '^data:' "$TMP/events" | sed 's/^data: *//' | jq -r .workspaceId | sort -u | tr '\n' ' ')
	assert_eq "$wa " "$ids" "workspaces in A's events"
	WA=$wa
	# last, as B's control deletes it
	same_as_missing workspace-delete DELETE "/v1/workspaces/$WB"
}

t_image_delete_by_tenant() {
	same_as_missing_image=$(printf 'sha256:%064d' 0)
	tapi "$TA" DELETE "/v1/images/$IMAGE_DIGEST"
	assert_eq 403 "$STATUS" "a tenant removing the operator's image" || return 1
	assert_contains "only an admin token removes it" "$(j .error.message)" message
	tapi "$TA" DELETE "/v1/images/$same_as_missing_image"
	assert_eq 404 "$STATUS" "a tenant removing a missing image"
}

t_creates_within_allow_lists_and_caps() {
	local img body
	img=$(jq -nc --arg i "$IMAGE" '{image: $i}')
	tapi "$TA" POST /v1/workspaces '{"adapter":"host"}'
	assert_eq 403 "$STATUS" "host adapter" && assert_contains 'adapter "host"' "$(j .error.message)" "host: message"
	tapi "$TA" POST /v1/workspaces "$(jq -nc --arg i "other@$IMAGE_DIGEST" '{image: $i}')"
	assert_eq 403 "$STATUS" "image off the allow list" &&
		assert_contains "allow list for tenants (busybox@*)" "$(j .error.message)" "image: message"
	tapi "$TA" POST /v1/workspaces "$(jq -c '. + {seccompProfile: "unconfined"}' <<<"$img")"
	assert_eq 403 "$STATUS" "profile off the allow list" &&
		assert_contains "seccomp profile allow list for tenants (default)" "$(j .error.message)" "profile: message"
	tapi "$TA" POST /v1/workspaces "$(jq -c '. + {network: "bridge"}' <<<"$img")"
	assert_eq 403 "$STATUS" "network off the allow list" &&
		assert_contains "network allow list for tenants (none)" "$(j .error.message)" "network: message"
	tapi "$TA" POST /v1/workspaces "$(jq -c '. + {cpus: 2}' <<<"$img")"
	assert_eq 403 "$STATUS" "cpus above the cap" && assert_contains "limit cpus 1" "$(j .error.message)" "cpus: message"
	tapi "$TA" POST /v1/workspaces "$(jq -c '. + {memoryMb: 512}' <<<"$img")"
	assert_eq 403 "$STATUS" "memory above the cap" && assert_contains "limit memoryMb 256" "$(j .error.message)" "memory: message"
	tapi "$TA" POST /v1/workspaces "$(jq -c '. + {pidsLimit: 1000}' <<<"$img")"
	assert_eq 403 "$STATUS" "pids above the cap" && assert_contains "limit pidsLimit 256" "$(j .error.message)" "pids: message"
	# positive control: at the caps, and absent limits take the token's caps
	tapi "$TA" POST /v1/workspaces "$(jq -c '. + {cpus: 1, memoryMb: 256}' <<<"$img")"
	assert_eq 201 "$STATUS" "a create at the caps ($(_short "$BODY"))" || return 1
	WORKSPACES+=("$(j .id)")
	assert_eq 256 "$(j .pidsLimit)" "pidsLimit absent: the token's cap"
	# the workspaces cap (2): A has two now
	tapi "$TA" POST /v1/workspaces "$img"
	assert_eq 429 "$STATUS" "beyond the workspaces cap" &&
		assert_contains "limit workspaces is 2" "$(j .error.message)" "workspaces: message"
	tapi "$TA" POST /v1/images '{"reference":"other@sha256:'"${IMAGE_DIGEST#sha256:}"'"}'
	assert_eq 403 "$STATUS" "a pull off the allow list"
	tapi "$TA" POST /v1/images "$(jq -nc --arg p "$TMP/image" '{path: $p, name: "busybox"}')"
	assert_eq 403 "$STATUS" "a path import by a tenant"
	tapi "$TR" POST /v1/workspaces "$img"
	assert_eq 403 "$STATUS" "a read token cannot create"
}

t_worker_says_so() {
	tapi "$TA" GET /v1/worker
	assert_eq null "$(j .tenant)" "a shared worker's tenant"
	assert_eq '["busybox@*"]' "$(j .tenantPolicy.images)" "image allow list"
	assert_eq '["none"]' "$(j .tenantPolicy.networks)" "network allow list"
	assert_eq 2 "$(j .workspaces)" "A's workspace count"
}

# evc TOKEN PATH [ARGS...]: events-client.py over TCP with TOKEN (admin: the unix socket when
# TOKEN is empty); its JSON result in EV.
evc() {
	local token=$1 path=$2
	shift 2
	if [[ -n $token ]]; then
		EV=$(python3 "$SRC/test/integration/events-client.py" "tcp:$PORT" "$path" --token "$token" --timeout 60 "$@")
	else
		EV=$(python3 "$SRC/test/integration/events-client.py" "$SOCK" "$path" --timeout 60 "$@")
	fi
}

# contiguous SEQS...: each one more than the one before.
contiguous() {
	local prev= s
	for s in "$@"; do
		[[ -z $prev || $s -eq $((prev + 1)) ]] || return 1
		prev=$s
	done
}

t_others_activity_hidden() {
	local img wb2 run max all a_seqs admin_a_seqs mid next
	img=$(jq -nc --arg i "$IMAGE" '{image: $i}')
	[[ -n $WA ]] || return 1
	# B's activity after A's: a workspace of B's; then a run of A's.
	tapi "$TB" POST /v1/workspaces "$img"
	assert_eq 201 "$STATUS" "B creates a workspace ($(_short "$BODY"))" || return 1
	wb2=$(j .id)
	WORKSPACES+=("$wb2")
	tapi "$TA" POST "/v1/workspaces/$WA/commands?waitMs=60000" '{"command":"true"}'
	assert_eq 201 "$STATUS" "A's run ($(_short "$BODY"))" || return 1
	run=$(j .id)
	# GET /v1/worker: a tenant counts its own workspaces, free as though it were alone.
	api -q GET /v1/worker
	max=$(j .capacity.workspaces.max)
	all=$(j .capacity.workspaces.used)
	assert_eq 3 "$all" "the admin counts every workspace (A's 2, B's 1)"
	tapi "$TA" GET /v1/worker
	assert_eq 2 "$(j .capacity.workspaces.used)" "A's used: its own"
	assert_eq $((max - 2)) "$(j .capacity.workspaces.free)" "A's free: max less its own"
	assert_eq "$max" "$(j .capacity.workspaces.max)" "A's max"
	tapi "$TB" GET /v1/worker
	assert_eq 1 "$(j .capacity.workspaces.used)" "B's used: its own"
	assert_eq $((max - 1)) "$(j .capacity.workspaces.free)" "B's free"
	# nor the connections or warm pools everybody's requests move: their limits only
	assert_eq '["limit","longLivedLimit"]' "$(j '.connections | keys')" "B's connections"
	api -q GET /v1/worker
	assert_eq number "$(j '.connections.open | type')" "control: the admin's connections.open"
	# Events: A's stream numbers A's events on their own, one after another.
	evc "$TA" "/v1/events?since=0" --until "run:$run:exited"
	assert_eq 200 "$(j .status "$EV")" "A's stream: $(_short "$EV")" || return 1
	mapfile -t a_seqs < <(j '.events[].seq' "$EV")
	assert_le 4 "${#a_seqs[@]}" "A's events"
	assert_eq 1 "$((a_seqs[0] & 0xffffffff))" "A's first event is number 1 of this boot"
	contiguous "${a_seqs[@]}" || _fail "A's seqs have gaps: ${a_seqs[*]}"
	# The same events, as the admin sees them: in its numbering others' events lie between.
	local a_ids a_events
	a_ids=$(j '[.events[].workspaceId] | unique' "$EV")
	a_events=$(j '[.events[] | del(.seq)]' "$EV")
	evc "" "/v1/events?since=0" --until "run:$run:exited"
	assert_eq "$a_events" "$(jq -c --argjson ids "$a_ids" '[.events[] | select(.workspaceId as $w | $ids | index($w)) | del(.seq)]' <<<"$EV")" \
		"A's stream is the admin's events of A's workspaces, in order"
	mapfile -t admin_a_seqs < <(jq -r --argjson ids "$a_ids" '.events[] | select(.workspaceId as $w | $ids | index($w)) | .seq' <<<"$EV")
	assert_eq "${#a_seqs[@]}" "${#admin_a_seqs[@]}" "as many in the admin's stream"
	! contiguous "${admin_a_seqs[@]}" ||
		_fail "control: the admin's numbering of A's events has no gap (B's lie between): ${admin_a_seqs[*]}"
	# Resuming A's stream at one of its seqs gives the next of A's.
	mid=${a_seqs[$((${#a_seqs[@]} / 2))]}
	evc "$TA" "/v1/events" --last-event-id "$mid" --count 1
	assert_eq $((mid + 1)) "$(j '.events[0].seq' "$EV")" "Last-Event-ID $mid: the next of A's"
	evc "$TA" "/v1/events?since=$mid" --count 1
	assert_eq $((mid + 1)) "$(j '.events[0].seq' "$EV")" "since=$mid: the next of A's"
	next=${a_seqs[-1]}
	evc "$TA" "/v1/events?since=$((next - 1))" --count 1
	assert_eq "$next" "$(j '.events[0].seq' "$EV")" "since the one before A's newest: A's newest"
	evc "$TA" "/v1/events?since=$((next + 1))"
	assert_eq 400 "$(j .status "$EV")" "since beyond A's newest"
	assert_eq "since $((next + 1)) is beyond the newest event ($next)" \
		"$(j .body "$EV" | jq -r .error.message)" "the message says A's newest"
}

t_private_worker() {
	stop_controller
	start_controller --listen "tcp:127.0.0.1:$PORT" --default-adapter container \
		--worker "$WORKER" --runtime "$RUNTIME" --seccomp-dir "$PROFILES" --import-dir "$TMP" \
		--tenant-images 'busybox@*' --tenant tenant-b --pool "$IMAGE,size=1" || return 1
	local img
	img=$(jq -nc --arg i "$IMAGE" '{image: $i}')
	tapi "$TA" GET /v1/worker
	assert_eq tenant-b "$(j .tenant)" "the private worker's tenant"
	# a warm pool's counts move with every tenant's creates: a tenant sees its size only
	assert_eq '[{"size":1}]' "$(j '[.pools[] | {size, ready, starting, claimed} | with_entries(select(.value != null))]')" \
		"the pool as a tenant sees it"
	api -q GET /v1/worker
	assert_eq '["number","number","number"]' "$(j '[.pools[0] | .ready, .starting, .claimed | type]')" \
		"control: the admin sees the pool's counts"
	tapi "$TA" POST /v1/workspaces "$img"
	assert_eq 403 "$STATUS" "another tenant's create" &&
		assert_contains 'this worker serves tenant "tenant-b" only' "$(j .error.message)" message
	tapi "$TB" POST /v1/workspaces "$img"
	assert_eq 201 "$STATUS" "its own tenant's create ($(_short "$BODY"))" && WORKSPACES+=("$(j .id)")
	api -q POST /v1/workspaces "$img"
	assert_eq 201 "$STATUS" "the admin's create ($(_short "$BODY"))" && WORKSPACES+=("$(j .id)")
	assert_eq null "$(j .tenant)" "the admin's workspace is the operator's"
}

run_test every-endpoint-answers-as-missing t_every_endpoint_answers_as_missing
run_test lists-show-ones-own t_lists_show_ones_own
run_test image-delete-by-tenant t_image_delete_by_tenant
run_test creates-within-allow-lists-and-caps t_creates_within_allow_lists_and_caps
run_test worker-says-so t_worker_says_so
run_test others-activity-hidden t_others_activity_hidden
run_test private-worker t_private_worker
