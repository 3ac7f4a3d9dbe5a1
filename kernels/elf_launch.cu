/* elf_launch: the GPU test of the CUPTI coverage guard. Once per iteration it launches a kernel through a
 * cuLaunchKernel found by reading libcuda's ELF dynamic symbol table (no dlsym, no cuGetProcAddress), a
 * route that no hook of the shim sees, between <<<>>> launches that the shim sees and may defer. That
 * kernel reads and rewrites what the launches before it produced, so running it ahead of deferred work
 * changes the checksum: only CUPTI's callbacks can make the shim flush first. Exit 2 if libcuda's
 * cuLaunchKernel cannot be found this way. */
#include <cuda.h>
#include <elf.h>
#include <link.h>

#include "common.h"

#define N 4096
#define THREADS 256

/* Bit 15 of a .gnu.version entry marks a non-default version (sym@VER, not sym@@VER); elf.h names the
 * other values but not this one. */
#define AG_VERSYM_HIDDEN 0x8000

#include "sample_kernels.cuh"

/* The unhooked launch: keeps the value a has at this point of the iteration in c and pushes a through
 * the map mixed with c's old value, so both buffers remember when it ran. */
__global__ void k_fold(float *a, float *c, float r, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    float v = fminf(fmaxf(a[i], 0.0f), 1.0f);
    float w = fminf(fmaxf(0.75f * v + 0.25f * c[i], 0.0f), 1.0f);
    c[i] = v;
    a[i] = r * w * (1.0f - w);
  }
}

typedef CUresult (*launch_fn)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                              unsigned, CUstream, void **, void **);

typedef struct {
  const char *object; /* substring of the loaded object's path */
  const char *symbol;
  void *addr;
  const char *why; /* the reason when addr stays NULL */
  char path[512];
} elf_query;

/* glibc rewrites the dynamic section's addresses to absolute ones when it relocates an object on most
 * architectures and leaves them relative to the load base on others; a relative one is below the base. */
static const void *dyn_ptr(ElfW(Addr) base, ElfW(Addr) v) {
  return (const void *)(v < base ? base + v : v);
}

/* Number of entries of the dynamic symbol table: the dynamic section does not say, the hash tables do.
 * DT_HASH holds it; with DT_GNU_HASH it is one past the last symbol of the longest-indexed chain. */
static size_t dynsym_count(const uint32_t *gnu_hash, const uint32_t *sysv_hash) {
  if (sysv_hash) return sysv_hash[1];
  if (!gnu_hash) return 0;
  uint32_t nbuckets = gnu_hash[0], symoffset = gnu_hash[1], bloom_words = gnu_hash[2];
  const uint32_t *buckets = gnu_hash + 4 + bloom_words * (sizeof(ElfW(Addr)) / sizeof(uint32_t));
  const uint32_t *chain = buckets + nbuckets;
  uint32_t last = 0;
  for (uint32_t b = 0; b < nbuckets; b++)
    if (buckets[b] > last) last = buckets[b];
  if (last < symoffset) return symoffset;
  while (!(chain[last - symoffset] & 1)) last++;
  return (size_t)last + 1;
}

/* dl_iterate_phdr callback: looks q->symbol up in the first loaded object whose path contains q->object,
 * through its in-memory dynamic section, the way the dynamic linker would, minus dlsym. */
static int elf_lookup_cb(struct dl_phdr_info *info, size_t size, void *p) {
  elf_query *q = (elf_query *)p;
  (void)size;
  if (!info->dlpi_name || !strstr(info->dlpi_name, q->object)) return 0;
  snprintf(q->path, sizeof q->path, "%s", info->dlpi_name);
  const ElfW(Addr) base = info->dlpi_addr;
  const ElfW(Dyn) *dyn = NULL;
  for (int i = 0; i < info->dlpi_phnum; i++)
    if (info->dlpi_phdr[i].p_type == PT_DYNAMIC) dyn = (const ElfW(Dyn) *)(base + info->dlpi_phdr[i].p_vaddr);
  if (!dyn) {
    q->why = "the object has no dynamic section";
    return 1;
  }
  const ElfW(Sym) *symtab = NULL;
  const char *strtab = NULL;
  const uint32_t *gnu_hash = NULL, *sysv_hash = NULL;
  const ElfW(Half) *versym = NULL;
  for (; dyn->d_tag != DT_NULL; dyn++) {
    switch (dyn->d_tag) {
    case DT_SYMTAB: symtab = (const ElfW(Sym) *)dyn_ptr(base, dyn->d_un.d_ptr); break;
    case DT_STRTAB: strtab = (const char *)dyn_ptr(base, dyn->d_un.d_ptr); break;
    case DT_GNU_HASH: gnu_hash = (const uint32_t *)dyn_ptr(base, dyn->d_un.d_ptr); break;
    case DT_HASH: sysv_hash = (const uint32_t *)dyn_ptr(base, dyn->d_un.d_ptr); break;
    case DT_VERSYM: versym = (const ElfW(Half) *)dyn_ptr(base, dyn->d_un.d_ptr); break;
    default: break;
    }
  }
  size_t count = dynsym_count(gnu_hash, sysv_hash);
  if (!symtab || !strtab || count == 0) {
    q->why = "the dynamic section has no symbol table, string table or hash table";
    return 1;
  }
  for (size_t i = 1; i < count; i++) {
    const ElfW(Sym) *s = &symtab[i];
    /* st_info packs type and binding alike in 32- and 64-bit ELF. */
    if (s->st_shndx == SHN_UNDEF || ELF64_ST_TYPE(s->st_info) != STT_FUNC) continue;
    if (ELF64_ST_BIND(s->st_info) != STB_GLOBAL && ELF64_ST_BIND(s->st_info) != STB_WEAK) continue;
    if (strcmp(strtab + s->st_name, q->symbol) != 0) continue;
    if (versym && (versym[i] == VER_NDX_LOCAL || (versym[i] & AG_VERSYM_HIDDEN))) continue;
    ElfW(Addr) addr = base + s->st_value;
    /* A sanity check on the arithmetic: the address must lie in one of the object's code segments. */
    for (int k = 0; k < info->dlpi_phnum; k++) {
      const ElfW(Phdr) *ph = &info->dlpi_phdr[k];
      if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X) && addr >= base + ph->p_vaddr &&
          addr < base + ph->p_vaddr + ph->p_memsz)
        q->addr = (void *)addr;
    }
    q->why = q->addr ? NULL : "the symbol's address is outside the object's code";
    return 1;
  }
  q->why = "no defined, default-version FUNC symbol of that name";
  return 1;
}

