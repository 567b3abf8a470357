#!/bin/bash
# run-all: slow: 60 to 110 s (every endpoint, the hostile-path table, file watches over WebSocket)
# The files API (docs/api.md, "Files") end to end, done by the workspace's agent: every endpoint
# with exact statuses and bodies on a host workspace; the hostile-path table (symlinks to host
# paths, `..`, absolute paths, NUL, a 4 KiB path, a symlink swapped during downloads, a FIFO, a
# device node), each row beside its positive control, on a host workspace and in a container;
# 256 MiB streamed both ways with the controller's peak memory bounded; Range, If-Match,
# a client that disconnects mid-upload; watch over SSE and WebSocket, overflow included.
. "$(dirname "$0")/container-lib.sh"

CLIENT=$SRC/test/integration/ws-client.mjs
HOST_MARKER=$TMP/host-marker
echo "HOST-MARKER-$$" >"$HOST_MARKER"
chmod 0644 "$HOST_MARKER"

HAVE_CONTAINER=1
[[ -n $RUNTIME_BIN && -x /bin/busybox && -x $PROBE_BIN ]] || HAVE_CONTAINER=0
if ((HAVE_CONTAINER)); then
	require_container_controller
else
	require_controller
fi

new_ws WS || exit 1
api -q GET "/v1/workspaces/$WS"
H=$(j .home)
W=$(j .workdir)
[[ -n $W && $W != null ]] || W=$H/workspace
mkdir -p "$W"

# F WS SUFFIX: the files URL of WS.
F() {
	echo "/v1/workspaces/$1/files$2"
}

uri() {
	jq -rn --arg s "$1" '$s | @uri'
}

# fcurl OUT [CURL ARGS...] URL-PATH: any request; STATUS, BODY (unless OUT is a file to keep
# the body in) and the response headers in $TMP/hdr.
fcurl() {
	local out=$1
	shift
	local args=("$@")
	local path=${args[-1]}
	unset 'args[-1]'
	STATUS=$(curl -sS --max-time 60 --unix-socket "$SOCK" -D "$TMP/hdr" -o "$out" -w '%{http_code}' \
		"${args[@]}" "http://station$path" 2>"$TMP/curl-err") || STATUS=000
	if [[ $out == "$TMP/body" ]]; then
		BODY=$(cat "$TMP/body")
	fi
}

# hdr NAME: a header of the last fcurl response.
hdr() {
	awk -v n="$(tr '[:upper:]' '[:lower:]' <<<"$1")" -F': ' \
		'tolower($1) == n {sub(/\r$/, "", $2); print $2; exit}' "$TMP/hdr"
}

# download WS PATH [CURL ARGS...]: into $TMP/dl.
download() {
	local ws=$1 p=$2
	shift 2
	fcurl "$TMP/dl" "$@" "$(F "$ws" "?path=$(uri "$p")")"
	BODY=$(head -c 2000 "$TMP/dl")
}

# upload WS PATH FILE [QUERY] [CURL ARGS...]
upload() {
	local ws=$1 p=$2 file=$3 q=${4-}
	shift 4 2>/dev/null || shift $#
	fcurl "$TMP/body" -X PUT --data-binary "@$file" "$@" "$(F "$ws" "?path=$(uri "$p")$q")"
}

fstat() {
	fcurl "$TMP/body" "$(F "$1" "/stat?path=$(uri "$2")")"
}

err_code() {
	j .error.code
}

# ---------------------------------------------------------------------------------------------
# Host workspace: the endpoints

t_write_new_and_replace() {
	printf 'hello\n' >"$TMP/in"
	upload "$WS" new.txt "$TMP/in" ""
	# 201 needs the agent's CREATED flag in WRITE's END (file-proto.h)
	assert_status 201 "new file"
	[[ $STATUS == 20[01] ]] || return 1
	assert_eq "new.txt|$W/new.txt|file|6|0644|null" \
		"$(j '[.name, .path, .type, .size, .mode, .linkTarget] | map(tostring) | join("|")')" entry
	assert_match '^"[0-9a-f]+-6-[0-9a-f]+"$' "$(j .etag)" etag
	assert_match '^20[0-9-]+T[0-9:.]+Z$' "$(j .mtime)" mtime
	assert_files_eq "$TMP/in" "$W/new.txt" "content on disk"
	printf 'replaced' >"$TMP/in2"
	upload "$WS" new.txt "$TMP/in2" "&mode=0600"
	assert_status 200 "replace" || return 1
	assert_eq "8 0600" "$(j '"\(.size) \(.mode)"')" "size and mode"
	assert_eq 600 "$(stat -c %a "$W/new.txt")" "mode on disk"
	assert_files_eq "$TMP/in2" "$W/new.txt" "replaced content"
}

