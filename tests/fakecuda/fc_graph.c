/* fc_graph.c: fakecuda (CPU test double for libcuda.so.1) graphs, executable graphs and stream
 * capture. A graph launch enqueues the nodes into the stream in a random topological order
 * (seeded like the scheduler), so a graph whose edges miss a dependency shows it. */
#include "fc_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fc_graph_valid(const void *g) { return fc_obj_valid(g, FC_OBJ_GRAPH); }

fc_node *fc_node_new(fc_graph *g, CUgraphNodeType type, fc_node *const *deps, size_t ndeps)
{
    fc_node *n = fc_obj_new(sizeof(*n), FC_OBJ_NODE);
    if (!n) return NULL;
    n->g = g, n->type = type, n->idx = g->n;
    if (ndeps) {
        n->deps = malloc(ndeps * sizeof(*deps));
        if (!n->deps) return n->hdr.dead = 1, NULL;
        memcpy(n->deps, deps, ndeps * sizeof(*deps));
        n->ndeps = ndeps;
    }
    if (fc_vec_push((void **)&g->nodes, &g->n, sizeof(n), &n)) return free(n->deps), n->hdr.dead = 1, NULL;
    return n;
}

static void fc_node_release(fc_node *n)
{
    fc_launch_free(&n->kl);
    free(n->kparams);
    free(n->deps);
    n->kparams = NULL, n->deps = NULL;
    n->hdr.dead = 1;
}

static CUresult fc_deps_check(fc_graph *g, const CUgraphNode *deps, size_t nd)
{
    if (nd && !deps) return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < nd; i++) {
        fc_node *d = (fc_node *)deps[i];
        if (!fc_obj_valid(d, FC_OBJ_NODE) || d->g != g) return CUDA_ERROR_INVALID_VALUE;
        for (size_t j = 0; j < i; j++)
            if (deps[j] == deps[i]) return CUDA_ERROR_INVALID_VALUE;
    }
    return CUDA_SUCCESS;
}

static int fc_kparams_build(fc_node *n)
{
    free(n->kparams);
    const fc_kernel *k = fc_func_kernel(n->kl.f);
    n->kparams = calloc(k->nparams + 1, sizeof(void *));
    if (!n->kparams) return -1;
    for (unsigned i = 0; i < k->nparams; i++) n->kparams[i] = n->kl.buf + k->offsets[i];
    return 0;
}

static CUresult fc_kernel_params(const CUDA_KERNEL_NODE_PARAMS *p, fc_launch *out)
{
    if (!p) return CUDA_ERROR_INVALID_VALUE;
    fc_func *f;
    CUresult r = fc_func_resolve(p->func ? p->func : (CUfunction)p->kern, &f);
    if (r) return r;
    if (!p->gridDimX || !p->gridDimY || !p->gridDimZ || !p->blockDimX || !p->blockDimY || !p->blockDimZ ||
        (unsigned long long)p->blockDimX * p->blockDimY * p->blockDimZ > 1024)
        return CUDA_ERROR_INVALID_VALUE;
    memset(out, 0, sizeof(*out));
    if (fc_kernel_pack(fc_func_kernel(f), p->kernelParams, p->extra, out, &r)) return r;
    out->f = f;
    out->gen = f->gen;
    out->dims = (fakecuda_dims_t){p->gridDimX, p->gridDimY, p->gridDimZ, p->blockDimX, p->blockDimY, p->blockDimZ, p->sharedMemBytes};
    return CUDA_SUCCESS;
}

static CUresult fc_memset_params(const CUDA_MEMSET_NODE_PARAMS *p, fc_memset *out)
{
    if (!p) return CUDA_ERROR_INVALID_VALUE;
    return fc_memset_build(p->dst, p->pitch, p->elementSize, p->value, p->width, p->height, out);
}

/* Adds a node whose parameters were already validated into *proto (ownership moves). */
static CUresult fc_add(CUgraphNode *out, CUgraph hg, const CUgraphNode *deps, size_t nd, fc_node *proto)
{
    fc_graph *g = (fc_graph *)hg;
    CUresult r = !out ? CUDA_ERROR_INVALID_VALUE : !fc_graph_valid(g) ? CUDA_ERROR_INVALID_VALUE : fc_deps_check(g, deps, nd);
    fc_node *n = r ? NULL : fc_node_new(g, proto->type, (fc_node *const *)deps, nd);
    if (!r && !n) r = CUDA_ERROR_OUT_OF_MEMORY;
    if (r) {
        fc_launch_free(&proto->kl);
        return r;
    }
    n->kl = proto->kl, n->cp = proto->cp, n->ms = proto->ms, n->msp = proto->msp, n->ev = proto->ev;
    n->hostfn = proto->hostfn, n->ud = proto->ud;
    if (n->type == CU_GRAPH_NODE_TYPE_KERNEL && fc_kparams_build(n)) return CUDA_ERROR_OUT_OF_MEMORY;
    *out = (CUgraphNode)n;
    return CUDA_SUCCESS;
}

static CUresult fc_add_kernel(CUgraphNode *out, CUgraph g, const CUgraphNode *deps, size_t nd, const CUDA_KERNEL_NODE_PARAMS *p)
{
    fc_node proto = {.type = CU_GRAPH_NODE_TYPE_KERNEL};
    CUresult r = fc_kernel_params(p, &proto.kl);
    return r ? r : fc_add(out, g, deps, nd, &proto);
}
static CUresult fc_add_memcpy(CUgraphNode *out, CUgraph g, const CUgraphNode *deps, size_t nd, const CUDA_MEMCPY3D *p)
{
    fc_node proto = {.type = CU_GRAPH_NODE_TYPE_MEMCPY};
    CUresult r = fc_copy_from3d(p, &proto.cp);
    return r ? r : fc_add(out, g, deps, nd, &proto);
}
static CUresult fc_add_memset(CUgraphNode *out, CUgraph g, const CUgraphNode *deps, size_t nd, const CUDA_MEMSET_NODE_PARAMS *p)
{
    fc_node proto = {.type = CU_GRAPH_NODE_TYPE_MEMSET};
    CUresult r = fc_memset_params(p, &proto.ms);
    if (!r) proto.msp = *p;
    return r ? r : fc_add(out, g, deps, nd, &proto);
}
static CUresult fc_add_event(CUgraphNode *out, CUgraph g, const CUgraphNode *deps, size_t nd, CUevent e, CUgraphNodeType t)
{
    if (!fc_event_valid(e, "cuGraphAdd*EventNode")) return CUDA_ERROR_INVALID_VALUE;
    fc_node proto = {.type = t, .ev = (fc_event *)e};
    return fc_add(out, g, deps, nd, &proto);
}

