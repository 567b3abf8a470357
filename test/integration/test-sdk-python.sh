#!/bin/bash
# run-all: not under sanitizers: Python (pytest) through API paths the C client and CLI tests run
# The Python SDK (sdk/python) against a real controller: builds its wheel offline with Debian's
# setuptools, installs it into a fresh virtual environment, starts a controller with a TCP
# listener, builds the busybox test image for the container tests and runs the SDK's pytest
# suite (and the examples' tests) with the installed wheel, each pytest result one of our lines.
# Skips only when no python3 with pytest, setuptools, wheel and venv is installed.
. "$(dirname "$0")/lib.sh"

SDK=$SRC/sdk/python
RUNTIME=${STATION_TEST_RUNTIME:-runc}

# Debian's python3 (/usr/bin/python3) carries python3-pytest and python3-setuptools; a python3
# earlier on PATH (a pyenv shim, say) may not.
PY=
for p in /usr/bin/python3 python3; do
	if "$p" -c 'import sys, pytest, setuptools, wheel, venv, ensurepip; assert sys.version_info >= (3, 11)' 2>/dev/null; then
		PY=$(command -v "$p")
		break
	fi
done
if [[ -z $PY ]]; then
	skip "$TEST_NAME" "python3 (3.11+) with pytest, setuptools, wheel and venv is needed (apt-get install python3-pytest python3-setuptools python3-wheel python3-venv)"
	exit 0
fi

# ---------------------------------------------------------------------------------------------
# The wheel, built offline (no build isolation: the backend is Debian's setuptools) from the
# checkout's sdk/python itself, installed into a virtual environment that sees Debian's pytest
# (--system-site-packages) but not the source tree.

VENV=$TMP/venv
# What is in sdk/python that a build could have left: build/, *.egg-info, anything newer than
# pyproject.toml, and git's word (ignored files included). Taken before any build.
sdk_leftovers() {
	find "$SDK" -newer "$SDK/pyproject.toml" -o -name build -o -name '*.egg-info' | sort
	git -C "$SRC" status --porcelain --ignored -- sdk/python 2>/dev/null
}
SDK_BEFORE=$(sdk_leftovers)

t_wheel() {
	local log=$TMP/wheel.log whl
	mkdir -p "$TMP/dist"
	if ! "$PY" -m pip wheel --no-deps --no-build-isolation --no-index -w "$TMP/dist" "$SDK" >"$log" 2>&1; then
		_fail "pip wheel failed:"
		tail -n 20 "$log" | sed 's/^/#   /'
		return 1
	fi
	whl=$(ls "$TMP"/dist/station_sandbox-*.whl 2>/dev/null)
	assert_match 'station_sandbox-[0-9.]+-py3-none-any\.whl$' "$whl" "the wheel" || return 1
	# Type information ships with it.
	assert_contains "station_sandbox/py.typed" "$("$PY" -m zipfile -l "$whl")" "the wheel's files" || return 1
	if ! { "$PY" -m venv --system-site-packages "$VENV" && "$VENV/bin/pip" install --no-index --no-deps "$whl"; } >>"$log" 2>&1; then
		_fail "installing the wheel into a venv failed:"
		tail -n 20 "$log" | sed 's/^/#   /'
		return 1
	fi
	local where
	where=$(cd "$TMP" && "$VENV/bin/python" -c 'import station_sandbox as s; print(s.__file__)')
	assert_match "^$VENV/lib/python3[.0-9]*/site-packages/station_sandbox/__init__.py$" "$where" "imported from" || return 1
}
run_test "sdk builds a wheel that installs into a venv (pip wheel --no-build-isolation)" t_wheel

