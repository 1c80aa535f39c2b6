#include "netlite.h"

/* one pixel of the padded image; zero outside it */
float unroll_pixel(float *im, int height, int width, int channels, int row, int col,
                   int channel, int pad)
{
    row -= pad;
    col -= pad;
    if (row < 0 || col < 0 || row >= height || col >= width) return 0;
    return im[col + width * (row + height * channel)];
}

/* image (channels x height x width) to columns for a convolution as a matrix product */
void col_unroll(float *im, int channels, int height, int width, int ksize, int stride,
                int pad, float *col)
{
    int c, h, w;
    int out_h = (height + 2 * pad - ksize) / stride + 1;
    int out_w = (width + 2 * pad - ksize) / stride + 1;
    int rows = channels * ksize * ksize;
    for (c = 0; c < rows; ++c) {
        int kx = c % ksize;
        int ky = (c / ksize) % ksize;
        int ch = c / ksize / ksize;
        for (h = 0; h < out_h; ++h) {
            for (w = 0; w < out_w; ++w) {
                int y = ky + h * stride;
                int x = kx + w * stride;
                col[(c * out_h + h) * out_w + w] =
                    unroll_pixel(im, height, width, channels, y, x, ch, pad);
            }
        }
    }
}
