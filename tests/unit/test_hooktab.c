/* Unit tests of the hook tables generated from hooks.def: unique names, per-thread twins of the same
 * kind, lookups by name, by API family and by real address. */
#define _GNU_SOURCE /* clock_gettime (internal.h, fakecuda_prog.h) under -std=c11 */
#include <string.h>

#include "check.h"
#include "internal.h"

static int is_launch(const char *n)
{
    return ag_hook_by_name(n) >= 0 && AG_KIND_IS_LAUNCH(ag_hook_kinds[ag_hook_by_name(n)]);
}

int main(void)
{
    ag_hooktab_init();
    for (int i = 0; i < AG_ID_COUNT; i++) {
        CHECK(ag_hook_by_name(ag_hook_names[i]) == i);
        for (int j = i + 1; j < AG_ID_COUNT; j++)
            CHECK(strcmp(ag_hook_names[i], ag_hook_names[j]) != 0);
        /* A per-thread twin has its legacy entry point, of the same kind, in the list too. */
        size_t len = strlen(ag_hook_names[i]);
        if (len > 5 && (strcmp(ag_hook_names[i] + len - 5, "_ptsz") == 0 ||
                        strcmp(ag_hook_names[i] + len - 5, "_ptds") == 0)) {
            char base[128];
            snprintf(base, sizeof base, "%.*s", (int)(len - 5), ag_hook_names[i]);
            int b = ag_hook_by_name(base);
            CHECK(b >= 0);
            if (b >= 0)
                CHECK(ag_hook_kinds[b] == ag_hook_kinds[i]);
        }
    }
    /* Everything the issue lists as hooked. */
    const char *required[] = {"cuLaunchKernel", "cuLaunchKernel_ptsz", "cuLaunchKernelEx", "cuLaunchKernelEx_ptsz",
                              "cuLaunchCooperativeKernel", "cuLaunchCooperativeKernel_ptsz", "cuMemcpyHtoD_v2",
                              "cuMemcpyHtoD_v2_ptds", "cuMemcpyDtoHAsync_v2_ptsz", "cuMemcpyBatchAsync_v2",
                              "cuMemsetD8Async_ptsz", "cuMemsetD2D32_v2_ptds", "cuStreamSynchronize",
                              "cuStreamQuery_ptsz", "cuEventSynchronize", "cuEventQuery", "cuCtxSynchronize",
                              "cuStreamWaitEvent", "cuEventRecord", "cuEventRecordWithFlags_ptsz", "cuMemFree_v2",
                              "cuMemFreeAsync", "cuMemAllocAsync_ptsz", "cuLaunchHostFunc", "cuGraphLaunch",
                              "cuGraphLaunch_ptsz", "cuStreamBeginCapture_v2", "cuStreamEndCapture",
                              "cuModuleUnload", "cuCtxDestroy_v2", "cuGetProcAddress", "cuGetProcAddress_v2",
                              "cuInit", "cuStreamIsCapturing"};
    for (size_t i = 0; i < sizeof required / sizeof *required; i++) {
        int ok = ag_hook_by_name(required[i]) >= 0;
        if (!ok)
            fprintf(stderr, "missing hook %s\n", required[i]);
        CHECK(ok);
    }
    CHECK(is_launch("cuLaunchKernel") && is_launch("cuLaunchKernelEx_ptsz") && !is_launch("cuMemcpy"));
    CHECK(ag_hook_per_thread[ag_hook_by_name("cuLaunchKernel_ptsz")]);
    CHECK(ag_hook_per_thread[ag_hook_by_name("cuMemcpyHtoD_v2_ptds")]);
    CHECK(!ag_hook_per_thread[ag_hook_by_name("cuLaunchKernel")]);
    CHECK(!ag_hook_per_thread[ag_hook_by_name("cuMemcpyHtoD_v2")]);
    CHECK(ag_hook_by_name("cuDeviceGet") < 0);
    CHECK(ag_hook_by_name("cuLaunchKernelX") < 0);
    CHECK(ag_hook_by_name("") < 0);

    /* Families: the base names cuGetProcAddress asks for. */
    CHECK(ag_hook_family_known("cuMemcpyHtoD"));
    CHECK(ag_hook_family_known("cuMemcpyHtoDAsync"));
    CHECK(ag_hook_family_known("cuLaunchKernel"));
    CHECK(ag_hook_family_known("cuStreamGetCaptureInfo"));
    CHECK(ag_hook_family_known("cuGetProcAddress"));
    CHECK(ag_hook_family_known("cuCtxSynchronize"));
    CHECK(!ag_hook_family_known("cuDeviceGetAttribute"));
    CHECK(!ag_hook_family_known("cuMemcpyHtoDX"));
    CHECK(!ag_hook_family_known("cu"));

    /* Real addresses map back to their ids; unknown ones do not. */
    static char fake[AG_ID_COUNT];
    for (int i = 0; i < AG_ID_COUNT; i++)
        ag_hooktab_add_real((ag_id_t)i, &fake[i]);
    for (int i = 0; i < AG_ID_COUNT; i++)
        CHECK(ag_hook_by_real(&fake[i]) == i);
    CHECK(ag_hook_by_real(NULL) == -1);
    CHECK(ag_hook_by_real(&required) == -1);
    return CHECK_DONE();
}
