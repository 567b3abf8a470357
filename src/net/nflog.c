/* SPDX-License-Identifier: MIT */

#include "nflog.h"
