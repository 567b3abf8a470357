#!/bin/bash
# run-all: slow: 70 to 90 s (runtimes that hang until their timeouts)
# Nothing slow on the event loop (issue 16 items 1-3): a runtime that hangs does not hold the
# API; a call past --runtime-timeout-ms is killed with everything it started and its workspace
# ends in a clear state; creates run side by side; GET /v1/ready spawns nothing per request;
# a delete is true (one runtime delete, the workspace stays "deleting" until the runtime lets
# go, a failed delete is retried); a create's checks of its spec (a profile directory that
# hangs) and a warm pool's teardown when its image goes hold nothing but themselves.
#
# The runtime is a wrapper the test points --runtime at: it logs every invocation (verb, pid,
# start and end times), fails a verb while $FAKE/fail-VERB exists and hangs on a verb while
# $FAKE/hang-VERB exists (writing $FAKE/hung-VERB-PID meanwhile), else runs the real runtime.
# Every assertion is an ordering or an outcome, never a duration.
. "$(dirname "$0")/container-lib.sh"

container_prereqs

FAKE=$TMP/fake
mkdir -p "$FAKE"
WRAPPER=$TMP/fake-runtime
cat >"$WRAPPER" <<SH
#!/bin/sh
verb=
for a in "\$@"; do
	case \$a in
	create | run | delete | state | start | kill | list | --version) verb=\$a; break ;;
	esac
done
echo "start \$verb \$\$ \$(date +%s%N)" >>$FAKE/log
if [ -e $FAKE/fail-\$verb ]; then
	echo "\$verb refused on purpose" >&2
	echo "end \$verb \$\$ \$(date +%s%N)" >>$FAKE/log
	exit 1
fi
if [ -e $FAKE/hang-\$verb ]; then
	: >$FAKE/hung-\$verb-\$\$
	while [ -e $FAKE/hang-\$verb ]; do sleep 0.05; done
	rm -f $FAKE/hung-\$verb-\$\$
fi
$RUNTIME_BIN "\$@"
rc=\$?
echo "end \$verb \$\$ \$(date +%s%N)" >>$FAKE/log
exit \$rc
SH
chmod 0755 "$WRAPPER"

# wrapper_gone: no invocation of the wrapper runs (the controller's own command line names it
# too: only the shell running it counts).
wrapper_gone() {
	! pgrep -f -- "^/bin/sh $WRAPPER" >/dev/null
}

# delete_all: every workspace of the controller deleted (each test starts from none).
delete_all() {
	local id
	api -q GET /v1/workspaces
	for id in $(j '.workspaces[].id'); do
		api -q DELETE "/v1/workspaces/$id"
		[[ $STATUS == 200 ]] || _fail "delete $id: HTTP $STATUS $(_short "$BODY")"
	done
}

# hung VERB [N]: at least N (default 1) calls of VERB are hanging now (a wait_for predicate).
hung() {
	local n
	n=$(find "$FAKE" -maxdepth 1 -name "hung-$1-*" | wc -l)
	((n >= ${2:-1}))
}

# count VERB: invocations of VERB logged so far.
count() {
	grep -c "^start $1 " "$FAKE/log" 2>/dev/null || true
}