CUresult cuGraphAddKernelNode_v2(CUgraphNode *n, CUgraph g, const CUgraphNode *d, size_t nd, const CUDA_KERNEL_NODE_PARAMS *p) { FC_API(1, fc_add_kernel(n, g, d, nd, p)); }
CUresult cuGraphAddMemcpyNode(CUgraphNode *n, CUgraph g, const CUgraphNode *d, size_t nd, const CUDA_MEMCPY3D *p, CUcontext c) { FC_API(1, fc_add_memcpy(n, g, d, nd, p)); }
CUresult cuGraphAddMemsetNode(CUgraphNode *n, CUgraph g, const CUgraphNode *d, size_t nd, const CUDA_MEMSET_NODE_PARAMS *p, CUcontext c) { FC_API(1, fc_add_memset(n, g, d, nd, p)); }
CUresult cuGraphAddEventRecordNode(CUgraphNode *n, CUgraph g, const CUgraphNode *d, size_t nd, CUevent e) { FC_API(1, fc_add_event(n, g, d, nd, e, CU_GRAPH_NODE_TYPE_EVENT_RECORD)); }
CUresult cuGraphAddEventWaitNode(CUgraphNode *n, CUgraph g, const CUgraphNode *d, size_t nd, CUevent e) { FC_API(1, fc_add_event(n, g, d, nd, e, CU_GRAPH_NODE_TYPE_WAIT_EVENT)); }

static CUresult fc_add_empty(CUgraphNode *n, CUgraph g, const CUgraphNode *d, size_t nd)
{
    fc_node proto = {.type = CU_GRAPH_NODE_TYPE_EMPTY};
    return fc_add(n, g, d, nd, &proto);
}
CUresult cuGraphAddEmptyNode(CUgraphNode *n, CUgraph g, const CUgraphNode *d, size_t nd) { FC_API(1, fc_add_empty(n, g, d, nd)); }

static CUresult fc_add_node(CUgraphNode *n, CUgraph g, const CUgraphNode *d, const CUgraphEdgeData *ed, size_t nd, CUgraphNodeParams *p)
{
    if (!p) return CUDA_ERROR_INVALID_VALUE;
    if (ed)
        for (size_t i = 0; i < nd; i++)
            if (ed[i].type != CU_GRAPH_DEPENDENCY_TYPE_DEFAULT || ed[i].from_port || ed[i].to_port) return CUDA_ERROR_NOT_SUPPORTED;
    switch (p->type) {
    case CU_GRAPH_NODE_TYPE_KERNEL: {
        const CUDA_KERNEL_NODE_PARAMS_v3 *k = &p->kernel;
        CUDA_KERNEL_NODE_PARAMS kp = {k->func, k->gridDimX, k->gridDimY, k->gridDimZ, k->blockDimX, k->blockDimY,
                                      k->blockDimZ, k->sharedMemBytes, k->kernelParams, k->extra, k->kern, k->ctx};
        return fc_add_kernel(n, g, d, nd, &kp);
    }
    case CU_GRAPH_NODE_TYPE_MEMCPY: return fc_add_memcpy(n, g, d, nd, &p->memcpy.copyParams);
    case CU_GRAPH_NODE_TYPE_MEMSET: {
        const CUDA_MEMSET_NODE_PARAMS_v2 *m = &p->memset;
        CUDA_MEMSET_NODE_PARAMS mp = {m->dst, m->pitch, m->value, m->elementSize, m->width, m->height};
        return fc_add_memset(n, g, d, nd, &mp);
    }
    case CU_GRAPH_NODE_TYPE_EVENT_RECORD: return fc_add_event(n, g, d, nd, p->eventRecord.event, p->type);
    case CU_GRAPH_NODE_TYPE_WAIT_EVENT: return fc_add_event(n, g, d, nd, p->eventWait.event, p->type);
    case CU_GRAPH_NODE_TYPE_EMPTY: return fc_add_empty(n, g, d, nd);
    default: return CUDA_ERROR_NOT_SUPPORTED;
    }
}
CUresult cuGraphAddNode_v2(CUgraphNode *n, CUgraph g, const CUgraphNode *d, const CUgraphEdgeData *ed, size_t nd, CUgraphNodeParams *p)
{
    FC_API(1, fc_add_node(n, g, d, ed, nd, p));
}

static CUresult fc_graph_create(CUgraph *out, unsigned flags)
{
    if (!out || flags) return CUDA_ERROR_INVALID_VALUE;
    fc_graph *g = fc_obj_new(sizeof(*g), FC_OBJ_GRAPH);
    if (!g) return CUDA_ERROR_OUT_OF_MEMORY;
    g->ctx = fc_cur_ctx();
    *out = (CUgraph)g;
    return CUDA_SUCCESS;
}
CUresult cuGraphCreate(CUgraph *g, unsigned int flags) { FC_API(1, fc_graph_create(g, flags)); }

static void fc_graph_release(fc_graph *g)
{
    for (size_t i = 0; i < g->n; i++) fc_node_release(g->nodes[i]);
    free(g->nodes);
    g->nodes = NULL, g->n = 0;
    g->hdr.dead = 1;
}

