/* SPDX-License-Identifier: MIT */
/* Tenants (docs/security.md, "The tenant boundary"): which workspaces a request may see. The
 * API layer sets the viewer around each request; every lookup by id (workspace_lookup()) and
 * every list asks workspace_visible(), so another tenant's workspace and everything in it
 * answers exactly as a missing one, through the same code. */

#include <stdio.h>
#include <string.h>

#include "domain/auth.h"
#include "manager-internal.h"

void manager_set_viewer(struct manager *m, const char *tenant)
{
	m->viewer = tenant && tenant[0] ? tenant : NULL;
}

const char *manager_viewer(const struct manager *m)
{
	return m->viewer;
}

bool workspace_visible(const struct manager *m, const struct workspace *ws)
{
	return !m->viewer || strcmp(m->viewer, ws->row.tenant ? ws->row.tenant : "") == 0;
}

size_t manager_tenant_workspaces(const struct manager *m, const char *tenant)
{
	size_t n = 0;

	for (const struct workspace *ws = m->workspaces; ws; ws = ws->next)
		if (!ws->pool &&
		    strcmp(tenant ? tenant : "", ws->row.tenant ? ws->row.tenant : "") == 0)
			n++;
	return n;
}

/* --- what a tenant may create --- */

static const char *const default_profiles[] = { "default", NULL };
static const char *const default_networks[] = { "none", NULL };

static bool strv_has(const char *const *v, const char *s)
{
	for (; v && *v; v++)
		if (strcmp(*v, s) == 0)
			return true;
	return false;
}

/* The list as "a, b" for a message. */
static void list_format(const char *const *v, char *buf, size_t size)
{
	size_t n = 0;

	buf[0] = '\0';
	for (; v && *v && n < size; v++)
		n += (size_t)snprintf(buf + n, size - n, "%s%s", n ? ", " : "", *v);
	if (!buf[0])
		snprintf(buf, size, "none");
}

/* The image allow list: --tenant-images, else the default image alone (when there is one). */
static const char *const *image_allow_list(const struct manager *m, const char **buf)
{
	if (m->cfg.tenant_images)
		return m->cfg.tenant_images;
	buf[0] = m->cfg.default_image;
	buf[1] = NULL;
	return buf;
}

/* The entry of the allow list ref matches; NULL when none. *ret_repo: an entry "repo@*". */
static const char *image_match(const struct manager *m, const struct image_ref *ref, bool *ret_repo)
{
	const char *buf[2];

	for (const char *const *v = image_allow_list(m, buf); v && *v; v++) {
		const char *at = strrchr(*v, '@');
		struct image_ref allowed;

		if (at && strcmp(at, "@*") == 0) {
			if (ref->name[0] && strlen(ref->name) == (size_t)(at - *v) &&
			    strncmp(ref->name, *v, (size_t)(at - *v)) == 0) {
				*ret_repo = true;
				return *v;
			}
			continue;
		}
		if (image_ref_parse(*v, &allowed, NULL) < 0)
			continue;
		if (strcmp(allowed.digest, ref->digest) == 0) {
			*ret_repo = false;
			return *v;
		}
	}
	return NULL;
}

static int image_refused(const struct manager *m, const char *ref, const char *field,
			 struct station_error *e)
{
	const char *buf[2];
	char list[512];

	list_format(image_allow_list(m, buf), list, sizeof list);
	return station_error_set(e, STATION_EFORBIDDEN, field,
				 "image \"%.200s\" is not on this worker's image allow list for "
				 "tenants (%s)",
				 ref, list);
}

int manager_tenant_image_allowed(struct manager *m, const char *ref, const char *field,
				 struct station_error *e)
{
	struct image_ref parsed;
	bool repo = false;

	if (image_ref_parse(ref, &parsed, NULL) < 0 || !image_match(m, &parsed, &repo))
		return image_refused(m, ref, field, e);
	return 0;
}

/* A create's image: on the allow list; by "repo@*" only an image stored under that name (a
 * digest is checked, a name is not: another image's digest under an allowed name is not
 * allowed). */
static int admit_image(struct manager *m, const char *ref, struct station_error *e)
{
	struct image_ref parsed;
	struct image *img = NULL;
	bool repo = false;
	bool ok;

	if (!ref)
		return 0; /* the worker's default image */
	if (image_ref_parse(ref, &parsed, NULL) < 0)
		return 0; /* the create says what is wrong with it */
	if (!image_match(m, &parsed, &repo))
		return image_refused(m, ref, "image", e);
	if (!manager_image_visible(
		    m, ref)) { /* another tenant's: as the create says of a missing one */
		image_error_not_in_store(ref, e);
		return e ? (e->err = -EINVAL) : -EINVAL;
	}
	if (!repo || !m->actx.images || image_lookup(m->actx.images, ref, &img, NULL) < 0)
		return 0; /* a missing image: the create says so */
	ok = img->name && strcmp(img->name, parsed.name) == 0;
	image_free(img);
	return ok ? 0 : image_refused(m, ref, "image", e);
}

