/* SPDX-License-Identifier: MIT */

#include "policy.h"