t_stat_list() {
	mkdir -p "$W/ls/sub"
	printf 'abc' >"$W/ls/b.txt"
	printf '' >"$W/ls/a.txt"
	ln -sfn b.txt "$W/ls/link"
	fstat "$WS" ls/b.txt
	assert_status 200 stat || return 1
	assert_eq "b.txt|file|3|null" "$(j '[.name, .type, .size, .linkTarget] | map(tostring) | join("|")')" stat
	fstat "$WS" ls/link
	assert_eq "symlink|b.txt|null" "$(j '[.type, .linkTarget, .etag] | map(tostring) | join("|")')" \
		"stat does not follow a symlink"
	fcurl "$TMP/body" "$(F "$WS" "/list?path=ls")"
	assert_status 200 list || return 1
	assert_eq "a.txt:file:0 b.txt:file:3 link:symlink:5 sub:dir:4096" \
		"$(j '[.entries[] | "\(.name):\(.type):\(.size)"] | join(" ")')" "entries sorted by name"
	assert_eq false "$(j .truncated)" truncated
	fcurl "$TMP/body" "$(F "$WS" "/list?path=ls/b.txt")"
	assert_status 400 "list of a file"
	assert_contains "not a directory" "$(j .error.message)"
}

# Names are bytes: one that is not UTF-8 is listed in base64 with nameEncoding, and a message
# quotes it with \xNN. Positive control: a UTF-8 name is listed as it is.
t_non_utf8_names() {
	mkdir -p "$W/enc"
	touch "$W/enc/"$'\xff'x "$W/enc/"$'\xc3\xa9'
	fcurl "$TMP/body" "$(F "$WS" "/list?path=enc")"
	assert_status 200 list || return 1
	assert_eq "é: /3g=:base64" "$(j '[.entries[] | "\(.name):\(.nameEncoding // "")"] | join(" ")')" \
		"names (UTF-8 as is, the other in base64)"
	fcurl "$TMP/body" "$(F "$WS" "/stat?path=enc/%FEnope")"
	assert_status 404 "a missing non-UTF-8 path"
	assert_eq '"enc/\xfenope": no such file or directory' "$(j .error.message)" "message quotes the byte"
}

t_read_headers_range() {
	head -c 100000 /dev/urandom >"$W/r.bin"
	download "$WS" r.bin
	assert_status 200 read || return 1
	assert_files_eq "$W/r.bin" "$TMP/dl" content
	assert_eq 100000 "$(hdr Content-Length)" Content-Length
	assert_eq application/octet-stream "$(hdr Content-Type)" Content-Type
	assert_match '^"[0-9a-f]+-186a0-[0-9a-f]+"$' "$(hdr ETag)" ETag
	assert_eq "$(date -u -r "$W/r.bin" '+%a, %d %b %Y %H:%M:%S GMT')" "$(hdr Last-Modified)" Last-Modified
	download "$WS" r.bin -H 'Range: bytes=10-19'
	assert_status 206 "bytes=A-B"
	assert_eq "bytes 10-19/100000" "$(hdr Content-Range)" Content-Range
	cmp -s <(tail -c +11 "$W/r.bin" | head -c 10) "$TMP/dl" || _fail "bytes 10-19 differ"
	download "$WS" r.bin -H 'Range: bytes=99990-'
	assert_status 206 "bytes=A-"
	assert_eq "bytes 99990-99999/100000" "$(hdr Content-Range)" Content-Range
	cmp -s <(tail -c 10 "$W/r.bin") "$TMP/dl" || _fail "bytes=A- differs"
	download "$WS" r.bin -H 'Range: bytes=-5'
	assert_status 206 "bytes=-N"
	assert_eq "bytes 99995-99999/100000" "$(hdr Content-Range)" Content-Range
	cmp -s <(tail -c 5 "$W/r.bin") "$TMP/dl" || _fail "bytes=-N differs"
	download "$WS" r.bin -H 'Range: bytes=99999-200000'
	assert_status 206 "a range past the end is cut"
	assert_eq "bytes 99999-99999/100000" "$(hdr Content-Range)" Content-Range
	download "$WS" r.bin -H 'Range: bytes=100000-'
	assert_status 416 "a range at the end"
	assert_eq "bytes */100000" "$(hdr Content-Range)" "416 Content-Range"
	assert_eq range_not_satisfiable "$(err_code)" code
}

t_max_bytes() {
	printf '0123456789' >"$W/ten"
	fcurl "$TMP/dl" "$(F "$WS" "?path=ten&maxBytes=9")"
	assert_status 413 "maxBytes below the size"
	assert_eq payload_too_large "$(jq -r .error.code "$TMP/dl")" code
	assert_contains '"ten"' "$(jq -r .error.message "$TMP/dl")" "message names the path"
	fcurl "$TMP/dl" "$(F "$WS" "?path=ten&maxBytes=10")"
	assert_status 200 "maxBytes equal to the size (positive control)"
	assert_eq 0123456789 "$(cat "$TMP/dl")" content
}

t_if_match() {
	printf 'v1' >"$TMP/in"
	upload "$WS" im.txt "$TMP/in" ""
	local etag
	etag=$(j .etag)
	printf 'v2' >"$TMP/in"
	upload "$WS" im.txt "$TMP/in" "" -H "If-Match: $etag"
	assert_status 200 "If-Match with the current etag" || return 1
	printf 'v3' >"$TMP/in"
	upload "$WS" im.txt "$TMP/in" "" -H "If-Match: $etag"
	assert_status 412 "If-Match with the old etag"
	assert_eq precondition_failed "$(err_code)" code
	assert_eq v2 "$(cat "$W/im.txt")" "the file kept v2"
}

t_exclusive_parents() {
	printf 'x' >"$TMP/in"
	upload "$WS" ex.txt "$TMP/in" "&exclusive=1"
	assert_status 201 "exclusive, new (positive control)"
	upload "$WS" ex.txt "$TMP/in" "&exclusive=1"
	assert_status 409 "exclusive onto an existing file"
	assert_eq conflict "$(err_code)" code
	assert_contains exists "$(j .error.message)"
	upload "$WS" p/q/r.txt "$TMP/in" ""
	assert_status 404 "missing parents"
	upload "$WS" p/q/r.txt "$TMP/in" "&parents=1"
	assert_status 201 "parents=1"
	[[ -f $W/p/q/r.txt ]] || _fail "p/q/r.txt not made"
	upload "$WS" p "$TMP/in" ""
	assert_status 400 "write onto a directory"
	assert_contains "is a directory" "$(j .error.message)"
}

t_mkdir_rename_delete() {
	api -q POST "$(F "$WS" /mkdir)" '{"path":"m1"}'
	assert_status 201 mkdir
	assert_eq "dir|0755" "$(j '"\(.type)|\(.mode)"')" entry
	api -q POST "$(F "$WS" /mkdir)" '{"path":"m1"}'
	assert_status 409 "mkdir of an existing directory"
	api -q POST "$(F "$WS" /mkdir)" '{"path":"m1","parents":true}'
	assert_status 201 "mkdir parents of an existing directory"
	api -q POST "$(F "$WS" /mkdir)" '{"path":"m2/a/b","parents":true,"mode":"0700"}'
	assert_status 201 "mkdir parents"
	assert_eq 700 "$(stat -c %a "$W/m2/a/b")" mode
	api -q POST "$(F "$WS" /mkdir)" '{"path":"m3","bogus":1}'
	assert_status 400 "unknown field"
	printf 'a' >"$W/ra"
	printf 'b' >"$W/rb"
	api -q POST "$(F "$WS" /rename)" '{"from":"ra","to":"rb","overwrite":false}'
	assert_status 409 "rename onto an existing path without overwrite"
	assert_eq to "$(j .error.field)" field
	api -q POST "$(F "$WS" /rename)" '{"from":"ra","to":"rb"}'
	assert_status 200 "rename with overwrite"
	assert_eq "rb|$W/rb" "$(j '"\(.name)|\(.path)"')" entry
	assert_eq a "$(cat "$W/rb")" content
	api -q DELETE "$(F "$WS" "?path=m2")"
	assert_status 409 "delete of a non-empty directory"
	assert_contains "not empty" "$(j .error.message)"
	api -q DELETE "$(F "$WS" "?path=m2&recursive=1")"
	assert_status 200 "recursive delete"
	assert_eq '{"path":"m2","deleted":true}' "$BODY" body
	[[ ! -e $W/m2 ]] || _fail "m2 still there"
	ln -sfn "$W/rb" "$W/dl-link"
	api -q DELETE "$(F "$WS" "?path=dl-link")"
	assert_status 200 "delete of a symlink"
	[[ -f $W/rb && ! -L $W/dl-link ]] || _fail "the link's target went, or the link stayed"
	api -q DELETE "$(F "$WS" "?path=nothing-here")"
	assert_status 404 "delete of nothing"
	assert_eq not_found "$(err_code)" code
	assert_contains '"nothing-here"' "$(j .error.message)" "message names the path"
}

t_bad_requests() {
	api -q GET "$(F "$WS" /stat)"
	assert_status 400 "no path"
	assert_eq path "$(j .error.field)" field
	api -q GET "$(F "$WS" "/stat?path=a&bogus=1")"
	assert_status 400 "unknown query parameter"
	api -q PUT "$(F "$WS" "?path=x&mode=0999")" 'x'
	assert_status 400 "bad mode"
	api -q GET "$(F nosuchws "/stat?path=a")"
	assert_status 404 "unknown workspace"
	api -q PATCH "$(F "$WS" "?path=a")"
	assert_status 405 "PATCH"
}

# ---------------------------------------------------------------------------------------------
# Host workspace: the hostile-path table

t_host_symlink_out() {
	ln -sfn "$HOST_MARKER" "$W/to-host"
	download "$WS" to-host
	assert_status 400 "symlink to a host path"
	assert_contains "escapes the workspace" "$BODY"
	ln -sfn ../../../../../../../../.. "$W/up-link"
	download "$WS" up-link/etc/passwd
	assert_status 400 "symlink climbing out"
	printf 'inside' >"$W/good"
	ln -sfn good "$W/to-good"
	download "$WS" to-good
	assert_status 200 "symlink inside home (positive control)"
	assert_eq inside "$(cat "$TMP/dl")" content
}

t_host_dotdot_absolute() {
	download "$WS" ../../../../../../etc/passwd
	assert_status 400 "dotdot above the root"
	download "$WS" "$HOST_MARKER"
	assert_status 400 "absolute path outside home"
	assert_eq "\"$HOST_MARKER\": escapes the workspace" "$(j .error.message)" "message names the path"
	download "$WS" "$W/good"
	assert_status 200 "absolute path inside home (positive control)"
	download "$WS" "sub/../good"
	assert_status 404 "dotdot that stays inside needs sub to exist"
	mkdir -p "$W/sub"
	download "$WS" "sub/../good"
	assert_status 200 "dotdot that stays inside (positive control)"
}

t_nul_long() {
	fcurl "$TMP/body" "$(F "$WS" "/stat?path=good%00/etc/passwd")"
	assert_status 400 "NUL via %00"
	assert_contains "NUL" "$(j .error.message)" "message names the problem"
	fcurl "$TMP/body" "$(F "$WS" "/stat?path=good")"
	assert_status 200 "the same path without NUL (positive control)"
	local long
	long=$(printf 'a%.0s' {1..4097})
	fcurl "$TMP/body" "$(F "$WS" "/stat?path=$long")"
	assert_status 400 "a 4 KiB path"
	assert_contains "4097 bytes" "$(j .error.message)"
	long=$(printf 'd%.0s' {1..200})
	mkdir -p "$W/$long"
	fcurl "$TMP/body" "$(F "$WS" "/stat?path=$long")"
	assert_status 200 "a 200-byte name (positive control)"
}

t_fifo_device() {
	mkfifo "$W/fifo"
	fcurl "$TMP/dl" --max-time 10 "$(F "$WS" "?path=fifo")"
	assert_status 400 "read of a FIFO"
	assert_contains "not a regular file" "$(cat "$TMP/dl")"
	printf 'x' >"$TMP/in"
	upload "$WS" fifo "$TMP/in" "" --max-time 10
	assert_status 400 "write onto a FIFO"
	mknod "$W/null" c 1 3
	download "$WS" null --max-time 10
	assert_status 400 "read of a device node"
	assert_contains "not a regular file" "$BODY"
	download "$WS" good
	assert_status 200 "a regular file (positive control)"
}

t_symlink_swap() {
	printf 'GOOD-CONTENT' >"$W/swap-good"
	local i bad=0 good=0 clean=0 loop
	(
		while :; do
			ln -sfn swap-good "$W/swap"
			ln -sfn "$HOST_MARKER" "$W/swap"
		done
	) &
	loop=$!
	for i in $(seq 1 60); do
		download "$WS" swap
		case "$STATUS:$(cat "$TMP/dl")" in
		200:GOOD-CONTENT) good=$((good + 1)) ;;
		400:*escapes*) clean=$((clean + 1)) ;;
		*) bad=$((bad + 1)) diag "unexpected: $STATUS $(head -c 200 "$TMP/dl")" ;;
		esac
	done
	kill "$loop"
	wait "$loop" 2>/dev/null
	note "symlink swap: $good good, $clean refused, $bad other"
	assert_eq 0 "$bad" "downloads that were neither the good file nor a clean refusal"
	assert_ne 0 "$good" "the swapped link gave the good file at least once (positive control)"
}

