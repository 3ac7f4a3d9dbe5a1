/* The glibc 2.2.5 version of dlsym, the one that wheels built for old glibc (PyTorch, Triton) bind to.
 * Kept in its own translation unit so that the .symver alias does not leak into route_prog.c, whose
 * other dlsym calls must use the default (current) version. */
#define _GNU_SOURCE
#include <dlfcn.h>

#include "route_prog.h"

#if defined(__x86_64__) && defined(__GLIBC__)
void *dlsym_old(void *handle, const char *name);
__asm__(".symver dlsym_old, dlsym@GLIBC_2.2.5");

void *rp_dlsym_old(void *handle, const char *name)
{
    return dlsym_old(handle, name);
}
int rp_have_dlsym_old(void)
{
    return 1;
}
#else
void *rp_dlsym_old(void *handle, const char *name)
{
    (void)handle;
    (void)name;
    return NULL;
}
int rp_have_dlsym_old(void)
{
    return 0;
}
#endif
