/* SPDX-License-Identifier: MIT */

#include "resolver.h"
