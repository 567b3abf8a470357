/* SPDX-License-Identifier: MIT */

#include "net.h"