# The README's other way: pip install of the source directory, the checkout's own: it leaves
# nothing behind there (no build/, no *.egg-info: sdk/python/_build's backend builds on a copy).
t_install_source() {
	local log=$TMP/source.log where
	if ! { "$PY" -m venv --system-site-packages "$TMP/venv2" &&
		"$TMP/venv2/bin/pip" install --no-index --no-build-isolation "$SDK"; } >"$log" 2>&1; then
		_fail "pip install of the source directory failed:"
		tail -n 20 "$log" | sed 's/^/#   /'
		return 1
	fi
	where=$(cd "$TMP" && "$TMP/venv2/bin/python" -c 'import station_sandbox as s, os; print(os.path.exists(os.path.join(os.path.dirname(s.__file__), "py.typed")))')
	assert_eq True "$where" "py.typed installed" || return 1
	# Neither this install nor the wheel built above left anything in the checkout.
	assert_eq "$SDK_BEFORE" "$(sdk_leftovers)" "what is new in sdk/python (and git status --ignored) after pip wheel and pip install"
}
run_test "pip install of sdk/python into a venv" t_install_source
((_n_fail == 0)) || exit 1

# ---------------------------------------------------------------------------------------------
# The controller, with a TCP listener for the token tests and a preview listener.

free_port() {
	"$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}
PORT=$(free_port)
PREVIEW_PORT=$(free_port)
# The usage history sampled every 200 ms, so that its tests see points within a second or two.
CONTROLLER_ARGS=(--listen "tcp:127.0.0.1:$PORT" --preview-listen "tcp:127.0.0.1:$PREVIEW_PORT"
	--usage-interval-ms 200)

IMAGE_LAYOUT=
CONTAINER_SKIP=
if ! command -v "$RUNTIME" >/dev/null; then
	CONTAINER_SKIP="OCI runtime '$RUNTIME' not installed"
elif [[ ! -x /bin/busybox ]]; then
	CONTAINER_SKIP="/bin/busybox missing (apt-get install busybox-static)"
else
	# The container's root (an unprivileged host uid) must pass through TMP to reach its rootfs.
	chmod 0755 "$TMP"
	if "$PY" "$SRC/test/helpers/make-busybox-image" "$TMP/image" >"$TMP/image.log" 2>&1; then
		IMAGE_LAYOUT=$TMP/image
		CONTROLLER_ARGS+=(--runtime "$RUNTIME" --import-dir "$TMP")
	else
		not_ok "busybox test image builds" "$(tail -n 1 "$TMP/image.log")"
		exit 1
	fi
fi

require_controller "${CONTROLLER_ARGS[@]}"

# ---------------------------------------------------------------------------------------------
# pytest, its JUnit XML turned into result lines: one per test case.

run_pytest() {
	local rc
	(
		cd "$TMP" &&
			STATION_SOCKET=$SOCK \
			STATION_URL=http://127.0.0.1:$PORT \
			STATION_TOKEN=$(tr -d '\n' <"$ROOT/admin.token") \
			STATION_TEST_IMAGE_LAYOUT=$IMAGE_LAYOUT \
			STATION_TEST_CONTAINER_SKIP=$CONTAINER_SKIP \
			STATION_TEST_SECCOMP=$SRC/profiles/default.json \
			STATION_PREVIEW=127.0.0.1:$PREVIEW_PORT \
			STATION_EXAMPLES=$SRC/examples/python \
			PYTHONDONTWRITEBYTECODE=1 \
			timeout -k 10 480 "$VENV/bin/python" -m pytest -p no:cacheprovider -q \
			--rootdir "$SDK" -c "$SDK/pyproject.toml" --junitxml "$TMP/junit.xml" \
			"$SDK/tests" >"$TMP/pytest.log" 2>&1
	)
	rc=$?
	if [[ ! -s $TMP/junit.xml ]]; then
		not_ok "sdk pytest" "pytest wrote no results (exit status $rc)"
		sed 's/^/#   /' "$TMP/pytest.log" | tail -n 40
		return 0
	fi
	"$PY" - "$TMP/junit.xml" <<'PYEOF'
import sys
import xml.etree.ElementTree as ET

for case in ET.parse(sys.argv[1]).getroot().iter("testcase"):
    name = f"{case.get('classname', '').split('.')[-1]}::{case.get('name')}"
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
		if ! grep -q 'failures="[1-9]\|errors="[1-9]' "$TMP/junit.xml"; then
			not_ok "sdk pytest" "pytest exited $rc without a failing test"
			tail -n 20 "$TMP/pytest.log" | sed 's/^/#   /'
		fi
		dump_controller_log 30
		_n_fail=$((_n_fail + 1))
	fi
	return 0
}
run_pytest
