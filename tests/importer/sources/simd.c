/* A helper with an SSE path the build's instruction-set macros select, and the portable
   path beside it (the usual shape of hand-vectorized C). */
#ifdef __SSE__
#include <xmmintrin.h>
static inline float dot(int n, const float *x, const float *y)
{
  int i, n4 = n >> 2 << 2;
  float t[4], s = 0.0f;
  __m128 acc = _mm_setzero_ps();
  for (i = 0; i < n4; i += 4)
    acc = _mm_add_ps(acc, _mm_mul_ps(_mm_loadu_ps(&x[i]), _mm_loadu_ps(&y[i])));
  for (; i < n; ++i)
    s += x[i] * y[i];
  _mm_storeu_ps(t, acc);
  return s + t[0] + t[1] + t[2] + t[3];
}
#else
static inline float dot(int n, const float *x, const float *y)
{
  int i;
  float s = 0.0f;
  for (i = 0; i < n; ++i)
    s += x[i] * y[i];
  return s;
}
#endif

void rows_dot(int rows, int cols, const float *a, const float *v, float *out)
{
  int r;
  for (r = 0; r < rows; r++)
    out[r] = dot(cols, a + r * cols, v);
}