/* Address of the default version of `symbol` in the loaded object whose path contains `object`. */
static void *elf_lookup(elf_query *q, const char *object, const char *symbol) {
  memset(q, 0, sizeof *q);
  q->object = object;
  q->symbol = symbol;
  q->why = "no loaded object's path contains that name";
  dl_iterate_phdr(elf_lookup_cb, q);
  return q->addr;
}

typedef struct {
  float *a, *c;
  CUfunction fold;
  launch_fn launch;
  long before, after;
} ctx_t;

/* One iteration on the legacy default stream: `before` hooked launches produce a, the unhooked k_fold
 * reads and rewrites a and c, `after` hooked launches consume both. */
static void enqueue(ctx_t *c) {
  const int grid = ag_blocks(N, THREADS);
  for (long k = 0; k < c->before; k++) {
    if (k % 2 == 0)
      k_logistic<<<grid, THREADS>>>(c->a, c->a, 3.8f + 0.01f * (float)(k % 16), N);
    else
      k_axpb<<<grid, THREADS>>>(c->a, c->a, 0.95f, 0.05f * (float)(k % 4) / 4.0f, N);
  }
  CK_LAUNCH();

  float *a = c->a, *cc = c->c, r = 3.97f;
  int n = N;
  void *params[] = {&a, &cc, &r, &n};
  CUresult res = c->launch(c->fold, (unsigned)grid, 1, 1, THREADS, 1, 1, 0, NULL, params, NULL);
  if (res != CUDA_SUCCESS) {
    fprintf(stderr, "elf_launch: cuLaunchKernel (resolved from the ELF symbol table) failed: %d\n", (int)res);
    exit(1);
  }

  for (long k = 0; k < c->after; k++) {
    if (k % 2 == 0)
      k_mix<<<grid, THREADS>>>(c->a, c->a, c->c, 0.1f + 0.05f * (float)(k % 4), N);
    else
      k_logistic<<<grid, THREADS>>>(c->a, c->a, 3.9f + 0.01f * (float)(k % 8), N);
  }
  CK_LAUNCH();
}

int main(int argc, char **argv) {
  ag_args args;
  /* 3 + 1 + 5: the shim's chunks hold 4 or 8 operations at first, so no chunk ends right before the
   * unhooked launch and, without the guard, it would overtake held-back work. */
  long before = 3, after = 5;
  ag_opt opts[] = {{"--before", 'i', &before}, {"--after", 'i', &after}};
  ag_parse(argc, argv, &args, 300, opts, 2);
  ag_graph_unsupported(&args);
  if (before < 1 || after < 1) {
    fprintf(stderr, "--before and --after must be >= 1\n");
    return 1;
  }

  /* The runtime opens libcuda.so.1 when it initializes; only then is there a libcuda to read. */
  CK(cudaFree(0));
  elf_query q;
  ctx_t c;
  c.launch = (launch_fn)elf_lookup(&q, "libcuda.so", "cuLaunchKernel");
  if (!c.launch) {
    fprintf(stderr, "elf_launch: cannot find cuLaunchKernel in the dynamic symbol table of %s: %s\n",
            q.path[0] ? q.path : "libcuda.so (not loaded)", q.why);
    return 2;
  }
  cudaFunction_t fold;
  CK(cudaGetFuncBySymbol(&fold, (const void *)k_fold));
  c.fold = (CUfunction)fold;
  c.before = before;
  c.after = after;

  static float h[N];
  CK(cudaMalloc(&c.a, N * sizeof(float)));
  CK(cudaMalloc(&c.c, N * sizeof(float)));
  ag_fill_uniform(h, N, args.seed, 0.0f, 1.0f);
  CK(cudaMemcpy(c.a, h, sizeof h, cudaMemcpyHostToDevice));
  ag_fill_uniform(h, N, args.seed + 1, 0.0f, 1.0f);
  CK(cudaMemcpy(c.c, h, sizeof h, cudaMemcpyHostToDevice));

  CK(cudaDeviceSynchronize());
  double t0 = ag_now_ms();
  for (long it = 0; it < args.iters; it++) {
    ag_loop_mark(it, args.iters);
    enqueue(&c);
    CK(cudaStreamSynchronize(0));
  }
  CK(cudaDeviceSynchronize());
  ag_report_loop(ag_now_ms() - t0);

  CK(cudaMemcpy(h, c.a, sizeof h, cudaMemcpyDeviceToHost));
  printf("sample: elf_launch\niters: %ld before: %ld after: %ld\na[0]: %a a[%d]: %a\n", args.iters, before,
         after, (double)h[0], N - 1, (double)h[N - 1]);
  uint64_t sum = ag_fnv1a(AG_FNV_INIT, h, sizeof h);
  sum = ag_hash_device(sum, c.c, sizeof h);
  ag_print_checksum(sum);
  CK(cudaFree(c.a));
  CK(cudaFree(c.c));
  return 0;
}
