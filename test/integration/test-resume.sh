#!/bin/bash
# Resuming a run's output stream (docs/api.md, "Resuming a stream"), against a real controller:
# a follower that closes its connection itself in the middle of the stream and comes back with
# Last-Event-ID gets every byte still kept exactly once (its joined stream is the run's stored
# output, byte for byte), and the bytes no longer kept as one gap with their count; ?offset= on a
# finished run replays from there; offsets beyond what a stream produced, and malformed ones, are
# refused with 400 naming the parameter (a good offset is the positive control).
. "$(dirname "$0")/lib.sh"

FOLLOW=$SRC/test/integration/sse-follow.py

require_controller
new_ws WS || exit 1
api -q GET "/v1/workspaces/$WS"
WS_HOME=$(j .home)
OUT=/v1/workspaces/$WS/commands

# sf NAME ARGS...: one connection of the SSE client; its JSON in R and in $TMP/NAME.json.
sf() {
	local name=$1
	shift
	R=$(python3 "$FOLLOW" "$SOCK" "$@" 2>"$TMP/sf-err")
	[[ -n $R ]] || R='{}'
	printf '%s\n' "$R" >"$TMP/$name.json"
}

# The bytes `seq FROM TO` prints, into a file.
seq_bytes() {
	seq "$1" "$2" >"$3"
}

# Everything kept (maxOutputBytes 1 MiB): three connections, the first two closed by the client
# after some bytes, the run waiting for a file in between so that the first drop happens while
# it runs. The joined stream is the stored stdout and stderr, exactly.
t_resume_exact() {
	local id
	rm -f "$WS_HOME/go" "$TMP/j1" "$TMP/j1.err"
	run_start "$WS" "$(json_cmd 'seq 1 4000; echo e1 >&2
		while [ ! -e "$HOME/go" ]; do sleep 0.02; done
		seq 4001 30000; echo e2 >&2' '.timeoutMs = 60000 | .maxOutputBytes = 1048576')" ||
		return 1
	sf c1 "$OUT/$RUN/output" --stop-after 1000 --out "$TMP/j1"
	assert_eq 200 "$(j .status "$R")" "first connection: 200" || { diag "$R"; return 1; }
	id=$(j .lastId "$R")
	assert_match '^[0-9]+:[0-9]+$' "$id" "events carry an id STDOUT:STDERR" || return 1
	assert_eq null "$(j .end "$R")" "first connection dropped before the end"
	touch "$WS_HOME/go"
	sf c2 "$OUT/$RUN/output" --last-event-id "$id" --stop-after 20000 --out "$TMP/j1"
	assert_eq "$(cut -d: -f1 <<<"$id")" "$(j .offsets.stdout "$R")" \
		"second connection starts where the first stopped"
	id=$(j .lastId "$R")
	sf c3 "$OUT/$RUN/output" --last-event-id "$id" --out "$TMP/j1"
	assert_eq end "$(j .endEvent "$R")" "third connection ends with end" || { diag "$R"; return 1; }
	for c in c1 c2 c3; do
		assert_eq 0 "$(jq '.gaps | length' "$TMP/$c.json")" "$c: no gap"
	done
	run_wait "$WS" "$RUN" || return 1
	seq_bytes 1 30000 "$TMP/want"
	assert_eq "$(stat -c %s "$TMP/want")" "$(j .stdoutBytes)" "the run printed what seq prints"
	jq -j .stdout <<<"$BODY" >"$TMP/stored"
	assert_eq "$(sha256sum <"$TMP/stored")" "$(sha256sum <"$TMP/j1")" \
		"sha256 of the joined stdout = sha256 of the stored stdout"
	assert_eq "$(sha256sum <"$TMP/want")" "$(sha256sum <"$TMP/j1")" "and of what seq prints"
	assert_eq "$(printf 'e1\ne2\n' | sha256sum)" "$(sha256sum <"$TMP/j1.err")" \
		"stderr joined exactly once"
}

# got_more FILE N: FILE holds more than N bytes.
got_more() {
	(($(stat -c %s "$1") > $2))
}

