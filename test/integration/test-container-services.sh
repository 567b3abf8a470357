#!/bin/bash
# Services in a container workspace (the agent is the container's PID 1): the running attempt
# is listed last in `attempts` with the byte counts it has written so far, and replaced by its
# ended form when it crashes and the next attempt starts (service-counts.sh, shared with the
# host's test-services.sh).
. "$(dirname "$0")/container-lib.sh"
. "$(dirname "$0")/service-counts.sh"

require_container_controller
new_cws CWS || exit 1

t_running_attempt() {
	check_running_counts "$CWS"
}

run_test "container: the running attempt is listed with its live byte counts" t_running_attempt