static CUresult fc_graph_destroy(CUgraph h, int kind)
{
    if (!fc_obj_valid(h, kind)) return CUDA_ERROR_INVALID_VALUE;
    if (kind == FC_OBJ_EXEC) { /* refused beside a global capture; a graph's destruction is not (the GPU's table) */
        CUresult r = fc_capture_unsafe_check();
        if (r) return r;
    }
    fc_graph_release((fc_graph *)h); /* queued ops own copies: pending launches are unaffected */
    return CUDA_SUCCESS;
}
CUresult cuGraphDestroy(CUgraph g) { FC_API(1, fc_graph_destroy(g, FC_OBJ_GRAPH)); }
CUresult cuGraphExecDestroy(CUgraphExec g) { FC_API(1, fc_graph_destroy((CUgraph)g, FC_OBJ_EXEC)); }

static CUresult fc_graph_nodes(CUgraph h, CUgraphNode *nodes, size_t *num)
{
    fc_graph *g = (fc_graph *)h;
    if (!fc_graph_valid(g) || !num) return CUDA_ERROR_INVALID_VALUE;
    if (nodes) {
        for (size_t i = 0; i < *num; i++) nodes[i] = i < g->n ? (CUgraphNode)g->nodes[i] : NULL;
        if (*num > g->n) *num = g->n;
    } else {
        *num = g->n;
    }
    return CUDA_SUCCESS;
}
CUresult cuGraphGetNodes(CUgraph g, CUgraphNode *n, size_t *num) { FC_API(1, fc_graph_nodes(g, n, num)); }

static CUresult fc_node_type(CUgraphNode h, CUgraphNodeType *t)
{
    if (!fc_obj_valid(h, FC_OBJ_NODE) || !t) return CUDA_ERROR_INVALID_VALUE;
    *t = ((fc_node *)h)->type;
    return CUDA_SUCCESS;
}
CUresult cuGraphNodeGetType(CUgraphNode n, CUgraphNodeType *t) { FC_API(1, fc_node_type(n, t)); }

static fc_node *fc_kernel_node(CUgraphNode h)
{
    fc_node *n = (fc_node *)h;
    return fc_obj_valid(n, FC_OBJ_NODE) && n->type == CU_GRAPH_NODE_TYPE_KERNEL ? n : NULL;
}

static CUresult fc_knode_get(CUgraphNode h, CUDA_KERNEL_NODE_PARAMS *p)
{
    fc_node *n = fc_kernel_node(h);
    if (!n || !p) return CUDA_ERROR_INVALID_VALUE;
    memset(p, 0, sizeof(*p));
    p->func = (CUfunction)n->kl.f;
    if (n->kl.f->hdr.kind == FC_OBJ_KERN) p->kern = (CUkernel)n->kl.f;
    p->gridDimX = n->kl.dims.gx, p->gridDimY = n->kl.dims.gy, p->gridDimZ = n->kl.dims.gz;
    p->blockDimX = n->kl.dims.bx, p->blockDimY = n->kl.dims.by, p->blockDimZ = n->kl.dims.bz;
    p->sharedMemBytes = n->kl.dims.smem;
    p->kernelParams = n->kparams;
    p->ctx = (CUcontext)n->g->ctx;
    return CUDA_SUCCESS;
}
CUresult cuGraphKernelNodeGetParams_v2(CUgraphNode n, CUDA_KERNEL_NODE_PARAMS *p) { FC_API(1, fc_knode_get(n, p)); }

static CUresult fc_knode_replace(fc_node *n, const CUDA_KERNEL_NODE_PARAMS *p)
{
    fc_launch kl;
    CUresult r = fc_kernel_params(p, &kl);
    if (r) return r;
    fc_launch_free(&n->kl);
    n->kl = kl;
    return fc_kparams_build(n) ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_SUCCESS;
}

static CUresult fc_knode_set(CUgraphNode h, const CUDA_KERNEL_NODE_PARAMS *p)
{
    fc_node *n = fc_kernel_node(h);
    return n ? fc_knode_replace(n, p) : CUDA_ERROR_INVALID_VALUE;
}
CUresult cuGraphKernelNodeSetParams_v2(CUgraphNode n, const CUDA_KERNEL_NODE_PARAMS *p) { FC_API(1, fc_knode_set(n, p)); }

static CUresult fc_knode_attr(CUgraphNode h, CUkernelNodeAttrID a, const CUkernelNodeAttrValue *in, CUkernelNodeAttrValue *out)
{
    if (!fc_kernel_node(h) || (!in && !out)) return CUDA_ERROR_INVALID_VALUE;
    if (a == CU_LAUNCH_ATTRIBUTE_DEVICE_UPDATABLE_KERNEL_NODE) return CUDA_ERROR_NOT_SUPPORTED;
    if ((unsigned)a > CU_LAUNCH_ATTRIBUTE_NVLINK_UTIL_CENTRIC_SCHEDULING) return CUDA_ERROR_INVALID_VALUE;
    if (out) memset(out, 0, sizeof(*out));
    return CUDA_SUCCESS;
}
CUresult cuGraphKernelNodeSetAttribute(CUgraphNode n, CUkernelNodeAttrID a, const CUkernelNodeAttrValue *v) { FC_API(1, fc_knode_attr(n, a, v, NULL)); }
CUresult cuGraphKernelNodeGetAttribute(CUgraphNode n, CUkernelNodeAttrID a, CUkernelNodeAttrValue *v) { FC_API(1, fc_knode_attr(n, a, NULL, v)); }
CUresult cuGraphDebugDotPrint(CUgraph g, const char *path, unsigned int flags) { FC_API(1, CUDA_ERROR_NOT_SUPPORTED); }

