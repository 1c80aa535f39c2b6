/* kernelcrew
flags: [-O3]
knobs: {BLOCK: 256}
launch:
  - kernel: layernorm_fast
    grid: ["B*T"]
    block: [BLOCK]
    shared_bytes: 0
    args: [inp, weight, bias, out, mean, rstd, B, T, C]
*/
// Hand-optimized CUDA version: one block per row, coalesced float4 accesses
// (C % 4 == 0 and 16-byte aligned rows, else scalars). The mean, then the sum
// of squared deviations from it (two passes: no cancellation), are block sums
// (warp shuffles, then one shared-memory step); the third pass writes the
// output. The row is read from DRAM once: the second and third reads find it in
// L1/L2. BLOCK: a multiple of 32, at most 1024.

__device__ __forceinline__ float kc_warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

// the sum over the block, in every thread; `part` is free again when it returns
__device__ __forceinline__ float kc_block_sum(float v, float* part) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    v = kc_warp_sum(v);
    if (lane == 0) part[warp] = v;
    __syncthreads();
    const float t = kc_warp_sum(lane < BLOCK / 32 ? part[lane] : 0.0f);
    __syncthreads();
    return t;
}

extern "C" __global__ void __launch_bounds__(BLOCK)
layernorm_fast(const float* __restrict__ inp, const float* __restrict__ weight,
               const float* __restrict__ bias, float* __restrict__ out,
               float* __restrict__ mean, float* __restrict__ rstd, long long B, long long T,
               long long C) {
    __shared__ float part[BLOCK / 32];
    const long long row = blockIdx.x;
    if (row >= B * T) return;
    const float* __restrict__ x = inp + row * C;
    float* __restrict__ o = out + row * C;
    const bool vec = (C & 3) == 0 && ((reinterpret_cast<unsigned long long>(x) |
                                       reinterpret_cast<unsigned long long>(o) |
                                       reinterpret_cast<unsigned long long>(weight) |
                                       reinterpret_cast<unsigned long long>(bias)) & 15ull) == 0;
    const long long c4 = C >> 2;
    const float4* __restrict__ x4 = reinterpret_cast<const float4*>(x);
    float s = 0.0f;
    if (vec) {
        for (long long j = threadIdx.x; j < c4; j += BLOCK) {
            const float4 v = __ldg(x4 + j);
            s += (v.x + v.y) + (v.z + v.w);
        }
    } else {
        for (long long j = threadIdx.x; j < C; j += BLOCK) s += __ldg(x + j);
    }
    const float m = kc_block_sum(s, part) / (float)C;
    float q = 0.0f;
    if (vec) {
        for (long long j = threadIdx.x; j < c4; j += BLOCK) {
            const float4 v = __ldg(x4 + j);
            const float a = v.x - m, b = v.y - m, c = v.z - m, d = v.w - m;
            q += (a * a + b * b) + (c * c + d * d);
        }
    } else {
        for (long long j = threadIdx.x; j < C; j += BLOCK) {
            const float a = __ldg(x + j) - m;
            q += a * a;
        }
    }
    const float rs = rsqrtf(kc_block_sum(q, part) / (float)C + 1e-5f);
    if (vec) {
        const float4* __restrict__ w4 = reinterpret_cast<const float4*>(weight);
        const float4* __restrict__ b4 = reinterpret_cast<const float4*>(bias);
        float4* __restrict__ o4 = reinterpret_cast<float4*>(o);
        for (long long j = threadIdx.x; j < c4; j += BLOCK) {
            const float4 v = __ldg(x4 + j), w = __ldg(w4 + j), b = __ldg(b4 + j);
            o4[j] = make_float4(fmaf((v.x - m) * rs, w.x, b.x), fmaf((v.y - m) * rs, w.y, b.y),
                                fmaf((v.z - m) * rs, w.z, b.z), fmaf((v.w - m) * rs, w.w, b.w));
        }
    } else {
        for (long long j = threadIdx.x; j < C; j += BLOCK)
            o[j] = fmaf((__ldg(x + j) - m) * rs, __ldg(weight + j), __ldg(bias + j));
    }
    if (threadIdx.x == 0) {
        mean[row] = m;
        rstd[row] = rs;
    }
}
