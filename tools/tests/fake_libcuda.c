/* fake_libcuda.c: the few driver entry points the CLI's GPU probe calls, answering "one GPU", so that
 * the bench and demo logic (interleaving, output comparison, failure reports) is tested on a CPU.
 * Built as libcuda.so.1 in its own directory; only the CLI tests put it on LD_LIBRARY_PATH. */
#include <string.h>

int cuInit(unsigned flags)
{
    (void)flags;
    return 0;
}

int cuDriverGetVersion(int *v)
{
    *v = 13000;
    return 0;
}

int cuDeviceGetCount(int *n)
{
    *n = 1;
    return 0;
}

int cuDeviceGet(int *dev, int ordinal)
{
    *dev = ordinal;
    return 0;
}

int cuDeviceGetName(char *name, int len, int dev)
{
    (void)dev;
    strncpy(name, "Fake GPU for the CLI tests", (size_t)len);
    name[len - 1] = '\0';
    return 0;
}

int cuDeviceGetAttribute(int *v, int attr, int dev)
{
    (void)dev;
    *v = attr == 75 ? 9 : 0; /* compute capability 9.0 */
    return 0;
}

int cuGetErrorName(int rc, const char **name)
{
    *name = rc == 0 ? "CUDA_SUCCESS" : "CUDA_ERROR_UNKNOWN";
    return 0;
}
