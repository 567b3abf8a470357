/* SPDX-License-Identifier: MIT */
/* A container workspace's network beyond "none" (net.h): its record (store:
 * workspace_networks), made before the container starts and on every restart, removed with the
 * workspace, adopted and reconciled when the controller starts; its policy read and replaced
 * through the API; each denial logged. */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "basic/cleanup.h"
#include "basic/json-util.h"
#include "basic/log.h"
#include "event/event.h"
#include "manager-internal.h"
#include "net/net.h"

static void on_denied(void *userdata, const char *id, const char *what, const char *dest,
		      uint16_t port, const char *proto)
{
	char p[8];

	workspace_denial_record(userdata, id, what, dest, port, proto);
	snprintf(p, sizeof p, "%u", port);
	if (strcmp(what, "dns") == 0)
		log_info("egress denied: name not allowed", "workspace", id, "name", dest, NULL);
	else
		log_info("egress denied", "workspace", id, "destination", dest, "port", p, "proto",
			 proto, NULL);
}

void manager_network_init(struct manager *m)
{
	if (!m->cfg.network || !m->cfg.allow_container)
		return;
	struct net_config cfg = *m->cfg.network;
	cfg.root = m->cfg.root;
	if (net_new(m->loop, &cfg, on_denied, m, &m->net) < 0) {
		log_error("network unavailable", "error", strerror(ENOMEM), NULL);
		return;
	}
	json_t *checks = json_array();
	if (!net_ready(m->net, checks)) {
		size_t i;
		json_t *c;
		json_array_foreach(checks, i, c) {
			if (!json_is_true(json_object_get(c, "ok")))
				log_warn("network unavailable", "check",
					 json_string_value(json_object_get(c, "name")), "error",
					 json_string_value(json_object_get(c, "message")), NULL);
		}
	}
	json_decref(checks);
}

void manager_network_free(struct manager *m)
{
	net_free(m->net);
	m->net = NULL;
}

void workspace_network_free(struct workspace *ws)
{
	net_policy_free(ws->net_policy);
	ws->net_policy = NULL;
	workspace_denials_free(ws);
}

static struct net_workspace net_ws(const struct workspace *ws)
{
	return (struct net_workspace){
		.id = ws->row.id,
		.mode = ws->net_mode,
		.address = ws->net_address,
		.policy = ws->net_policy,
	};
}

/* The mode a create asks for, and for restricted its policy: checked before anything is
 * made. */
int workspace_network_check(struct manager *m, const struct workspace_spec *spec,
			    enum net_mode *ret_mode, struct net_policy **ret_policy,
			    struct station_error *e)
{
	int mode = net_mode_from_string(spec->network ? spec->network : "none");

	if (mode < 0)
		return station_error_set(e, -EINVAL, "network",
					 "unknown network \"%.64s\" (none, bridge or restricted)",
					 spec->network);
	if (spec->egress && mode != NET_RESTRICTED)
		return station_error_set(e, -EINVAL, "egress",
					 "an egress policy needs network \"restricted\" (this is "
					 "\"%s\")",
					 net_mode_to_string(mode));
	if (mode == NET_NONE) {
		*ret_mode = NET_NONE;
		*ret_policy = NULL;
		return 0;
	}
	if (!m->net)
		return station_error_set(e, -EHOSTDOWN, "network",
					 "network \"%s\" is not available on this worker: "
					 "networking is off (--network-range none)",
					 net_mode_to_string(mode));
	int r = net_check(m->net, mode, e);
	if (r < 0)
		return r;
	struct net_policy *p = NULL;
	if (mode == NET_RESTRICTED) {
		json_t *empty = spec->egress ? NULL : json_pack("{s:[]}", "allow");
		r = net_policy_from_json(spec->egress ? spec->egress : empty, &p, e);
		json_decref(empty);
		if (r < 0)
			return r;
	}
	*ret_mode = (enum net_mode)mode;
	*ret_policy = p;
	return 0;
}

static int addresses_in_use(struct manager *m, uint32_t **ret, size_t *ret_n)
{
	_cleanup_free_ uint32_t *a = calloc(m->n_workspaces + 1, sizeof *a);
	size_t n = 0;

	if (!a)
		return -ENOMEM;
	for (struct workspace *ws = m->workspaces; ws; ws = ws->next)
		if (ws->net_mode != NET_NONE && n < m->n_workspaces)
			a[n++] = ws->net_address;
	*ret = TAKE_PTR(a);
	*ret_n = n;
	return 0;
}

/* After the workspace's row, before its container: the lease recorded (its links are made by
 * workspace_network_attach when the container is created). Takes policy. */