/* ---- executable graphs ---- */
static CUresult fc_instantiate(CUgraphExec *out, CUgraph h, unsigned long long flags)
{
    fc_graph *g = (fc_graph *)h;
    if (!out || !fc_graph_valid(g)) return CUDA_ERROR_INVALID_VALUE;
    if (flags & ~0xFull) return CUDA_ERROR_INVALID_VALUE;
    CUresult r = fc_capture_unsafe_check(); /* refused beside a global capture (the GPU's table) */
    if (r) return r;
    fc_graph *x = fc_obj_new(sizeof(*x), FC_OBJ_EXEC);
    if (!x) return CUDA_ERROR_OUT_OF_MEMORY;
    x->is_exec = 1, x->ctx = g->ctx;
    for (size_t i = 0; i < g->n; i++) {
        fc_node *o = g->nodes[i];
        fc_node *n = fc_node_new(x, o->type, NULL, 0);
        if (!n) return fc_graph_release(x), CUDA_ERROR_OUT_OF_MEMORY;
        n->deps = malloc((o->ndeps + 1) * sizeof(*n->deps));
        if (!n->deps) return fc_graph_release(x), CUDA_ERROR_OUT_OF_MEMORY;
        for (size_t j = 0; j < o->ndeps; j++) n->deps[j] = x->nodes[o->deps[j]->idx];
        n->ndeps = o->ndeps, n->orig = o;
        n->cp = o->cp, n->ms = o->ms, n->msp = o->msp, n->ev = o->ev, n->hostfn = o->hostfn, n->ud = o->ud;
        if (o->type == CU_GRAPH_NODE_TYPE_KERNEL && (fc_launch_dup(&o->kl, &n->kl) || fc_kparams_build(n)))
            return fc_graph_release(x), CUDA_ERROR_OUT_OF_MEMORY;
    }
    *out = (CUgraphExec)x;
    return CUDA_SUCCESS;
}
CUresult cuGraphInstantiateWithFlags(CUgraphExec *e, CUgraph g, unsigned long long f) { fc_spend_instantiate(); FC_API(1, fc_instantiate(e, g, f)); }

static CUresult fc_instantiate_params(CUgraphExec *e, CUgraph g, CUDA_GRAPH_INSTANTIATE_PARAMS *p)
{
    if (!p) return CUDA_ERROR_INVALID_VALUE;
    CUresult r = fc_instantiate(e, g, p->flags);
    p->hErrNode_out = NULL;
    p->result_out = r ? CUDA_GRAPH_INSTANTIATE_ERROR : CUDA_GRAPH_INSTANTIATE_SUCCESS;
    return r;
}
CUresult cuGraphInstantiateWithParams(CUgraphExec *e, CUgraph g, CUDA_GRAPH_INSTANTIATE_PARAMS *p) { FC_API(1, fc_instantiate_params(e, g, p)); }
CUresult cuGraphInstantiateWithParams_ptsz(CUgraphExec *e, CUgraph g, CUDA_GRAPH_INSTANTIATE_PARAMS *p) { FC_API(1, fc_instantiate_params(e, g, p)); }

static fc_node *fc_exec_node(CUgraphExec hx, CUgraphNode hn, CUgraphNodeType t)
{
    fc_graph *x = (fc_graph *)hx;
    if (!fc_obj_valid(x, FC_OBJ_EXEC) || !fc_obj_valid(hn, FC_OBJ_NODE)) return NULL;
    for (size_t i = 0; i < x->n; i++)
        if (x->nodes[i]->orig == (fc_node *)hn) return x->nodes[i]->type == t ? x->nodes[i] : NULL;
    return NULL;
}

static CUresult fc_exec_kset(CUgraphExec x, CUgraphNode hn, const CUDA_KERNEL_NODE_PARAMS *p)
{
    fc_node *n = fc_exec_node(x, hn, CU_GRAPH_NODE_TYPE_KERNEL);
    return n ? fc_knode_replace(n, p) : CUDA_ERROR_INVALID_VALUE;
}
CUresult cuGraphExecKernelNodeSetParams_v2(CUgraphExec x, CUgraphNode n, const CUDA_KERNEL_NODE_PARAMS *p) { FC_API(1, fc_exec_kset(x, n, p)); }

static CUresult fc_exec_cset(CUgraphExec x, CUgraphNode hn, const CUDA_MEMCPY3D *p)
{
    fc_node *n = fc_exec_node(x, hn, CU_GRAPH_NODE_TYPE_MEMCPY);
    if (!n) return CUDA_ERROR_INVALID_VALUE;
    fc_copy c;
    CUresult r = fc_copy_from3d(p, &c);
    if (!r) n->cp = c;
    return r;
}
CUresult cuGraphExecMemcpyNodeSetParams(CUgraphExec x, CUgraphNode n, const CUDA_MEMCPY3D *p, CUcontext c) { FC_API(1, fc_exec_cset(x, n, p)); }

static CUresult fc_exec_mset(CUgraphExec x, CUgraphNode hn, const CUDA_MEMSET_NODE_PARAMS *p)
{
    fc_node *n = fc_exec_node(x, hn, CU_GRAPH_NODE_TYPE_MEMSET);
    if (!n) return CUDA_ERROR_INVALID_VALUE;
    fc_memset m;
    CUresult r = fc_memset_params(p, &m);
    if (!r) n->ms = m, n->msp = *p;
    return r;
}
CUresult cuGraphExecMemsetNodeSetParams(CUgraphExec x, CUgraphNode n, const CUDA_MEMSET_NODE_PARAMS *p, CUcontext c) { FC_API(1, fc_exec_mset(x, n, p)); }

