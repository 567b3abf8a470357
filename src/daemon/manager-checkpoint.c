/* SPDX-License-Identifier: MIT */
/* Memory snapshots (docs/operations.md "Memory snapshots"): whether this worker can checkpoint
 * a container workspace's processes, probed once at start off the loop (criu check and the
 * runtime take a second or more), answered from then on by GET /v1/ready's "checkpoint" check
 * and by the refusal of a snapshot with "memory": true. */

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "adapter/adapter.h"
#include "basic/log.h"
#include "event/work.h"
#include "manager-internal.h"

struct checkpoint_job {
	struct manager *m;
	char *runtime;
	const char *criu; /* the manager's config: lives as long as it */
	struct checkpoint_status status;
};

static void checkpoint_job_run(void *userdata)
{
	struct checkpoint_job *j = userdata;
	checkpoint_probe(j->runtime, j->criu, &j->status);
}

static void checkpoint_job_done(void *userdata, bool cancelled)
{
	struct checkpoint_job *j = userdata;
	struct manager *m = j->m;
	if (!cancelled) {
		m->checkpoint = j->status;
		m->checkpoint_probed = true;
		if (j->status.ok)
			log_info("memory snapshots available", "checkpoint", j->status.message,
				 NULL);
		else
			log_info("memory snapshots unavailable", "reason", j->status.message, NULL);
		manager_ready_kick(m);
	}
	free(j->runtime);
	free(j);
}

void manager_checkpoint_init(struct manager *m)
{
	if (!m->cfg.allow_container)
		return;
	if (!m->actx.runtime) {
		m->checkpoint.ok = false;
		snprintf(m->checkpoint.message, sizeof m->checkpoint.message,
			 "memory snapshots unavailable: no container runtime: %.400s",
			 m->actx.runtime_error);
		m->checkpoint_probed = true;
		return;
	}
	struct checkpoint_job *j = calloc(1, sizeof *j);
	if (j)
		j->m = m, j->criu = m->cfg.criu;
	if (!j || !(j->runtime = strdup(adapter_runtime_path(&m->actx))) ||
	    event_work_queue(m->work, checkpoint_job_run, checkpoint_job_done, j) < 0) {
		if (j)
			free(j->runtime);
		free(j);
		snprintf(m->checkpoint.message, sizeof m->checkpoint.message,
			 "memory snapshots unavailable: the probe could not be started");
		m->checkpoint_probed = true;
	}
}

void manager_checkpoint_ready(struct manager *m, json_t *checks)
{
	if (!m->cfg.allow_container)
		return;
	json_array_append_new(
		checks,
		json_pack("{s:s,s:b,s:s}", "name", "checkpoint", "ok",
			  m->checkpoint_probed && m->checkpoint.ok, "message",
			  m->checkpoint_probed ?
				  m->checkpoint.message :
				  "checking whether this worker can checkpoint (criu check)"));
}

int workspace_checkpoint_check(struct workspace *ws, struct station_error *e)
{
	struct manager *m = ws->m;
	if (ws->adapter != &adapter_container)
		return station_error_set(
			e, -ENOTSUP, "memory",
			"memory snapshots are taken of container workspaces only; "
			"\"%s\" is a %s workspace (its snapshot holds its directory)",
			ws->row.id, ws->adapter->name);
	if (!m->checkpoint_probed)
		return station_error_set(e, -ENOTSUP, "memory",
					 "this worker is still checking whether it can checkpoint "
					 "(criu check); ask again in a few seconds");
	if (!m->checkpoint.ok)
		return station_error_set(e, -ENOTSUP, "memory", "%s", m->checkpoint.message);
	/* The pieces are there, but taking the checkpoint and restoring it into a new workspace
	 * is not done yet: refused rather than a snapshot that says memory and holds none. */
	return station_error_set(e, -ENOTSUP, "memory",
				 "this worker has %s, but this controller does not take memory "
				 "snapshots yet (docs/operations.md \"Memory snapshots\")",
				 m->checkpoint.message);
}
