/* gesum2: y = alpha * A x + beta * B x, two matrix-vector products sharing x. */
#include <polysuite.h>
#include "gesum2.h"

static void kernel_gesum2(int n, DATA_TYPE alpha, DATA_TYPE beta,
                          DATA_TYPE PS_2D(A, N, N), DATA_TYPE PS_2D(B, N, N),
                          DATA_TYPE PS_1D(tmp, N), DATA_TYPE PS_1D(x, N),
                          DATA_TYPE PS_1D(y, N)) {
  int i, j;
  for (i = 0; i < _PS_N; i++) {
    tmp[i] = SCALAR(0.0);
    y[i] = SCALAR(0.0);
    for (j = 0; j < _PS_N; j++) {
      tmp[i] = A[i][j] * x[j] + tmp[i];
      y[i] = B[i][j] * x[j] + y[i];
    }
    y[i] = alpha * tmp[i] + beta * y[i];
  }
}

int main(void) {
  int n = N, i, j;
  DATA_TYPE (*A)[N + PS_PAD] = PS_ALLOC_2D(DATA_TYPE, N, N);
  DATA_TYPE (*B)[N + PS_PAD] = PS_ALLOC_2D(DATA_TYPE, N, N);
  DATA_TYPE *tmp = PS_ALLOC_1D(DATA_TYPE, N), *x = PS_ALLOC_1D(DATA_TYPE, N);
  DATA_TYPE *y = PS_ALLOC_1D(DATA_TYPE, N);
  for (i = 0; i < n; i++) {
    x[i] = (DATA_TYPE)(i % n) / n;
    for (j = 0; j < n; j++) {
      A[i][j] = (DATA_TYPE)((i * j + 1) % n) / n;
      B[i][j] = (DATA_TYPE)((i * j + 2) % n) / n;
    }
  }
  ps_start();
  kernel_gesum2(n, SCALAR(1.5), SCALAR(1.2), A, B, tmp, x, y);
  ps_stop();
  for (i = 0; i < n; i += n / 10)
    printf("y[%d] = %.12e\n", i, y[i]);
  return 0;
}
