/* kernelcrew
flags: [-O3]
launch:
  - kernel: tiny_sss
    grid: [rows]
    block: [1]
    args: [x, out, a, b, rows, cols]
*/
// ATTACK: a CUDA file that includes a host file; nvcc would quote its lines in the
// errors, and those reach logs, reports and the agents' prompts. Defense: includes
// are refused before the compiler runs; no file content appears in any output.
#include "/etc/passwd"

extern "C" __global__ void tiny_sss(const float* x, float* out, float a, float b,
                                    long long rows, long long cols) {
    out[blockIdx.x] = x[blockIdx.x] * a + b + (float)(rows * cols);
}
