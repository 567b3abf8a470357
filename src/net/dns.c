/* SPDX-License-Identifier: MIT */

#include "dns.h"