int workspace_network_create(struct workspace *ws, enum net_mode mode, struct net_policy *policy,
			     struct station_error *e)
{
	struct manager *m = ws->m;
	_cleanup_free_ uint32_t *used = NULL;
	_cleanup_free_ char *policy_json = NULL;
	size_t n_used = 0;
	uint32_t address;
	int r;

	ws->net_mode = mode;
	ws->net_policy = policy;
	if (mode == NET_NONE)
		return 0;
	r = addresses_in_use(m, &used, &n_used);
	if (r < 0)
		return station_error_set(e, r, NULL, "out of memory");
	r = net_address_alloc(m->net, used, n_used, &address, e);
	if (r < 0)
		return r;
	if (policy) {
		json_t *j = net_policy_to_json(policy);
		policy_json = j ? json_dumps(j, JSON_COMPACT) : NULL;
		json_decref(j);
		if (!policy_json)
			return station_error_set(e, -ENOMEM, NULL, "out of memory");
	}
	struct network_row row = {
		.workspace_id = ws->row.id,
		.mode = (char *)net_mode_to_string(mode),
		.address = address,
		.policy_json = policy_json,
		.created_at = realtime_usec(),
	};
	row.updated_at = row.created_at;
	r = store_network_insert(m->store, &row);
	if (r < 0)
		return station_error_set(e, r, NULL, "cannot record the workspace's network: %s",
					 strerror(-r));
	ws->net_address = address;
	return 0;
}

/* The adapter's net_attach: the container pid's namespace gets the workspace's links. */
int workspace_network_attach(void *userdata, pid_t pid, struct station_error *e)
{
	struct workspace *ws = userdata;

	if (!ws->m->net)
		return station_error_set(e, -EHOSTDOWN, "network",
					 "the workspace's network \"%s\" is not available on this "
					 "worker: networking is off (--network-range none)",
					 net_mode_to_string(ws->net_mode));
	struct net_workspace w = net_ws(ws);
	return net_workspace_up(ws->m->net, &w, pid, e);
}

int workspace_network_job(struct workspace *ws, struct workspace_network_job *ret)
{
	*ret = (struct workspace_network_job){ .net = ws->m->net,
					       .mode = ws->net_mode,
					       .address = ws->net_address };
	if (ws->net_mode != NET_RESTRICTED || !ws->net_policy)
		return 0;
	json_t *j = net_policy_to_json(ws->net_policy);
	int r = j ? net_policy_from_json(j, &ret->policy, NULL) : -ENOMEM;
	json_decref(j);
	return r;
}

void workspace_network_job_free(struct workspace_network_job *j)
{
	net_policy_free(j->policy);
	j->policy = NULL;
}

int workspace_network_make(const struct workspace_network_job *j, const char *id, pid_t pid,
			   struct station_error *e)
{
	if (!j->net)
		return station_error_set(e, -EHOSTDOWN, "network",
					 "the workspace's network \"%s\" is not available on this "
					 "worker: networking is off (--network-range none)",
					 net_mode_to_string(j->mode));
	struct net_workspace w = { .id = id,
				   .mode = j->mode,
				   .address = j->address,
				   .policy = j->policy };
	return net_workspace_make(j->net, &w, pid, e);
}

void workspace_network_unmake(const struct workspace_network_job *j, const char *id)
{
	if (j->mode != NET_NONE && j->net)
		net_workspace_unmake(j->net, id, j->address);
}

int workspace_network_known(struct workspace *ws)
{
	if (ws->net_mode == NET_NONE || !ws->m->net)
		return 0;
	struct net_workspace w = net_ws(ws);
	return net_workspace_adopt(ws->m->net, &w);
}

void workspace_network_remove(struct workspace *ws)
{
	if (ws->net_mode == NET_NONE || !ws->m->net)
		return;
	net_workspace_forget(ws->m->net, ws->row.id);
	store_network_delete(ws->m->store, ws->row.id);
}

/* At start: every recorded network back on its workspace and known to the resolver, then
 * whatever of ours no record holds removed. */
void manager_network_start(struct manager *m)
{
	struct network_row *rows = NULL;
	size_t n = 0;
	int r = store_network_list(m->store, &rows, &n);

	if (r < 0) {
		log_error("cannot read the workspaces' networks", "error", strerror(-r), NULL);
		return;
	}
	for (size_t i = 0; i < n; i++) {
		struct workspace *ws = workspace_find(m, rows[i].workspace_id);
		int mode = net_mode_from_string(rows[i].mode);
		struct net_policy *p = NULL;
		json_t *j = rows[i].policy_json ? json_loads(rows[i].policy_json, 0, NULL) : NULL;
		if (ws && mode > NET_NONE &&
		    (mode != NET_RESTRICTED || (j && net_policy_from_json(j, &p, NULL) >= 0))) {
			ws->net_mode = (enum net_mode)mode;
			ws->net_address = rows[i].address;
			ws->net_policy = p;
			if (m->net) {
				struct net_workspace w = net_ws(ws);
				net_workspace_adopt(m->net, &w);
			}
		} else {
			log_error("ignoring a workspace network record", "workspace",
				  rows[i].workspace_id, "mode", rows[i].mode, NULL);
			net_policy_free(p);
		}
		json_decref(j);
		network_row_free(&rows[i]);
	}
	free(rows);
	if (m->net)
		net_reconcile(m->net);
}

