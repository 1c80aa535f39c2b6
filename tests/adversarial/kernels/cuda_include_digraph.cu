/* kernelcrew
flags: [-O3]
launch:
  - kernel: tiny_sss
    grid: [rows]
    block: [1]
    args: [x, out, a, b, rows, cols]
*/
// ATTACK: a CUDA file that includes a host file through the digraph `%:` for `#`.
// Defense: the static check reads `%:` as `#`, as the compiler does.
%:include </etc/passwd>

extern "C" __global__ void tiny_sss(const float* x, float* out, float a, float b,
                                    long long rows, long long cols) {
    out[blockIdx.x] = x[blockIdx.x] * a + b + (float)(rows * cols);
}
