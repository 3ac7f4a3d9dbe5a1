/* fc_procaddr.c: fakecuda (CPU test double for libcuda.so.1) cuGetProcAddress. One table maps
 * {API name, first CUDA version, ABI symbol, per-thread ABI symbol}; the answer is this library's
 * own definition of that symbol (looked up on our own handle, never an interposer's). */
#include "fc_internal.h"

#include <dlfcn.h>
#include <string.h>

typedef struct { const char *api; int ver; const char *abi, *pt; } fc_proc;

/* A NULL abi marks a version whose ABI the fake does not implement (the legacy 32-bit forms). */
static const fc_proc fc_procs[] = {
    {"cuInit", 2000, "cuInit", 0}, {"cuDriverGetVersion", 2020, "cuDriverGetVersion", 0},
    {"cuDeviceGet", 2000, "cuDeviceGet", 0}, {"cuDeviceGetCount", 2000, "cuDeviceGetCount", 0},
    {"cuDeviceGetName", 2000, "cuDeviceGetName", 0}, {"cuDeviceGetAttribute", 2000, "cuDeviceGetAttribute", 0},
    {"cuDevicePrimaryCtxRetain", 7000, "cuDevicePrimaryCtxRetain", 0},
    {"cuDevicePrimaryCtxRelease", 7000, 0, 0}, {"cuDevicePrimaryCtxRelease", 11000, "cuDevicePrimaryCtxRelease_v2", 0},
    {"cuDevicePrimaryCtxReset", 7000, 0, 0}, {"cuDevicePrimaryCtxReset", 11000, "cuDevicePrimaryCtxReset_v2", 0},
    {"cuDevicePrimaryCtxGetState", 7000, "cuDevicePrimaryCtxGetState", 0},
    {"cuCtxCreate", 2000, 0, 0}, {"cuCtxCreate", 3020, "cuCtxCreate_v2", 0}, {"cuCtxCreate", 11040, "cuCtxCreate_v3", 0},
    {"cuCtxCreate", 12050, "cuCtxCreate_v4", 0},
    {"cuCtxDestroy", 2000, 0, 0}, {"cuCtxDestroy", 4000, "cuCtxDestroy_v2", 0},
    {"cuCtxPushCurrent", 2000, 0, 0}, {"cuCtxPushCurrent", 4000, "cuCtxPushCurrent_v2", 0},
    {"cuCtxPopCurrent", 2000, 0, 0}, {"cuCtxPopCurrent", 4000, "cuCtxPopCurrent_v2", 0},
    {"cuCtxSetCurrent", 4000, "cuCtxSetCurrent", 0}, {"cuCtxGetCurrent", 4000, "cuCtxGetCurrent", 0},
    {"cuCtxGetDevice", 2000, "cuCtxGetDevice", 0}, {"cuCtxSynchronize", 2000, "cuCtxSynchronize", 0},
    {"cuGetErrorName", 6000, "cuGetErrorName", 0}, {"cuGetErrorString", 6000, "cuGetErrorString", 0},
    {"cuGetProcAddress", 11030, "cuGetProcAddress", 0}, {"cuGetProcAddress", 12000, "cuGetProcAddress_v2", 0},
    {"cuMemAlloc", 2000, 0, 0}, {"cuMemAlloc", 3020, "cuMemAlloc_v2", 0},
    {"cuMemFree", 2000, 0, 0}, {"cuMemFree", 3020, "cuMemFree_v2", 0},
    {"cuMemAllocHost", 2000, 0, 0}, {"cuMemAllocHost", 3020, "cuMemAllocHost_v2", 0},
    {"cuMemGetInfo", 2000, 0, 0}, {"cuMemGetInfo", 3020, "cuMemGetInfo_v2", 0},
    {"cuMemFreeHost", 2000, "cuMemFreeHost", 0}, {"cuMemHostAlloc", 2020, "cuMemHostAlloc", 0},
    {"cuMemHostRegister", 4000, 0, 0}, {"cuMemHostRegister", 6050, "cuMemHostRegister_v2", 0},
    {"cuMemHostUnregister", 4000, "cuMemHostUnregister", 0},
    {"cuMemAllocAsync", 11020, "cuMemAllocAsync", "cuMemAllocAsync_ptsz"},
    {"cuMemFreeAsync", 11020, "cuMemFreeAsync", "cuMemFreeAsync_ptsz"},
    {"cuMemAllocFromPoolAsync", 11020, "cuMemAllocFromPoolAsync", "cuMemAllocFromPoolAsync_ptsz"},
    {"cuPointerGetAttribute", 4000, "cuPointerGetAttribute", 0}, {"cuPointerGetAttributes", 7000, "cuPointerGetAttributes", 0},
    {"cuMemUnmap", 10020, "cuMemUnmap", 0}, {"cuMemRelease", 10020, "cuMemRelease", 0},
    {"cuMemAddressReserve", 10020, "cuMemAddressReserve", 0}, {"cuMemAddressFree", 10020, "cuMemAddressFree", 0},
    {"cuMemCreate", 10020, "cuMemCreate", 0}, {"cuMemMap", 10020, "cuMemMap", 0},
    {"cuMemSetAccess", 10020, "cuMemSetAccess", 0},
    {"cuMemcpy", 4000, "cuMemcpy", "cuMemcpy_ptds"}, {"cuMemcpyAsync", 4000, "cuMemcpyAsync", "cuMemcpyAsync_ptsz"},
#define V2(api, pt) {api, 2000, 0, 0}, {api, 3020, api "_v2", api "_v2" pt}
    V2("cuMemcpyHtoD", "_ptds"), V2("cuMemcpyDtoH", "_ptds"), V2("cuMemcpyDtoD", "_ptds"),
    V2("cuMemcpyHtoDAsync", "_ptsz"), V2("cuMemcpyDtoHAsync", "_ptsz"), V2("cuMemcpyDtoDAsync", "_ptsz"),
    V2("cuMemcpy2D", "_ptds"), V2("cuMemcpy2DAsync", "_ptsz"), V2("cuMemcpy2DUnaligned", "_ptds"),
    V2("cuMemcpy3D", "_ptds"), V2("cuMemcpy3DAsync", "_ptsz"),
    V2("cuMemcpyAtoH", "_ptds"), V2("cuMemcpyHtoA", "_ptds"), V2("cuMemcpyAtoD", "_ptds"), V2("cuMemcpyDtoA", "_ptds"),
    V2("cuMemcpyAtoA", "_ptds"), V2("cuMemcpyAtoHAsync", "_ptsz"), V2("cuMemcpyHtoAAsync", "_ptsz"),
    V2("cuMemsetD8", "_ptds"), V2("cuMemsetD16", "_ptds"), V2("cuMemsetD32", "_ptds"),
    V2("cuMemsetD2D8", "_ptds"), V2("cuMemsetD2D16", "_ptds"), V2("cuMemsetD2D32", "_ptds"),
    {"cuMemsetD8Async", 3020, "cuMemsetD8Async", "cuMemsetD8Async_ptsz"},
    {"cuMemsetD16Async", 3020, "cuMemsetD16Async", "cuMemsetD16Async_ptsz"},
    {"cuMemsetD32Async", 3020, "cuMemsetD32Async", "cuMemsetD32Async_ptsz"},
    {"cuMemsetD2D8Async", 3020, "cuMemsetD2D8Async", "cuMemsetD2D8Async_ptsz"},
    {"cuMemsetD2D16Async", 3020, "cuMemsetD2D16Async", "cuMemsetD2D16Async_ptsz"},
    {"cuMemsetD2D32Async", 3020, "cuMemsetD2D32Async", "cuMemsetD2D32Async_ptsz"},
    {"cuMemcpyPeer", 4000, "cuMemcpyPeer", "cuMemcpyPeer_ptds"}, {"cuMemcpyPeerAsync", 4000, "cuMemcpyPeerAsync", "cuMemcpyPeerAsync_ptsz"},
    {"cuMemcpy3DPeer", 4000, "cuMemcpy3DPeer", "cuMemcpy3DPeer_ptds"},
    {"cuMemcpy3DPeerAsync", 4000, "cuMemcpy3DPeerAsync", "cuMemcpy3DPeerAsync_ptsz"},
    {"cuMemcpyBatchAsync", 12080, 0, 0}, {"cuMemcpyBatchAsync", 13000, "cuMemcpyBatchAsync_v2", "cuMemcpyBatchAsync_v2_ptsz"},
    {"cuMemcpy3DBatchAsync", 12080, 0, 0}, {"cuMemcpy3DBatchAsync", 13000, "cuMemcpy3DBatchAsync_v2", "cuMemcpy3DBatchAsync_v2_ptsz"},
    {"cuStreamCreate", 2000, "cuStreamCreate", 0}, {"cuStreamCreateWithPriority", 5050, "cuStreamCreateWithPriority", 0},
    {"cuStreamDestroy", 2000, 0, 0}, {"cuStreamDestroy", 4000, "cuStreamDestroy_v2", 0},
    {"cuStreamSynchronize", 2000, "cuStreamSynchronize", "cuStreamSynchronize_ptsz"},
    {"cuStreamQuery", 2000, "cuStreamQuery", "cuStreamQuery_ptsz"},
    {"cuStreamWaitEvent", 3020, "cuStreamWaitEvent", "cuStreamWaitEvent_ptsz"},
    {"cuStreamAddCallback", 5000, "cuStreamAddCallback", "cuStreamAddCallback_ptsz"},
    {"cuLaunchHostFunc", 10000, "cuLaunchHostFunc", "cuLaunchHostFunc_ptsz"},
    {"cuStreamBeginCapture", 10000, "cuStreamBeginCapture", "cuStreamBeginCapture_ptsz"},
    {"cuStreamBeginCapture", 10010, "cuStreamBeginCapture_v2", "cuStreamBeginCapture_v2_ptsz"},
    {"cuStreamBeginCaptureToGraph", 12030, "cuStreamBeginCaptureToGraph", "cuStreamBeginCaptureToGraph_ptsz"},
    {"cuStreamEndCapture", 10000, "cuStreamEndCapture", "cuStreamEndCapture_ptsz"},
    {"cuStreamIsCapturing", 10000, "cuStreamIsCapturing", "cuStreamIsCapturing_ptsz"},
    {"cuStreamGetCaptureInfo", 10010, 0, 0},
    {"cuStreamGetCaptureInfo", 11030, "cuStreamGetCaptureInfo_v2", "cuStreamGetCaptureInfo_v2_ptsz"},
    {"cuStreamGetCaptureInfo", 12030, "cuStreamGetCaptureInfo_v3", "cuStreamGetCaptureInfo_v3_ptsz"},
    {"cuStreamGetCtx", 9020, "cuStreamGetCtx", "cuStreamGetCtx_ptsz"},
    {"cuStreamGetFlags", 5050, "cuStreamGetFlags", "cuStreamGetFlags_ptsz"},
    {"cuStreamGetPriority", 5050, "cuStreamGetPriority", "cuStreamGetPriority_ptsz"},
    {"cuStreamGetId", 12000, "cuStreamGetId", "cuStreamGetId_ptsz"},
    {"cuThreadExchangeStreamCaptureMode", 10010, "cuThreadExchangeStreamCaptureMode", 0},
#define MO(api) {api, 8000, api, api "_ptsz"}, {api, 11070, api "_v2", api "_v2_ptsz"}
    MO("cuStreamWriteValue32"), MO("cuStreamWaitValue32"), MO("cuStreamWriteValue64"), MO("cuStreamWaitValue64"),
    MO("cuStreamBatchMemOp"),
    {"cuEventCreate", 2000, "cuEventCreate", 0}, {"cuEventDestroy", 2000, 0, 0}, {"cuEventDestroy", 4000, "cuEventDestroy_v2", 0},
    {"cuEventRecord", 2000, "cuEventRecord", "cuEventRecord_ptsz"},
    {"cuEventRecordWithFlags", 11010, "cuEventRecordWithFlags", "cuEventRecordWithFlags_ptsz"},
    {"cuEventQuery", 2000, "cuEventQuery", 0}, {"cuEventSynchronize", 2000, "cuEventSynchronize", 0},
    {"cuEventElapsedTime", 2000, "cuEventElapsedTime", 0}, {"cuEventElapsedTime", 12080, "cuEventElapsedTime_v2", 0},
    {"cuModuleLoad", 2000, "cuModuleLoad", 0}, {"cuModuleLoadData", 2000, "cuModuleLoadData", 0},
    {"cuModuleLoadDataEx", 2010, "cuModuleLoadDataEx", 0}, {"cuModuleLoadFatBinary", 2000, "cuModuleLoadFatBinary", 0},
    {"cuModuleUnload", 2000, "cuModuleUnload", 0}, {"cuModuleGetFunction", 2000, "cuModuleGetFunction", 0},
    {"cuModuleGetGlobal", 2000, 0, 0}, {"cuModuleGetGlobal", 3020, "cuModuleGetGlobal_v2", 0},
    {"cuLibraryLoadData", 12000, "cuLibraryLoadData", 0}, {"cuLibraryUnload", 12000, "cuLibraryUnload", 0},
    {"cuLibraryGetKernel", 12000, "cuLibraryGetKernel", 0}, {"cuKernelGetFunction", 12000, "cuKernelGetFunction", 0},
    {"cuFuncGetModule", 11000, "cuFuncGetModule", 0}, {"cuKernelGetLibrary", 12050, "cuKernelGetLibrary", 0},
    {"cuLibraryGetModule", 12000, "cuLibraryGetModule", 0},
    {"cuKernelGetName", 12030, "cuKernelGetName", 0}, {"cuFuncGetName", 12030, "cuFuncGetName", 0},
    {"cuFuncGetParamInfo", 12040, "cuFuncGetParamInfo", 0}, {"cuKernelGetParamInfo", 12040, "cuKernelGetParamInfo", 0},
    {"cuCtxSetLimit", 3010, "cuCtxSetLimit", 0}, {"cuCtxGetLimit", 3010, "cuCtxGetLimit", 0},
    {"cuFuncGetAttribute", 2020, "cuFuncGetAttribute", 0}, {"cuFuncSetAttribute", 9000, "cuFuncSetAttribute", 0},
    {"cuKernelGetAttribute", 12000, "cuKernelGetAttribute", 0}, {"cuKernelSetAttribute", 12000, "cuKernelSetAttribute", 0},
    {"cuLaunchKernel", 4000, "cuLaunchKernel", "cuLaunchKernel_ptsz"},
    {"cuLaunchKernelEx", 11060, "cuLaunchKernelEx", "cuLaunchKernelEx_ptsz"},
    {"cuLaunchCooperativeKernel", 9000, "cuLaunchCooperativeKernel", "cuLaunchCooperativeKernel_ptsz"},
    {"cuGraphCreate", 10000, "cuGraphCreate", 0}, {"cuGraphDestroy", 10000, "cuGraphDestroy", 0},
    {"cuGraphAddKernelNode", 10000, 0, 0}, {"cuGraphAddKernelNode", 12000, "cuGraphAddKernelNode_v2", 0},
    {"cuGraphKernelNodeGetParams", 10000, 0, 0}, {"cuGraphKernelNodeGetParams", 12000, "cuGraphKernelNodeGetParams_v2", 0},
    {"cuGraphKernelNodeSetParams", 10000, 0, 0}, {"cuGraphKernelNodeSetParams", 12000, "cuGraphKernelNodeSetParams_v2", 0},
    {"cuGraphAddMemcpyNode", 10000, "cuGraphAddMemcpyNode", 0}, {"cuGraphAddMemsetNode", 10000, "cuGraphAddMemsetNode", 0},
    {"cuGraphAddEventRecordNode", 11010, "cuGraphAddEventRecordNode", 0},
    {"cuGraphAddEventWaitNode", 11010, "cuGraphAddEventWaitNode", 0}, {"cuGraphAddEmptyNode", 10000, "cuGraphAddEmptyNode", 0},
    {"cuGraphAddNode", 12020, 0, 0}, {"cuGraphAddNode", 12030, "cuGraphAddNode_v2", 0},
    {"cuGraphGetNodes", 10000, "cuGraphGetNodes", 0}, {"cuGraphNodeGetType", 10000, "cuGraphNodeGetType", 0},
    {"cuGraphInstantiate", 10000, 0, 0}, {"cuGraphInstantiate", 12000, "cuGraphInstantiateWithFlags", 0},
    {"cuGraphInstantiateWithFlags", 11040, "cuGraphInstantiateWithFlags", 0},
    {"cuGraphInstantiateWithParams", 12000, "cuGraphInstantiateWithParams", "cuGraphInstantiateWithParams_ptsz"},
    {"cuGraphExecDestroy", 10000, "cuGraphExecDestroy", 0},
    {"cuGraphExecKernelNodeSetParams", 10010, 0, 0}, {"cuGraphExecKernelNodeSetParams", 12000, "cuGraphExecKernelNodeSetParams_v2", 0},
    {"cuGraphExecMemcpyNodeSetParams", 10020, "cuGraphExecMemcpyNodeSetParams", 0},
    {"cuGraphExecMemsetNodeSetParams", 10020, "cuGraphExecMemsetNodeSetParams", 0},
    {"cuGraphExecUpdate", 10020, 0, 0}, {"cuGraphExecUpdate", 12000, "cuGraphExecUpdate_v2", 0},
    {"cuGraphUpload", 11010, "cuGraphUpload", "cuGraphUpload_ptsz"}, {"cuGraphLaunch", 10000, "cuGraphLaunch", "cuGraphLaunch_ptsz"},
    {"cuGraphKernelNodeSetAttribute", 11000, "cuGraphKernelNodeSetAttribute", 0},
    {"cuGraphKernelNodeGetAttribute", 11000, "cuGraphKernelNodeGetAttribute", 0},
    {"cuGraphDebugDotPrint", 11030, "cuGraphDebugDotPrint", 0},
};

