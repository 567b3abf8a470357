/* SPDX-License-Identifier: MIT */

#include "nft.h"
