/* SPDX-License-Identifier: MIT */
#pragma once

/* Code contexts (manager-contexts.c; docs/api.md, "Code contexts"): a Jupyter kernel the
 * workspace's agent supervises as a hidden service ("ctx-<cid>", kept out of GET …/services and
 * of the service limit), and cells, each a run of the language's kernel program (`exec DIR N
 * TIMEOUT_MS`) whose DIR/cells/N/result.json is read through the agent's file read once the run
 * ended, validated as hostile input and stored once. Like the rest of manager.h: on the loop,
 * never blocking, callbacks never from inside the call that registers them.
 *
 * Errors beyond error.h's: CONTEXT_EMISSING (422 "kernel_missing", the message names the
 * package), CONTEXT_ETIMEOUT (504, the kernel did not answer; the message has its stderr tail),
 * CONTEXT_EBUSY (409 "busy": a cell runs). */

#include <jansson.h>
#include <stdint.h>

#include "basic/error.h"

struct manager;

#define CONTEXT_EMISSING (-ENOPKG)
#define CONTEXT_ETIMEOUT (-ETIME)
#define CONTEXT_EBUSY (-EALREADY)

#define CONTEXT_SERVICE_PREFIX "ctx-"	  /* the kernel's service: "ctx-<cid>" */
#define MANAGER_MAX_CONTEXTS 8		  /* per workspace (-EAGAIN, 429, beyond) */
#define CONTEXT_MAX_CODE_BYTES (1u << 20) /* a cell's code */
#define CONTEXT_RESULT_MAX_BYTES (16u << 20)
#define CONTEXT_MIME_MAX_BYTES (4u << 20) /* one MIME value of a result */
#define CONTEXT_START_TIMEOUT_MS 30000

struct context_spec {
	const char *language; /* "python" or "javascript" */
	const char *cwd;      /* NULL: the workspace directory */
	json_t *env;	      /* borrowed; NULL or an object of string values, validated */
};

/* A create, restart or execute under way: fn is called once (r 0 with result, a new reference
 * the callee owns, or r < 0 with e) unless forgotten first. */
struct context_op;
typedef void (*context_done_fn)(void *userdata, int r, json_t *result,
				const struct station_error *e);
void manager_context_op_forget(struct context_op *op);

/* 0 with *ret_op once under way; fn gets the context once its kernel answered. */
int manager_context_create(struct manager *m, const char *ws_id, const struct context_spec *spec,
			   context_done_fn fn, void *userdata, struct context_op **ret_op,
			   struct station_error *e);
/* A fresh kernel (variables gone); fn gets the context once it answered. */
int manager_context_restart(struct manager *m, const char *ws_id, const char *cid,
			    context_done_fn fn, void *userdata, struct context_op **ret_op,
			    struct station_error *e);
/* usage: the workspace's resource use (manager_usage_get()), whose services give each live
 * kernel's cpuMs and memoryBytes; NULL: those of live kernels are null. */
int manager_context_list(struct manager *m, const char *ws_id, const json_t *usage, json_t **ret,
			 struct station_error *e);
int manager_context_get(struct manager *m, const char *ws_id, const char *cid, const json_t *usage,
			json_t **ret, struct station_error *e);
/* A usage report (manager_usage_get()) as clients see it: each kernel's entry moved from
 * "services" (where its hidden service stands) to "contexts" as {"id","cpuMs","memoryBytes"}. */
void manager_usage_contexts_split(json_t *usage);
/* The kernel's service removed (its processes killed), DIR removed, the rows gone. */
int manager_context_delete(struct manager *m, const char *ws_id, const char *cid,
			   struct station_error *e);
/* fn gets the execution as started (status "running") once its code is written and its run
 * started. timeout_ms 0: the worker's default. */
int manager_context_execute(struct manager *m, const char *ws_id, const char *cid, const char *code,
			    size_t code_len, uint64_t timeout_ms, context_done_fn fn,
			    void *userdata, struct context_op **ret_op, struct station_error *e);
/* The running cell's execution id into ret (-EBUSY, 409, when none runs): SIGINT to it, then
 * wait for it with manager_execution_wait(). */
int manager_context_interrupt(struct manager *m, const char *ws_id, const char *cid, char ret[64],
			      struct station_error *e);
int manager_execution_get(struct manager *m, const char *ws_id, const char *cid, const char *eid,
			  json_t **ret, struct station_error *e);
/* Newest first. */
int manager_execution_list(struct manager *m, const char *ws_id, const char *cid, json_t **ret,
			   struct station_error *e);
/* The run of an execution (its output stream). */
int manager_execution_run_id(struct manager *m, const char *ws_id, const char *cid, const char *eid,
			     char ret[64], struct station_error *e);
/* fn once the execution is recorded as ended; 1 when it is already (nothing registered), 0
 * with *ret. */
struct execution_waiter;
int manager_execution_wait(struct manager *m, const char *ws_id, const char *cid, const char *eid,
			   void (*fn)(void *userdata), void *userdata,
			   struct execution_waiter **ret, struct station_error *e);
void manager_execution_waiter_cancel(struct execution_waiter *w);
