/* SPDX-License-Identifier: MIT */

#include "link.h"
