/* kernelcrew
entry: conv2d
flags: [-O3, -march=native, -fopenmp]
*/
// Hand-optimized CPU version: one output plane at a time (it stays in L1), started at
// the bias; for every input channel and filter row, the three taps of that row added
// along the output row in one vectorized pass over the interior, the padded edges
// apart. (n, output channel) planes split across OpenMP threads.
#include <cstdint>

namespace {

void plane(const float* __restrict__ img, const float* __restrict__ filt, float bias,
           float* __restrict__ y, int64_t cin, int64_t h, int64_t w) {
    for (int64_t i = 0; i < h * w; ++i) y[i] = bias;
    for (int64_t c = 0; c < cin; ++c) {
        const float* xc = img + c * h * w;
        const float* f = filt + c * 9;
        for (int64_t ky = 0; ky < 3; ++ky) {
            const float w0 = f[ky * 3], w1 = f[ky * 3 + 1], w2 = f[ky * 3 + 2];
            const int64_t oy0 = ky == 0 ? 1 : 0;
            const int64_t oy1 = ky == 2 ? h - 1 : h;
            for (int64_t oy = oy0; oy < oy1; ++oy) {
                const float* xr = xc + (oy + ky - 1) * w;
                float* yr = y + oy * w;
                if (w == 1) {
                    yr[0] += w1 * xr[0];
                    continue;
                }
                yr[0] += w1 * xr[0] + w2 * xr[1];
#pragma omp simd
                for (int64_t ox = 1; ox < w - 1; ++ox)
                    yr[ox] += w0 * xr[ox - 1] + w1 * xr[ox] + w2 * xr[ox + 1];
                yr[w - 1] += w0 * xr[w - 2] + w1 * xr[w - 1];
            }
        }
    }
}

}  // namespace

extern "C" void conv2d(const float* __restrict__ x, const float* __restrict__ w,
                       const float* __restrict__ bias, float* __restrict__ y, int64_t N,
                       int64_t Cin, int64_t Cout, int64_t H, int64_t W) {
    const int64_t planes = N * Cout;
    if (planes * Cin * H * W * 9 < (int64_t)1 << 21) {  // under ~1 ms of work: one thread
        for (int64_t p = 0; p < planes; ++p) {
            const int64_t n = p / Cout, co = p % Cout;
            plane(x + n * Cin * H * W, w + co * Cin * 9, bias[co], y + p * H * W, Cin, H, W);
        }
        return;
    }
#pragma omp parallel for schedule(static)
    for (int64_t p = 0; p < planes; ++p) {
        const int64_t n = p / Cout, co = p % Cout;
        plane(x + n * Cin * H * W, w + co * Cin * 9, bias[co], y + p * H * W, Cin, H, W);
    }
}