static CUresult fc_exec_update(CUgraphExec hx, CUgraph hg, CUgraphExecUpdateResultInfo *info)
{
    fc_graph *x = (fc_graph *)hx, *g = (fc_graph *)hg;
    if (!fc_obj_valid(x, FC_OBJ_EXEC) || !fc_graph_valid(g) || !info) return CUDA_ERROR_INVALID_VALUE;
    memset(info, 0, sizeof(*info));
    CUgraphExecUpdateResult res = CU_GRAPH_EXEC_UPDATE_SUCCESS;
    size_t bad = 0;
    if (x->n != g->n) res = CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED;
    for (size_t i = 0; !res && i < g->n; i++) {
        fc_node *a = x->nodes[i], *b = g->nodes[i];
        if (a->type != b->type) res = CU_GRAPH_EXEC_UPDATE_ERROR_NODE_TYPE_CHANGED;
        else if (a->ndeps != b->ndeps) res = CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED;
        for (size_t j = 0; !res && j < a->ndeps; j++)
            if (a->deps[j]->idx != b->deps[j]->idx) res = CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED;
        bad = i;
    }
    if (res) {
        info->result = res;
        if (bad < g->n) info->errorNode = (CUgraphNode)g->nodes[bad];
        if (bad < x->n) info->errorFromNode = (CUgraphNode)x->nodes[bad]->orig;
        return CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE;
    }
    for (size_t i = 0; i < g->n; i++) {
        fc_node *a = x->nodes[i], *b = g->nodes[i];
        a->cp = b->cp, a->ms = b->ms, a->msp = b->msp, a->ev = b->ev, a->hostfn = b->hostfn, a->ud = b->ud;
        if (a->type == CU_GRAPH_NODE_TYPE_KERNEL) {
            fc_launch kl;
            if (fc_launch_dup(&b->kl, &kl)) return CUDA_ERROR_OUT_OF_MEMORY;
            fc_launch_free(&a->kl);
            a->kl = kl;
            if (fc_kparams_build(a)) return CUDA_ERROR_OUT_OF_MEMORY;
        }
    }
    info->result = CU_GRAPH_EXEC_UPDATE_SUCCESS;
    return CUDA_SUCCESS;
}
CUresult cuGraphExecUpdate_v2(CUgraphExec x, CUgraph g, CUgraphExecUpdateResultInfo *i) { FC_API(1, fc_exec_update(x, g, i)); }

static CUresult fc_graph_upload(CUgraphExec x, CUstream hs, int ptds)
{
    fc_stream *s;
    if (!fc_obj_valid(x, FC_OBJ_EXEC)) return CUDA_ERROR_INVALID_VALUE;
    return fc_stream_resolve(hs, ptds, &s);
}
CUresult cuGraphUpload(CUgraphExec x, CUstream s) { FC_API(1, fc_graph_upload(x, s, FC_LEGACY)); }
CUresult cuGraphUpload_ptsz(CUgraphExec x, CUstream s) { FC_API(1, fc_graph_upload(x, s, FC_PTDS)); }

static CUresult fc_node_enqueue(fc_stream *s, fc_node *n)
{
    static const int kinds[] = {[CU_GRAPH_NODE_TYPE_KERNEL] = FC_OP_KERNEL, [CU_GRAPH_NODE_TYPE_MEMCPY] = FC_OP_COPY,
                                [CU_GRAPH_NODE_TYPE_MEMSET] = FC_OP_MEMSET, [CU_GRAPH_NODE_TYPE_HOST] = FC_OP_HOSTFN,
                                [CU_GRAPH_NODE_TYPE_EVENT_RECORD] = FC_OP_EVREC};
    if (n->type == CU_GRAPH_NODE_TYPE_EMPTY) return CUDA_SUCCESS;
    if (n->type == CU_GRAPH_NODE_TYPE_KERNEL && (n->kl.f->hdr.dead || n->kl.f->gen != n->kl.gen)) {
        /* A driver's exec keeps the code it was made with, or fails: never the right one. */
        fprintf(stderr, "fakecuda: a graph launched a kernel node whose function (%p) was unloaded since the node "
                        "was made%s\n", (void *)n->kl.f, n->kl.f->hdr.dead ? "" : ", its handle now another kernel's");
        abort();
    }
    fc_op *op = fc_op_new(n->type < sizeof(kinds) / sizeof(kinds[0]) ? kinds[n->type] : FC_OP_NOP);
    if (!op) return CUDA_ERROR_OUT_OF_MEMORY;
    op->from_graph = 1;
    op->cp = n->cp, op->ms = n->ms, op->ev = n->ev, op->hostfn = n->hostfn, op->ud = n->ud;
    if (n->type == CU_GRAPH_NODE_TYPE_KERNEL && fc_launch_dup(&n->kl, &op->kl)) return fc_op_free(op), CUDA_ERROR_OUT_OF_MEMORY;
    if (n->type == CU_GRAPH_NODE_TYPE_WAIT_EVENT && n->ev->recorded && !fc_event_done(n->ev)) {
        fc_dep d = {n->ev->rs, n->ev->rseq};
        if (fc_vec_push((void **)&op->deps, &op->ndeps, sizeof(d), &d)) return fc_op_free(op), CUDA_ERROR_OUT_OF_MEMORY;
    }
    uint64_t seq;
    CUresult r = fc_submit(s, op, &seq);
    if (!r && n->type == CU_GRAPH_NODE_TYPE_EVENT_RECORD)
        n->ev->recorded = 1, n->ev->rs = s, n->ev->rseq = seq, n->ev->cap = NULL;
    return r;
}

static CUresult fc_graph_launch(CUgraphExec hx, CUstream hs, int ptds)
{
    fc_graph *x = (fc_graph *)hx;
    if (!fc_obj_valid(x, FC_OBJ_EXEC)) return CUDA_ERROR_INVALID_VALUE;
    fc_stream *s;
    CUresult r = fc_stream_resolve(hs, ptds, &s);
    if (r) return r;
    if (s->cap) return CUDA_ERROR_NOT_SUPPORTED; /* no child-graph nodes in the fake */
    if ((r = fc_legacy_capture_check(s, 1))) return r;
    fc_spend(fc_g.graph_ns); /* (before CUPTI sees it: a window that opens meanwhile traces it) */
    fc_cupti_graph(x);
    /* Kahn's algorithm with a random pick among ready nodes: one of the DAG's valid orders. */
    size_t n = x->n, nready = 0, *indeg = calloc(n + 1, sizeof(size_t)), *ready = calloc(n + 1, sizeof(size_t));
    if (!indeg || !ready) return free(indeg), free(ready), CUDA_ERROR_OUT_OF_MEMORY;
    for (size_t i = 0; i < n; i++) indeg[i] = x->nodes[i]->ndeps;
    for (size_t i = 0; i < n; i++)
        if (!indeg[i]) ready[nready++] = i;
    fc_g.stats.graphs_launched++;
    fc_g.dev_graph_first = 1; /* the modeled device starts the graph FAKECUDA_GRAPH_DEVICE_NS late */
    while (nready && !r) {
        size_t pick = fc_rand() % nready, i = ready[pick];
        ready[pick] = ready[--nready];
        r = fc_node_enqueue(s, x->nodes[i]);
        for (size_t j = 0; j < n; j++)
            for (size_t k = 0; k < x->nodes[j]->ndeps; k++)
                if (x->nodes[j]->deps[k] == x->nodes[i] && --indeg[j] == 0) ready[nready++] = j;
    }
    fc_g.dev_graph_first = 0; /* (a graph of empty nodes only) */
    free(indeg);
    free(ready);
    return r;
}
CUresult cuGraphLaunch(CUgraphExec x, CUstream s) { FC_TRACED(cuGraphLaunch, 1, fc_graph_launch(x, s, FC_LEGACY)); }
CUresult cuGraphLaunch_ptsz(CUgraphExec x, CUstream s) { FC_TRACED(cuGraphLaunch_ptsz, 1, fc_graph_launch(x, s, FC_PTDS)); }

