/* kernelcrew
flags: [-O3]
knobs: {BLOCK: 256}
launch:
  - kernel: conv2d
    grid: ["ceil_div(N*Cout*H*W, BLOCK)"]
    block: [BLOCK]
    shared_bytes: 0
    args: [x, w, bias, y, N, Cin, Cout, H, W]
*/
// Naive CUDA baseline, direct convolution: one thread per output pixel reads its
// 3 x 3 x Cin window and the filter straight from global memory, the zero
// padding checked per tap.
extern "C" __global__ void conv2d(const float* x, const float* w, const float* bias, float* y,
                                  long long N, long long Cin, long long Cout, long long H,
                                  long long W) {
    long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= N * Cout * H * W) return;
    long long ox = idx % W;
    long long oy = (idx / W) % H;
    long long co = (idx / (W * H)) % Cout;
    long long n = idx / (W * H * Cout);
    float sum = bias[co];
    for (long long c = 0; c < Cin; c++) {
        for (int ky = 0; ky < 3; ky++) {
            for (int kx = 0; kx < 3; kx++) {
                long long iy = oy + ky - 1;
                long long ix = ox + kx - 1;
                if (iy < 0 || iy >= H || ix < 0 || ix >= W) continue;
                sum += x[((n * Cin + c) * H + iy) * W + ix] * w[((co * Cin + c) * 3 + ky) * 3 + kx];
            }
        }
    }
    y[idx] = sum;
}
