/* A row-wise scaled normalisation, written the way application code often is:
 * int sizes, pointer arithmetic on rows, a static helper, a macro constant and an
 * OpenMP pragma that was already there. */
#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include "project_config.h"

#define NORM_EPS 1e-6f
#define SQUARE(v) ((v) * (v))

static float row_mean(const float* row, int cols) {
    float s = 0.0f;
    for (int j = 0; j < cols; j++) {
        s += row[j];
    }
    return s / (float)cols;
}

/* not needed by rownorm_forward: must not be imported */
static void print_row(const float* row, int cols) {
    for (int j = 0; j < cols; j++) printf("%f ", row[j]);
}

void rownorm_forward(float* out, const float* inp, const float* gain, int rows, int cols) {
    #pragma omp parallel for
    for (int i = 0; i < rows; i++) {
        const float* x = inp + i * cols;
        float* y = out + i * cols;
        float m = row_mean(x, cols);
        float v = 0.0f;
        for (int j = 0; j < cols; j++) {
            v += SQUARE(x[j] - m);
        }
        float inv = 1.0f / sqrtf(v / cols + NORM_EPS);
        for (int j = 0; j < cols; j++) {
            y[j] = (x[j] - m) * inv * gain[j];
        }
    }
}

/* out = inp (rows x inner) times w (inner x cols), row pointers, the textbook loop order */
void project_rows(float* out, const float* inp, const float* w, int rows, int inner,
                  int cols) {
    for (int i = 0; i < rows; i++) {
        float* y = out + i * cols;
        for (int j = 0; j < cols; j++) {
            float acc = 0.0f;
            for (int k = 0; k < inner; k++) {
                acc += inp[i * inner + k] * w[k * cols + j];
            }
            y[j] = acc;
        }
    }
}

int main(void) {
    float a[4] = {1, 2, 3, 4}, g[2] = {1, 1}, o[4];
    rownorm_forward(o, a, g, 2, 2);
    print_row(o, 4);
    return 0;
}
