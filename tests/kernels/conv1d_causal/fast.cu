/* kernelcrew
flags: [-O3]
knobs: {BLOCK: 256}
launch:
  - kernel: conv1d_causal_fast
    grid: ["ceil_div(B*C*ceil_div(L, 4), BLOCK)"]
    block: [BLOCK]
    shared_bytes: 0
    args: [x, w, bias, out, B, C, L, K]
*/
// Hand-optimized CUDA version: time fastest across threads (coalesced), four
// consecutive outputs of one (batch, channel) row per thread. The four inputs at
// t0..t0+3 come in one float4 load and are reused by every tap; the K-1 before
// them are scalar loads that hit L1 (the neighbouring thread loaded them). The
// four outputs go out as one float4 store (L % 4 == 0 and 16-byte aligned
// arrays), else as scalars.

extern "C" __global__ void __launch_bounds__(BLOCK)
conv1d_causal_fast(const float* __restrict__ x, const float* __restrict__ w,
                   const float* __restrict__ bias, float* __restrict__ out, long long B,
                   long long C, long long L, long long K) {
    const long long quads = (L + 3) >> 2;
    const long long id = (long long)blockIdx.x * BLOCK + threadIdx.x;
    if (id >= B * C * quads) return;
    const long long row = id / quads;
    const long long t0 = (id - row * quads) << 2;
    const long long c = row % C;
    const float* __restrict__ xr = x + row * L;
    const float* __restrict__ wc = w + c * K;
    const bool vec = (L & 3) == 0 && ((reinterpret_cast<unsigned long long>(x) |
                                       reinterpret_cast<unsigned long long>(out)) & 15ull) == 0;
    float cur[4];
    if (vec) {  // L % 4 == 0: the four are in the row
        const float4 a = __ldg(reinterpret_cast<const float4*>(xr + t0));
        cur[0] = a.x;
        cur[1] = a.y;
        cur[2] = a.z;
        cur[3] = a.w;
    } else {
#pragma unroll
        for (int r = 0; r < 4; ++r) cur[r] = t0 + r < L ? __ldg(xr + t0 + r) : 0.0f;
    }
    const float b = __ldg(bias + c);
    float acc[4] = {b, b, b, b};
    for (long long k = 0; k < K; ++k) {
        const float wk = __ldg(wc + k);
        const long long back = K - 1 - k;  // output t reads x[t - back]
#pragma unroll
        for (int r = 0; r < 4; ++r) {
            const long long src = t0 + r - back;
            float xv;
            if (src >= t0) xv = cur[src - t0];
            else xv = src >= 0 ? __ldg(xr + src) : 0.0f;
            acc[r] = fmaf(wk, xv, acc[r]);
        }
    }
    float* __restrict__ orow = out + row * L;
    if (vec) {
        *reinterpret_cast<float4*>(orow + t0) = make_float4(acc[0], acc[1], acc[2], acc[3]);
    } else {
#pragma unroll
        for (int r = 0; r < 4; ++r)
            if (t0 + r < L) orow[t0 + r] = acc[r];
    }
}
