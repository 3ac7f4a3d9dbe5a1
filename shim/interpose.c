/* Every route to a driver entry point ends here: the exported cu* symbols generated from hooks.def,
 * dlsym (any handle, both glibc symbol versions: the library carries no symbol versions, so the loader
 * binds references of either version to it), and cuGetProcAddress(_v2), which hands out the hook whose
 * ABI matches the pointer the driver returned. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <string.h>

#include "internal.h"

/* Plain pass-through: count, then call the driver. A hook reached from the shim's own calls
 * (ag_guard) is not counted. */
#define AG_PASSTHROUGH(name, params, args)                                                            \
    AG_EXPORT CUresult CUDAAPI name params                                                            \
    {                                                                                                 \
        if (AG_LIKELY(!ag_guard))                                                                     \
            ag_count(AG_ID_##name);                                                                   \
        ag_fn_##name##_t real_ = (ag_fn_##name##_t)ag_real_get(AG_ID_##name);                         \
        return real_ ? real_ args : CUDA_ERROR_NOT_FOUND;                                             \
    }

/* Kinds whose hooks do more than pass through are written by hand below. */
#define AG_GEN_INIT(name, params, args)
#define AG_GEN_PROC(name, params, args)
#define AG_GEN_LAUNCH AG_PASSTHROUGH
#define AG_GEN_COPY AG_PASSTHROUGH
#define AG_GEN_SET AG_PASSTHROUGH
#define AG_GEN_SYNC AG_PASSTHROUGH
#define AG_GEN_EVENT AG_PASSTHROUGH
#define AG_GEN_STREAM AG_PASSTHROUGH
#define AG_GEN_HOSTFN AG_PASSTHROUGH
#define AG_GEN_MEMOP AG_PASSTHROUGH
#define AG_GEN_ALLOC AG_PASSTHROUGH
#define AG_GEN_FREE AG_PASSTHROUGH
#define AG_GEN_GRAPH AG_PASSTHROUGH
#define AG_GEN_CAPTURE AG_PASSTHROUGH
#define AG_GEN_MODULE AG_PASSTHROUGH
#define AG_GEN_CONTEXT AG_PASSTHROUGH
#define AG_GEN_IPC AG_PASSTHROUGH

#define AG_HOOK(kind, name, params, args) AG_GEN_##kind(name, params, args)
#include "hooks.def"
#undef AG_HOOK

AG_EXPORT CUresult CUDAAPI cuInit(unsigned int Flags)
{
    if (ag_guard)
        return ((ag_fn_cuInit_t)ag_real_get(AG_ID_cuInit))(Flags);
    ag_count(AG_ID_cuInit);
    ag_fn_cuInit_t real = (ag_fn_cuInit_t)ag_real_get(AG_ID_cuInit);
    if (!real)
        return CUDA_ERROR_NOT_FOUND;
    CUresult r = real(Flags);
    if (r == CUDA_SUCCESS)
        ag_cupti_start();
    return r;
}

/* Replaces the driver's answer by our hook with the same ABI. An entry point of a family we hook whose
 * address we do not know would bypass the shim: count it, say so, and hand it out unchanged. */
static void wrap_proc(const char *symbol, void **pfn)
{
    int id = ag_hook_by_real(*pfn);
    if (id >= 0) {
        *pfn = ag_hook_addr((ag_id_t)id);
        return;
    }
    if (symbol && ag_hook_family_known(symbol)) {
        atomic_fetch_add_explicit(&ag_unmatched_proc, 1, memory_order_relaxed);
        AG_LOG_CAPPED(AG_LOG_WARN, "cuGetProcAddress(\"%s\") returned an entry point the shim does not know; "
                                   "calls through it are not seen", symbol);
    }
}

AG_EXPORT CUresult CUDAAPI cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
                                               CUdriverProcAddressQueryResult *symbolStatus)
{
    ag_fn_cuGetProcAddress_v2_t real = (ag_fn_cuGetProcAddress_v2_t)ag_real_get(AG_ID_cuGetProcAddress_v2);
    if (!real)
        return CUDA_ERROR_NOT_FOUND;
    if (ag_guard)
        return real(symbol, pfn, cudaVersion, flags, symbolStatus);
    ag_count(AG_ID_cuGetProcAddress_v2);
    CUresult r = real(symbol, pfn, cudaVersion, flags, symbolStatus);
    if (r == CUDA_SUCCESS && pfn && *pfn)
        wrap_proc(symbol, pfn);
    return r;
}

AG_EXPORT CUresult CUDAAPI cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags)
{
    ag_fn_cuGetProcAddress_t real = (ag_fn_cuGetProcAddress_t)ag_real_get(AG_ID_cuGetProcAddress);
    if (!real)
        return CUDA_ERROR_NOT_FOUND;
    if (ag_guard)
        return real(symbol, pfn, cudaVersion, flags);
    ag_count(AG_ID_cuGetProcAddress);
    CUresult r = real(symbol, pfn, cudaVersion, flags);
    if (r == CUDA_SUCCESS && pfn && *pfn)
        wrap_proc(symbol, pfn);
    return r;
}

static void *const hook_addrs[AG_ID_COUNT] = {
#define AG_HOOK(kind, name, params, args) (void *)name,
#include "hooks.def"
#undef AG_HOOK
};

void *ag_hook_addr(ag_id_t id)
{
    return hook_addrs[id];
}

/* dlsym for every handle but RTLD_NEXT (whose meaning depends on the caller's address, so the entry
 * stub below jumps to the real dlsym for it without a frame of ours in between). */
void *ag_dlsym_hook(void *handle, const char *name);
void *ag_dlsym_hook(void *handle, const char *name)
{
    if (AG_UNLIKELY(!ag_real_dlsym))
        return NULL;
    void *r = ag_real_dlsym(handle, name);
    if (!r || !name || name[0] != 'c' || name[1] != 'u' || ag_guard)
        return r;
    int id = ag_hook_by_name(name);
    if (id < 0 || r == hook_addrs[id])
        return r;
    ag_bind_cuda();
    /* Only the driver's own definition is replaced; another library's symbol of that name is not ours
     * to take. */
    return ag_real[id] == r ? hook_addrs[id] : r;
}

#if defined(__x86_64__)
__asm__(".text\n"
        ".globl dlsym\n"
        ".type dlsym, @function\n"
        "dlsym:\n"
        "    cmpq $-1, %rdi\n"
        "    jne 1f\n"
        "    movq ag_real_dlsym(%rip), %rax\n"
        "    testq %rax, %rax\n"
        "    je 1f\n"
        "    jmp *%rax\n"
        "1:  jmp ag_dlsym_hook\n"
        ".size dlsym, .-dlsym\n");
#elif defined(__aarch64__)
__asm__(".text\n"
        ".globl dlsym\n"
        ".type dlsym, %function\n"
        "dlsym:\n"
        "    cmn x0, #1\n"
        "    b.ne 1f\n"
        "    adrp x16, ag_real_dlsym\n"
        "    ldr x16, [x16, :lo12:ag_real_dlsym]\n"
        "    cbz x16, 1f\n"
        "    br x16\n"
        "1:  b ag_dlsym_hook\n"
        ".size dlsym, .-dlsym\n");
#else
AG_EXPORT void *dlsym(void *handle, const char *name)
{
    return ag_dlsym_hook(handle, name);
}
#endif
