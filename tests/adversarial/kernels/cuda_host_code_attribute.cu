/* kernelcrew
flags: [-O3]
launch:
  - kernel: tiny_sss
    grid: [rows]
    block: [1]
    args: [x, out, a, b, rows, cols]
*/
// ATTACK: hides a host function from the static check behind a C++ attribute. A
// check that skips definitions whose prefix holds `]` (taking them for lambdas) skips
// `[[nodiscard]] int host_side(...)`. Defense: attributes are not lambdas.
extern "C" __global__ void tiny_sss(const float* x, float* out, float a, float b,
                                    long long rows, long long cols) {
    long long r = blockIdx.x;
    float acc = 0.0f;
    for (long long c = 0; c < cols; ++c) acc += a * x[r * cols + c] + b;
    out[r] = acc;
}

[[nodiscard]] int host_side(int n) { return n * 2; }
