#!/bin/bash
# run-all: slow: 55 to 140 s (1,000 runs one after the other)
# 1,000 quick runs in one workspace all end exited 0 (the elapsed time is a note, never asserted;
# timings belong in `make bench`).
. "$(dirname "$0")/lib.sh"

N=1000

require_controller
new_ws WS || exit 1

t_many() {
	local i code bad=0 start elapsed
	json_cmd true >"$TMP/true.json"
	: >"$TMP/runs.jsonl"
	start=${EPOCHREALTIME/./}
	# curl directly, bodies collected in a file and checked by one jq at the end: the loop then
	# costs a curl per run rather than several jq start-ups.
	for ((i = 0; i < N; i++)); do
		code=$(curl -sS --max-time 90 --unix-socket "$SOCK" -o "$TMP/body" -w '%{http_code}' \
			-H 'Content-Type: application/json' --data-binary "@$TMP/true.json" \
			"http://station/v1/workspaces/$WS/commands?waitMs=60000") || code=000
		if [[ $code != 201 ]]; then
			bad=$((bad + 1))
			((bad <= 5)) && diag "run $i: HTTP $code $(_short "$(cat "$TMP/body")")"
		fi
		cat "$TMP/body" >>"$TMP/runs.jsonl"
		echo >>"$TMP/runs.jsonl"
	done
	elapsed=$(((${EPOCHREALTIME/./} - start) / 1000))
	note "$N runs of 'true' (POST with waitMs, one curl each, one at a time): $elapsed ms," \
		"$((elapsed * 1000 / N)) us per run including curl"
	assert_eq 0 "$bad" "requests not answered 201"
	assert_eq "$N" "$(jq -s '[.[] | select(.status == "exited" and .exitCode == 0)] | length' \
		"$TMP/runs.jsonl")" "responses with status exited, exitCode 0"
	assert_eq "$N" "$(jq -rs '[.[].id] | unique | length' "$TMP/runs.jsonl")" "distinct run ids"
	api -q GET "/v1/workspaces/$WS/commands?limit=1000"
	assert_status 200 "list" || return 1
	assert_eq "$N" "$(j '.commands | length')" "runs listed"
	assert_eq "$N" "$(j '[.commands[] | select(.status == "exited" and .exitCode == 0)] | length')" \
		"runs listed as exited 0"
}

run_test "$N quick runs all exited 0" t_many