/* ---- stream capture ---- */
void fc_capture_invalidate(fc_capture *c) { c->invalidated = 1; }

/* A potentially unsafe call (an allocation, a free, an event query or sync) where the calling thread's mode
 * forbids it: refused, and the captures that forbid it are invalidated, as CUDA does (their
 * cuStreamEndCapture fails). */
CUresult fc_capture_unsafe_check(void)
{
    CUresult r = CUDA_SUCCESS;
    if (fc_tl_capmode == CU_STREAM_CAPTURE_MODE_RELAXED) return r;
    for (size_t i = 0; i < fc_g.ncaps; i++) {
        fc_capture *c = fc_g.caps[i];
        if (!c->active || c->mode == CU_STREAM_CAPTURE_MODE_RELAXED) continue;
        if ((!c->unseen && pthread_equal(c->thread, pthread_self())) ||
            (c->mode == CU_STREAM_CAPTURE_MODE_GLOBAL && fc_tl_capmode == CU_STREAM_CAPTURE_MODE_GLOBAL)) {
            fc_capture_invalidate(c);
            r = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
        }
    }
    return r;
}

/* fakecuda_unseen_capture's capture (fc_g.mu held to touch it) */
static fc_capture unseen = {.mode = CU_STREAM_CAPTURE_MODE_GLOBAL, .unseen = 1};
int fakecuda_unseen_capture(int on)
{
    (void)fc_enter(-1);
    int was = unseen.active && unseen.invalidated;
    if (on && !unseen.active) {
        unseen.active = 1, unseen.invalidated = 0;
        if (fc_vec_push((void **)&fc_g.caps, &fc_g.ncaps, sizeof(fc_capture *), &(fc_capture *){&unseen}))
            unseen.active = 0;
    } else if (!on && unseen.active) {
        unseen.active = 0;
        fc_vec_remove((void **)fc_g.caps, &fc_g.ncaps, &unseen);
    }
    fc_leave();
    return was;
}

static int fc_set_capdeps(fc_node ***dst, size_t *nd, fc_node *const *src, size_t n)
{
    fc_node **p = n ? malloc(n * sizeof(*p)) : NULL;
    if (n && !p) return -1;
    if (n) memcpy(p, src, n * sizeof(*p));
    free(*dst);
    *dst = p, *nd = n;
    return 0;
}

CUresult fc_capture_op(fc_stream *s, fc_op *op)
{
    fc_capture *c = s->cap;
    fc_node proto = {0};
    CUresult r = CUDA_SUCCESS;
    if (c->invalidated) r = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    switch (op->kind) {
    case FC_OP_KERNEL: proto.type = CU_GRAPH_NODE_TYPE_KERNEL, proto.kl = op->kl, op->kl.buf = NULL; break;
    case FC_OP_COPY: proto.type = CU_GRAPH_NODE_TYPE_MEMCPY, proto.cp = op->cp; break;
    case FC_OP_MEMSET:
        proto.type = CU_GRAPH_NODE_TYPE_MEMSET, proto.ms = op->ms;
        proto.msp = (CUDA_MEMSET_NODE_PARAMS){(CUdeviceptr)(uintptr_t)op->ms.dst, op->ms.pitch, op->ms.value, op->ms.esize, op->ms.width, op->ms.height};
        break;
    case FC_OP_HOSTFN: proto.type = CU_GRAPH_NODE_TYPE_HOST, proto.hostfn = op->hostfn, proto.ud = op->ud; break;
    case FC_OP_EVREC: proto.type = CU_GRAPH_NODE_TYPE_EVENT_RECORD, proto.ev = op->ev; break;
    default: r = r ? r : CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    }
    fc_op_free(op);
    if (r) {
        fc_launch_free(&proto.kl);
        return r;
    }
    CUgraphNode n;
    r = fc_add(&n, (CUgraph)c->g, (const CUgraphNode *)s->capdeps, s->ncapdeps, &proto);
    if (!r && fc_set_capdeps(&s->capdeps, &s->ncapdeps, (fc_node *const *)&n, 1)) r = CUDA_ERROR_OUT_OF_MEMORY;
    if (r) fc_capture_invalidate(c);
    return r;
}

CUresult fc_capture_event_record(fc_stream *s, fc_event *e, int external)
{
    if (external) {
        fc_op *op = fc_op_new(FC_OP_EVREC);
        if (!op) return CUDA_ERROR_OUT_OF_MEMORY;
        op->ev = e;
        return fc_capture_op(s, op);
    }
    if (s->cap->invalidated) return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    e->cap = s->cap;
    return fc_set_capdeps(&e->capdeps, &e->ncapdeps, s->capdeps, s->ncapdeps) ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_SUCCESS;
}