# More than is kept (head 32768 + tail 32768 bytes): the follower drops within the head while
# the run runs, the run writes 100000 lines meanwhile and waits; the resumed follower gets the
# rest of the head, ONE gap with the count of what is gone, the tail, the end. Then the same
# from the stored run with ?offset=.
t_resume_gap() {
	local id k total gap_bytes
	rm -f "$WS_HOME/go" "$WS_HOME/go2" "$WS_HOME/p2" "$TMP/j2" "$TMP/j2.err"
	run_start "$WS" "$(json_cmd 'seq 1 4000
		while [ ! -e "$HOME/go" ]; do sleep 0.02; done
		seq 4001 100000; touch "$HOME/p2"
		while [ ! -e "$HOME/go2" ]; do sleep 0.02; done' \
		'.timeoutMs = 60000 | .maxOutputBytes = 65536')" || return 1
	sf d1 "$OUT/$RUN/output" --stop-after 1000 --out "$TMP/j2"
	id=$(j .lastId "$R")
	k=$(cut -d: -f1 <<<"$id")
	assert_le "$k" 32768 "first connection stopped within the head" || { diag "$R"; return 1; }
	touch "$WS_HOME/go"
	wait_for -t 60 test -e "$WS_HOME/p2" || { _fail "part 2 not written"; return 1; }
	# The run is still running (waiting for go2): the resume is served live by the agent.
	(
		python3 "$FOLLOW" "$SOCK" "$OUT/$RUN/output" --last-event-id "$id" --out "$TMP/j2" \
			>"$TMP/d2.json"
	) &
	local bg=$!
	wait_for -t 60 got_more "$TMP/j2" 40000 || diag "resumed follower slow to receive"
	touch "$WS_HOME/go2"
	wait "$bg"
	R=$(cat "$TMP/d2.json")
	run_wait "$WS" "$RUN" || return 1
	total=$(j .stdoutBytes)
	seq_bytes 1 100000 "$TMP/want2"
	assert_eq "$(stat -c %s "$TMP/want2")" "$total" "the run printed what seq prints"
	assert_eq end "$(j .endEvent "$R")" "resumed connection ends with end" || { diag "$(_short "$R")"; return 1; }
	assert_eq 1 "$(j '.gaps | length' "$R")" "exactly one gap" || { diag "$(j .gaps "$R")"; return 1; }
	gap_bytes=$((total - 65536))
	assert_eq "{\"stream\":\"stdout\",\"offset\":32768,\"bytes\":$gap_bytes}" "$(j '.gaps[0]' "$R")" \
		"the gap: from the head's end, every byte not kept"
	assert_eq "$k" "$(j .offsets.stdout "$R")" "resumed where the first connection stopped"
	{ head -c 32768 "$TMP/want2"; tail -c 32768 "$TMP/want2"; } >"$TMP/kept2"
	assert_eq "$(sha256sum <"$TMP/kept2")" "$(sha256sum <"$TMP/j2")" \
		"joined stream = the kept head and tail, each byte once"
	jq -j '.stdout + .stdoutTail' <<<"$BODY" >"$TMP/stored2"
	assert_eq "$(sha256sum <"$TMP/stored2")" "$(sha256sum <"$TMP/j2")" \
		"joined stream = the run's stored stdout and stdoutTail"

	# The finished run, from offset 1000 (query) and from 40000 (inside the gap).
	sf d3 "$OUT/$RUN/output?offset=1000:0" --out "$TMP/j3"
	assert_eq 1000 "$(j .offsets.stdout "$R")" "?offset=1000:0 starts at 1000"
	assert_eq "$(cat "$TMP/kept2" | tail -c +1001 | sha256sum)" "$(sha256sum <"$TMP/j3")" \
		"?offset=1000:0: the kept bytes from 1000 on"
	assert_eq "[{\"stream\":\"stdout\",\"offset\":32768,\"bytes\":$gap_bytes}]" "$(j .gaps "$R")" \
		"?offset=1000:0: one gap"
	sf d4 "$OUT/$RUN/output?stdoutOffset=40000" --out "$TMP/j4"
	assert_eq "[{\"stream\":\"stdout\",\"offset\":40000,\"bytes\":$((gap_bytes - 40000 + 32768))}]" \
		"$(j .gaps "$R")" "from inside the gap: the rest of the gap"
	assert_eq "$(tail -c 32768 "$TMP/want2" | sha256sum)" "$(sha256sum <"$TMP/j4")" \
		"from inside the gap: the tail"
	sf d5 "$OUT/$RUN/output?stdoutOffset=$total" --out "$TMP/j5"
	assert_eq "0 0 end" "$(j '"\(.gaps | length) \(.bytes.stdout) \(.endEvent)"' "$R")" \
		"from the end: nothing but end"
}

