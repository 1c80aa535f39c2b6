// GELU as a CUDA project writes it: a __device__ helper, a macro constant, an int size,
// and a host launcher next to the kernel (the import leaves the launcher out).
#include <math.h>
#include <cuda_runtime.h>

#define GELU_COEF 0.044715f

__device__ __forceinline__ float gelu_scalar(float x) {
    const float k = sqrtf(2.0f / 3.14159265358979f);
    return 0.5f * x * (1.0f + tanhf(k * (x + GELU_COEF * x * x * x)));
}

__global__ void gelu_kernel(float* out, const float* inp, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        out[i] = gelu_scalar(inp[i]);
    }
}

void gelu_launch(float* out, const float* inp, int n, cudaStream_t stream) {
    gelu_kernel<<<(n + 255) / 256, 256, 0, stream>>>(out, inp, n);
}
