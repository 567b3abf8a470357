/* SPDX-License-Identifier: MIT */
/* The controller's service requests, checked field by field: SERVICE_START into a struct
 * service_def, and the name (and watch flag) of the others. */

#include "agent/service.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "agent/spawn.h"
#include "basic/cleanup.h"

void service_def_done(struct service_def *d)
{
	free(d->name);
	free(d->id);
	free(d->command);
	free(d->cwd);
	spawn_env_free(d->env, d->n_env);
	*d = (struct service_def){ 0 };
}

/* A SERVICE_START being parsed. */
struct start_request {
	struct service_def *svc;
	uint64_t seen; /* bit per tag: tag < 32 as is, 150… from bit 32 */
	uint64_t policy;
};

static int tag_bit(uint16_t tag)
{
	if (tag < 32)
		return tag;
	if (tag >= 150 && tag < 150 + 32)
		return 32 + (tag - 150);
	return -1;
}

static int read_name(const uint8_t *val, size_t len, char **ret)
{
	char *s;
	int k = frame_val_strdup(val, len, SERVICE_NAME_MAX, &s);

	if (k < 0)
		return k;
	if (!service_name_valid(s)) {
		free(s);
		return -EBADMSG;
	}
	*ret = s;
	return 0;
}

static int add_env(struct service_def *svc, const uint8_t *val, size_t len)
{
	return spawn_env_append(&svc->env, &svc->n_env, val, len);
}

static int read_u64_max(const uint8_t *val, size_t len, uint64_t max, uint64_t *ret)
{
	uint64_t v;
	int k = frame_val_u64(val, len, &v);

	if (k < 0)
		return k;
	if (v > max)
		return -EBADMSG;
	*ret = v;
	return 0;
}

static int start_field(void *userdata, uint16_t tag, const uint8_t *val, size_t len)
{
	struct start_request *q = userdata;
	struct service_def *svc = q->svc;
	uint64_t v = 0;
	int bit, k;

	if (tag == TAG_ENV)
		return add_env(svc, val, len);
	bit = tag_bit(tag);
	if (bit < 0 || (q->seen & (1ull << bit)))
		return -EBADMSG; /* unknown or repeated */
	q->seen |= 1ull << bit;
	switch (tag) {
	case TAG_SERVICE_NAME:
		return read_name(val, len, &svc->name);
	case TAG_SERVICE_ID:
		return proto_id_read(val, len, &svc->id);
	case TAG_COMMAND:
		return frame_val_strdup(val, len, PROTO_MAX_COMMAND, &svc->command);
	case TAG_CWD:
		return frame_val_strdup(val, len, PROTO_MAX_PATH, &svc->cwd);
	case TAG_RESTART_POLICY:
		return read_u64_max(val, len, _SERVICE_POLICY_MAX - 1, &q->policy);
	case TAG_MAX_RESTARTS:
		return frame_val_u64(val, len, &svc->restart.max_restarts);
	case TAG_DELAY_MS:
		return read_u64_max(val, len, UINT32_MAX, &svc->restart.delay_ms);
	case TAG_BACKOFF_PERMILLE:
		return read_u64_max(val, len, SERVICE_MAX_BACKOFF_PERMILLE,
				    &svc->restart.backoff_permille);
	case TAG_MAX_DELAY_MS:
		return read_u64_max(val, len, UINT32_MAX, &svc->restart.max_delay_ms);
	case TAG_RESET_AFTER_MS:
		return read_u64_max(val, len, UINT32_MAX, &svc->restart.reset_after_ms);
	case TAG_STOP_SIGNAL:
		k = read_u64_max(val, len, _NSIG - 1, &v);
		svc->stop_signal = (int)v;
		return k < 0 || v == 0 ? -EBADMSG : 0;
	case TAG_STOP_TIMEOUT_MS:
		return read_u64_max(val, len, UINT32_MAX, &svc->stop_timeout_ms);
	case TAG_HEAD_BYTES:
		return frame_val_u64(val, len, &svc->head);
	case TAG_TAIL_BYTES:
		return frame_val_u64(val, len, &svc->tail);
	case TAG_ATTEMPT:
		k = frame_val_u64(val, len, &svc->first_attempt);
		return k < 0 || svc->first_attempt == 0 ? -EBADMSG : 0;
	default:
		return -EBADMSG;
	}
}

static int start_parse(const struct frame *f, struct start_request *q)
{
	static const uint16_t required[] = { TAG_SERVICE_NAME,	 TAG_SERVICE_ID,  TAG_COMMAND,
					     TAG_RESTART_POLICY, TAG_STOP_SIGNAL, TAG_HEAD_BYTES,
					     TAG_TAIL_BYTES,	 TAG_ATTEMPT };
	struct service_def *svc = q->svc;
	int k = frame_for_each_field(f, start_field, q);

	if (k < 0)
		return k;
	for (size_t i = 0; i < ELEMENTSOF(required); i++)
		if (!(q->seen & (1ull << tag_bit(required[i]))))
			return -EBADMSG;
	if (svc->cwd && svc->cwd[0] != '/')
		return -EBADMSG;
	if (svc->restart.backoff_permille && svc->restart.backoff_permille < 1000)
		return -EBADMSG;
	if (svc->head > AGENT_MAX_OUTPUT_BYTES || svc->tail > AGENT_MAX_OUTPUT_BYTES - svc->head)
		return -E2BIG;
	svc->restart.policy = (enum service_policy)q->policy;
	return 0;
}

/* SERVICE_STOP, _RESTART, _REMOVE (SERVICE_NAME) and _WATCH (SERVICE_NAME, WATCH). */
int service_parse_name(const struct frame *f, bool want_flag, char **ret_name, bool *ret_flag)
{
	return proto_parse_key_flag(f, TAG_SERVICE_NAME, read_name, want_flag, ret_name, ret_flag);
}

int service_def_parse(const struct frame *f, struct service_def *ret)
{
	struct start_request q = { .svc = ret };

	*ret = (struct service_def){ .stop_timeout_ms = 10000,
				     .restart.reset_after_ms = SERVICE_DEFAULT_RESET_AFTER_MS };
	return start_parse(f, &q);
}