# ---------------------------------------------------------------------------------------------
# Host workspace: streaming

t_big_stream() {
	local before after
	head -c $((256 * 1024 * 1024)) /dev/urandom >"$TMP/big"
	before=$(vmhwm_kb "$CONTROLLER_PID")
	upload "$WS" big.bin "$TMP/big" "&exclusive=1"
	assert_status 201 "256 MiB upload" || return 1
	assert_eq $((256 * 1024 * 1024)) "$(j .size)" size
	download "$WS" big.bin
	assert_status 200 "256 MiB download" || return 1
	after=$(vmhwm_kb "$CONTROLLER_PID")
	assert_eq "$(sha256sum <"$TMP/big" | cut -c1-64)" "$(sha256sum <"$TMP/dl" | cut -c1-64)" "sha256 of the download"
	assert_eq "$(sha256sum <"$TMP/big" | cut -c1-64)" "$(sha256sum <"$W/big.bin" | cut -c1-64)" "sha256 on disk"
	note "controller VmHWM ${before} kB before, ${after} kB after 256 MiB each way"
	assert_le $((after - before)) $((32 * 1024)) "VmHWM growth in kB"
	rm -f "$TMP/big" "$TMP/dl" "$W/big.bin"
}

# Entries of W that were not there before the upload (its temporary file shows up there).
tmp_count() {
	comm -13 "$TMP/before" <(ls -A "$W" | sort) | wc -l
}

