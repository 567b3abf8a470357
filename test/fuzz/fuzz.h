/* SPDX-License-Identifier: MIT */
#pragma once

/* What every harness of test/fuzz defines. Built twice: with libFuzzer (make fuzz, clang,
 * -fsanitize=fuzzer) and with replay-main.c, which feeds the committed corpus and regression
 * inputs through the same function in every build that `make test` runs. A harness returns 0
 * whatever the input: a crash, a sanitizer report or a leak is the only failure. */

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
/* Optional: a harness that needs set-up once defines it (a weak symbol in replay-main.c). */
int LLVMFuzzerInitialize(int *argc, char ***argv);
