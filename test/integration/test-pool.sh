#!/bin/bash
# run-all: serial: asserts wall-clock bounds (refill attempts per second, createdAt within seconds) that other scripts beside it would stretch
# The warm pool (--pool, docs/operations.md): started idle container workspaces, claimed by a
# matching create, indistinguishable from a fresh workspace from inside (posture probe, HOME,
# process list), limits of the request on the host cgroups, never listed, never reused, adopted
# after a SIGKILLed controller, torn down when no longer configured or when their image goes.
. "$(dirname "$0")/container-lib.sh"

require_container_controller

# Pool members are no client's: a script that stops early removes them the way an operator
# would, by deleting what uses the image and then the image.
_pool_cleanup() {
	local rc=$? id
	if [[ -n $CONTROLLER_PID ]] && kill -0 "$CONTROLLER_PID" 2>/dev/null; then
		api -q GET /v1/workspaces
		for id in $(j '.workspaces[].id' 2>/dev/null); do
			api -q DELETE "/v1/workspaces/$id"
		done
		[[ -n $IMAGE_DIGEST ]] && api -q DELETE "/v1/images/$IMAGE_DIGEST"
	fi
	(exit "$rc")
	_container_cleanup
}
trap _pool_cleanup EXIT
# A fresh workspace to compare a claimed one with; nothing runs in it until the comparison.
new_cws FRESH '{"memoryMb":300,"pidsLimit":77}' || exit 1

# pool_json: the first pool of GET /v1/worker.
pool_json() {
	api -q GET /v1/worker
	j '.pools[0]'
}

pool_ready_is() {
	[[ $(pool_json | jq -r .ready) == "$1" ]]
}

# members: ids of the containers the runtime runs for workspaces no client sees (the pool's).
members() {
	local listed
	api -q GET /v1/workspaces
	listed=$(j '.workspaces[].id')
	runtime_cli list -q 2>/dev/null | grep -vxF -f <(printf '%s\n' "$listed" "-") | sort
}

members_are() {
	[[ $(members | wc -l) == "$1" ]]
}

stop_controller TERM
if ! start_container_controller --pool "$IMAGE,size=2"; then
	not_ok "controller starts with --pool" "see the diagnostics above"
	exit 1
fi

t_bad_specs() {
	local out spec other=$TMP/other-root
	mkdir -p "$other"
	for spec in ",size=2" "$IMAGE,size=0" "$IMAGE,size=1001" "$IMAGE,size=x" \
		"$IMAGE,network=restricted" "$IMAGE,network=wifi" "$IMAGE,colour=red" \
		"$IMAGE,size=1,size=2" "$IMAGE,seccomp="; do
		out=$("$DAEMON" --root "$other" --worker bad --network-range none --pool "$spec" 2>&1 </dev/null)
		assert_eq 64 "$?" "exit status for --pool '$spec'"
		assert_match "^station-sandboxd: --pool \"$(sed 's/[.[\*^$]/\\&/g' <<<"$spec")\": " \
			"$(head -1 <<<"$out")" "message for '$spec'"
	done
	# what the store must hold is checked when the controller starts: a fresh root has no image
	out=$(timeout 20 "$DAEMON" --root "$other" --worker bad --network-range none \
		--runtime "$RUNTIME" --pool "$IMAGE" 2>&1 </dev/null)
	assert_eq 1 "$?" "exit status for an image not in the store"
	assert_contains "--pool \"$IMAGE\": " "$out" "names the pool"
	assert_contains "not in store" "$out" "says why"
	out=$(timeout 20 "$DAEMON" --root "$other" --worker bad --network-range none \
		--runtime "$RUNTIME" --pool "$IMAGE,network=bridge" 2>&1 </dev/null)
	assert_eq 1 "$?" "exit status for bridge on a worker without networking"
	assert_contains "--pool \"$IMAGE\": " "$out" "names the pool"
	# the positive control: the running controller took the same image
	assert_eq 2 "$(pool_json | jq -r .size)" "the running controller's pool"
}

