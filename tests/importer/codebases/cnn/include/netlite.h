/* netlite: a small convolutional network library, written the way C CNN frameworks are:
 * float buffers, int sizes, helpers in their own files, prototypes in one header. */
#ifndef NETLITE_H
#define NETLITE_H

#include <stdlib.h>

#define NL_EPS .00001f

typedef struct {
    int c, h, w;
    float *data;
} image_t;

void col_unroll(float *im, int channels, int height, int width, int ksize, int stride,
                int pad, float *col);
void channel_var(float *x, float *mean, int batch, int filters, int spatial, float *var);
void channel_norm(float *x, float *mean, float *var, int batch, int filters, int spatial);
void gemm_acc(int M, int N, int K, float ALPHA, float *A, int lda, float *B, int ldb,
              float *C, int ldc);
void activate_hardtan(float *x, const int n);
double nl_seconds(void);

#endif
