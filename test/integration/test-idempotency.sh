#!/bin/bash
# Idempotency-Key on the creating endpoints (docs/api.md, "Idempotency keys"): a retried
# create with the same key and body answers the first object and starts nothing more (counted
# in the API and in the process table); another body is 409; a bad key is 400; keys are per
# path, survive a SIGKILL of the controller, hold against concurrent duplicates, and expire.
. "$(dirname "$0")/lib.sh"

require_controller
new_ws WS || exit 1
new_ws WS2 || exit 1

# keyed [-q] PATH KEY BODY: POST with an Idempotency-Key; sets STATUS, BODY and HEADERS.
keyed() {
	local path=$1 key=$2 body=$3
	printf '%s' "$body" >"$TMP/keyed-request"
	: >"$TMP/keyed-body"
	STATUS=$(curl -sS --max-time 90 --unix-socket "$SOCK" -X POST -o "$TMP/keyed-body" \
		-D "$TMP/keyed-headers" -w '%{http_code}' -H 'Content-Type: application/json' \
		-H "Idempotency-Key: $key" --data-binary "@$TMP/keyed-request" \
		"http://station$path" 2>"$TMP/curl-err") || STATUS=000
	BODY=$(cat "$TMP/keyed-body")
	HEADERS=$(cat "$TMP/keyed-headers")
}

# run_count WS COMMAND: runs of WS listed with exactly this command.
run_count() {
	api -q GET "/v1/workspaces/$1/commands?limit=1000"
	jq -r --arg c "$2" '[.commands[] | select(.command == $c)] | length' <<<"$BODY"
}

ws_count() {
	api -q GET /v1/workspaces
	j '.workspaces | length'
}

t_exec_retry() {
	local cmd='exec sleep 30.5101' first
	keyed "/v1/workspaces/$WS/commands" exec-1 "$(json_cmd "$cmd")"
	assert_eq 201 "$STATUS" "first start" || return 1
	first=$(j .id)
	wait_for -t 10 pgrep -f 'sleep 30.5101' >/dev/null || _fail "command never started"
	keyed "/v1/workspaces/$WS/commands?waitMs=10" exec-1 "$(json_cmd "$cmd")"
	assert_eq 201 "$STATUS" "retry: the first status" || return 1
	assert_eq "$first" "$(j .id)" "retry: the first run"
	assert_eq running "$(j .status)" "retry: the run as it is now"
	assert_eq 1 "$(run_count "$WS" "$cmd")" "runs listed with that command"
	assert_eq 1 "$(process_count 'sleep 30.5101')" "processes of the command"
	api -q POST "/v1/workspaces/$WS/commands/$first/cancel"
	assert_eq 200 "$STATUS" "cancel"
	# Positive control: the same body without a key is a second run.
	run_start "$WS" "$(json_cmd 'true')" || return 1
	local a=$RUN
	run_start "$WS" "$(json_cmd 'true')" || return 1
	assert_ne "$a" "$RUN" "two starts without a key are two runs"
}

t_workspace_retry() {
	local before first
	before=$(ws_count)
	keyed /v1/workspaces ws-1 '{"adapter":"host"}'
	assert_eq 201 "$STATUS" "first create" || return 1
	first=$(j .id)
	WORKSPACES+=("$first")
	keyed /v1/workspaces ws-1 '{"adapter":"host"}'
	assert_eq 201 "$STATUS" "retry" || return 1
	assert_eq "$first" "$(j .id)" "retry: the first workspace"
	assert_eq $((before + 1)) "$(ws_count)" "workspaces after a create and its retry"
	assert_eq 1 "$(pgrep -fc -- "station-agent.*$first")" "agents of the workspace"
}

t_conflict() {
	keyed "/v1/workspaces/$WS/commands" conflict-1 "$(json_cmd 'echo one')"
	assert_eq 201 "$STATUS" "first" || return 1
	keyed "/v1/workspaces/$WS/commands" conflict-1 "$(json_cmd 'echo two')"
	assert_eq 409 "$STATUS" "another body under the same key"
	assert_eq conflict "$(j .error.code)" code
	assert_eq Idempotency-Key "$(j .error.field)" field
	assert_contains '"conflict-1"' "$(j .error.message)" "the message names the key"
	assert_eq 0 "$(run_count "$WS" 'echo two')" "the second body started nothing"
}

