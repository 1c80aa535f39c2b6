/* kernelcrew
flags: [-O3]
knobs: {BLOCK: 256}
launch:
  - kernel: softmax_rows_fast
    grid: [rows]
    block: [BLOCK]
    shared_bytes: 0
    args: [x, y, rows, cols]
*/
// Hand-optimized CUDA version: one block per row. Pass 1 is an online
// (max, sum of exp) reduction over coalesced, float4-vectorized loads, merged
// across the block with warp shuffles; pass 2 re-reads the row (mostly from L2)
// and writes exp(x - max) / sum. Two reads + one write instead of the naive
// version's serial, uncoalesced three passes. BLOCK: multiple of 32, <= 1024.

__device__ __forceinline__ void kc_merge(float& m, float& s, float m2, float s2) {
    const float mx = fmaxf(m, m2);
    if (mx == -__int_as_float(0x7f800000)) return;  // both sides empty
    s = s * expf(m - mx) + s2 * expf(m2 - mx);
    m = mx;
}

__device__ __forceinline__ void kc_push(float& m, float& s, float v) {
    if (v > m) {
        s = s * expf(m - v) + 1.0f;
        m = v;
    } else {
        s += expf(v - m);
    }
}

extern "C" __global__ void __launch_bounds__(BLOCK)
softmax_rows_fast(const float* __restrict__ x, float* __restrict__ y, long long rows,
                  long long cols) {
    __shared__ float sm[BLOCK / 32], ss[BLOCK / 32];
    __shared__ float row_max, row_inv;
    const long long i = blockIdx.x;
    if (i >= rows) return;
    const float* __restrict__ xr = x + i * cols;
    float* __restrict__ yr = y + i * cols;
    const bool vec = (cols & 3) == 0 &&
                     ((reinterpret_cast<unsigned long long>(xr) |
                       reinterpret_cast<unsigned long long>(yr)) & 15ull) == 0;

    float m = -__int_as_float(0x7f800000), s = 0.0f;
    if (vec) {
        const float4* __restrict__ x4 = reinterpret_cast<const float4*>(xr);
        for (long long j = threadIdx.x; j < (cols >> 2); j += BLOCK) {
            const float4 v = __ldg(x4 + j);
            kc_push(m, s, v.x);
            kc_push(m, s, v.y);
            kc_push(m, s, v.z);
            kc_push(m, s, v.w);
        }
    } else {
        for (long long j = threadIdx.x; j < cols; j += BLOCK) kc_push(m, s, __ldg(xr + j));
    }
    for (int o = 16; o > 0; o >>= 1) {
        const float m2 = __shfl_xor_sync(0xffffffffu, m, o);
        const float s2 = __shfl_xor_sync(0xffffffffu, s, o);
        kc_merge(m, s, m2, s2);
    }
    const int lane = threadIdx.x & 31;
    const int warp = threadIdx.x >> 5;
    if (lane == 0) {
        sm[warp] = m;
        ss[warp] = s;
    }
    __syncthreads();
    if (warp == 0) {
        m = lane < BLOCK / 32 ? sm[lane] : -__int_as_float(0x7f800000);
        s = lane < BLOCK / 32 ? ss[lane] : 0.0f;
        for (int o = 16; o > 0; o >>= 1) {
            const float m2 = __shfl_xor_sync(0xffffffffu, m, o);
            const float s2 = __shfl_xor_sync(0xffffffffu, s, o);
            kc_merge(m, s, m2, s2);
        }
        if (lane == 0) {
            row_max = m;
            row_inv = 1.0f / s;
        }
    }
    __syncthreads();
    const float mx = row_max, inv = row_inv;
    if (vec) {
        const float4* __restrict__ x4 = reinterpret_cast<const float4*>(xr);
        float4* __restrict__ y4 = reinterpret_cast<float4*>(yr);
        for (long long j = threadIdx.x; j < (cols >> 2); j += BLOCK) {
            const float4 v = __ldg(x4 + j);
            float4 o;
            o.x = expf(v.x - mx) * inv;
            o.y = expf(v.y - mx) * inv;
            o.z = expf(v.z - mx) * inv;
            o.w = expf(v.w - mx) * inv;
            y4[j] = o;
        }
    } else {
        for (long long j = threadIdx.x; j < cols; j += BLOCK) yr[j] = expf(__ldg(xr + j) - mx) * inv;
    }
}
