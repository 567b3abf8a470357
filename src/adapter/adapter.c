/* SPDX-License-Identifier: MIT */
/* What the controller asks of the adapters as a whole rather than of one workspace: the
 * container runtime's lifetime and the worker's default seccomp profile. The controller reaches
 * runtime.h and seccomp.h only through these, so that adapter.h stays the adapters' one door. */

#include <limits.h>
#include <stdio.h>

#include "adapter.h"
#include "basic/cleanup.h"
#include "runtime.h"
#include "seccomp.h"

int adapter_runtime_open(struct adapter_context *ctx, const char *name, struct station_error *e)
{
	char state[PATH_MAX];
	snprintf(state, sizeof state, "%s/runtime", ctx->root);
	int r = runtime_new(name, state, &ctx->runtime, e);
	if (r < 0)
		snprintf(ctx->runtime_error, sizeof ctx->runtime_error, "%s", e->message);
	return r;
}

void adapter_runtime_close(struct adapter_context *ctx)
{
	runtime_free(ctx->runtime);
	ctx->runtime = NULL;
}

void adapter_runtime_set_timeout(struct adapter_context *ctx, int timeout_ms)
{
	if (ctx->runtime && timeout_ms > 0)
		ctx->runtime->timeout_ms = timeout_ms;
}

const char *adapter_runtime_name(const struct adapter_context *ctx)
{
	return ctx->runtime ? ctx->runtime->name : NULL;
}

const char *adapter_runtime_path(const struct adapter_context *ctx)
{
	return ctx->runtime ? ctx->runtime->path : NULL;
}

int adapter_seccomp_find(const char *const *dirs, const char *name, char **ret_path,
			 struct station_error *e)
{
	_cleanup_close_ int fd = -1;
	return seccomp_profile_open(dirs, name, ret_path, &fd, e);
}
