#!/bin/bash
# run-all: not under sanitizers: JavaScript and Python through API paths the C client and CLI tests run
# Both SDKs with several workers: three controllers on loopback (roots w1, w2, w3, worker names
# w1, w2, w3, TCP listeners, --max-workspaces 4, 8 and 6 so the most free one is known). The
# TypeScript tests (sdk/typescript/test/workers-*.multi.mjs) and the Python ones
# (sdk/python/tests/workers/) create on each worker and on the most free, route exec, get and
# delete by id and list across all three; then w2 is stopped (SIGTERM, waited for) and they
# check that lists name w2, calls on a w2 id raise the typed error naming it, and w1 and w3 are
# still served. Skips a language whose tools are missing.
. "$(dirname "$0")/lib.sh"

SDK_TS=$SRC/sdk/typescript
SDK_PY=$SRC/sdk/python
NAMES=(w1 w2 w3)
declare -A MAX=([w1]=4 [w2]=8 [w3]=6) WPID=() WPORT=()

HAVE_NODE=1
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
	HAVE_NODE=0
	skip "typescript sdk with several workers" "node and npm are needed (apt-get install nodejs npm)"
elif (($(node -p 'process.versions.node.split(".")[0]') < 20)); then
	HAVE_NODE=0
	skip "typescript sdk with several workers" "node $(node --version) is too old: the SDK needs node 20 or later"
fi
PY=
for p in /usr/bin/python3 python3; do
	if "$p" -c 'import sys, pytest; assert sys.version_info >= (3, 11)' 2>/dev/null; then
		PY=$(command -v "$p")
		break
	fi
done
[[ -n $PY ]] || skip "python sdk with several workers" "python3 (3.11+) with pytest is needed (apt-get install python3-pytest)"

# ---------------------------------------------------------------------------------------------
# The TypeScript SDK, built in a copy (test-sdk-typescript.sh builds the checkout's at the same
# time) that shares the checkout's node_modules.

TS=$TMP/ts
t_build_ts() {
	local log=$TMP/npm.log
	(
		cd "$SDK_TS" || exit 1
		npm_ci "$SDK_TS" || exit 1
		mkdir -p "$TS" &&
			cp -a "$SDK_TS/src" "$SDK_TS/test" "$SDK_TS/package.json" "$SDK_TS"/tsconfig*.json "$TS/" &&
			ln -s "$SDK_TS/node_modules" "$TS/node_modules" &&
			cd "$TS" && npx --offline tsc -p tsconfig.json
	) >"$log" 2>&1 && return 0
	_fail "the SDK does not build:"
	tail -n 30 "$log" | sed 's/^/#   /'
	return 1
}
if ((HAVE_NODE)); then
	run_test "typescript sdk builds" t_build_ts || HAVE_NODE=0
fi

# ---------------------------------------------------------------------------------------------
# The workers.

