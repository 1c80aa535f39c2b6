/* kernelcrew
flags: [-O3]
knobs: {COB: 8, CI_STEP: 4}
launch:
  - kernel: conv2d_fast
    grid: ["ceil_div(W, 32)*ceil_div(H, 16)", "ceil_div(Cout, COB)", N]
    block: [32, 8]
    shared_bytes: 0
    args: [x, w, bias, y, N, Cin, Cout, H, W]
*/
// Hand-optimized CUDA version: shared-memory tiling. A block computes a 32 x 16
// tile of output pixels for COB output channels; per step of CI_STEP input
// channels it stages the 34 x 18 input tile (with its halo, zero outside the
// image: no bounds checks in the inner loop) and the COB x CI_STEP x 9 filter
// taps in shared memory; each thread keeps 2 pixels x COB channels in registers,
// so every input value read from shared memory feeds COB multiply-adds.
// No __launch_bounds__: with it ptxas aimed at 64 registers and spilled; without,
// 72 registers (3 blocks per SM on sm_90) and no spills.

#define TW 32
#define TH 16
#define IW (TW + 2)
#define IH (TH + 2)

extern "C" __global__ void conv2d_fast(const float* __restrict__ x, const float* __restrict__ w,
            const float* __restrict__ bias, float* __restrict__ y, long long N, long long Cin,
            long long Cout, long long H, long long W) {
    __shared__ float tile[CI_STEP][IH][IW];
    __shared__ float taps[CI_STEP][9][COB];
    const int tx = threadIdx.x, ty = threadIdx.y, tid = ty * 32 + tx;
    const long long tiles_x = (W + TW - 1) / TW;
    const long long ox0 = (blockIdx.x % tiles_x) * TW, oy0 = (blockIdx.x / tiles_x) * TH;
    const long long co0 = (long long)blockIdx.y * COB;
    const long long n = blockIdx.z;
    float acc[2][COB];
#pragma unroll
    for (int o = 0; o < COB; ++o) {
        const float b = co0 + o < Cout ? __ldg(bias + co0 + o) : 0.0f;
        acc[0][o] = b;
        acc[1][o] = b;
    }
    const float* __restrict__ xn = x + n * Cin * H * W;
    for (long long c0 = 0; c0 < Cin; c0 += CI_STEP) {
        for (int e = tid; e < CI_STEP * IH * IW; e += 256) {
            const int cc = e / (IH * IW), r = (e / IW) % IH, q = e % IW;
            const long long iy = oy0 + r - 1, ix = ox0 + q - 1;
            float v = 0.0f;
            if (c0 + cc < Cin && iy >= 0 && iy < H && ix >= 0 && ix < W)
                v = __ldg(xn + ((c0 + cc) * H + iy) * W + ix);
            tile[cc][r][q] = v;
        }
        for (int e = tid; e < CI_STEP * 9 * COB; e += 256) {
            const int cc = e / (9 * COB), k = (e / COB) % 9, o = e % COB;
            float v = 0.0f;
            if (c0 + cc < Cin && co0 + o < Cout) v = __ldg(w + ((co0 + o) * Cin + c0 + cc) * 9 + k);
            taps[cc][k][o] = v;
        }
        __syncthreads();
#pragma unroll
        for (int cc = 0; cc < CI_STEP; ++cc) {
#pragma unroll
            for (int p = 0; p < 2; ++p) {
                const int r0 = ty + 8 * p;
#pragma unroll
                for (int ky = 0; ky < 3; ++ky) {
#pragma unroll
                    for (int kx = 0; kx < 3; ++kx) {
                        const float v = tile[cc][r0 + ky][tx + kx];
#pragma unroll
                        for (int o = 0; o < COB; ++o)
                            acc[p][o] = fmaf(v, taps[cc][ky * 3 + kx][o], acc[p][o]);
                    }
                }
            }
        }
        __syncthreads();
    }
    const long long ox = ox0 + tx;
#pragma unroll
    for (int p = 0; p < 2; ++p) {
        const long long oy = oy0 + ty + 8 * p;
        if (ox < W && oy < H) {
#pragma unroll
            for (int o = 0; o < COB; ++o)
                if (co0 + o < Cout) y[((n * Cout + co0 + o) * H + oy) * W + ox] = acc[p][o];
        }
    }
}