static int admit_choice(const char *field, const char *what, const char *value,
			const char *const *allowed, struct station_error *e)
{
	char list[512];

	if (strv_has(allowed, value))
		return 0;
	list_format(allowed, list, sizeof list);
	return station_error_set(e, STATION_EFORBIDDEN, field,
				 "%s \"%.200s\" is not on this worker's %s allow list for tenants "
				 "(%s)",
				 what, value, what, list);
}

/* A limit of the request above the token's cap is refused; an absent one gets the cap when
 * the worker's default is higher (or none). */
static int admit_limit(const char *field, uint64_t *value, uint64_t worker_default, uint64_t cap,
		       struct station_error *e)
{
	if (cap == 0)
		return 0;
	if (*value > cap)
		return station_error_set(e, STATION_EFORBIDDEN, field,
					 "field \"%s\" is %llu, above this token's limit %s %llu",
					 field, (unsigned long long)*value, field,
					 (unsigned long long)cap);
	if (*value == 0 && (worker_default == 0 || worker_default > cap))
		*value = cap;
	return 0;
}

static int admit_cpus(double *cpus, uint32_t cap_milli, struct station_error *e)
{
	if (cap_milli == 0)
		return 0;
	if (*cpus * 1000 > cap_milli)
		return station_error_set(e, STATION_EFORBIDDEN, "cpus",
					 "field \"cpus\" is %g, above this token's limit cpus %g",
					 *cpus, cap_milli / 1000.0);
	if (*cpus == 0)
		*cpus = cap_milli / 1000.0;
	return 0;
}

static int admit_tenant(struct manager *m, const struct auth_principal *p,
			struct workspace_spec *spec, struct station_error *e)
{
	uint64_t v;
	int r;

	if (!spec->adapter)
		spec->adapter = "container";
	if (strcmp(spec->adapter, "container") != 0)
		return station_error_set(e, STATION_EFORBIDDEN, "adapter",
					 "adapter \"%.32s\" is not for tenants: a tenant's token "
					 "creates container workspaces only",
					 spec->adapter);
	r = admit_image(m, spec->image, e);
	if (r >= 0 && spec->seccomp_profile)
		r = admit_choice("seccompProfile", "seccomp profile", spec->seccomp_profile,
				 m->cfg.tenant_seccomp_profiles ?: default_profiles, e);
	if (r >= 0)
		r = admit_choice("network", "network", spec->network ?: "none",
				 m->cfg.tenant_networks ?: default_networks, e);
	if (r >= 0)
		r = admit_cpus(&spec->cpus, p->limits.cpus_milli, e);
	if (r >= 0)
		r = admit_limit("memoryMb", &spec->memory_mb, m->cfg.default_memory_mb,
				p->limits.memory_mb, e);
	if (r >= 0)
		r = admit_limit("pidsLimit", &spec->pids_limit, m->cfg.default_pids_limit,
				p->limits.pids_limit, e);
	if (r < 0)
		return r;
	v = manager_tenant_workspaces(m, p->tenant);
	if (p->limits.workspaces && v >= p->limits.workspaces)
		return station_error_set(e, -EAGAIN, NULL,
					 "tenant \"%s\" already has %llu workspaces on this worker "
					 "(its token's limit workspaces is %u)",
					 p->tenant, (unsigned long long)v, p->limits.workspaces);
	return 0;
}

int manager_tenant_admit(struct manager *m, const struct auth_principal *p,
			 struct workspace_spec *spec, struct station_error *e)
{
	spec->tenant = p->tenant[0] ? p->tenant : NULL;
	if (!p->tenant[0])
		return 0; /* the operator's */
	if (m->cfg.tenant && strcmp(m->cfg.tenant, p->tenant) != 0)
		return station_error_set(
			e, STATION_EFORBIDDEN, NULL,
			"this worker serves tenant \"%s\" only (the token is tenant "
			"\"%s\"'s)",
			m->cfg.tenant, p->tenant);
	return admit_tenant(m, p, spec, e);
}

static json_t *strv_json(const char *const *v)
{
	json_t *a = json_array();

	for (; a && v && *v; v++)
		json_array_append_new(a, json_string(*v));
	return a;
}

void manager_tenant_worker_json(struct manager *m, json_t *o)
{
	const char *buf[2];

	json_object_set_new(o, "tenant", m->cfg.tenant ? json_string(m->cfg.tenant) : json_null());
	json_object_set_new(o, "tenantPolicy",
			    json_pack("{s:o,s:o,s:o}", "images",
				      strv_json(image_allow_list(m, buf)), "seccompProfiles",
				      strv_json(m->cfg.tenant_seccomp_profiles ?: default_profiles),
				      "networks",
				      strv_json(m->cfg.tenant_networks ?: default_networks)));
	if (m->viewer)
		json_object_set_new(
			o, "workspaces",
			json_integer((json_int_t)manager_tenant_workspaces(m, m->viewer)));
}
