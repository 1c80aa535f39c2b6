/* kernelcrew
flags: [-O3]
knobs: {BLOCK: 256}
launch:
  - kernel: clear
    grid: [1]
    block: [1]
    args: [r]
  - kernel: dot_tree
    grid: ["ceil_div(n, BLOCK)"]
    block: [BLOCK]
    args: [x, y, r, n]
*/
// op: ddot. The reduction of the CUDA samples: a value per thread in shared memory, a
// tree over the block, one atomicAdd per block.
extern "C" __global__ void clear(double* r) { r[0] = 0.0; }

extern "C" __global__ void dot_tree(const double* x, const double* y, double* result,
                                    long long n) {
    __shared__ double sdata[BLOCK];
    unsigned int tid = threadIdx.x;
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    sdata[tid] = (i < n) ? x[i] * y[i] : 0.0;
    __syncthreads();
    for (unsigned int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (tid < s) sdata[tid] += sdata[tid + s];
        __syncthreads();
    }
    if (tid == 0) atomicAdd(result, sdata[0]);
}
