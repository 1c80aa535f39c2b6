/* kernelcrew
flags: [-O3]
knobs: {BLOCK: 256}
launch:
  - kernel: embedding
    grid: ["ceil_div(B*T*C, BLOCK)"]
    block: [BLOCK]
    shared_bytes: 0
    args: [inp, wte, wpe, out, B, T, C, V]
*/
// Naive CUDA baseline: one thread per output element; the token, position and
// channel come from 64-bit divisions of the flat index, the token id is read
// again by every thread of its row.
extern "C" __global__ void embedding(const int* inp, const float* wte, const float* wpe,
                                     float* out, long long B, long long T, long long C,
                                     long long V) {
    long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= B * T * C) return;
    long long c = idx % C;
    long long bt = idx / C;
    long long t = bt % T;
    int ix = inp[bt];
    out[idx] = wte[(long long)ix * C + c] + wpe[t * C + c];
}
