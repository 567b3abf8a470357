/* SPDX-License-Identifier: MIT */
/* The ids and key fields of the agent protocol, checked as they come over the wire. */
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

struct key_flag {
	uint16_t tag;
	int (*read_key)(const uint8_t *val, size_t len, char **ret);
	bool want_flag, have_flag, flag;
	char *key;
};

static int key_flag_field(void *userdata, uint16_t tag, const uint8_t *val, size_t len)
{
	struct key_flag *q = userdata;
	uint64_t v;
	int r;

	if (tag == q->tag && !q->key)
		return q->read_key(val, len, &q->key);
	if (tag != TAG_WATCH || !q->want_flag || q->have_flag)
		return -EBADMSG;
	r = frame_val_u64(val, len, &v);
	if (r < 0)
		return r;
	if (v > 1)
		return -EBADMSG;
	q->flag = v;
	q->have_flag = true;
	return 0;
}

int proto_parse_key_flag(const struct frame *f, uint16_t tag,
			 int (*read_key)(const uint8_t *val, size_t len, char **ret),
			 bool want_flag, char **ret_key, bool *ret_flag)
{
	struct key_flag q = { .tag = tag, .read_key = read_key, .want_flag = want_flag };
	int r = frame_for_each_field(f, key_flag_field, &q);

	if (r >= 0 && (!q.key || q.have_flag != want_flag))
		r = -EBADMSG;
	if (r < 0) {
		free(q.key);
		return r;
	}
	*ret_key = q.key;
	if (want_flag)
		*ret_flag = q.flag;
	return 0;
}
