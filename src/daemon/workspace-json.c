/* SPDX-License-Identifier: MIT */
/* A workspace as the API shows it (docs/api.md, "Workspaces"). */

#include <string.h>

#include "basic/util.h"
#include "lxcfs.h"
#include "manager-internal.h"

static json_t *nullable_str(const char *s)
{
	return s ? json_string(s) : json_null();
}

/* manager-view.c: the /proc view a container got, "lxcfs-lost" once the lxcfs it binds died. */
void workspace_view_json(const struct workspace *ws, json_t *o)
{
	const char *view = "host";
	if (strcmp(ws->row.adapter, "container") == 0) {
		const char *v = json_string_value(json_object_get(ws->spec, "procView"));
		json_int_t serial = json_integer_value(json_object_get(ws->spec, "lxcfsSerial"));
		view = v ? v : "host";
		/* its lxcfs died since it started: reads there fail until a restart */
		if (strcmp(view, "lxcfs") == 0 && ws->agent_pid > 0 &&
		    (unsigned long)serial != lxcfs_serial(ws->m->lxcfs))
			view = "lxcfs-lost";
		json_t *cpuset = json_object_get(ws->spec, "cpuset");
		if (cpuset)
			json_object_set(o, "cpuset", cpuset);
	}
	json_object_set_new(o, "procView", json_string(view));
}

json_t *workspace_to_json(const struct workspace *ws)
{
	json_t *o = json_object();
	if (!o)
		return NULL;
	const struct workspace_row *r = &ws->row;
	json_object_set_new(o, "id", json_string(r->id));
	json_object_set_new(o, "worker", json_string(r->worker));
	json_object_set_new(o, "adapter", json_string(r->adapter));
	json_object_set_new(o, "tenant",
			    r->tenant && r->tenant[0] ? json_string(r->tenant) : json_null());
	workspace_labels_json(ws, o);
	json_object_set_new(o, "state", json_string(workspace_state_to_string(r->state)));
	json_object_set_new(o, "reason", nullable_str(r->reason));
	json_object_set_new(o, "home", json_string(ws->home));
	json_object_set_new(o, "workdir", json_string(ws->workdir));
	json_object_set_new(o, "env", env_redacted_json(json_object_get(ws->spec, "env")));
	static const char *const keys[] = { "cpus", "memoryMb", "pidsLimit" };
	for (size_t i = 0; i < ELEMENTSOF(keys); i++) {
		json_t *v = json_object_get(ws->spec, keys[i]);
		if (v)
			json_object_set(o, keys[i], v);
		else
			json_object_set_new(o, keys[i], json_integer(0));
	}
	static const char *const container_keys[] = { "image",	 "seccompProfile", "seccompDigest",
						      "network", "runtime",	   "homeSizeMb",
						      "snapshot" };
	for (size_t i = 0; i < ELEMENTSOF(container_keys); i++) {
		json_t *v = json_object_get(ws->spec, container_keys[i]);
		if (v)
			json_object_set(o, container_keys[i], v);
	}
	json_object_set_new(o, "runningCommands", json_integer((json_int_t)ws->n_running));
	workspace_view_json(ws, o);
	workspace_activity_json(ws, o);
	json_object_set_new(o, "autoResume", json_boolean(workspace_auto_resume(ws)));
	/* its trees are being read for a snapshot: a resume waits (409) until then */
	json_object_set_new(o, "snapshotting", json_boolean(ws->snapshots_running > 0));
	if (r->state == WORKSPACE_PAUSED && r->paused_at)
		json_set_time(o, "pausedAt", r->paused_at);
	else
		json_object_set_new(o, "pausedAt", json_null());
	json_set_time(o, "createdAt", r->created_at);
	json_set_time(o, "updatedAt", r->updated_at);
	return o;
}