t_bad_keys() {
	local long
	long=$(printf 'k%.0s' {1..256})
	keyed "/v1/workspaces/$WS/commands" "$long" "$(json_cmd true)"
	assert_eq 400 "$STATUS" "a 256-byte key"
	assert_eq Idempotency-Key "$(j .error.field)" "field of the 256-byte key"
	keyed "/v1/workspaces/$WS/commands" $'tab\tkey' "$(json_cmd true)"
	assert_eq 400 "$STATUS" "a key with a tab"
	keyed "/v1/workspaces/$WS/commands" $'caf\xc3\xa9' "$(json_cmd true)"
	assert_eq 400 "$STATUS" "a key that is not ASCII"
	assert_contains Idempotency-Key "$(j .error.message)" "the message names the header"
	# Positive control: 255 printable bytes are a key.
	keyed "/v1/workspaces/$WS/commands" "${long:1}" "$(json_cmd true)"
	assert_eq 201 "$STATUS" "a 255-byte key"
}

t_scoped_per_path() {
	local a
	keyed "/v1/workspaces/$WS/commands" shared-1 "$(json_cmd 'echo scoped')"
	assert_eq 201 "$STATUS" "on WS" || return 1
	a=$(j .id)
	keyed "/v1/workspaces/$WS2/commands" shared-1 "$(json_cmd 'echo scoped')"
	assert_eq 201 "$STATUS" "the same key on WS2" || return 1
	assert_ne "$a" "$(j .id)" "two runs"
	assert_eq 1 "$(run_count "$WS2" 'echo scoped')" "runs on WS2"
	assert_eq 1 "$(run_count "$WS" 'echo scoped')" "runs on WS"
}

t_service_and_terminal() {
	local body='{"name":"idem-svc","command":"exec sleep 30.5102"}' tid
	keyed "/v1/workspaces/$WS/services" svc-1 "$body"
	assert_eq 201 "$STATUS" "service start" || return 1
	keyed "/v1/workspaces/$WS/services" svc-1 "$body"
	assert_eq 201 "$STATUS" "service retry: not 409 for the taken name" || return 1
	assert_eq idem-svc "$(j .name)" "service retry: the same service"
	wait_for -t 10 pgrep -f 'sleep 30.5102' >/dev/null || _fail "service never started"
	assert_eq 1 "$(process_count 'sleep 30.5102')" "service processes"
	api -q GET "/v1/workspaces/$WS/services"
	assert_eq 1 "$(j '[.services[] | select(.name == "idem-svc")] | length')" "services listed"
	api -q DELETE "/v1/workspaces/$WS/services/idem-svc"
	keyed "/v1/workspaces/$WS/terminals" term-1 '{"command":"exec sleep 30.5103","cols":80,"rows":24}'
	assert_eq 201 "$STATUS" "terminal open: $(_short "$BODY")" || return 1
	tid=$(j .id)
	keyed "/v1/workspaces/$WS/terminals" term-1 '{"command":"exec sleep 30.5103","cols":80,"rows":24}'
	assert_eq 201 "$STATUS" "terminal retry" || return 1
	assert_eq "$tid" "$(j .id)" "terminal retry: the same terminal"
	assert_eq 1 "$(process_count 'sleep 30.5103')" "terminal processes"
	api -q DELETE "/v1/workspaces/$WS/terminals/$tid"
}

t_survives_sigkill() {
	local cmd='echo before-kill' first
	keyed "/v1/workspaces/$WS/commands" restart-1 "$(json_cmd "$cmd")"
	assert_eq 201 "$STATUS" "first" || return 1
	first=$(j .id)
	stop_controller KILL
	assert_eq 137 "$CONTROLLER_EXIT" "controller exit status (SIGKILL)"
	restart_controller || return 1
	keyed "/v1/workspaces/$WS/commands" restart-1 "$(json_cmd "$cmd")"
	assert_eq 201 "$STATUS" "retry after the restart" || return 1
	assert_eq "$first" "$(j .id)" "the run from before the restart"
	assert_eq 1 "$(run_count "$WS" "$cmd")" "runs listed with that command"
	keyed "/v1/workspaces/$WS/commands" restart-1 "$(json_cmd 'echo other')"
	assert_eq 409 "$STATUS" "another body after the restart"
}