t_fills() {
	wait_for -t 60 pool_ready_is 2 || _fail "pool not filled: $(pool_json)"
	local p
	p=$(pool_json)
	assert_eq "$IMAGE" "$(j .image "$p")" image
	assert_eq "$RUNTIME" "$(j .runtime "$p")" runtime
	assert_eq none "$(j .network "$p")" network
	assert_eq 0 "$(j .starting "$p")" starting
	assert_eq 0 "$(j .claimed "$p")" claimed
	assert_eq null "$(j .lastError "$p")" lastError
	assert_eq 2 "$(members | wc -l)" "pool containers the runtime runs"
	# never listed, never counted, never reachable by id
	api -q GET /v1/workspaces
	assert_eq "[\"$FRESH\"]" "$(j '[.workspaces[].id]')" "listed workspaces"
	api -q GET /v1/worker
	assert_eq 1 "$(j .workspaces)" "workspaces the worker counts"
	local m
	for m in $(members); do
		api -q GET "/v1/workspaces/$m"
		assert_eq 404 "$STATUS" "GET of a pool member"
		api -q POST "/v1/workspaces/$m/commands" "$(json_cmd true)"
		assert_eq 404 "$STATUS" "a command in a pool member"
	done
}

CLAIMED=
t_claim() {
	local before after fresh_json
	wait_for -t 60 pool_ready_is 2 || return 1
	before=$(members)
	# the members were made before this second began (pool_ready_is waited for them)
	local asked_s
	sleep 1
	asked_s=$(date +%s)
	api -q POST /v1/workspaces "$(cws_body '{"memoryMb":300,"pidsLimit":77}')"
	assert_eq 201 "$STATUS" "create" || return 1
	CLAIMED=$(j .id)
	WORKSPACES+=("$CLAIMED")
	local created=$BODY
	grep -qxF -- "$CLAIMED" <<<"$before" || _fail "$CLAIMED was not a pool member: $before"
	assert_eq 1 "$(pool_json | jq -r .claimed)" "claimed counter"
	grep -q "workspace served from the warm pool.*$CLAIMED" "$CONTROLLER_LOG" ||
		_fail "no log line for the claim"
	# the same JSON as a fresh create: same keys, same values but id, times and uid range
	api -q GET "/v1/workspaces/$FRESH"
	fresh_json=$BODY
	local norm='del(.id, .createdAt, .updatedAt, .lastActivityAt)'
	assert_eq "$(j "$norm" "$fresh_json")" "$(j "$norm" "$created")" "create answer"
	assert_eq ready "$(j .state "$created")" state
	# createdAt is the claim's: not before the request (the member was made before it)
	local created_s
	created_s=$(j '.createdAt | sub("\\.[0-9]+Z$"; "Z") | fromdate' "$created")
	assert_le "$asked_s" "$created_s" "createdAt is the claim's"
	assert_le "$created_s" "$(date +%s)" "createdAt is not in the future"
	# the pool refills to its size with a new member
	wait_for -t 60 pool_ready_is 2 || _fail "pool did not refill: $(pool_json)"
	after=$(members)
	assert_eq 2 "$(wc -l <<<"$after")" "members after the refill"
	grep -qxF -- "$CLAIMED" <<<"$after" && _fail "the claimed workspace is still a member"
	return 0
}

