/* kernelcrew
flags: [-O3]
knobs: {BLOCK: 128}
launch:
  - kernel: attention
    grid: ["ceil_div(B*T, BLOCK)"]
    block: [BLOCK]
    shared_bytes: 0
    args: [q, k, v, out, scale, B, T, D]
*/
// Naive CUDA baseline, the CPU code per thread: one thread per query row; a
// first pass over the keys finds the largest score, a second recomputes the
// scores, exponentiates and accumulates the weighted values into the output row
// in global memory, which is divided by the sum at the end.
__device__ float dot(const float* a, const float* b, long long n) {
    float s = 0.0f;
    for (long long i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

extern "C" __global__ void attention(const float* q, const float* k, const float* v, float* out,
                                     float scale, long long B, long long T, long long D) {
    long long row = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= B * T) return;
    long long b = row / T;
    const float* qt = q + row * D;
    const float* kb = k + b * T * D;
    const float* vb = v + b * T * D;
    float* ot = out + row * D;
    float maxval = -INFINITY;
    for (long long s = 0; s < T; s++) {
        float score = dot(qt, kb + s * D, D) * scale;
        if (score > maxval) maxval = score;
    }
    for (long long d = 0; d < D; d++) ot[d] = 0.0f;
    float denom = 0.0f;
    for (long long s = 0; s < T; s++) {
        float p = expf(dot(qt, kb + s * D, D) * scale - maxval);
        denom += p;
        const float* vs = vb + s * D;
        for (long long d = 0; d < D; d++) ot[d] += p * vs[d];
    }
    for (long long d = 0; d < D; d++) ot[d] /= denom;
}
