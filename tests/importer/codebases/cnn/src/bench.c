/* netlite's layer benchmark: times each layer and prints a checksum of its output */
#include <stdio.h>
#include "netlite.h"

static float frand(unsigned *s) { *s = *s * 1103515245u + 12345u; return (*s >> 9) / 8388608.0f - 0.5f; }

int main(void)
{
    unsigned seed = 1;
    int c = 32, h = 40, w = 40, k = 3, f = 64, b = 4, sp = 400, i;
    int oh = h, ow = w, rows = c * k * k;
    float *im = malloc(sizeof(float) * c * h * w), *col = malloc(sizeof(float) * rows * oh * ow);
    float *x = malloc(sizeof(float) * b * f * sp), *mean = malloc(sizeof(float) * f);
    float *var = malloc(sizeof(float) * f), *W = malloc(sizeof(float) * f * rows);
    float *out = calloc(f * oh * ow, sizeof(float));
    double t, sum;
    for (i = 0; i < c * h * w; ++i) im[i] = frand(&seed);
    for (i = 0; i < b * f * sp; ++i) x[i] = frand(&seed);
    for (i = 0; i < f; ++i) mean[i] = frand(&seed) * 0.1f;
    for (i = 0; i < f * rows; ++i) W[i] = frand(&seed);
    t = nl_seconds();
    col_unroll(im, c, h, w, k, 1, 1, col);
    printf("unroll time: %.6f\n", nl_seconds() - t);
    t = nl_seconds();
    gemm_acc(f, oh * ow, rows, 1, W, rows, col, oh * ow, out, oh * ow);
    printf("gemm time: %.6f\n", nl_seconds() - t);
    t = nl_seconds();
    channel_var(x, mean, b, f, sp, var);
    printf("var time: %.6f\n", nl_seconds() - t);
    t = nl_seconds();
    activate_hardtan(out, f * oh * ow);
    printf("activate time: %.6f\n", nl_seconds() - t);
    for (sum = 0, i = 0; i < rows * oh * ow; ++i) sum += col[i] * (i % 7);
    printf("col checksum: %.9e\n", sum);
    for (sum = 0, i = 0; i < f * oh * ow; ++i) sum += out[i] * (i % 5);
    printf("out checksum: %.9e\n", sum);
    for (sum = 0, i = 0; i < f; ++i) sum += var[i] * (i % 3 + 1);
    printf("var checksum: %.9e\n", sum);
    return 0;
}