t_limits() {
	local mem pids
	mem=$(cgroup_dirs "$CLAIMED" | grep -m1 "/memory/station-sandbox/$CLAIMED\$")
	pids=$(cgroup_dirs "$CLAIMED" | grep -m1 "/pids/station-sandbox/$CLAIMED\$")
	assert_eq $((300 << 20)) "$(cat "$mem/memory.limit_in_bytes" 2>/dev/null)" "memory.limit_in_bytes"
	assert_eq 77 "$(cat "$pids/pids.max" 2>/dev/null)" "pids.max"
	# control: a member keeps the worker's defaults
	local m
	m=$(members | head -1)
	mem=$(cgroup_dirs "$m" | grep -m1 "/memory/station-sandbox/$m\$")
	pids=$(cgroup_dirs "$m" | grep -m1 "/pids/station-sandbox/$m\$")
	assert_eq $((2048 << 20)) "$(cat "$mem/memory.limit_in_bytes" 2>/dev/null)" "a member's memory limit"
	assert_eq 1024 "$(cat "$pids/pids.max" 2>/dev/null)" "a member's pids.max"
}

# What a workspace shows from inside, first the processes (nothing ran in either before). The
# pid numbers are left out: the first command's pid was seen to be 6 in one run and 7 in
# another for workspaces in which nothing had run, so it does not tell what ran before.
inside() {
	run_cmd "$1" 'ps -o user,args' || return 1
	j .stdout
	run_cmd "$1" 'cd /home/node && find . | sort | while read -r f; do stat -c "%n %A %u %g %s" "$f"; done' || return 1
	j .stdout
	probe "$1" || return 1
	# per workspace by design: its id in the paths of its binds, its own uid range, the inode
	# numbers of the pipes of the run
	sed -e "s/$1/WS/g" -e 's/^\(uid_map\|gid_map\)=0 [0-9]* /\1=0 BASE /' \
		-e 's/=pipe:\[[0-9]*\]$/=pipe/' <<<"$PROBE_OUT"
}

t_indistinguishable() {
	local a b
	a=$(inside "$FRESH") || return 1
	b=$(inside "$CLAIMED") || return 1
	assert_match 'posture|uid' "$a" "the probe reported" || return 1
	if [[ $a != "$b" ]]; then
		_fail "a claimed workspace differs from a fresh one:"
		diff <(echo "$a") <(echo "$b") | head -20 | while IFS= read -r l; do diag "  $l"; done
	fi
}

t_cold() {
	local before
	before=$(members)
	api -q POST /v1/workspaces "$(cws_body '{"env":{"POOLTEST":"cold"}}')"
	assert_eq 201 "$STATUS" "create with env" || return 1
	local ws
	ws=$(j .id)
	WORKSPACES+=("$ws")
	grep -qxF -- "$ws" <<<"$before" && _fail "a create with env took a member"
	assert_eq 1 "$(pool_json | jq -r .claimed)" "claimed counter unchanged"
	run_cmd "$ws" 'echo $POOLTEST' || return 1
	assert_eq cold "$(j .stdout | tr -d '\n')" "the env reached the workspace"
	assert_eq "$before" "$(members)" "members untouched"
	# another image, host adapter: cold too
	api -q POST /v1/workspaces '{"adapter":"host"}'
	assert_eq 201 "$STATUS" "host create" || return 1
	WORKSPACES+=("$(j .id)")
	assert_eq 1 "$(pool_json | jq -r .claimed)" "claimed counter after a host create"
	api -q DELETE "/v1/workspaces/$ws"
	assert_eq 200 "$STATUS" "delete the cold one"
}

t_not_reused() {
	api -q DELETE "/v1/workspaces/$CLAIMED"
	assert_eq 200 "$STATUS" delete || return 1
	wait_for -t 20 ws_clean "$CLAIMED" || assert_clean "$CLAIMED"
	wait_for -t 60 pool_ready_is 2 || return 1
	members | grep -qxF -- "$CLAIMED" && _fail "the deleted workspace is a member again"
	new_cws AGAIN || return 1
	assert_ne "$CLAIMED" "$AGAIN" "a new claim's id"
	assert_eq 2 "$(pool_json | jq -r .claimed)" "claimed counter"
	api -q GET "/v1/workspaces/$CLAIMED"
	assert_eq 404 "$STATUS" "the deleted workspace stays deleted"
	api -q DELETE "/v1/workspaces/$AGAIN"
}

