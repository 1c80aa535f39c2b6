/* kernelcrew
flags: [-O3]
knobs: {BLOCK: 256}
launch:
  - kernel: small_matmul_fast
    grid: ["ceil_div(batch, max(1, min(BLOCK // (ceil_div(m, 4)*n), 12288 // (k*(4*ceil_div(m, 4) + n)))))"]
    block: [BLOCK]
    shared_bytes: "4*max(1, min(BLOCK // (ceil_div(m, 4)*n), 12288 // (k*(4*ceil_div(m, 4) + n))))*k*(4*ceil_div(m, 4) + n)"
    args: [a, b, c, batch, m, k, n]
*/
// Hand-optimized CUDA version. A block handles G consecutive matrices of the
// batch (G > 1 only when one matrix has too few outputs to keep BLOCK threads
// busy, e.g. 16x16x16; G is also capped so the block fits in 48 KiB of shared
// memory; the same G formula appears in grid and shared_bytes above).
// a[p] is staged transposed in shared memory (rows padded to a multiple of 4)
// and b[p] as is, both with coalesced global loads; each thread then computes
// a 4x1 strip of c, reading 4 values of a with one float4 shared load and one
// value of b per k step, so every shared load feeds several FMAs.
// Shape limit: k*(4*ceil(m/4) + n) <= 12288 floats (any m, k, n <= 64 fits).

extern "C" __global__ void __launch_bounds__(BLOCK)
small_matmul_fast(const float* __restrict__ a, const float* __restrict__ b,
                  float* __restrict__ c, long long batch, long long m, long long k,
                  long long n) {
    extern __shared__ float4 kc_smem4[];
    float* smem = reinterpret_cast<float*>(kc_smem4);
    const int M = (int)m, K = (int)k, N = (int)n;
    const int mp = (M + 3) & ~3;             // padded row count of a
    const int strips = (mp >> 2) * N;        // 4x1 output strips per matrix
    const int G = max(1, min(BLOCK / strips, 12288 / (K * (mp + N))));
    const long long p0 = (long long)blockIdx.x * G;
    if (p0 >= batch) return;
    const int gn = (int)min((long long)G, batch - p0);  // matrices in this block
    const int a_sz = K * mp, b_sz = K * N;
    float* at = smem;                        // at[g*a_sz + q*mp + i] = a[p0+g, i, q]
    float* bs = smem + G * a_sz;             // bs[g*b_sz + q*N + j]  = b[p0+g, q, j]
    const float* __restrict__ ap = a + p0 * m * k;
    const float* __restrict__ bp = b + p0 * k * n;
    float* __restrict__ cp = c + p0 * m * n;

    for (int e = threadIdx.x; e < gn * a_sz; e += BLOCK) {
        const int g = e / a_sz, r = e - g * a_sz;
        const int i = r / K, q = r - i * K;
        at[g * a_sz + q * mp + i] = i < M ? __ldg(ap + ((long long)g * M + i) * K + q) : 0.0f;
    }
    for (int e = threadIdx.x; e < gn * b_sz; e += BLOCK) bs[e] = __ldg(bp + e);
    __syncthreads();

    for (int s = threadIdx.x; s < gn * strips; s += BLOCK) {
        const int g = s / strips, r = s - g * strips;
        const int i0 = (r / N) << 2;
        const int j = r - (r / N) * N;
        const float* ag = at + g * a_sz + i0;
        const float* bg = bs + g * b_sz + j;
        float c0 = 0.0f, c1 = 0.0f, c2 = 0.0f, c3 = 0.0f;
#pragma unroll 4
        for (int q = 0; q < K; ++q) {
            const float4 av = *reinterpret_cast<const float4*>(ag + q * mp);
            const float bv = bg[q * N];
            c0 = fmaf(av.x, bv, c0);
            c1 = fmaf(av.y, bv, c1);
            c2 = fmaf(av.z, bv, c2);
            c3 = fmaf(av.w, bv, c3);
        }
        float* cr = cp + ((long long)g * M + i0) * N + j;
        cr[0] = c0;
        if (i0 + 1 < M) cr[N] = c1;
        if (i0 + 2 < M) cr[2 * N] = c2;
        if (i0 + 3 < M) cr[3 * N] = c3;
    }
}
