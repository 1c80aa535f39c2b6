/* kernelcrew
flags: [-O3]
knobs: {BLOCK: 128}
launch:
  - kernel: linear_forward
    grid: ["ceil_div(m*n, BLOCK)"]
    block: [BLOCK]
    args: [a, b, bias, c, m, k, n]
*/
// op: gemm_nt. A linear layer's forward pass as found in training code: one thread per
// output, the flat index split by hand, weights stored a row per output feature, the
// sum started from the bias, reads through __ldg.
extern "C" __global__ void linear_forward(const float* __restrict__ inp,
                                          const float* __restrict__ weight,
                                          const float* __restrict__ bias,
                                          float* __restrict__ out, long long B, long long C,
                                          long long OC) {
    long long idx = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (idx >= B * OC) return;
    long long o = idx % OC;
    long long bt = idx / OC;
    const float* x = inp + bt * C;
    const float* w = weight + o * C;
    float val = __ldg(&bias[o]);
    for (long long c = 0; c < C; c++) {
        val += __ldg(&x[c]) * __ldg(&w[c]);
    }
    out[bt * OC + o] = val;
}