t_disconnect_mid_upload() {
	printf 'OLD' >"$W/keep.txt"
	ls -A "$W" | sort >"$TMP/before"
	mkfifo "$TMP/slow"
	curl -sS --unix-socket "$SOCK" -T "$TMP/slow" \
		-o /dev/null "http://station$(F "$WS" "?path=keep.txt")" 2>/dev/null &
	local curl_pid=$!
	exec 7>"$TMP/slow"
	head -c 300000 /dev/urandom >&7
	wait_for -t 10 test "$(tmp_count)" -ge 1 || _fail "no temporary file appeared"
	kill "$curl_pid"
	wait "$curl_pid" 2>/dev/null
	exec 7>&-
	wait_for -t 10 test "$(tmp_count)" -eq 0 || _fail "the temporary file stayed: $(comm -13 "$TMP/before" <(ls -A "$W" | sort))"
	assert_eq OLD "$(cat "$W/keep.txt")" "the target is untouched"
	rm -f "$TMP/slow"
}

t_not_ready_and_limit() {
	local ws2 pid i
	new_ws ws2 || return 1
	pid=$(agent_pid "$ws2")
	kill -KILL "$pid"
	wait_for -t 10 sh -c "curl -s --unix-socket '$SOCK' http://x/v1/workspaces/$ws2 | grep -q '\"state\":\"stopped\"'"
	fcurl "$TMP/body" "$(F "$ws2" "/stat?path=.")"
	assert_status 409 "a stopped workspace"
	assert_contains "not ready" "$(j .error.message)"
	# 32 watches hold every session of WS; the 33rd operation is refused
	local pids=() try
	for i in $(seq 1 32); do
		for try in 1 2 3 4 5; do
			curl -sN --unix-socket "$SOCK" "http://station$(F "$WS" "/watch?path=.")" >"$TMP/w$i" 2>/dev/null &
			local p=$!
			wait_for -t 10 grep -qE '^event: ready|too_many' "$TMP/w$i"
			grep -q '^event: ready' "$TMP/w$i" && break
			# the agent still counted a worker of an earlier operation that was exiting
			wait "$p" 2>/dev/null
		done
		pids+=("$p")
		grep -q '^event: ready' "$TMP/w$i" || _fail "watch $i not ready: $(head -c 300 "$TMP/w$i")"
	done
	fcurl "$TMP/body" "$(F "$WS" "/stat?path=good")"
	assert_status 429 "the 33rd file operation"
	assert_eq too_many_requests "$(err_code)" code
	kill "${pids[@]}"
	wait "${pids[@]}" 2>/dev/null
	wait_for -t 10 sh -c "curl -s -o /dev/null -w '%{http_code}' --unix-socket '$SOCK' \
		'http://x$(F "$WS" "/stat?path=good")' | grep -q 200" || _fail "stat after the watches ended (positive control)"
}

