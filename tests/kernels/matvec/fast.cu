/* kernelcrew
flags: [-O3]
knobs: {BLOCK: 256}
launch:
  - kernel: matvec_fast
    grid: ["ceil_div(m, BLOCK // 32)"]
    block: [BLOCK]
    shared_bytes: 0
    args: [A, x, y, m, n]
*/
// Hand-optimized CUDA version: one warp per row. The 32 lanes walk the row
// together (coalesced), float4 loads of A and x when n % 4 == 0 and both are
// 16-byte aligned, two of each in flight per lane and step; x stays in L1/L2 for
// the other rows. The lanes' sums meet by warp shuffles. BLOCK: a multiple of 32.

__device__ __forceinline__ float kc_warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

extern "C" __global__ void __launch_bounds__(BLOCK)
matvec_fast(const float* __restrict__ A, const float* __restrict__ x, float* __restrict__ y,
            long long m, long long n) {
    const long long i = (long long)blockIdx.x * (BLOCK / 32) + (threadIdx.x >> 5);
    const int lane = threadIdx.x & 31;
    if (i >= m) return;  // a whole warp leaves together
    const float* __restrict__ row = A + i * n;
    float s0 = 0.0f, s1 = 0.0f;
    const bool vec = (n & 3) == 0 && ((reinterpret_cast<unsigned long long>(A) |
                                       reinterpret_cast<unsigned long long>(x)) & 15ull) == 0;
    if (vec) {
        const float4* __restrict__ r4 = reinterpret_cast<const float4*>(row);
        const float4* __restrict__ x4 = reinterpret_cast<const float4*>(x);
        const long long n4 = n >> 2;
        long long j = lane;
        for (; j + 32 < n4; j += 64) {
            const float4 a = __ldg(r4 + j), b = __ldg(x4 + j);
            const float4 c = __ldg(r4 + j + 32), d = __ldg(x4 + j + 32);
            s0 += a.x * b.x + a.y * b.y + a.z * b.z + a.w * b.w;
            s1 += c.x * d.x + c.y * d.y + c.z * d.z + c.w * d.w;
        }
        if (j < n4) {
            const float4 a = __ldg(r4 + j), b = __ldg(x4 + j);
            s0 += a.x * b.x + a.y * b.y + a.z * b.z + a.w * b.w;
        }
    } else {
        for (long long j = lane; j < n; j += 32) s0 = fmaf(__ldg(row + j), __ldg(x + j), s0);
    }
    const float s = kc_warp_sum(s0 + s1);
    if (lane == 0) y[i] = s;
}