CUresult fc_capture_wait_event(fc_stream *s, fc_event *e, int external)
{
    fc_capture *ec = e->cap && e->cap->active ? e->cap : NULL;
    if (!ec) {
        if (external) {
            fc_node proto = {.type = CU_GRAPH_NODE_TYPE_WAIT_EVENT, .ev = e};
            CUgraphNode n;
            CUresult r = fc_add(&n, (CUgraph)s->cap->g, (const CUgraphNode *)s->capdeps, s->ncapdeps, &proto);
            if (!r && fc_set_capdeps(&s->capdeps, &s->ncapdeps, (fc_node *const *)&n, 1)) r = CUDA_ERROR_OUT_OF_MEMORY;
            return r;
        }
        fc_capture_invalidate(s->cap);
        return CUDA_ERROR_STREAM_CAPTURE_ISOLATION;
    }
    if (s->cap && s->cap != ec) {
        fc_capture_invalidate(ec);
        return CUDA_ERROR_STREAM_CAPTURE_MERGE;
    }
    if (!s->cap) { /* fork: the stream joins the capture */
        if (s->legacy) {
            fc_capture_invalidate(ec);
            return CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
        }
        if (fc_vec_push((void **)&ec->streams, &ec->nstreams, sizeof(s), &s)) return CUDA_ERROR_OUT_OF_MEMORY;
        s->cap = ec;
        return fc_set_capdeps(&s->capdeps, &s->ncapdeps, e->capdeps, e->ncapdeps) ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_SUCCESS;
    }
    for (size_t i = 0; i < e->ncapdeps; i++) { /* join: union of dependency sets */
        size_t j = 0;
        while (j < s->ncapdeps && s->capdeps[j] != e->capdeps[i]) j++;
        if (j == s->ncapdeps && fc_vec_push((void **)&s->capdeps, &s->ncapdeps, sizeof(fc_node *), &e->capdeps[i]))
            return CUDA_ERROR_OUT_OF_MEMORY;
    }
    return CUDA_SUCCESS;
}

static CUresult fc_begin_capture(CUstream hs, int ptds, CUgraph hg, const CUgraphNode *deps, size_t nd, CUstreamCaptureMode mode)
{
    fc_stream *s;
    CUresult r = fc_stream_resolve(hs, ptds, &s);
    if (r) return r;
    if (s->legacy || s->perthread) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    if ((unsigned)mode > CU_STREAM_CAPTURE_MODE_RELAXED) return CUDA_ERROR_INVALID_VALUE;
    if (s->cap) return CUDA_ERROR_ILLEGAL_STATE;
    fc_graph *g = (fc_graph *)hg;
    if (hg && (!fc_graph_valid(g) || fc_deps_check(g, deps, nd))) return CUDA_ERROR_INVALID_VALUE;
    fc_capture *c = calloc(1, sizeof(*c));
    if (!c) return CUDA_ERROR_OUT_OF_MEMORY;
    if (!hg) {
        CUgraph made; /* through its own type: writing g through a CUgraph pointer breaks strict aliasing */
        r = fc_graph_create(&made, 0);
        if (r) return free(c), r;
        g = (fc_graph *)made;
        c->owns_graph = 1;
    }
    c->id = ++fc_g.next_capture_id, c->mode = mode, c->thread = pthread_self(), c->origin = s, c->g = g, c->active = 1;
    if (fc_vec_push((void **)&c->streams, &c->nstreams, sizeof(s), &s) ||
        fc_vec_push((void **)&fc_g.caps, &fc_g.ncaps, sizeof(c), &c) ||
        fc_set_capdeps(&s->capdeps, &s->ncapdeps, (fc_node *const *)deps, hg ? nd : 0))
        return CUDA_ERROR_OUT_OF_MEMORY;
    s->cap = c;
    return CUDA_SUCCESS;
}
#undef cuStreamBeginCapture /* the v1 ABI (no mode) is exported too */
CUresult cuStreamBeginCapture(CUstream s) { FC_API(1, fc_begin_capture(s, FC_LEGACY, NULL, NULL, 0, CU_STREAM_CAPTURE_MODE_GLOBAL)); }
CUresult cuStreamBeginCapture_ptsz(CUstream s) { FC_API(1, fc_begin_capture(s, FC_PTDS, NULL, NULL, 0, CU_STREAM_CAPTURE_MODE_GLOBAL)); }
static CUresult fc_begin_capture_v2(CUstream s, CUstreamCaptureMode m)
{
    FC_API_FOR("cuStreamBeginCapture_v2", 1, fc_begin_capture(s, FC_LEGACY, NULL, NULL, 0, m));
}
CUresult cuStreamBeginCapture_v2(CUstream s, CUstreamCaptureMode m)
{
    CUresult r = fc_begin_capture_v2(s, m);
    if (r == CUDA_SUCCESS) fc_capture_began();
    return r;
}
CUresult cuStreamBeginCapture_v2_ptsz(CUstream s, CUstreamCaptureMode m) { FC_API(1, fc_begin_capture(s, FC_PTDS, NULL, NULL, 0, m)); }
CUresult cuStreamBeginCaptureToGraph(CUstream s, CUgraph g, const CUgraphNode *d, const CUgraphEdgeData *ed, size_t nd, CUstreamCaptureMode m)
{
    FC_API(1, !g ? CUDA_ERROR_INVALID_VALUE : fc_begin_capture(s, FC_LEGACY, g, d, nd, m));
}
CUresult cuStreamBeginCaptureToGraph_ptsz(CUstream s, CUgraph g, const CUgraphNode *d, const CUgraphEdgeData *ed, size_t nd, CUstreamCaptureMode m)
{
    FC_API(1, !g ? CUDA_ERROR_INVALID_VALUE : fc_begin_capture(s, FC_PTDS, g, d, nd, m));
}

/* Every forked stream's last work must be an ancestor of the origin's last work. */
static int fc_capture_joined(fc_capture *c)
{
    fc_graph *g = c->g;
    char *mark = calloc(g->n + 1, 1);
    fc_node **stack = malloc((g->n + 1) * sizeof(*stack));
    int ok = mark && stack;
    size_t sp = 0;
    for (size_t i = 0; ok && i < c->origin->ncapdeps; i++) stack[sp++] = c->origin->capdeps[i], mark[c->origin->capdeps[i]->idx] = 1;
    while (ok && sp) {
        fc_node *n = stack[--sp];
        for (size_t j = 0; j < n->ndeps; j++)
            if (!mark[n->deps[j]->idx]) mark[n->deps[j]->idx] = 1, stack[sp++] = n->deps[j];
    }
    for (size_t i = 0; ok && i < c->nstreams; i++)
        for (size_t j = 0; ok && c->streams[i]->cap == c && j < c->streams[i]->ncapdeps; j++)
            if (!mark[c->streams[i]->capdeps[j]->idx]) ok = 0;
    free(mark);
    free(stack);
    return ok;
}

