#!/bin/bash
# run-all: serial: needs the tools image, which CI builds beside the other tests (it runs after them)
# run-all: not under sanitizers: the tools image's kernels in a container; the controller paths run in test-contexts
# Code contexts in container workspaces (docs/api.md, "Code contexts"): the controller binds
# station-kernel-python and station-kernel-js read-only at /usr/local/bin, and the tools
# image's python3-ipykernel and node run them: python state (x = 41, then x + 1 is 42), a
# matplotlib chart as a PNG, ZeroDivisionError with its traceback, an interrupted
# `while True: pass` with x kept; javascript state and an error. A hostile image cannot
# redirect the binds: /usr/local/bin/station-kernel-python a symlink to /etc/passwd, or
# /usr/local/bin itself a symlink to /etc, gets no bind and the symlink's target is untouched
# (positive control: a plain busybox image has both programs, read-only).
#
# The tools image is cached in TOOLS_IMAGE (default <source>/build/tools-image, shared with
# test-tools-image and test-network-seed); a machine that cannot reach the Debian archive
# skips the tools image's cases.
. "$(dirname "${BASH_SOURCE[0]}")/container-lib.sh"

TOOLS_IMAGE=${TOOLS_IMAGE:-$SRC/build/tools-image}
TOOLS_IMAGE_NAME=node-tools

require_container_controller --import-dir "$TOOLS_IMAGE"

# The programs' first lines
KERNEL_SHEBANG='#!/usr/bin/python3'
JS_SHEBANG=$(head -n 1 "$SRC/src/kernel/station-kernel-js")

t_binds() {
	local ws
	new_cws ws || return 1
	run_cmd "$ws" 'head -n 1 /usr/local/bin/station-kernel-python; head -n 1 /usr/local/bin/station-kernel-js; echo x >>/usr/local/bin/station-kernel-python || echo read-only' || return 1
	assert_eq "$KERNEL_SHEBANG"$'\n'"$JS_SHEBANG"$'\nread-only' "$(j .stdout)" \
		"both programs bound, read-only ($(j .stderr))"
	api -q DELETE "/v1/workspaces/$ws"
}

t_hostile_symlink() {
	local ws
	build_image kernel-symlink 0 "
add('usr', D, mode=0o755)
add('usr/local', D, mode=0o755)
add('usr/local/bin', D, mode=0o755)
add('usr/local/bin/station-kernel-python', S, target='/etc/passwd')
add('usr/local/bin/station-kernel-js', S, target='../../../etc/group')" || return 1
	new_ws ws "$(jq -nc --arg img "$IMG" '{adapter: "container", image: $img}')" || return 1
	run_cmd "$ws" 'head -n 1 /etc/passwd; head -n 1 /etc/group; readlink /usr/local/bin/station-kernel-python' || return 1
	assert_eq "exited 0" "$(j '"\(.status) \(.exitCode)"')" "the workspace runs ($(j .stderr))" || return 1
	local out
	out=$(j .stdout)
	[[ $out != *"$KERNEL_SHEBANG"* && $out != *"$JS_SHEBANG"* ]] ||
		_fail "a kernel program was bound over the symlink's target: $out"
	assert_eq /etc/passwd "$(tail -n 1 <<<"$out")" "the image's symlink is left as it is"
	api -q DELETE "/v1/workspaces/$ws"
}

t_hostile_dir_symlink() {
	local ws
	build_image kernel-dirlink 0 "
add('usr', D, mode=0o755)
add('usr/local', D, mode=0o755)
add('usr/local/bin', S, target='/etc')" || return 1
	new_ws ws "$(jq -nc --arg img "$IMG" '{adapter: "container", image: $img}')" || return 1
	run_cmd "$ws" 'ls /etc | grep -c station-kernel; true' || return 1
	assert_eq "0" "$(j .stdout)" "nothing bound under /etc through the symlinked /usr/local/bin ($(j .stderr))"
	api -q DELETE "/v1/workspaces/$ws"
}

run_test "container: both kernel programs bound read-only at /usr/local/bin" t_binds
run_test "container: a kernel program's name a symlink to /etc/passwd gets no bind" t_hostile_symlink
run_test "container: /usr/local/bin a symlink to /etc gets no bind" t_hostile_dir_symlink

# ---- the tools image's kernels --------------------------------------------------------------

t0=$SECONDS
tools_image_build
case $? in
0) ;;
2)
	skip "$TEST_NAME: tools image" "$TOOLS_IMAGE_WHY"
	exit $((_n_fail > 0))
	;;
*)
	not_ok "tools image builds" "$TOOLS_IMAGE_WHY"
	exit 1
	;;
esac
note "tools image $TOOLS_DIGEST ready in $((SECONDS - t0)) s"
tools_image_import "$TOOLS_IMAGE_NAME"
if [[ $STATUS != 201 || $(j .digest) != "$TOOLS_DIGEST" ]]; then
	not_ok "tools image imports" "HTTP $STATUS $(_short "$BODY")"
	exit 1
