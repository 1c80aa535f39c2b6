/* colsum: scaled column sums of a square matrix, s = scale * (1^T A). */
#include <math.h>
#include <polysuite.h>
#include "colsum.h"

static void init(int n, real_t PS_2D(A, N, N)) {
  int i, j;
  for (i = 0; i < n; i++)
    for (j = 0; j < n; j++)
      A[i][j] = (real_t)((i * 7 + j * 3) % 17) / 17 - 0.5;
}

/* The kernel: counters at the top, column reads A[i][j] with i innermost. */
static void kernel_colsum(int n, real_t scale, real_t PS_2D(A, N, N), real_t PS_1D(s, N)) {
  int i, j;
  for (j = 0; j < _PS_N; j++) {
    register real_t acc = 0;
    for (i = 0; i < _PS_N; i++)
      acc += A[i][j];
    s[j] = scale * acc;
  }
}

int main(int argc, char **argv) {
  int n = N, reps = argc > 1 ? atoi(argv[1]) : 10, r, j;
  real_t (*A)[N + PS_PAD] = PS_ALLOC_2D(real_t, N, N);
  real_t *s = PS_ALLOC_1D(real_t, N);
  double check = 0;
  init(n, A);
  ps_start();
  for (r = 0; r < reps; r++)
    kernel_colsum(n, 0.5, A, s);
  ps_stop();
  for (j = 0; j < n; j++)
    check += s[j] * (j % 5 + 1);
  printf("checksum: %.12e\n", check);
  for (j = 0; j < n; j += n / 8)
    printf("s[%d] = %.12e\n", j, s[j]);
  free(A);
  free(s);
  return 0;
}