# ---------------------------------------------------------------------------------------------
# Watch

t_watch_sse() {
	mkdir -p "$W/wd"
	curl -sN --unix-socket "$SOCK" "http://station$(F "$WS" "/watch?path=wd&recursive=1")" >"$TMP/sse" 2>&1 &
	local pid=$!
	wait_for -t 10 grep -q '^event: ready' "$TMP/sse" || { _fail "no ready event: $(cat "$TMP/sse")"; kill $pid; return 1; }
	printf 'x' >"$W/wd/a.txt"
	mv "$W/wd/a.txt" "$W/wd/b.txt"
	rm "$W/wd/b.txt"
	mkdir "$W/wd/sub"
	wait_for -t 5 grep -q '"kind":"dir"' "$TMP/sse"
	printf 'y' >"$W/wd/sub/deep.txt"
	wait_for -t 5 grep -q 'deep.txt' "$TMP/sse" || _fail "no event from the subdirectory"
	rm -r "$W/wd"
	wait_for -t 10 sh -c "! kill -0 $pid 2>/dev/null" || _fail "the stream did not end when the directory went"
	kill "$pid" 2>/dev/null
	local data
	data=$(sed -n 's/^data: //p' "$TMP/sse")
	assert_contains "{\"type\":\"ready\",\"path\":\"$W/wd\",\"seq\":1}" "$data" ready
	assert_contains "\"type\":\"created\",\"kind\":\"file\",\"path\":\"$W/wd/a.txt\"" "$data" created
	assert_contains "\"type\":\"moved\",\"kind\":\"file\",\"path\":\"$W/wd/a.txt\",\"to\":\"$W/wd/b.txt\"" "$data" moved
	assert_contains "\"type\":\"deleted\",\"kind\":\"file\",\"path\":\"$W/wd/b.txt\"" "$data" deleted
	assert_contains "\"path\":\"$W/wd/sub/deep.txt\"" "$data" "recursive"
	assert_match 'id: 2' "$(cat "$TMP/sse")" "SSE id"
	local seqs
	seqs=$(jq -r .seq <<<"$data" | tr '\n' ' ')
	assert_eq "$(seq -s ' ' 1 "$(wc -l <<<"$data")") " "$seqs" "seq counts up by one"
	fcurl "$TMP/body" "$(F "$WS" "/watch?path=no-such-dir")"
	assert_status 404 "watch of a missing directory"
}