static void *fc_self_sym(const char *name)
{
    static void *self;
    if (!self) {
        Dl_info di;
        if (!dladdr((void *)&fc_self_sym, &di) || !di.dli_fname) return NULL;
        self = dlopen(di.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
        if (!self) return NULL;
    }
    return dlsym(self, name);
}

static CUresult fc_proc_address(const char *sym, void **pfn, int ver, cuuint64_t flags, CUdriverProcAddressQueryResult *st)
{
    if (!sym || !pfn) return CUDA_ERROR_INVALID_VALUE;
    if (flags != CU_GET_PROC_ADDRESS_DEFAULT && flags != CU_GET_PROC_ADDRESS_LEGACY_STREAM &&
        flags != CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM)
        return CUDA_ERROR_INVALID_VALUE;
    *pfn = NULL;
    const fc_proc *best = NULL;
    int known = 0;
    for (size_t i = 0; i < sizeof(fc_procs) / sizeof(fc_procs[0]); i++) {
        if (strcmp(fc_procs[i].api, sym)) continue;
        known = 1;
        if (fc_procs[i].ver <= ver && (!best || fc_procs[i].ver > best->ver)) best = &fc_procs[i];
    }
    if (!best || !best->abi) {
        if (st) *st = known ? CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
        return CUDA_ERROR_NOT_FOUND;
    }
    const char *abi = flags == CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM && best->pt ? best->pt : best->abi;
    *pfn = fc_self_sym(abi);
    if (!*pfn) {
        if (st) *st = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
        return CUDA_ERROR_NOT_FOUND;
    }
    if (st) *st = CU_GET_PROC_ADDRESS_SUCCESS;
    return CUDA_SUCCESS;
}

/* Like the real driver, cuGetProcAddress works before cuInit (the runtime calls it first). */
CUresult cuGetProcAddress_v2(const char *sym, void **pfn, int ver, cuuint64_t flags, CUdriverProcAddressQueryResult *st)
{
    FC_API(-1, fc_proc_address(sym, pfn, ver, flags, st));
}
#undef cuGetProcAddress /* v1 ABI: no symbolStatus */
CUresult cuGetProcAddress(const char *sym, void **pfn, int ver, cuuint64_t flags)
{
    FC_API(-1, fc_proc_address(sym, pfn, ver, flags, NULL));
}
