/* kernelcrew
flags: [-O3]
knobs: {BLOCK: 128}
launch:
  - kernel: embedding_fast
    grid: ["B*T"]
    block: [BLOCK]
    shared_bytes: 0
    args: [inp, wte, wpe, out, B, T, C, V]
*/
// Hand-optimized CUDA version: one block per token. The token id and the row
// pointers are found once per block (no divisions per element), and the row is
// copied as float4 loads of wte and wpe and float4 stores (C % 4 == 0 and
// 16-byte aligned tables), else as coalesced scalars.

extern "C" __global__ void __launch_bounds__(BLOCK)
embedding_fast(const int* __restrict__ inp, const float* __restrict__ wte,
               const float* __restrict__ wpe, float* __restrict__ out, long long B,
               long long T, long long C, long long V) {
    const long long bt = blockIdx.x;
    if (bt >= B * T) return;
    const long long t = bt % T;
    const long long ix = __ldg(inp + bt);
    const float* __restrict__ er = wte + ix * C;
    const float* __restrict__ pr = wpe + t * C;
    float* __restrict__ orow = out + bt * C;
    const bool vec = (C & 3) == 0 && ((reinterpret_cast<unsigned long long>(wte) |
                                       reinterpret_cast<unsigned long long>(wpe) |
                                       reinterpret_cast<unsigned long long>(out)) & 15ull) == 0;
    if (vec) {
        const float4* __restrict__ e4 = reinterpret_cast<const float4*>(er);
        const float4* __restrict__ p4 = reinterpret_cast<const float4*>(pr);
        float4* __restrict__ o4 = reinterpret_cast<float4*>(orow);
        for (long long j = threadIdx.x; j < (C >> 2); j += BLOCK) {
            const float4 a = __ldg(e4 + j), b = __ldg(p4 + j);
            o4[j] = make_float4(a.x + b.x, a.y + b.y, a.z + b.z, a.w + b.w);
        }
    } else {
        for (long long j = threadIdx.x; j < C; j += BLOCK) orow[j] = __ldg(er + j) + __ldg(pr + j);
    }
}
