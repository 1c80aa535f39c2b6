/* A function with a mode argument and a mode it does not handle (it aborts there, as a
   BLAS-like routine does for a transpose combination it lacks). */
#include <stdlib.h>

void apply_mode(int mode, int n, const float *x, float *y)
{
  int i;
  if (mode == 0) {
    for (i = 0; i < n; i++)
      y[i] = 2.0f * x[i];
  } else if (mode == 1) {
    for (i = 0; i < n; i++)
      y[i] = x[i] * x[i] + 1.0f;
  } else {
    abort();
  }
}
