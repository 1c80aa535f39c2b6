/* y = A^T (A x): a polyhedral-suite style kernel (double, fixed-size 2D parameters,
   counters at the top of the function). */
#define M 1900
#define N 2100
typedef double DATA_TYPE;

void kernel_atax(int m, int n, DATA_TYPE A[M][N], DATA_TYPE x[N], DATA_TYPE y[N],
                 DATA_TYPE tmp[M])
{
  int i, j;

  for (i = 0; i < n; i++)
    y[i] = 0;
  for (i = 0; i < m; i++)
    {
      tmp[i] = 0.0;
      for (j = 0; j < n; j++)
        tmp[i] = tmp[i] + A[i][j] * x[j];
      for (j = 0; j < n; j++)
        y[j] = y[j] + A[i][j] * tmp[i];
    }
}
