/* libnextprobe.so: a second preloaded library, loaded after libautograph.so, that asks
 * dlsym(RTLD_NEXT, "cuInit") from its own code, as layered interposers do. RTLD_NEXT is relative to the
 * caller, so the answer must be the next definition after this library: libcuda's own cuInit, not the
 * shim's hook (which comes before us) and not NULL. It looks once from its constructor and once at exit
 * and reports each on stderr as "nextprobe: WHEN ok|FAIL ...". The constructor also reports whether an
 * ordinary lookup, dlsym(RTLD_DEFAULT, "getpid"), works at that time ("nextprobe: ctor-default ..."):
 * constructors of libraries preloaded after the shim run before the shim's own. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void probe(const char *when)
{
    void *p = dlsym(RTLD_NEXT, "cuInit");
    Dl_info di;
    memset(&di, 0, sizeof di);
    const char *obj = "?", *sym = "?";
    if (p && dladdr(p, &di)) {
        obj = di.dli_fname ? di.dli_fname : "?";
        sym = di.dli_sname ? di.dli_sname : "?";
    }
    const char *base = strrchr(obj, '/');
    base = base ? base + 1 : obj;
    int ok = p && strcmp(base, "libcuda.so.1") == 0 && strcmp(sym, "cuInit") == 0;
    fprintf(stderr, "nextprobe: %s %s dlsym(RTLD_NEXT, cuInit)=%s in %s (%s)\n", when, ok ? "ok" : "FAIL",
            p ? sym : "NULL", obj, p ? "" : "no definition");
}

static void at_exit(void)
{
    probe("exit");
}

__attribute__((constructor)) static void nextprobe_start(void)
{
    void *p = dlsym(RTLD_DEFAULT, "getpid");
    fprintf(stderr, "nextprobe: ctor-default %s dlsym(RTLD_DEFAULT, getpid)=%s\n", p ? "ok" : "FAIL",
            p ? "found" : "NULL");
    probe("ctor");
    atexit(at_exit);
}