# bg_create N BODY: POST /v1/workspaces in the background; its status and body land in
# $TMP/bg-N.status and $TMP/bg-N.body, the status file only once it answered.
bg_create() {
	local n=$1 body=$2
	(
		code=$(curl -sS --max-time 120 --unix-socket "$SOCK" -X POST \
			-H 'Content-Type: application/json' --data-binary "$body" \
			-o "$TMP/bg-$n.body" -w '%{http_code}' http://station/v1/workspaces 2>/dev/null) ||
			code=000
		echo "$code" >"$TMP/bg-$n.tmp"
		mv "$TMP/bg-$n.tmp" "$TMP/bg-$n.status"
	) &
}

answered() {
	[[ -s $TMP/bg-$1.status ]]
}

bg_status() {
	cat "$TMP/bg-$1.status" 2>/dev/null
}

start_fake_controller() {
	start_controller --worker "$WORKER" --runtime "$WRAPPER" --seccomp-dir "$PROFILES" \
		--import-dir "$TMP" "$@" || return 1
	{ [[ -n $IMAGE_DIGEST ]] || container_build_image; } && container_import_image
}

# --- a hung runtime holds nothing but its own workspace ---

t_hung_create() {
	start_fake_controller || return 1
	local host
	new_ws host '{"adapter": "host"}' || return 1
	touch "$FAKE/hang-run"
	rm -f "$TMP"/bg-1.*
	bg_create 1 "$(cws_body)"
	wait_for -t 60 hung run || {
		_fail "the create never reached the runtime"
		return 1
	}
	api -q GET /v1/workspaces
	assert_status 200 "GET /v1/workspaces while the runtime hangs"
	assert_eq creating "$(j '.workspaces[] | select(.adapter == "container") | .state')" \
		"the hung workspace's state"
	api -q GET /v1/worker
	assert_status 200 "GET /v1/worker while the runtime hangs"
	run_cmd "$host" "echo alive" || return 1
	assert_eq "alive" "$(j .stdout | tr -d '\n')" "exec on a host workspace while the runtime hangs"
	api -q GET /v1/ready
	assert_status 200 "GET /v1/ready while the runtime hangs"
	# the ordering: all of the above answered while the create still waits
	answered 1 && _fail "the create answered while its runtime call still hung"
	hung run || _fail "the runtime call was released before the other requests answered"
	rm -f "$FAKE/hang-run"
	wait_for -t 90 answered 1 || _fail "the create never answered after the release"
	assert_eq 201 "$(bg_status 1)" "the create after the release"
	assert_eq ready "$(jq -r .state "$TMP/bg-1.body")" "its state"
	WORKSPACES+=("$(jq -r .id "$TMP/bg-1.body")")
	delete_all
	stop_controller
}

# --- a call past the timeout: killed, with what it started; the workspace in a clear state ---

t_timeout() {
	start_fake_controller --runtime-timeout-ms 2000 || return 1
	touch "$FAKE/hang-run"
	api -q POST /v1/workspaces "$(cws_body)"
	assert_ne 201 "$STATUS" "create with a runtime that hangs past the timeout"
	assert_contains "timed out" "$(j .error.message)" "the error names the timeout"
	note "create: HTTP $STATUS $(j .error.message)"
	wait_for -t 30 wrapper_gone || _fail "runtime processes left: $(pgrep -af -- "^/bin/sh $WRAPPER")"
	api -q GET /v1/workspaces
	assert_eq 0 "$(j '.workspaces | length')" "workspaces after the failed create (it is torn down)"
	[[ -z $(cgroup_dirs "$WORKER-") ]] || _fail "cgroups left: $(cgroup_dirs "$WORKER-")"
	[[ -z $(runtime_cli list -q 2>/dev/null) ]] || _fail "runtime state left: $(runtime_cli list -q)"
	# the positive control, then a restart that times out: the workspace is failed, with why
	rm -f "$FAKE/hang-run"
	local ws
	new_cws ws || return 1
	touch "$FAKE/hang-run"
	api -q POST "/v1/workspaces/$ws/restart"
	assert_ne 200 "$STATUS" "restart with a runtime that hangs past the timeout"
	api -q GET "/v1/workspaces/$ws"
	assert_eq failed "$(j .state)" "state after the timed-out restart"
	assert_contains "timed out" "$(j .reason)" "its reason"
	note "after the restart: $(j '{state, reason}' | tr -d '\n')"
	wait_for -t 30 wrapper_gone || _fail "runtime processes left: $(pgrep -af -- "^/bin/sh $WRAPPER")"
	rm -f "$FAKE/hang-run"
	api -q DELETE "/v1/workspaces/$ws"
	assert_status 200 "delete of the failed workspace"
	assert_clean "$ws"
	delete_all
	stop_controller
}

# --- creates side by side ---

t_parallel() {
	start_fake_controller --create-concurrency 4 || return 1
	# a wrapper killed inside its hang (the timeout test) leaves its marker: not this test's
	rm -f "$FAKE"/hung-*
	touch "$FAKE/hang-run"
	rm -f "$TMP"/bg-[23].*
	bg_create 2 "$(cws_body)"
	bg_create 3 "$(cws_body)"
	# both runtime calls are under way at once: neither waited for the other (the wrapper of
	# each is inside its hang, so the later began before the earlier ended)
	wait_for -t 60 hung run 2 || _fail "the two creates never hung in the runtime together"
	local pids p
	pids=$(find "$FAKE" -maxdepth 1 -name 'hung-run-*' | sed 's/.*-//' | sort -n)
	rm -f "$FAKE/hang-run"
	wait_for -t 120 answered 2 || _fail "create 2 never answered"
	wait_for -t 120 answered 3 || _fail "create 3 never answered"
	assert_eq 201 "$(bg_status 2)" "create 2"
	assert_eq 201 "$(bg_status 3)" "create 3"
	WORKSPACES+=("$(jq -r .id "$TMP/bg-2.body")" "$(jq -r .id "$TMP/bg-3.body")")
	# from the runtime's own timestamps of those two calls: the later began before the
	# earlier ended
	local s2=0 e1= t
	for p in $pids; do
		note "runtime run $p: $(awk -v p="$p" '$2 == "run" && $3 == p {printf "%s %s  ", $1, $4}' "$FAKE/log")"
		t=$(awk -v p="$p" '$1 == "start" && $2 == "run" && $3 == p {print $4}' "$FAKE/log")
		[[ -n $t ]] && ((t > s2)) && s2=$t
		t=$(awk -v p="$p" '$1 == "end" && $2 == "run" && $3 == p {print $4}' "$FAKE/log")
		[[ -n $t ]] && { [[ -z $e1 ]] || ((t < e1)); } && e1=$t
	done
	assert_eq 2 "$(wc -w <<<"$pids")" "runtime calls hung together"
	[[ -n $e1 ]] && ((s2 < e1)) || _fail "the runs did not overlap"
	delete_all
	stop_controller
}

# --- readiness from the background ---

t_ready_cheap() {
	start_fake_controller || return 1
	local before after i
	before=$(count --version)
	for i in $(seq 1 30); do
		api -q GET /v1/ready
		[[ $STATUS == 200 ]] || _fail "GET /v1/ready: HTTP $STATUS"
	done
	after=$(count --version)
	note "runtime --version calls during 30 GET /v1/ready: $((after - before))"
	# background checks (every 10 s) may fall in between, never one per request
	assert_le $((after - before)) 9 "runtime calls for 30 GET /v1/ready"
	# the positive control: ?refresh=1 runs a fresh check
	before=$(count --version)
	api -q GET "/v1/ready?refresh=1"
	assert_status 200 "GET /v1/ready?refresh=1"
	after=$(count --version)
	assert_le 1 $((after - before)) "runtime calls for ?refresh=1"
	api -q GET "/v1/ready?refresh=soon"
	assert_status 400 "GET /v1/ready?refresh=soon"
	assert_contains "refresh" "$(j .error.message)" "the error names the parameter"
	# a refresh waits without holding other requests: hang the check, ask others meanwhile
	touch "$FAKE/hang---version"
	rm -f "$TMP"/ready.*
	(curl -sS --max-time 120 --unix-socket "$SOCK" -o "$TMP/ready.body" \
		"http://station/v1/ready?refresh=1" && touch "$TMP/ready.done") &
	wait_for -t 60 hung --version || _fail "the refresh never reached the runtime"
	api -q GET /v1/worker
	assert_status 200 "GET /v1/worker while a readiness check hangs"
	api -q GET /v1/ready
	assert_status 200 "GET /v1/ready (the last check) while a fresh one hangs"
	[[ -e $TMP/ready.done ]] && _fail "the refresh answered before its check"
	rm -f "$FAKE/hang---version"
	wait_for -t 60 test -e "$TMP/ready.done" || _fail "the refresh never answered"
	delete_all
	stop_controller
}

# --- delete is true ---

t_delete_retry() {
	start_fake_controller || return 1
	local ws before after
	new_cws ws || return 1
	assert_present "$ws"
	touch "$FAKE/fail-delete"
	api -q DELETE "/v1/workspaces/$ws"
	assert_ne 200 "$STATUS" "delete while the runtime refuses"
	assert_contains "still knows container" "$(j .error.message)" "the error says what is left"
	assert_contains "refused on purpose" "$(j .error.message)" "with the runtime's words"
	note "failed delete: HTTP $STATUS $(j .error.message)"
	api -q GET "/v1/workspaces/$ws"
	assert_status 200 "the workspace is still listed"
	assert_eq deleting "$(j .state)" "its state"
	assert_contains "DELETE again" "$(j .reason)" "its reason"
	runtime_knows "$ws" || _fail "the runtime let go although its delete failed"
	rm -f "$FAKE/fail-delete"
	before=$(count delete)
	api -q DELETE "/v1/workspaces/$ws"
	assert_status 200 "delete retried"
	after=$(count delete)
	assert_eq 1 $((after - before)) "runtime deletes for one removal"
	api -q GET "/v1/workspaces/$ws"
	assert_status 404 "the workspace after the delete"
	assert_clean "$ws"
	delete_all
	stop_controller
}

# --- a hung delete holds only its own workspace ---

t_hung_delete() {
	start_fake_controller || return 1
	local ws host
	new_ws host '{"adapter": "host"}' || return 1
	new_cws ws || return 1
	touch "$FAKE/hang-delete"
	rm -f "$TMP"/del.*
	(code=$(curl -sS --max-time 120 --unix-socket "$SOCK" -X DELETE -o "$TMP/del.body" \
		-w '%{http_code}' "http://station/v1/workspaces/$ws") || code=000
	echo "$code" >"$TMP/del.status") &
	wait_for -t 60 hung delete || _fail "the delete never reached the runtime"
	api -q GET "/v1/workspaces/$ws"
	assert_eq deleting "$(j .state)" "state while the runtime's delete hangs"
	run_cmd "$host" "echo alive" || return 1
	assert_eq "alive" "$(j .stdout | tr -d '\n')" "exec on a host workspace while a delete hangs"
	[[ -e $TMP/del.status ]] && _fail "the delete answered while the runtime still hung"
	rm -f "$FAKE/hang-delete"
	wait_for -t 90 test -s "$TMP/del.status" || _fail "the delete never answered"
	assert_eq 200 "$(cat "$TMP/del.status")" "the delete after the release"
	assert_clean "$ws"
	delete_all
	stop_controller
}

# --- a create's checks of its spec (image, seccomp profile) read the disk off the loop ---

# The profile directory is a FUSE filesystem (hangfs.py) that stops answering on demand, as a
# dead network share does: a create naming a profile there hangs in its check.
HANGFS=$TMP/hangfs
HANGFS_PID=
hangfs_stop() {
	[[ -n $HANGFS_PID ]] || return 0
	rm -f "$FAKE/hang-lookup"
	umount "$HANGFS" 2>/dev/null || umount -l "$HANGFS" 2>/dev/null
	wait "$HANGFS_PID" 2>/dev/null
	HANGFS_PID=
}
_loop_cleanup() {
	local rc=$?
	hangfs_stop
	(exit "$rc")
	_container_cleanup
}
trap _loop_cleanup EXIT

t_hung_check() {
	local host profile
	mkdir -p "$HANGFS"
	rm -f "$FAKE"/hangfs-ready "$FAKE"/hang-lookup*
	python3 "$(dirname "$0")/hangfs.py" "$HANGFS" "$FAKE/hang-lookup" "$FAKE/hangfs-ready" \
		2>>"$TMP/hangfs.log" &
	HANGFS_PID=$!
	wait_for -t 30 test -e "$FAKE/hangfs-ready" || {
		_fail "the FUSE filesystem did not mount: $(cat "$TMP/hangfs.log")"
		hangfs_stop
		return 1
	}
	start_fake_controller --seccomp-dir "$HANGFS" || {
		hangfs_stop
		return 1
	}
	new_ws host '{"adapter": "host"}' || return 1
	profile=$(realpath "$HANGFS")/profile.json
	# the positive control: while it answers, the profile is not there (the request's fault)
	api -q POST /v1/workspaces "$(cws_body "$(jq -nc --arg p "$profile" '{seccompProfile: $p}')")"
	assert_status 400 "a create naming a profile the directory lacks"
	assert_eq seccompProfile "$(j .error.field)" "the field it names"
	touch "$FAKE/hang-lookup"
	rm -f "$TMP"/bg-4.*
	bg_create 4 "$(cws_body "$(jq -nc --arg p "$profile" '{seccompProfile: $p}')")"
	wait_for -t 60 test -e "$FAKE/hang-lookup-held" || {
		_fail "the create's check never reached the profile directory"
		hangfs_stop
		return 1
	}
	api -q GET /v1/workspaces
	assert_status 200 "GET /v1/workspaces while the create's check hangs"
	assert_eq creating "$(j '.workspaces[] | select(.adapter == "container") | .state')" \
		"the checked workspace's state"
	run_cmd "$host" "echo alive" || return 1
	assert_eq "alive" "$(j .stdout | tr -d '\n')" "exec on a host workspace while a check hangs"
	api -q GET /v1/worker
	assert_status 200 "GET /v1/worker while a check hangs"
	# the ordering: all of the above answered while the check still waits
	answered 4 && _fail "the create answered while its check still hung"
	[[ -e $FAKE/hang-lookup-held ]] || _fail "the check was released before the others answered"
	rm -f "$FAKE/hang-lookup"
	wait_for -t 90 answered 4 || _fail "the create never answered after the release"
	assert_eq 400 "$(bg_status 4)" "the create once its check failed"
	assert_eq seccompProfile "$(jq -r .error.field "$TMP/bg-4.body")" "the field it names"
	api -q GET /v1/workspaces
	assert_eq 0 "$(j '[.workspaces[] | select(.adapter == "container")] | length')" \
		"container workspaces after the failed check (it is forgotten)"
	delete_all
	stop_controller
	hangfs_stop
}

# --- the warm pool's teardown when its image goes: off the loop ---

pool_ready() {
	api -q GET /v1/worker
	[[ $(j '.pools[0].ready') == "$1" ]]
}

no_containers() {
	[[ -z $(runtime_cli list -q 2>/dev/null) ]]
}

t_pool_image_remove() {
	local host
	start_fake_controller || return 1 # the image in the store before a --pool names it
	stop_controller
	start_fake_controller --pool "$IMAGE,size=1" || return 1
	new_ws host '{"adapter": "host"}' || return 1
	wait_for -t 120 pool_ready 1 || {
		_fail "the pool never had a ready member: $BODY"
		return 1
	}
	touch "$FAKE/hang-delete"
	rm -f "$TMP"/img.*
	(code=$(curl -sS --max-time 120 --unix-socket "$SOCK" -X DELETE -o "$TMP/img.body" \
		-w '%{http_code}' "http://station/v1/images/$IMAGE_DIGEST") || code=000
	echo "$code" >"$TMP/img.tmp" && mv "$TMP/img.tmp" "$TMP/img.status") &
	wait_for -t 60 hung delete || _fail "the member's teardown never reached the runtime"
	wait_for -t 60 test -s "$TMP/img.status" || _fail "the image removal never answered"
	assert_eq 200 "$(cat "$TMP/img.status" 2>/dev/null)" "the image removal"
	api -q GET /v1/workspaces
	assert_status 200 "GET /v1/workspaces while the member's delete hangs"
	run_cmd "$host" "echo alive" || return 1
	assert_eq "alive" "$(j .stdout | tr -d '\n')" "exec on a host workspace while it hangs"
	# the ordering: the removal and the others answered while the runtime's delete still hung
	hung delete || _fail "the runtime's delete was released before the others answered"
	rm -f "$FAKE/hang-delete"
	wait_for -t 90 no_containers || _fail "containers left: $(runtime_cli list -q)"
	api -q GET /v1/worker
	assert_eq 0 "$(j '.pools[0].ready')" "the pool's ready members after"
	delete_all
	stop_controller
}

run_test "a hung runtime create: list, worker, ready and a host exec answer before it" t_hung_create
run_test "a runtime call past the timeout is killed; create torn down, restart failed with why" t_timeout
run_test "two creates hang in the runtime at once and overlap in time" t_parallel
run_test "GET /v1/ready spawns no process per request; ?refresh=1 checks anew without blocking" t_ready_cheap
run_test "a failed delete keeps the workspace deleting with why; the retry runs one delete" t_delete_retry
run_test "a hung delete holds only its own workspace" t_hung_delete
run_test "a create's check hung on its profile directory holds only that create" t_hung_check
run_test "removing a pool's image answers while the members' runtime deletes hang" \
	t_pool_image_remove
