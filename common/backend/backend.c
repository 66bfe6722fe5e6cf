/* common/backend/backend.c: choosing the backend for trainer.device (backend.h). */
#include <string.h>

#include "backend/backend.h"
#include "backend/cpu/cpu_family.h"
#ifdef USE_CUDA
#include "backend/cuda/device.h"
#endif

int backend_known(const char *device, char err[ERR_LEN]) {
    if (!device || !strcmp(device, "cpu")) return 0;
    if (strcmp(device, "cuda") != 0)
        return err_set(err, ERR_INVAL, "trainer.device: \"%s\" is neither cpu nor cuda", device);
#ifndef USE_CUDA
    return err_set(err, ERR_UNSUPPORTED, "trainer.device=cuda: this build has no CUDA backend (rebuild with `make "
                   "CUDA=1`, which needs nvcc on PATH or CUDA_HOME)");
#else
    return 0;
#endif
}

const Backend *backend_select(const char *device, char err[ERR_LEN]) {
    if (backend_known(device, err)) return NULL;
    if (!device || !strcmp(device, "cpu"))          /* the kernel family, once: DAPO_CPU_FAMILY or CPUID (logged) */
        return cpu_family_init(err) ? NULL : &backend_cpu;
#ifdef USE_CUDA
    if (cuda_device_count() >= 1) return &backend_cuda;
    err_set(err, ERR_UNSUPPORTED, "trainer.device=cuda: no CUDA device is visible (no driver, no GPU, or "
            "CUDA_VISIBLE_DEVICES hides them); use trainer.device=cpu");
#endif
    return NULL;
}
