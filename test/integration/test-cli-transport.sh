#!/bin/bash
# The CLI's transports: on the unix socket it speaks HTTP/1.1 itself and never loads libcurl
# (neither it nor libstation-client.so has libcurl among its needed libraries); an http://
# endpoint loads libcurl at its first request; without a loadable libcurl an http:// endpoint
# fails with an error that says so, and the unix socket still works.
. "$(dirname "$0")/lib.sh"

PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
URL=http://127.0.0.1:$PORT

require_controller --listen "tcp:127.0.0.1:$PORT"
TOKEN=$(tr -d '\n' <"$ROOT/admin.token")

t_no_libcurl_needed() {
	local lib=$BUILD/src/client/libstation-client.so
	assert_eq "" "$(readelf -d "$CLI_BIN" | grep NEEDED | grep -i curl)" "the CLI needs no libcurl"
	assert_eq "" "$(readelf -d "$lib" | grep NEEDED | grep -i curl)" \
		"libstation-client.so needs no libcurl"
	# Positive control: readelf does list what is needed.
	assert_contains "libc.so.6" "$(readelf -d "$CLI_BIN" | grep NEEDED)" "readelf lists libc"
}

# The libraries the dynamic loader reports loading for one CLI command.
loaded_libs() {
	LD_DEBUG=libs "$@" 2>&1 >/dev/null | grep -o 'calling init: [^ ]*' | sort -u
}

t_unix_socket_loads_no_libcurl() {
	local ws out
	new_ws ws || return 1
	out=$(loaded_libs env STATION_SOCKET="$SOCK" "$CLI_BIN" exec "$ws" -- true)
	assert_contains "libc.so.6" "$out" "the loader reports what it loads" || return 1
	assert_eq "" "$(grep -i curl <<<"$out")" "libcurl loaded on the unix socket"
	# Over http:// the same command loads it (the positive control).
	out=$(loaded_libs "$CLI_BIN" --url "$URL" --token "$TOKEN" exec "$ws" -- true)
	assert_contains "libcurl.so.4" "$out" "libcurl loaded for an http:// endpoint"
}

# Whether the process PID maps a file whose name holds $2.
maps_has() {
	grep -q "$2" "/proc/$1/maps"
}

t_maps_of_a_running_exec() {
	local ws pid
	new_ws ws || return 1
	cli exec "$ws" -- sleep 30 >/dev/null 2>&1 &
	pid=$!
	# Blocked in the request: connected and waiting for the run to end.
	wait_for -t 10 run_is_running_any "$ws" || { kill "$pid"; _fail "the run did not start"; return 1; }
	assert_contains libc.so.6 "$(cat "/proc/$pid/maps")" "the CLI's maps are readable"
	assert_eq 0 "$(grep -c -i curl "/proc/$pid/maps")" "libcurl mapped by a unix socket CLI"
	kill "$pid"
	wait "$pid" 2>/dev/null
	"$CLI_BIN" --url "$URL" --token "$TOKEN" exec "$ws" -- sleep 30 >/dev/null 2>&1 &
	pid=$!
	wait_for -t 10 maps_has "$pid" libcurl || _fail "an http:// CLI never mapped libcurl"
	kill "$pid"
	wait "$pid" 2>/dev/null
	return 0 # the CLI's own exit status after the signal is not what is tested
}

# Whether WS has a running run.
run_is_running_any() {
	api -q GET "/v1/workspaces/$1/commands"
	[[ $STATUS == 200 && $(j '[.commands[] | select(.status == "running")] | length') -ge 1 ]]
}

LIBCURL=$(readlink -f "$(ldconfig -p | awk '/libcurl\.so\.4 / {print $NF; exit}')" 2>/dev/null)

t_without_libcurl() {
	local real=$LIBCURL out rc
	# In a mount namespace of its own, the library is an empty file: dlopen() fails.
	out=$(unshare -m sh -c 'mount --bind /dev/null "$1" && shift && "$@"' sh "$real" \
		"$CLI_BIN" --url "$URL" --token "$TOKEN" worker 2>&1)
	rc=$?
	assert_eq 1 "$rc" "exit status without libcurl" || diag "$out"
	assert_contains "needs libcurl (libcurl.so.4) for an http:// or https:// endpoint" "$out" \
		"the error names what is missing"
	# The unix socket does not care.
	out=$(unshare -m sh -c 'mount --bind /dev/null "$1" && shift && "$@"' sh "$real" \
		env STATION_SOCKET="$SOCK" "$CLI_BIN" worker 2>&1)
	assert_eq 0 "$?" "the unix socket without libcurl" || diag "$out"
	assert_eq test "$(jq -r .name <<<"$out")" "worker over the unix socket without libcurl"
	# Positive control: with libcurl in place the same TCP command works.
	out=$("$CLI_BIN" --url "$URL" --token "$TOKEN" worker 2>&1)
	assert_eq test "$(jq -r .name <<<"$out")" "worker over TCP with libcurl"
}

run_test "neither the CLI nor the library needs libcurl" t_no_libcurl_needed
run_test "exec on the unix socket loads no libcurl, over http:// it does" t_unix_socket_loads_no_libcurl
run_test "a running exec maps libcurl only over http://" t_maps_of_a_running_exec
if [[ ! -f $LIBCURL ]] || ! command -v unshare >/dev/null || [[ $(id -u) != 0 ]]; then
	skip "without libcurl: http:// fails clearly, the unix socket works" \
		"needs root, unshare and an installed libcurl.so.4"
else
	run_test "without libcurl: http:// fails clearly, the unix socket works" t_without_libcurl
fi
