/* SPDX-License-Identifier: MIT */
#include <errno.h>

#include "agent/files-internal.h"

int files_op_watch(struct files_session *s, const struct files_request *q)
{
	return files_send_error(s, ENOSYS, NULL, "not yet");
}