bool manager_network_ready(struct manager *m, json_t *checks)
{
	return !m->net || net_ready(m->net, checks);
}

json_t *manager_network_worker_json(struct manager *m)
{
	json_t *modes = json_array();
	json_array_append_new(modes, json_string("none"));
	if (m->net && net_check(m->net, NET_BRIDGE, NULL) >= 0) {
		json_array_append_new(modes, json_string("bridge"));
		json_array_append_new(modes, json_string("restricted"));
	}
	return modes;
}

static json_t *network_json(struct workspace *ws)
{
	char addr[16], gw[16];
	struct net_counters c = { 0 };

	if (ws->net_mode == NET_NONE)
		return json_pack("{s:s}", "mode", "none");
	net_address_string(ws->net_address, addr);
	snprintf(gw, sizeof gw, "%s", ws->m->net ? net_nameserver(ws->m->net) : "");
	if (ws->m->net)
		net_workspace_counters(ws->m->net, ws->row.id, &c);
	json_t *o = json_pack("{s:s,s:s,s:s,s:{s:I,s:I,s:I,s:I,s:I,s:I}}", "mode",
			      net_mode_to_string(ws->net_mode), "address", addr, "gateway", gw,
			      "counters", "allowed", (json_int_t)c.allowed, "denied",
			      (json_int_t)c.denied, "dnsAllowed", (json_int_t)c.dns_allowed,
			      "dnsRefused", (json_int_t)c.dns_refused, "pinned",
			      (json_int_t)c.pinned, "pinsExpired", (json_int_t)c.pins_expired);
	json_object_set_new(json_object_get(o, "counters"), "dnsShed",
			    json_integer((json_int_t)c.dns_shed));
	if (ws->net_policy)
		json_object_set_new(o, "egress", net_policy_to_json(ws->net_policy));
	json_object_set_new(o, "refused", workspace_refused_json(ws));
	return o;
}

int manager_workspace_network_get(struct manager *m, const char *id, json_t **ret,
				  struct station_error *e)
{
	struct workspace *ws = NULL;
	int r = workspace_lookup(m, id, &ws, e);

	if (r < 0)
		return r;
	*ret = network_json(ws);
	return 0;
}

int manager_workspace_network_set(struct manager *m, const char *id, json_t *egress, json_t **ret,
				  struct station_error *e)
{
	struct workspace *ws = NULL;
	struct net_policy *p = NULL;
	_cleanup_free_ char *text = NULL;
	int r = workspace_lookup(m, id, &ws, e);

	if (r < 0)
		return r;
	if (ws->net_mode != NET_RESTRICTED)
		return station_error_set(e, -EBUSY, "egress",
					 "workspace \"%s\" has network \"%s\": an egress policy "
					 "applies to \"restricted\" only",
					 id, net_mode_to_string(ws->net_mode));
	r = net_policy_from_json(egress, &p, e);
	if (r < 0)
		return r;
	json_t *j = net_policy_to_json(p);
	text = j ? json_dumps(j, JSON_COMPACT) : NULL;
	json_decref(j);
	if (!text) {
		net_policy_free(p);
		return station_error_set(e, -ENOMEM, NULL, "out of memory");
	}
	if (!m->net) {
		net_policy_free(p);
		return station_error_set(e, -EHOSTDOWN, "network",
					 "networking is off on this worker");
	}
	/* the record first: a policy in force that the record does not hold would not survive a
	 * restart of the workspace */
	r = store_network_set_policy(m->store, id, text, realtime_usec());
	if (r < 0) {
		station_error_set(e, r, NULL, "cannot record the policy: %s", strerror(-r));
	} else if ((r = net_policy_replace(m->net, id, ws->net_address, p, e)) < 0) {
		json_t *old = net_policy_to_json(ws->net_policy);
		_cleanup_free_ char *old_text = old ? json_dumps(old, JSON_COMPACT) : NULL;
		json_decref(old);
		if (old_text)
			store_network_set_policy(m->store, id, old_text, realtime_usec());
	}
	if (r < 0) {
		net_policy_free(p);
		return r;
	}
	net_policy_free(ws->net_policy);
	ws->net_policy = p;
	log_info("egress policy replaced", "workspace", id, "policy", text, NULL);
	*ret = network_json(ws);
	return 0;
}
