/* common/backend/cuda/cuda_types.h: plain-data types shared by the C11 side (cuda_host.h, backend_cuda.c) and the
 * kernels' launcher header (cuda_ops.h), with no other includes so nvcc's C++ can read it too.
 * Not here: functions. */
#ifndef DAPO_CUDA_TYPES_H
#define DAPO_CUDA_TYPES_H

/* Sampling parameters, model/sample.h's SampleParams field for field. */
typedef struct {
    float temperature;   /* > 0 divides the logits; <= 0 means greedy */
    float top_p;         /* (0, 1]; 1 = off */
    int   top_k;         /* <= 0 or >= V = off */
    int   greedy;        /* nonzero: argmax */
} CudaSampleParams;

#endif