ws_ok=0
npm_tools && ws_ok=1 # ws, pinned in test/npm-tools

t_watch_ws() {
	mkdir -p "$W/ww"
	WS_MODULE_DIR=$NPM_TOOLS node "$CLIENT" events "ws+unix://$SOCK:$(F "$WS" "/watch?path=ww")" \
		"$TMP/wsev" >"$TMP/wsres" 2>&1 &
	local pid=$!
	wait_for -t 10 grep -q '"ready"' "$TMP/wsev" 2>/dev/null || { _fail "no ready message"; kill $pid; return 1; }
	printf 'x' >"$W/ww/one"
	wait_for -t 5 grep -q '"created"' "$TMP/wsev" || _fail "no created message"
	rm -r "$W/ww"
	wait_for -t 10 sh -c "! kill -0 $pid 2>/dev/null" || _fail "the WebSocket did not close"
	assert_eq 1000 "$(jq -r .code "$TMP/wsres")" "close code"
	assert_eq 0 "$(grep -c overflow "$TMP/wsev")" "no overflow for a client that reads (positive control)"
}

t_watch_overflow() {
	mkdir -p "$W/wo"
	WS_MODULE_DIR=$NPM_TOOLS node "$CLIENT" events "ws+unix://$SOCK:$(F "$WS" "/watch?path=wo")" \
		"$TMP/woev" "$TMP/wo-go" >"$TMP/wores" 2>&1 &
	local pid=$! i
	wait_for -t 10 test -e "$TMP/woev.open" || { _fail "did not open"; kill $pid; return 1; }
	# the client reads nothing now: many changes, far more than the queues hold
	for i in $(seq 1 40); do
		(cd "$W/wo" && seq -f "f$i-%05g" 1 500 | xargs touch && seq -f "f$i-%05g" 1 500 | xargs rm)
	done
	touch "$TMP/wo-go"
	wait_for -t 60 grep -q '"overflow"' "$TMP/woev" ||
		_fail "no overflow message after catching up: $(cat "$TMP/wores") $(tail -n 3 "$TMP/woev")"
	printf 'after' >"$W/wo/after-overflow"
	wait_for -t 10 grep -q 'after-overflow' "$TMP/woev" || _fail "events did not go on after the overflow"
	kill "$pid" 2>/dev/null
	wait "$pid" 2>/dev/null
	note "overflow client got $(wc -l <"$TMP/woev") messages"
}

