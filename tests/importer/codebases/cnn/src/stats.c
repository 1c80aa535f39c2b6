#include <math.h>
#include "netlite.h"

/* per-filter variance over a batch of feature maps, as batch norm computes it */
void channel_var(float *x, float *mean, int batch, int filters, int spatial, float *var)
{
    float scale = 1. / (batch * spatial - 1);
    int i, j, k;
    for (i = 0; i < filters; ++i) {
        var[i] = 0;
        for (j = 0; j < batch; ++j) {
            for (k = 0; k < spatial; ++k) {
                int index = j * filters * spatial + i * spatial + k;
                var[i] += pow((x[index] - mean[i]), 2);
            }
        }
        var[i] *= scale;
    }
}

/* batch norm's normalization step, in place */
void channel_norm(float *x, float *mean, float *var, int batch, int filters, int spatial)
{
    int b, f, i;
    for (b = 0; b < batch; ++b) {
        for (f = 0; f < filters; ++f) {
            for (i = 0; i < spatial; ++i) {
                int index = b * filters * spatial + f * spatial + i;
                x[index] = (x[index] - mean[f]) / (sqrtf(var[f]) + NL_EPS);
            }
        }
    }
}
