/* kernelcrew
flags: [-O3]
knobs: {BLOCK: 256}
launch:
  - kernel: qmatvec_fast
    grid: ["ceil_div(m, BLOCK // 32)"]
    block: [BLOCK]
    shared_bytes: 0
    args: [W, x, scale, y, m, n]
*/
// Hand-optimized CUDA version: one warp per row, the lanes walking the row
// together (coalesced) with int4 loads of W and x when n % 4 == 0 and both are
// 16-byte aligned, two of each in flight per lane and step; int32 accumulation
// (exact, as the baseline), warp-shuffle sum, one float scaling per row.

__device__ __forceinline__ int kc_warp_sum(int v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

extern "C" __global__ void __launch_bounds__(BLOCK)
qmatvec_fast(const int* __restrict__ W, const int* __restrict__ x,
             const float* __restrict__ scale, float* __restrict__ y, long long m, long long n) {
    const long long i = (long long)blockIdx.x * (BLOCK / 32) + (threadIdx.x >> 5);
    const int lane = threadIdx.x & 31;
    if (i >= m) return;
    const int* __restrict__ row = W + i * n;
    int s0 = 0, s1 = 0;
    const bool vec = (n & 3) == 0 && ((reinterpret_cast<unsigned long long>(W) |
                                       reinterpret_cast<unsigned long long>(x)) & 15ull) == 0;
    if (vec) {
        const int4* __restrict__ r4 = reinterpret_cast<const int4*>(row);
        const int4* __restrict__ x4 = reinterpret_cast<const int4*>(x);
        const long long n4 = n >> 2;
        long long j = lane;
        for (; j + 32 < n4; j += 64) {
            const int4 a = __ldg(r4 + j), b = __ldg(x4 + j);
            const int4 c = __ldg(r4 + j + 32), d = __ldg(x4 + j + 32);
            s0 += a.x * b.x + a.y * b.y + a.z * b.z + a.w * b.w;
            s1 += c.x * d.x + c.y * d.y + c.z * d.z + c.w * d.w;
        }
        if (j < n4) {
            const int4 a = __ldg(r4 + j), b = __ldg(x4 + j);
            s0 += a.x * b.x + a.y * b.y + a.z * b.z + a.w * b.w;
        }
    } else {
        for (long long j = lane; j < n; j += 32) s0 += __ldg(row + j) * __ldg(x + j);
    }
    const int s = kc_warp_sum(s0 + s1);
    if (lane == 0) y[i] = __ldg(scale + i) * (float)s;
}
