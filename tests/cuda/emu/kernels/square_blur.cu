/* kernelcrew
flags: [-O3]
knobs: {BLOCK: 128}
temps:
  sq: {dtype: float32, shape: [n]}
launch:
  - kernel: square
    grid: ["ceil_div(n, BLOCK)"]
    block: [BLOCK]
    args: [x, sq, n]
  - kernel: blur3
    grid: ["ceil_div(n, BLOCK)"]
    block: [BLOCK]
    args: [sq, y, n]
*/
// op: square_blur. A kernel per pass: the squares into a temp, then each output sums its
// neighbours' squares.
extern "C" __global__ void square(const float* x, float* t, long long n) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i >= n) return;
    t[i] = x[i] * x[i];
}

extern "C" __global__ void blur3(const float* t, float* y, long long n) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i >= n) return;
    float acc = t[i];
    if (i > 0) acc += t[i - 1];
    if (i + 1 < n) acc += t[i + 1];
    y[i] = acc;
}
