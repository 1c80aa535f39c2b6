/* An embedded-style file: every size fixed by the build, no size parameters, 2D data
   passed through array typedefs. */
#include "dsp.h"

typedef float mat_t[ROWS][COLS];
typedef const float taps_t[TAPS];

void fir_fixed(const short x[], const short h[], long y[])
{
  long i, j, acc;

  for (i = 0; i < SAMPLES - TAPS; i++) {
    acc = 0;
    for (j = 0; j < TAPS; j++)
      acc += x[i + j] * h[j];
    y[i] = acc >> 15;
  }
}

void scale_rows(mat_t a, taps_t w, mat_t out)
{
  int r, c;

  for (r = 0; r < ROWS; r++)
    for (c = 0; c < COLS; c++)
      out[r][c] = a[r][c] * w[c % TAPS];
}

void blocks_sum(const mat_t *blocks, int nblocks, float *total)
{
  int b, r, c;

  for (b = 0; b < nblocks; b++) {
    float s = 0.0f;
    for (r = 0; r < ROWS; r++)
      for (c = 0; c < COLS; c++)
        s += blocks[b][r][c];
    total[b] = s;
  }
}
