/* Kernel-set selection from CPUID. SIMD sets register here as they are added. */
#include "isa.h"

#include <string.h>

const at_kernels *at_isa_best(void) { return &at_kernels_generic; }

const at_kernels *at_isa_by_name(const char *name) {
    if (strcmp(name, "generic") == 0) return &at_kernels_generic;
    return NULL;
}

const char *at_isa_list(void) { return "generic"; }
