/* SPDX-License-Identifier: MIT */
#include "proto/file-proto.h"

#include "basic/util.h"

static const char *const file_types[] = {
	[FILE_TYPE_FILE] = "file",   [FILE_TYPE_DIR] = "dir",	    [FILE_TYPE_SYMLINK] = "symlink",
	[FILE_TYPE_FIFO] = "fifo",   [FILE_TYPE_SOCKET] = "socket", [FILE_TYPE_CHAR] = "char",
	[FILE_TYPE_BLOCK] = "block",
};

static const char *const file_events[] = {
	[FILE_EVENT_CREATED] = "created",   [FILE_EVENT_MODIFIED] = "modified",
	[FILE_EVENT_DELETED] = "deleted",   [FILE_EVENT_MOVED] = "moved",
	[FILE_EVENT_OVERFLOW] = "overflow",
};

const char *file_type_to_string(uint64_t t)
{
	return t < ELEMENTSOF(file_types) ? file_types[t] : NULL;
}

const char *file_event_to_string(uint64_t e)
{
	return e < ELEMENTSOF(file_events) ? file_events[e] : NULL;
}