free_port() {
	"${PY:-python3}" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

worker_ready() {
	local name=$1
	kill -0 "${WPID[$name]}" 2>/dev/null || return 2
	[[ $(curl -s -o /dev/null -w '%{http_code}' --max-time 10 --unix-socket "$TMP/$name/station.sock" http://x/v1/ready) == 200 ]]
}

start_worker() {
	local name=$1 root=$TMP/$1
	mkdir -p "$root"
	[[ -n ${WPORT[$name]:-} ]] || WPORT[$name]=$(free_port)
	"$DAEMON" --root "$root" --worker "$name" --log-format text --network-range none \
		--adapters host --default-adapter host --max-workspaces "${MAX[$name]}" \
		--listen "tcp:127.0.0.1:${WPORT[$name]}" >>"$root/controller.log" 2>&1 </dev/null &
	WPID[$name]=$!
	if ! wait_for -t 60 worker_ready "$name"; then
		diag "worker $name did not become ready within 60 s"
		tail -n 30 "$root/controller.log" | sed 's/^/#   /'
		return 1
	fi
}

stop_worker() {
	local name=$1 pid=${WPID[$1]:-}
	[[ -n $pid ]] || return 0
	kill -TERM "$pid" 2>/dev/null
	if ! wait_for -t 60 _pid_gone "$pid"; then
		diag "worker $name ($pid) ignored SIGTERM for 60 s; killing it"
		kill -KILL "$pid" 2>/dev/null
	fi
	wait "$pid" 2>/dev/null
	WPID[$name]=
}

# Every workspace the tests left, on every worker (a stopped one is started again for it), then
# the workers; then lib.sh's own cleanup.
cleanup_workers() {
	local name id
	for name in "${NAMES[@]}"; do
		[[ -d $TMP/$name ]] || continue
		if [[ -z ${WPID[$name]:-} ]] && [[ -e $TMP/$name/station.db ]]; then
			start_worker "$name" >/dev/null 2>&1 || WPID[$name]=
		fi
		if [[ -n ${WPID[$name]:-} ]]; then
			for id in $(curl -s --max-time 30 --unix-socket "$TMP/$name/station.sock" http://x/v1/workspaces | jq -r '.workspaces[].id' 2>/dev/null); do
				curl -s -o /dev/null --max-time 90 -X DELETE --unix-socket "$TMP/$name/station.sock" "http://x/v1/workspaces/$id"
			done
			stop_worker "$name"
		fi
		local pid
		for pid in $(pgrep -f -- "$TMP/$name/|--root $TMP/$name( |\$)" 2>/dev/null); do
			kill -KILL "$pid" 2>/dev/null
		done
	done
	_cleanup
}
trap cleanup_workers EXIT

for name in "${NAMES[@]}"; do
	if ! start_worker "$name"; then
		not_ok "workers start" "worker $name: see the diagnostics above"
		exit 1
	fi
done

# The worker list three ways: environment for the tests, and a workers file with per-worker
# token files (mode 0600).
for name in "${NAMES[@]}"; do
	up=${name^^}
	tr -d '\n' <"$TMP/$name/admin.token" >"$TMP/$name.token"
	chmod 0600 "$TMP/$name.token"
	export "STATION_TEST_${up}_URL=http://127.0.0.1:${WPORT[$name]}"
	export "STATION_TEST_${up}_TOKEN=$(cat "$TMP/$name.token")"
	export "STATION_TEST_${up}_SOCK=$TMP/$name/station.sock"
	echo "$name http://127.0.0.1:${WPORT[$name]} $TMP/$name.token # worker $name" >>"$TMP/workers"
done
export STATION_TEST_WORKERS_FILE=$TMP/workers

# ---------------------------------------------------------------------------------------------
# node --test, its TAP turned into result lines (as test-sdk-typescript.sh does).

_tap_name() {
	local s=$1
	s=${s#*ok }
	s=${s#* - }
	printf '%s' "$s"
}

run_node() {
	local line name reason rc results=0 in_yaml=0 failed=0
	while IFS= read -r line; do
		if ((in_yaml)); then
			if [[ $line == "  ..." ]]; then
				in_yaml=0
			else
				echo "#   ${line#  }"
			fi
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
			reason=${reason# }
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
		cd "$TS" && timeout -k 10 300 node --test --test-reporter=tap "$@" 2>&1
		echo $? >"$TMP/node-rc"
	)
	rc=$(cat "$TMP/node-rc" 2>/dev/null || echo 1)
	if ((results == 0)); then
		not_ok "typescript: $*" "node --test reported no results (exit status $rc)"
	elif ((rc != 0 && !failed)); then
		not_ok "typescript: $*" "node --test exited $rc without a failing test"
	fi
	return 0
}

# pytest on the SDK's source (the wheel is test-sdk-python.sh's), one result line per test.
run_py() {
	local rc junit=$TMP/junit-$1.xml
	(
		cd "$TMP" &&
			STATION_SOCKET=$TMP/w1/station.sock \
			PYTHONPATH=$SDK_PY/src \
			PYTHONDONTWRITEBYTECODE=1 \
			timeout -k 10 300 "$PY" -m pytest -p no:cacheprovider -q \
			--rootdir "$SDK_PY" -c "$SDK_PY/pyproject.toml" --junitxml "$junit" \
			"$SDK_PY/tests/workers/multi_$1.py" >"$TMP/pytest-$1.log" 2>&1
	)
	rc=$?
	if [[ ! -s $junit ]]; then
		not_ok "python: $1" "pytest wrote no results (exit status $rc)"
		sed 's/^/#   /' "$TMP/pytest-$1.log" | tail -n 40
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
    skipped = case.find("skipped")
    if bad is not None:
        print(f"not ok {name}")
        for line in (bad.get("message", "") + "\n" + (bad.text or "")).splitlines()[-40:]:
            print(f"#   {line}")
    elif skipped is not None:
        print(f"skip {name} {skipped.get('message') or 'skipped'}")
    else:
        print(f"ok {name}")
PYEOF
	if ((rc != 0)); then
		grep -q 'failures="[1-9]\|errors="[1-9]' "$junit" || not_ok "python: $1" "pytest exited $rc without a failing test"
		_n_fail=$((_n_fail + 1))
	fi
	return 0
}

# ---------------------------------------------------------------------------------------------
# All three up.

((HAVE_NODE)) && run_node test/workers-up.multi.mjs
[[ -n $PY ]] && run_py up

# One workspace on each worker for the tests with w2 stopped.
IDS=()
t_make_ids() {
	local name id
	for name in "${NAMES[@]}"; do
		id=$(curl -s --max-time 90 --unix-socket "$TMP/$name/station.sock" -X POST -H 'Content-Type: application/json' \
			-d '{"adapter":"host"}' http://x/v1/workspaces | jq -r .id)
		assert_match "^$name-[a-z2-7]{26}\$" "$id" "workspace on $name" || return 1
		IDS+=("$id")
	done
}
run_test "a workspace on each worker" t_make_ids || exit 1
export STATION_TEST_IDS
STATION_TEST_IDS=$(IFS=,; echo "${IDS[*]}")

t_stop_w2() {
	stop_worker w2
	assert_eq "" "$(curl -s --max-time 5 --unix-socket "$TMP/w2/station.sock" http://x/v1/ready)" "w2's answer" || return 1
}
run_test "w2 stops (SIGTERM, waited for)" t_stop_w2 || exit 1

((HAVE_NODE)) && run_node test/workers-down.multi.mjs
[[ -n $PY ]] && run_py down
exit 0