static CUresult fc_end_capture(CUstream hs, int ptds, CUgraph *out)
{
    fc_stream *s;
    CUresult r = fc_stream_resolve(hs, ptds, &s);
    if (r) return r;
    if (!out) return CUDA_ERROR_INVALID_VALUE;
    fc_capture *c = s->cap;
    if (!c) return CUDA_ERROR_ILLEGAL_STATE;
    if (c->origin != s) {
        fc_capture_invalidate(c);
        return CUDA_ERROR_STREAM_CAPTURE_UNMATCHED;
    }
    if (c->mode != CU_STREAM_CAPTURE_MODE_RELAXED && !pthread_equal(c->thread, pthread_self()))
        return CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD;
    if (c->invalidated) r = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    else if (!fc_capture_joined(c)) r = CUDA_ERROR_STREAM_CAPTURE_UNJOINED;
    for (size_t i = 0; i < c->nstreams; i++)
        if (c->streams[i]->cap == c) {
            c->streams[i]->cap = NULL;
            fc_set_capdeps(&c->streams[i]->capdeps, &c->streams[i]->ncapdeps, NULL, 0);
        }
    c->active = 0;
    /* Only active captures are looked at (every legacy-stream submission walks them): an ended one
     * leaves the list, and stays allocated for the events recorded in it (their cap, now inactive). */
    fc_vec_remove((void **)fc_g.caps, &fc_g.ncaps, c);
    (void)fc_vec_push((void **)&fc_g.ended_caps, &fc_g.nended_caps, sizeof(c), &c); /* (unlisted if no memory) */
    if (r) {
        if (c->owns_graph) fc_graph_release(c->g);
        *out = NULL;
        return r;
    }
    *out = (CUgraph)c->g;
    return CUDA_SUCCESS;
}
CUresult cuStreamEndCapture(CUstream s, CUgraph *g) { FC_API(1, fc_end_capture(s, FC_LEGACY, g)); }
CUresult cuStreamEndCapture_ptsz(CUstream s, CUgraph *g) { FC_API(1, fc_end_capture(s, FC_PTDS, g)); }

static CUresult fc_capture_info(CUstream hs, int ptds, CUstreamCaptureStatus *st, cuuint64_t *id, CUgraph *g,
                                const CUgraphNode **deps, const CUgraphEdgeData **edges, size_t *nd)
{
    fc_stream *s;
    CUresult r = fc_stream_resolve(hs, ptds, &s);
    if (!r) r = fc_legacy_capture_check(s, 0);
    if (r) return r;
    if (!st) return CUDA_ERROR_INVALID_VALUE;
    fc_capture *c = s->cap;
    *st = !c ? CU_STREAM_CAPTURE_STATUS_NONE : c->invalidated ? CU_STREAM_CAPTURE_STATUS_INVALIDATED : CU_STREAM_CAPTURE_STATUS_ACTIVE;
    if (id && c) *id = c->id;
    if (g) *g = c ? (CUgraph)c->g : NULL;
    if (deps) *deps = c ? (const CUgraphNode *)s->capdeps : NULL;
    if (edges) *edges = NULL; /* all edges are default edges */
    if (nd) *nd = c ? s->ncapdeps : 0;
    return CUDA_SUCCESS;
}
CUresult cuStreamIsCapturing(CUstream s, CUstreamCaptureStatus *st) { FC_API(1, fc_capture_info(s, FC_LEGACY, st, NULL, NULL, NULL, NULL, NULL)); }
CUresult cuStreamIsCapturing_ptsz(CUstream s, CUstreamCaptureStatus *st) { FC_API(1, fc_capture_info(s, FC_PTDS, st, NULL, NULL, NULL, NULL, NULL)); }
CUresult cuStreamGetCaptureInfo_v2(CUstream s, CUstreamCaptureStatus *st, cuuint64_t *id, CUgraph *g, const CUgraphNode **d, size_t *n)
{
    FC_API(1, fc_capture_info(s, FC_LEGACY, st, id, g, d, NULL, n));
}
CUresult cuStreamGetCaptureInfo_v2_ptsz(CUstream s, CUstreamCaptureStatus *st, cuuint64_t *id, CUgraph *g, const CUgraphNode **d, size_t *n)
{
    FC_API(1, fc_capture_info(s, FC_PTDS, st, id, g, d, NULL, n));
}
CUresult cuStreamGetCaptureInfo_v3(CUstream s, CUstreamCaptureStatus *st, cuuint64_t *id, CUgraph *g, const CUgraphNode **d, const CUgraphEdgeData **e, size_t *n)
{
    FC_API(1, fc_capture_info(s, FC_LEGACY, st, id, g, d, e, n));
}
CUresult cuStreamGetCaptureInfo_v3_ptsz(CUstream s, CUstreamCaptureStatus *st, cuuint64_t *id, CUgraph *g, const CUgraphNode **d, const CUgraphEdgeData **e, size_t *n)
{
    FC_API(1, fc_capture_info(s, FC_PTDS, st, id, g, d, e, n));
}

static CUresult fc_exchange_mode(CUstreamCaptureMode *m)
{
    if (!m || (unsigned)*m > CU_STREAM_CAPTURE_MODE_RELAXED) return CUDA_ERROR_INVALID_VALUE;
    CUstreamCaptureMode old = fc_tl_capmode;
    fc_tl_capmode = *m;
    *m = old;
    return CUDA_SUCCESS;
}
CUresult cuThreadExchangeStreamCaptureMode(CUstreamCaptureMode *m) { FC_API(0, fc_exchange_mode(m)); }
