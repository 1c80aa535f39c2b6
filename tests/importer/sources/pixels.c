/* 8-bit image code as video and image libraries write it: a typedef for the pixel,
 * strides in bytes, row pointers stepped by them, int accumulation, clipping. */
#include <stdint.h>
#include <stdlib.h>

typedef uint8_t pixel;

static inline int clip_pixel(int v) { return v < 0 ? 0 : (v > 255 ? 255 : v); }

/* sum of absolute differences of two w x h blocks */
int block_sad(const pixel *a, int stride_a, const pixel *b, int stride_b, int w, int h)
{
    int sum = 0;
    for (int y = 0; y < h; y++) {
        for (int x = 0; x < w; x++)
            sum += abs(a[x] - b[x]);
        a += stride_a;
        b += stride_b;
    }
    return sum;
}

/* a weighted average of two images with rounding, the result clipped to 8 bits */
void blend_rows(pixel *dst, const pixel *src1, const pixel *src2, int width, int height,
                int w1, int w2)
{
    for (int y = 0; y < height; y++) {
        const pixel *p = src1 + y * width;
        const pixel *q = src2 + y * width;
        pixel *d = dst + y * width;
        for (int x = 0; x < width; x++)
            d[x] = (pixel)clip_pixel((p[x] * w1 + q[x] * w2 + 32) >> 6);
    }
}
