/* kernelcrew
entry: conv2d
flags: [-O2]
*/
// Direct convolution as an image-processing library writes it: output channels split
// across threads by an existing OpenMP pragma, a static helper computes one output
// pixel with the padding checked per tap, constants as macros.
#include <stdint.h>

#define KSIZE 3
#define PAD 1

static float conv_pixel(const float* img, const float* filt, int cin, int h, int w, int oy,
                        int ox) {
    float sum = 0.0f;
    for (int c = 0; c < cin; c++) {
        for (int ky = 0; ky < KSIZE; ky++) {
            for (int kx = 0; kx < KSIZE; kx++) {
                int iy = oy + ky - PAD;
                int ix = ox + kx - PAD;
                if (iy < 0 || iy >= h || ix < 0 || ix >= w) continue;
                sum += img[(c * h + iy) * w + ix] * filt[(c * KSIZE + ky) * KSIZE + kx];
            }
        }
    }
    return sum;
}

extern "C" void conv2d(const float* x, const float* w, const float* bias, float* y,
                       int64_t N, int64_t Cin, int64_t Cout, int64_t H, int64_t W) {
    int n_ = (int)N, cin = (int)Cin, cout = (int)Cout, h = (int)H, wd = (int)W;
    for (int n = 0; n < n_; n++) {
        const float* img = x + (int64_t)n * cin * h * wd;
#pragma omp parallel for
        for (int co = 0; co < cout; co++) {
            const float* filt = w + (int64_t)co * cin * KSIZE * KSIZE;
            float* plane = y + ((int64_t)n * cout + co) * h * wd;
            for (int oy = 0; oy < h; oy++) {
                for (int ox = 0; ox < wd; ox++) {
                    plane[oy * wd + ox] = bias[co] + conv_pixel(img, filt, cin, h, wd, oy, ox);
                }
            }
        }
    }
}
