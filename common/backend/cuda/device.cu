// common/backend/cuda/device.cu: CUDA device discovery for the backend (device count, name, memory).
// Not here: kernels (one per file beside this one).
#include <cuda_runtime.h>
#include <stdio.h>

#include "backend/cuda/device.h"

extern "C" int cuda_device_count(void) {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    return e == cudaSuccess ? n : 0;  // no driver / no device: the CPU path is used
}

extern "C" int cuda_device_describe(int dev, char *buf, size_t len) {
    cudaDeviceProp p;
    cudaError_t e = cudaGetDeviceProperties(&p, dev);
    if (e != cudaSuccess) return snprintf(buf, len, "cuda device %d: %s", dev, cudaGetErrorString(e)), -1;
    snprintf(buf, len, "%s (sm_%d%d, %.1f GiB)", p.name, p.major, p.minor, p.totalGlobalMem / 1073741824.0);
    return 0;
}