t_watch_workspace_stops() {
	local ws3 h3 pid
	new_ws ws3 || return 1
	curl -sN --unix-socket "$SOCK" "http://station$(F "$ws3" "/watch?path=.")" >"$TMP/sse3" 2>&1 &
	pid=$!
	wait_for -t 10 grep -q '^event: ready' "$TMP/sse3" || _fail "no ready"
	api -q DELETE "/v1/workspaces/$ws3"
	assert_status 200 "delete the workspace"
	wait_for -t 10 sh -c "! kill -0 $pid 2>/dev/null" || _fail "the stream did not end with the workspace"
	kill "$pid" 2>/dev/null
	return 0
}

# FILES_ONLY=REGEX runs only the tests whose names match (while working on one).
ftest() {
	[[ -z ${FILES_ONLY:-} || $1 =~ $FILES_ONLY ]] || return 0
	run_test "$@"
}

ftest write_new_and_replace t_write_new_and_replace
ftest stat_list t_stat_list
ftest non_utf8_names t_non_utf8_names
ftest read_headers_range t_read_headers_range
ftest max_bytes t_max_bytes
ftest if_match t_if_match
ftest exclusive_parents t_exclusive_parents
ftest mkdir_rename_delete t_mkdir_rename_delete
ftest bad_requests t_bad_requests
ftest host_symlink_out t_host_symlink_out
ftest host_dotdot_absolute t_host_dotdot_absolute
ftest nul_and_long_paths t_nul_long
ftest fifo_and_device t_fifo_device
ftest symlink_swapped_during_downloads t_symlink_swap
ftest big_stream_bounded_memory t_big_stream
ftest disconnect_mid_upload t_disconnect_mid_upload
ftest not_ready_and_session_limit t_not_ready_and_limit
ftest watch_sse t_watch_sse
if ((ws_ok)); then
	ftest watch_websocket t_watch_ws
	ftest watch_overflow t_watch_overflow
else
	skip watch_websocket "$NPM_TOOLS_ERROR"
	skip watch_overflow "$NPM_TOOLS_ERROR"
fi
ftest watch_ends_with_workspace t_watch_workspace_stops

# ---------------------------------------------------------------------------------------------
# Container workspace: paths resolve inside the container

c_run() {
	run_cmd "$CWS" "$1" || return 1
	[[ $(j .status) == exited && $(j .exitCode) == 0 ]] || {
		_fail "command in the container: $(j '{status, exitCode, stderr}')"
		return 1
	}
}

t_c_symlink_resolves_inside() {
	local p=$HOST_MARKER
	c_run "mkdir -p /home/node/workspace && ln -sfn '$p' /home/node/workspace/to-host" || return 1
	download "$CWS" /home/node/workspace/to-host
	assert_status 404 "a symlink to a host path that the container lacks"
	c_run "mkdir -p '$(dirname "$p")' && echo CONTAINER-FILE >'$p'" || return 1
	download "$CWS" /home/node/workspace/to-host
	assert_status 200 "the same symlink once the container has the path (positive control)"
	assert_eq CONTAINER-FILE "$(cat "$TMP/dl")" "the container's file, never the host's"
	c_run "ln -sfn /etc/shadow-test /home/node/workspace/shadow && echo inside >/etc/shadow-test" || return 1
	download "$CWS" ../workspace/shadow
	assert_status 200 "relative path with dotdot inside"
	assert_eq inside "$(cat "$TMP/dl")" content
}

