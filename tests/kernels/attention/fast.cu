/* kernelcrew
flags: [-O3]
knobs: {DMAX: 128}
launch:
  - kernel: attention_fast
    grid: ["ceil_div(T, 16)", B]
    block: [128]
    shared_bytes: "4*(16*min(D, DMAX) + 32*(min(D, DMAX) + 1) + 32*min(D, DMAX) + 512)"
    args: [q, k, v, out, scale, B, T, D]
*/
// Hand-optimized CUDA version, one pass in the style of flash attention on CUDA
// cores: a block takes 16 queries of one batch entry (4 warps x 4 queries) and
// walks the keys in tiles of 32 staged in shared memory (K rows padded by one
// float against bank conflicts, V as is). Per tile a lane scores one key against
// its warp's 4 queries, the warp finds the tile's maximum and sum with shuffles
// and rescales its running (max, sum, output) state: the online softmax, so the
// scores are never stored and every key and value is read once per 16 queries.
// Lanes then split the head dimension to accumulate the weighted values.
// D > DMAX (outside the op's cases): a plain per-query loop, correct and slow.

#define NQ 16   // queries per block
#define QW 4    // queries per warp
#define KT 32   // keys per tile
#define RMAX (DMAX / 32)

__device__ __forceinline__ float kc_warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

__device__ __forceinline__ float kc_warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ void kc_attention_plain(const float* __restrict__ q, const float* __restrict__ k,
                                   const float* __restrict__ v, float* __restrict__ out,
                                   float scale, long long b, long long T, long long D,
                                   long long t) {
    const float* qt = q + (b * T + t) * D;
    float* ot = out + (b * T + t) * D;
    float mx = -INFINITY;
    for (long long s = 0; s < T; ++s) {
        float d = 0.0f;
        for (long long e = 0; e < D; ++e) d += qt[e] * k[(b * T + s) * D + e];
        mx = fmaxf(mx, d * scale);
    }
    for (long long e = 0; e < D; ++e) ot[e] = 0.0f;
    float l = 0.0f;
    for (long long s = 0; s < T; ++s) {
        float d = 0.0f;
        for (long long e = 0; e < D; ++e) d += qt[e] * k[(b * T + s) * D + e];
        const float p = expf(d * scale - mx);
        l += p;
        for (long long e = 0; e < D; ++e) ot[e] += p * v[(b * T + s) * D + e];
    }
    for (long long e = 0; e < D; ++e) ot[e] /= l;
}

extern "C" __global__ void __launch_bounds__(128)
attention_fast(const float* __restrict__ q, const float* __restrict__ k,
               const float* __restrict__ v, float* __restrict__ out, float scale, long long B,
               long long T, long long D) {
    extern __shared__ float kc_smem[];
    const long long b = blockIdx.y;
    const long long q0 = (long long)blockIdx.x * NQ;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (D > DMAX) {
        if (threadIdx.x < NQ && q0 + threadIdx.x < T)
            kc_attention_plain(q, k, v, out, scale, b, T, D, q0 + threadIdx.x);
        return;
    }
    const int d = (int)D;
    float* qs = kc_smem;              // [NQ][d]
    float* ks = qs + NQ * d;          // [KT][d + 1]
    float* vs = ks + KT * (d + 1);    // [KT][d]
    float* ps = vs + KT * d;          // [4 warps][QW][KT]
    const float* __restrict__ kb = k + b * T * D;
    const float* __restrict__ vb = v + b * T * D;
    for (int e = threadIdx.x; e < NQ * d; e += 128) {
        const long long t = q0 + e / d;
        qs[e] = t < T ? __ldg(q + (b * T + t) * D + e % d) : 0.0f;
    }
    float m[QW], l[QW], o[QW][RMAX];
#pragma unroll
    for (int w = 0; w < QW; ++w) {
        m[w] = -INFINITY;
        l[w] = 0.0f;
#pragma unroll
        for (int r = 0; r < RMAX; ++r) o[w][r] = 0.0f;
    }
    float* pw = ps + warp * QW * KT;
    const float* qw = qs + warp * QW * d;
    for (long long s0 = 0; s0 < T; s0 += KT) {
        __syncthreads();  // the previous tile is consumed (and qs is written, first time)
        for (int e = threadIdx.x; e < KT * d; e += 128) {
            const long long s = s0 + e / d;
            const int c = e % d;
            const bool in = s < T;
            ks[(e / d) * (d + 1) + c] = in ? __ldg(kb + s * D + c) : 0.0f;
            vs[e] = in ? __ldg(vb + s * D + c) : 0.0f;
        }
        __syncthreads();
        const bool valid = s0 + lane < T;
        float sc[QW];
#pragma unroll
        for (int w = 0; w < QW; ++w) sc[w] = 0.0f;
        const float* kr = ks + lane * (d + 1);
        for (int c = 0; c < d; ++c) {
            const float kv = kr[c];
#pragma unroll
            for (int w = 0; w < QW; ++w) sc[w] = fmaf(qw[w * d + c], kv, sc[w]);
        }
#pragma unroll
        for (int w = 0; w < QW; ++w) {
            const float s = valid ? sc[w] * scale : -INFINITY;
            const float mn = fmaxf(m[w], kc_warp_max(s));  // lane 0's key is valid: finite
            const float alpha = expf(m[w] - mn);
            const float p = valid ? expf(s - mn) : 0.0f;
            l[w] = l[w] * alpha + kc_warp_sum(p);
            m[w] = mn;
#pragma unroll
            for (int r = 0; r < RMAX; ++r) o[w][r] *= alpha;
            pw[w * KT + lane] = p;
        }
        __syncwarp();
        const int keys = T - s0 < KT ? (int)(T - s0) : KT;
        for (int s = 0; s < keys; ++s) {
            const float* vr = vs + s * d;
#pragma unroll
            for (int r = 0; r < RMAX; ++r) {
                const int c = lane + 32 * r;
                if (c < d) {
                    const float vv = vr[c];
#pragma unroll
                    for (int w = 0; w < QW; ++w) o[w][r] = fmaf(pw[w * KT + s], vv, o[w][r]);
                }
            }
        }
        __syncwarp();  // pw is read before the next tile writes it
    }
#pragma unroll
    for (int w = 0; w < QW; ++w) {
        const long long t = q0 + warp * QW + w;
        if (t >= T) continue;
        const float inv = 1.0f / l[w];
#pragma unroll
        for (int r = 0; r < RMAX; ++r) {
            const int c = lane + 32 * r;
            if (c < d) out[(b * T + t) * D + c] = o[w][r] * inv;
        }
    }
}
