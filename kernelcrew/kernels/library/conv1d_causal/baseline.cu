/* kernelcrew
flags: [-O3]
knobs: {BLOCK: 256}
launch:
  - kernel: conv1d_causal
    grid: ["ceil_div(B*C*L, BLOCK)"]
    block: [BLOCK]
    shared_bytes: 0
    args: [x, w, bias, out, B, C, L, K]
*/
// Naive CUDA baseline, the CPU loop order as a flat index: the channel fastest,
// then time, then batch, so neighbouring threads touch addresses L floats apart;
// the causal edge checked per tap.
#define X(b, c, t) x[((b) * C + (c)) * L + (t)]
#define OUT(b, c, t) out[((b) * C + (c)) * L + (t)]
#define W(c, k) w[(c) * K + (k)]

extern "C" __global__ void conv1d_causal(const float* x, const float* w, const float* bias,
                                         float* out, long long B, long long C, long long L,
                                         long long K) {
    long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= B * C * L) return;
    long long c = idx % C;
    long long t = (idx / C) % L;
    long long b = idx / (C * L);
    float acc = bias[c];
    for (long long k = 0; k < K; k++) {
        long long src = t - (K - 1) + k;
        if (src >= 0) acc += W(c, k) * X(b, c, src);
    }
    OUT(b, c, t) = acc;
}