t_c_dotdot_absolute() {
	download "$CWS" ../../../../etc/passwd
	assert_status 400 "dotdot above the container's root"
	download "$CWS" /etc/passwd
	assert_status 200 "an absolute path inside the container (positive control)"
	grep -q '^root:' "$TMP/dl" || _fail "not the container's passwd"
	if cmp -s "$TMP/dl" /etc/passwd; then
		_fail "the host's passwd came back"
	fi
	return 0
}

t_c_fifo_device() {
	download "$CWS" /dev/null --max-time 10
	assert_status 400 "/dev/null"
	assert_contains "not a regular file" "$BODY"
	c_run "busybox mkfifo /tmp/fifo" || return 1
	download "$CWS" /tmp/fifo --max-time 10
	assert_status 400 "a FIFO in the container"
	c_run "echo regular >/tmp/reg" || return 1
	download "$CWS" /tmp/reg
	assert_status 200 "a regular file (positive control)"
	assert_eq regular "$(cat "$TMP/dl")" content
}

t_c_write_read() {
	head -c 3000000 /dev/urandom >"$TMP/cin"
	upload "$CWS" /home/node/workspace/c.bin "$TMP/cin" "&parents=1&exclusive=1"
	assert_status 201 "upload into the container" || return 1
	assert_eq /home/node/workspace/c.bin "$(j .path)" "path in the sandbox's view"
	download "$CWS" /home/node/workspace/c.bin
	assert_status 200 download
	assert_files_eq "$TMP/cin" "$TMP/dl" "content"
	c_run "test \$(wc -c </home/node/workspace/c.bin) -eq 3000000" || return 1
}

t_c_symlink_swap() {
	c_run "echo GOOD >/tmp/good; (while :; do ln -sfn /tmp/good /tmp/sw; ln -sfn '$HOST_MARKER' /tmp/sw; done) >/dev/null 2>&1 &" || return 1
	local i bad=0 good=0
	for i in $(seq 1 40); do
		download "$CWS" /tmp/sw
		case "$STATUS:$(cat "$TMP/dl")" in
		200:GOOD | 200:CONTAINER-FILE | 404:*) good=$((good + 1)) ;;
		*) bad=$((bad + 1)) diag "unexpected: $STATUS $(head -c 200 "$TMP/dl")" ;;
		esac
	done
	assert_eq 0 "$bad" "downloads other than the container's files"
	grep -q "HOST-MARKER" "$TMP/dl" && _fail "the host marker came back"
	return 0
}

# A file of host root (a uid the container's user namespace does not map), mode 0600: container
# root holds no capability over it, so the agent's open fails and the API says 403. Positive
# control: the same owner with mode 0644 is readable.
t_c_forbidden() {
	local chome=$ROOT/workspaces/$CWS/home
	[[ -d $chome ]] || { _fail "no home on the host: $chome"; return 1; }
	mkdir -p "$chome/workspace"
	printf 'root only' >"$chome/workspace/root-only"
	printf 'for all' >"$chome/workspace/for-all"
	chown 0:0 "$chome/workspace/root-only" "$chome/workspace/for-all"
	chmod 0600 "$chome/workspace/root-only"
	chmod 0644 "$chome/workspace/for-all"
	download "$CWS" /home/node/workspace/root-only
	assert_status 403 "a file the sandbox's user may not read"
	assert_eq '"/home/node/workspace/root-only": permission denied' "$(j .error.message)" message
	assert_eq forbidden "$(j .error.code)" code
	download "$CWS" /home/node/workspace/for-all
	assert_status 200 "a file it may read (positive control)"
	assert_eq "for all" "$(cat "$TMP/dl")" content
}

if ((HAVE_CONTAINER)); then
	if new_cws CWS; then
		ftest container_forbidden t_c_forbidden
		ftest container_symlink_resolves_inside t_c_symlink_resolves_inside
		ftest container_dotdot_absolute t_c_dotdot_absolute
		ftest container_fifo_device t_c_fifo_device
		ftest container_write_read t_c_write_read
		ftest container_symlink_swapped t_c_symlink_swap
	else
		not_ok container_workspace "could not create a container workspace"
	fi
else
	skip container_files "no OCI runtime or busybox"
fi
