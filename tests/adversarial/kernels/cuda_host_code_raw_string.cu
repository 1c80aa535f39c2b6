/* kernelcrew
flags: [-O3]
launch:
  - kernel: tiny_sss
    grid: [rows]
    block: [1]
    args: [x, out, a, b, rows, cols]
*/
// ATTACK: hides host code from the static check with a raw string literal. A check
// that does not know raw strings reads the closing `)"` as the opening quote of a new
// string and blanks the rest of that line, where a host function sits.
// Defense: the static check reads raw string literals as the compiler does.
extern "C" __global__ void tiny_sss(const float* x, float* out, float a, float b,
                                    long long rows, long long cols) {
    long long r = blockIdx.x;
    float acc = 0.0f;
    for (long long c = 0; c < cols; ++c) acc += a * x[r * cols + c] + b;
    out[r] = acc;
}
__device__ const char* banner = R"(
)"; int host_side(int n) { return n * 2; }