fi
WS=
new_ws WS "$(jq -nc --arg img "$TOOLS_IMAGE_NAME@$TOOLS_DIGEST" '{adapter: "container", image: $img}')" || {
	not_ok "a workspace on the tools image" "$(_short "$BODY")"
	exit 1
}

# ctx_new VAR LANGUAGE: a context in WS; VAR its id.
ctx_new() {
	api -q POST "/v1/workspaces/$WS/contexts" "{\"language\":\"$2\"}"
	assert_eq 201 "$STATUS" "create a $2 context: $(_short "$BODY")" || return 1
	assert_eq idle "$(j .state)" "a new context is idle" || return 1
	printf -v "$1" '%s' "$(j .id)"
}

# cell CTX CODE [TIMEOUT_MS]: executes and waits (60 s); BODY is the execution.
cell() {
	local body
	body=$(jq -nc --arg c "$2" --argjson t "${3:-30000}" '{code: $c, timeoutMs: $t}')
	api -q POST "/v1/workspaces/$WS/contexts/$1/execute?waitMs=60000" "$body"
	assert_eq 201 "$STATUS" "execute: $(_short "$BODY")"
}

PY=
t_py_state() {
	ctx_new PY python || return 1
	cell "$PY" 'x = 41' || return 1
	assert_eq ok "$(j .status)" "x = 41 ($(j .error))" || return 1
	cell "$PY" 'x + 1' || return 1
	assert_eq ok "$(j .status)" "x + 1" || return 1
	assert_eq 42 "$(j '.results[0].data["text/plain"]')" "the second cell sees x"
}

t_py_png() {
	cell "$PY" $'import matplotlib.pyplot as plt\nplt.figure(figsize=(4, 3), dpi=100)\nplt.plot([1, 2, 3], [4, 1, 9])\nplt.show()' ||
		return 1
	assert_eq ok "$(j .status)" "status ($(j .error))" || return 1
	local png=$TMP/plot.png
	j '[.results[] | .data["image/png"] | select(. != null)][0]' | base64 -d >"$png"
	assert_eq 89504e470d0a1a0a "$(head -c 8 "$png" | od -An -tx1 | tr -d ' \n')" \
		"PNG signature" || return 1
	# IHDR: width and height, big-endian, at bytes 16..23 (inline charts are cropped, so
	# within the figure's 400 x 300)
	local w h
	w=$((16#$(od -An -tx1 -j16 -N4 "$png" | tr -d ' \n')))
	h=$((16#$(od -An -tx1 -j20 -N4 "$png" | tr -d ' \n')))
	((w > 100 && w <= 400 && h > 100 && h <= 300)) || _fail "the PNG is $w x $h"
}

t_py_error() {
	cell "$PY" '1 / 0' || return 1
	assert_eq error "$(j .status)" "status" || return 1
	assert_eq ZeroDivisionError "$(j .error.name)" "error name" || return 1
	assert_contains "ZeroDivisionError" "$(j '.error.traceback | join("\n")')" "traceback"
}

t_py_interrupt() {
	local body eid
	body=$(jq -nc --arg c 'while True: pass' '{code: $c, timeoutMs: 60000}')
	api -q POST "/v1/workspaces/$WS/contexts/$PY/execute" "$body"
	assert_eq 201 "$STATUS" "execute" || return 1
	eid=$(j .id)
	api -q POST "/v1/workspaces/$WS/contexts/$PY/interrupt"
	assert_eq 200 "$STATUS" "interrupt: $(_short "$BODY")" || return 1
	assert_eq "$eid" "$(j .id)" "the interrupted execution" || return 1
	assert_eq interrupted "$(j .status)" "status" || return 1
	cell "$PY" 'x' || return 1
	assert_eq 41 "$(j '.results[0].data["text/plain"]')" "x survives the interrupt"
}

t_js() {
	local js
	ctx_new js javascript || return 1
	cell "$js" 'let x = 41' || return 1
	assert_eq ok "$(j .status)" "let x = 41 ($(j .error))" || return 1
	cell "$js" 'x + 1' || return 1
	assert_eq 42 "$(j '.results[0].data["text/plain"]')" "the second cell sees x" || return 1
	cell "$js" 'null.f' || return 1
	assert_eq error "$(j .status)" "status" || return 1
	assert_eq TypeError "$(j .error.name)" "error name"
}

run_test "container context: x = 41 then x + 1 gives 42" t_py_state
run_test "container context: a matplotlib chart comes back as a PNG" t_py_png
run_test "container context: ZeroDivisionError with its traceback" t_py_error
run_test "container context: interrupt, and the next cell sees x" t_py_interrupt
run_test "container context: javascript state and errors" t_js
exit $((_n_fail > 0))
