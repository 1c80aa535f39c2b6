/* kernelcrew
flags: [-O3]
knobs: {RCHUNK: 128}
launch:
  - kernel: colsum_zero
    grid: ["ceil_div(cols, 256)"]
    block: [256]
    shared_bytes: 0
    args: [out, cols]
  - kernel: colsum_fast
    grid: ["ceil_div(cols, 128)", "ceil_div(rows, RCHUNK)"]
    block: [32, 8]
    shared_bytes: 0
    args: [x, out, rows, cols]
*/
// Hand-optimized CUDA version: the matrix is cut into tiles of 128 columns by
// RCHUNK rows, one block of 32 x 8 threads per tile, so the whole GPU works
// whatever the shape. A thread sums every 8th row of its tile for 4 columns
// (one float4 per row when cols % 4 == 0 and x is 16-byte aligned, else 4
// coalesced scalar loads 32 columns apart), the 8 partial sums of a column are
// added in shared memory, and one atomicAdd per column and tile adds the result
// into out, which the first launch clears.

extern "C" __global__ void colsum_zero(float* __restrict__ out, long long cols) {
    const long long j = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (j < cols) out[j] = 0.0f;
}

extern "C" __global__ void __launch_bounds__(256)
colsum_fast(const float* __restrict__ x, float* __restrict__ out, long long rows,
            long long cols) {
    __shared__ float part[8][129];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const long long j0 = (long long)blockIdx.x * 128;
    const long long r0 = (long long)blockIdx.y * RCHUNK;
    const long long r1 = r0 + RCHUNK < rows ? r0 + RCHUNK : rows;
    float a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f;
    const bool vec = (cols & 3) == 0 && (reinterpret_cast<unsigned long long>(x) & 15ull) == 0;
    if (vec) {  // lane tx: columns j0 + 4 tx .. + 3 (all valid or none: cols % 4 == 0)
        const long long j = j0 + 4 * tx;
        if (j < cols) {
            for (long long i = r0 + ty; i < r1; i += 8) {
                const float4 v = __ldg(reinterpret_cast<const float4*>(x + i * cols + j));
                a0 += v.x;
                a1 += v.y;
                a2 += v.z;
                a3 += v.w;
            }
        }
        part[ty][4 * tx] = a0;
        part[ty][4 * tx + 1] = a1;
        part[ty][4 * tx + 2] = a2;
        part[ty][4 * tx + 3] = a3;
    } else {  // lane tx: columns j0 + tx + 32 q, q = 0..3
        for (long long i = r0 + ty; i < r1; i += 8) {
            const float* xr = x + i * cols + j0 + tx;
            const long long left = cols - j0 - tx;
            if (left > 0) a0 += __ldg(xr);
            if (left > 32) a1 += __ldg(xr + 32);
            if (left > 64) a2 += __ldg(xr + 64);
            if (left > 96) a3 += __ldg(xr + 96);
        }
        part[ty][tx] = a0;
        part[ty][tx + 32] = a1;
        part[ty][tx + 64] = a2;
        part[ty][tx + 96] = a3;
    }
    __syncthreads();
    const int c = ty * 32 + tx;  // 0..255: the first 128 threads finish one column each
    if (c < 128 && j0 + c < cols) {
        float s = 0.0f;
#pragma unroll
        for (int k = 0; k < 8; ++k) s += part[k][c];
        atomicAdd(out + j0 + c, s);
    }
}