t_sigkill_adopts() {
	wait_for -t 60 pool_ready_is 2 || return 1
	local before
	before=$(members)
	stop_controller KILL
	restart_controller || return 1
	wait_for -t 30 pool_ready_is 2 || _fail "members not adopted: $(pool_json)"
	assert_eq "$before" "$(members)" "the same members, no extra container"
	assert_eq 0 "$(pool_json | jq -r .claimed)" "claimed counter of the new controller"
	new_cws ADOPTED || return 1
	grep -qxF -- "$ADOPTED" <<<"$before" || _fail "the claim after the restart was cold"
	run_cmd "$ADOPTED" 'echo hi' || return 1
	assert_eq hi "$(j .stdout | tr -d '\n')" "a command in an adopted member"
	api -q DELETE "/v1/workspaces/$ADOPTED"
}

t_smaller_tears_down() {
	wait_for -t 60 pool_ready_is 2 || return 1
	local before gone kept
	before=$(members)
	stop_controller TERM
	if ! start_container_controller --pool "$IMAGE,size=1"; then
		_fail "restart with size 1"
		return 1
	fi
	wait_for -t 30 members_are 1 || _fail "surplus not torn down: $(members)"
	kept=$(members)
	grep -qxF -- "$kept" <<<"$before" || _fail "the kept member $kept is new"
	gone=$(grep -vxF -- "$kept" <<<"$before")
	assert_eq 1 "$(wc -l <<<"$gone")" "members torn down" || return 1
	wait_for -t 20 ws_clean "$gone" || assert_clean "$gone"
	assert_eq 1 "$(pool_json | jq -r .ready)" "ready"
	# positive control for the cleanliness check: the kept member is there to find
	assert_present "$kept"
}

t_image_removed() {
	local kept
	kept=$(members)
	api -q DELETE "/v1/workspaces/$FRESH"
	api -q DELETE "/v1/images/$IMAGE_DIGEST"
	assert_eq 200 "$STATUS" "image delete with only pool members on it: $(_short "$BODY")" || return 1
	# the members' deletes run off the loop, after the answer
	wait_for -t 60 members_are 0 || _fail "members after the image went: $(members)"
	wait_for -t 20 ws_clean "$kept" || assert_clean "$kept"
	local p
	p=$(pool_json)
	assert_eq 0 "$(j .ready "$p")" ready
	# the removal's own words, or already those of the first refill after it (1 s later)
	assert_match 'was removed from the store|not in store' "$(j .lastError "$p")" "lastError"
	# the refill fails and backs off instead of looping: one failure logged, not hundreds
	wait_for -t 10 grep -q "pool refill failed" "$CONTROLLER_LOG" || _fail "no refill attempt"
	local n
	n=$(grep -c "pool refill failed" "$CONTROLLER_LOG")
	assert_le "$n" 3 "refill failures logged within the first second"
	assert_contains "not in store" "$(pool_json | jq -r .lastError)" "lastError after the refill"
}

run_test "bad --pool values refused at start, each named" t_bad_specs
run_test "the pool fills to its size; members are never listed, counted or reachable" t_fills
run_test "a matching create is served from the pool and the pool refills" t_claim
run_test "the request's limits are on the claimed workspace's cgroups" t_limits
run_test "a claimed workspace looks like a fresh one from inside (processes, HOME, posture)" t_indistinguishable
run_test "a create that does not match is cold" t_cold
run_test "a claimed then deleted workspace is never reused" t_not_reused
run_test "SIGKILLed controller: the members are adopted, no extra container" t_sigkill_adopts
run_test "restart with a smaller size tears the surplus down" t_smaller_tears_down
run_test "removing the pool's image tears the members down; the pool reports it" t_image_removed
exit $((_n_fail > 0))
