/* common/backend/cuda/device.h: CUDA device discovery (C interface; implemented in device.cu).
 * Only compiled and linked in CUDA builds (USE_CUDA). */
#ifndef DAPO_CUDA_DEVICE_H
#define DAPO_CUDA_DEVICE_H
#include <stddef.h>
#ifdef __cplusplus
extern "C" {
#endif
/* Number of visible CUDA devices; 0 when there is no driver or no device (never fails). */
int cuda_device_count(void);
/* Writes "NAME (sm_XY, N GiB)" for device dev into buf; 0, or -1 with the CUDA error text in buf. */
int cuda_device_describe(int dev, char *buf, size_t len);
#ifdef __cplusplus
}
#endif
#endif