# One POST in the background, its status and body kept in $TMP/dup-N.
dup_post() {
	curl -sS --max-time 90 --unix-socket "$SOCK" -X POST -o "$TMP/dup-$1.body" \
		-w '%{http_code}' -H 'Content-Type: application/json' \
		-H 'Idempotency-Key: concurrent-1' --data-binary "$2" \
		"http://station/v1/workspaces/$WS/commands" >"$TMP/dup-$1.status" 2>/dev/null
}

t_concurrent() {
	local cmd='exec sleep 30.5104' body i pids=() ids=() status
	body=$(json_cmd "$cmd")
	for i in 1 2 3 4 5 6 7 8; do
		dup_post "$i" "$body" &
		pids+=($!)
	done
	wait "${pids[@]}"
	for i in 1 2 3 4 5 6 7 8; do
		status=$(cat "$TMP/dup-$i.status")
		case $status in
		201) ids+=("$(jq -r .id "$TMP/dup-$i.body")") ;;
		409) assert_eq in_progress "$(jq -r .error.code "$TMP/dup-$i.body")" "409 code" ;;
		*) _fail "duplicate $i: HTTP $status $(cat "$TMP/dup-$i.body")" ;;
		esac
	done
	assert_ne 0 "${#ids[@]}" "answers with the run"
	assert_eq 1 "$(printf '%s\n' "${ids[@]}" | sort -u | wc -l)" "one run id in every answer"
	assert_eq 1 "$(run_count "$WS" "$cmd")" "runs listed with that command"
	wait_for -t 10 pgrep -f 'sleep 30.5104' >/dev/null || _fail "command never started"
	assert_eq 1 "$(process_count 'sleep 30.5104')" "processes of the command"
	api -q POST "/v1/workspaces/$WS/commands/${ids[0]}/cancel"
}

CHECK=$BUILD/test/helpers/idem-check

t_client_library() {
	local out line
	out=$("$CHECK" real "$SOCK" "$WS" 2>&1) || _fail "idem-check real: $out"
	while IFS= read -r line; do diag "idem-check: $line"; done <<<"$out"
	assert_eq 1 "$(run_count "$WS" 'echo lib-1')" "runs of the keyed command"
	assert_eq 0 "$(run_count "$WS" 'echo lib-2')" "runs of the conflicting command"
	assert_eq 2 "$(run_count "$WS" 'echo lib-4')" "runs without a key"
}

t_client_library_retry() {
	local out line
	mkdir -p "$TMP/fake"
	out=$(timeout 60 "$CHECK" retry "$TMP/fake" 2>&1) || _fail "idem-check retry: $out"
	while IFS= read -r line; do diag "idem-check: $line"; done <<<"$out"
}

_key_expired() {
	keyed "/v1/workspaces/$WS/commands" expiry-1 "$(json_cmd 'echo second')"
	[[ $STATUS == 201 ]]
}

t_expiry() {
	stop_controller TERM
	start_controller --idempotency-retention-ms 1000 || return 1
	keyed "/v1/workspaces/$WS/commands" expiry-1 "$(json_cmd 'echo first')"
	assert_eq 201 "$STATUS" "first" || return 1
	# Until the key expires this is 409 (another body) and starts nothing; the first 201 ends
	# the wait, so exactly one run of it follows, however slow the machine.
	wait_for -t 20 _key_expired || _fail "the key never expired: HTTP $STATUS $(_short "$BODY")"
	assert_eq 1 "$(run_count "$WS" 'echo second')" "the expired key's new request ran once"
}

run_test "retried exec with the same key starts one run" t_exec_retry
run_test "retried workspace create with the same key makes one workspace" t_workspace_retry
run_test "same key, different body: 409 naming the key" t_conflict
run_test "bad keys: 400 naming the header; 255 bytes is fine" t_bad_keys
run_test "keys are scoped per path" t_scoped_per_path
run_test "retried service start and terminal open" t_service_and_terminal
run_test "a key survives a SIGKILL and restart of the controller" t_survives_sigkill
run_test "concurrent duplicates start one run" t_concurrent
run_test "client library: keys given and keys of its own" t_client_library
run_test "client library: its own retry sends the same key" t_client_library_retry
run_test "expired keys are free again" t_expiry
