#!/bin/bash
# run-all: not under sanitizers: JavaScript and Python through API paths the C client and CLI tests run
# Both SDKs' deadlines (their READMEs, "Deadlines"): a real controller ("test") beside
# hang-worker.py workers that accept and never answer (silent, a head then a stalled body, a
# start answered and then nothing, an event stream begun and then silent). The TypeScript tests
# (sdk/typescript/test/deadlines.multi.mjs) and the Python ones
# (sdk/python/tests/workers/multi_deadlines.py) check that each call on the hung worker fails
# within its deadline (2 s, 2 s + 15 s in an event stream, 15 s for a cancel) naming it, and,
# as controls, that the real controller with the same deadline answers, a long-poll held longer
# than it and a quiet event stream (its heartbeat) included. Skips a language whose tools are
# missing.
. "$(dirname "$0")/lib.sh"

SDK_TS=$SRC/sdk/typescript
SDK_PY=$SRC/sdk/python

PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
URL=http://127.0.0.1:$PORT
require_controller --listen "tcp:127.0.0.1:$PORT"
TOKEN=$(tr -d '\n' <"$ROOT/admin.token")

declare -A HANG_PID=()
for mode in silent stall-body start-only quiet-stream; do
	python3 "$SRC/test/integration/hang-worker.py" --mode "$mode" >"$TMP/hang-$mode.port" &
	HANG_PID[$mode]=$!
	if ! wait_for -t 10 test -s "$TMP/hang-$mode.port"; then
		not_ok "hang worker $mode starts" "it printed no port within 10 s"
		exit 1
	fi
	var=STATION_TEST_HANG_${mode^^}
	export "${var//-/_}=http://127.0.0.1:$(cat "$TMP/hang-$mode.port")"
done
stop_hang_workers() {
	local rc=$? pid
	for pid in "${HANG_PID[@]}"; do
		kill "$pid" 2>/dev/null
		wait "$pid" 2>/dev/null
	done
	(exit "$rc") # _cleanup takes the script's status from $?
	_cleanup
}
trap stop_hang_workers EXIT

WS=
t_workspace() {
	new_ws WS || return 1
	assert_match '^test-' "$WS" "the controller's workspace id"
}
run_test "a workspace on the real worker" t_workspace || exit 1
export STATION_TEST_URL=$URL STATION_TEST_TOKEN=$TOKEN STATION_TEST_WS=$WS
unset STATION_TIMEOUT_MS STATION_WORKERS STATION_WORKERS_FILE

_tap_name() {
	local s=$1
	s=${s#*ok }
	s=${s#* - }
	printf '%s' "$s"
}

# node --test on a copy of the SDK built there (other scripts build the checkout's), its TAP
# turned into result lines as test-sdk-typescript.sh does.
run_node() {
	local line name reason rc results=0 in_yaml=0 failed=0 ts=$TMP/ts
	mkdir -p "$ts" &&
		cp -a "$SDK_TS/src" "$SDK_TS/test" "$SDK_TS/package.json" "$SDK_TS"/tsconfig*.json "$ts/" &&
		ln -s "$SDK_TS/node_modules" "$ts/node_modules" || return 1
	if ! (cd "$SDK_TS" && npm_ci "$SDK_TS" && cd "$ts" && npx --offline tsc -p tsconfig.json) >"$TMP/npm.log" 2>&1; then
		not_ok "typescript sdk builds" "$(tail -n 5 "$TMP/npm.log")"
		return 0
	fi
	while IFS= read -r line; do
		if ((in_yaml)); then
			if [[ $line == "  ..." ]]; then in_yaml=0; else echo "#   ${line#  }"; fi
			continue
		fi
		case $line in
		"not ok "*)
			results=$((results + 1))
			name=$(_tap_name "$line")
			not_ok "typescript: ${name% # *}"
			failed=1
			in_yaml=1
			;;
		"ok "*" # SKIP"*)
			results=$((results + 1))
			name=$(_tap_name "$line")
			reason=${name#* # SKIP}
			skip "typescript: ${name%% # SKIP*}" "${reason:-skipped}"
			;;
		"ok "*)
			results=$((results + 1))
			ok "typescript: $(_tap_name "$line")"
			;;
		"# Subtest: "*) ;;
		"# "[a-z_]*" "[0-9]*) ;;
		"#"*) echo "$line" ;;
		esac
	done < <(
		cd "$ts" && timeout -k 10 300 node --test --test-reporter=tap --test-concurrency=1 test/deadlines.multi.mjs 2>&1
		echo $? >"$TMP/node-rc"
	)
	rc=$(cat "$TMP/node-rc" 2>/dev/null || echo 1)
	if ((results == 0)); then
		not_ok "typescript: deadlines" "node --test reported no results (exit status $rc)"
	elif ((rc != 0 && !failed)); then
		not_ok "typescript: deadlines" "node --test exited $rc without a failing test"
	fi
}

run_py() {
	local rc junit=$TMP/junit.xml
	(
		cd "$TMP" && STATION_SOCKET=$SOCK PYTHONPATH=$SDK_PY/src PYTHONDONTWRITEBYTECODE=1 \
			timeout -k 10 300 "$PY" -m pytest -p no:cacheprovider -q --rootdir "$SDK_PY" \
			-c "$SDK_PY/pyproject.toml" --junitxml "$junit" \
			"$SDK_PY/tests/workers/multi_deadlines.py" >"$TMP/pytest.log" 2>&1
	)
	rc=$?
	if [[ ! -s $junit ]]; then
		not_ok "python: deadlines" "pytest wrote no results (exit status $rc)"
		sed 's/^/#   /' "$TMP/pytest.log" | tail -n 40
		return 0
	fi
	"$PY" - "$junit" <<'PYEOF'
import sys
import xml.etree.ElementTree as ET

for case in ET.parse(sys.argv[1]).getroot().iter("testcase"):
    name = f"python: {case.get('name')}"
    bad = case.find("failure")
    if bad is None:
        bad = case.find("error")
    if bad is not None:
        print(f"not ok {name}")
        for line in (bad.get("message", "") + "\n" + (bad.text or "")).splitlines()[-30:]:
            print(f"#   {line}")
    elif case.find("skipped") is not None:
        print(f"skip {name} {case.find('skipped').get('message') or 'skipped'}")
    else:
        print(f"ok {name}")
PYEOF
	if ((rc != 0)); then
		grep -q 'failures="[1-9]\|errors="[1-9]' "$junit" || not_ok "python: deadlines" "pytest exited $rc without a failing test"
		_n_fail=$((_n_fail + 1))
	fi
}

if ! command -v node >/dev/null || ! command -v npm >/dev/null || (($(node -p 'process.versions.node.split(".")[0]') < 20)); then
	skip "typescript sdk deadlines" "node 20 or later and npm are needed"
else
	run_node
fi
PY=
for p in /usr/bin/python3 python3; do
	if "$p" -c 'import sys, pytest; assert sys.version_info >= (3, 11)' 2>/dev/null; then
		PY=$(command -v "$p")
		break
	fi
done
if [[ -z $PY ]]; then
	skip "python sdk deadlines" "python3 (3.11+) with pytest is needed (apt-get install python3-pytest)"
else
	run_py
fi
exit 0
