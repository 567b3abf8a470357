/* SPDX-License-Identifier: MIT */
/* The ids of the agent protocol, checked as they come over the wire. */
#include "agent-proto.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "frame.h"

bool proto_id_valid(const char *s)
{
	if (!*s)
		return false;
	for (; *s; s++)
		if (!((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') ||
		      (*s >= '0' && *s <= '9') || strchr("._:-", *s)))
			return false;
	return true;
}

int proto_id_read(const uint8_t *val, size_t len, char **ret)
{
	char *s;
	int r = frame_val_strdup(val, len, PROTO_MAX_ID, &s);

	if (r < 0)
		return r;
	if (!proto_id_valid(s)) {
		free(s);
		return -EBADMSG;
	}
	*ret = s;
	return 0;
}
