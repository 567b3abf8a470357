/* SPDX-License-Identifier: MIT */
#include "error.h"

#include <stdio.h>
#include <string.h>

int station_error_set(struct station_error *e, int err, const char *field, const char *fmt, ...)
{
	if (!e)
		return err;
	e->err = err;
	snprintf(e->field, sizeof e->field, "%s", field ? field : "");
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(e->message, sizeof e->message, fmt, ap);
	va_end(ap);
	return err;
}