# Offsets that do not fit: 400 naming the parameter; the same request with a good offset is the
# positive control (200, tested above and here).
t_resume_refused() {
	local total
	run_cmd "$WS" 'printf hello; printf err >&2' || return 1
	RUN2=$RUN
	sf r0 "$OUT/$RUN2/output?stdoutOffset=5&stderrOffset=3"
	assert_eq "200 end 0" "$(j '"\(.status) \(.endEvent) \(.gaps | length)"' "$R")" \
		"offsets at the end: 200"
	sf r1 "$OUT/$RUN2/output?stdoutOffset=6"
	assert_eq 400 "$(j .status "$R")" "stdoutOffset beyond the output: 400"
	assert_contains '"field":"stdoutOffset"' "$(j .body "$R")" "names stdoutOffset"
	assert_contains "stdoutOffset 6 is beyond the 5 bytes" "$(j .body "$R")" "says why"
	sf r2 "$OUT/$RUN2/output?offset=0:4"
	assert_eq 400 "$(j .status "$R")" "stderr offset beyond the output: 400"
	assert_contains '"field":"stderrOffset"' "$(j .body "$R")" "names stderrOffset"
	sf r3 "$OUT/$RUN2/output" --last-event-id 'x:1'
	assert_eq 400 "$(j .status "$R")" "malformed Last-Event-ID: 400"
	assert_contains '"field":"Last-Event-ID"' "$(j .body "$R")" "names Last-Event-ID"
	sf r4 "$OUT/$RUN2/output?offset=12"
	assert_eq 400 "$(j .status "$R")" "offset without the stderr part: 400"
	assert_contains 'STDOUT:STDERR' "$(j .body "$R")" "says the form"
	sf r5 "$OUT/$RUN2/output?offset=1:0&stdoutOffset=1"
	assert_eq 400 "$(j .status "$R")" "offset and stdoutOffset together: 400"
	sf r6 "$OUT/$RUN2/output?stdoutOffset=99999999999999999999999"
	assert_eq 400 "$(j .status "$R")" "a huge offset: 400"
	sf r7 "$OUT/$RUN2/output" --last-event-id '2:1'
	assert_eq "200 3 2" "$(j '"\(.status) \(.bytes.stdout) \(.bytes.stderr)"' "$R")" \
		"Last-Event-ID 2:1: the bytes after (llo, rr)"
}

# svc_done: the service's attempt has ended.
svc_done() {
	api -q GET "/v1/workspaces/$WS/services/s1"
	[[ $(j .state) =~ ^(stopped|failed|exhausted)$ ]]
}

# A service's logs resume the same way (its newest finished attempt here).
t_resume_service_logs() {
	api -q POST "/v1/workspaces/$WS/services" \
		'{"name":"s1","command":"seq 1 1000; printf E >&2","restart":{"policy":"no"}}'
	assert_eq 201 "$STATUS" "service created" || { diag "$BODY"; return 1; }
	wait_for -t 60 svc_done || { _fail "service did not end: $(_short "$BODY")"; return 1; }
	seq_bytes 1 1000 "$TMP/svc-want"
	sf s1 "/v1/workspaces/$WS/services/s1/logs?stdoutOffset=100&stderrOffset=1" --out "$TMP/svc"
	assert_eq "200 end 0" "$(j '"\(.status) \(.endEvent) \(.gaps | length)"' "$R")" "resumed: 200"
	assert_eq "$(tail -c +101 "$TMP/svc-want" | sha256sum)" "$(sha256sum <"$TMP/svc")" \
		"the logs from byte 100 on"
	assert_eq 0 "$(stat -c %s "$TMP/svc.err")" "stderr: nothing after its 1 byte"
	sf s2 "/v1/workspaces/$WS/services/s1/logs?stdoutOffset=$(($(stat -c %s "$TMP/svc-want") + 1))"
	assert_eq 400 "$(j .status "$R")" "beyond the attempt's output: 400"
	assert_contains '"field":"stdoutOffset"' "$(j .body "$R")" "names stdoutOffset"
}

run_test "a dropped follower resumes with Last-Event-ID: every byte once" t_resume_exact
run_test "resuming past what is kept: one gap with its count" t_resume_gap
run_test "bad offsets refused with 400 naming them" t_resume_refused
run_test "a service's logs resume from an offset" t_resume_service_logs
