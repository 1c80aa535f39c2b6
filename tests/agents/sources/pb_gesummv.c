/* y = alpha A x + beta B x. */
#define N 2000
typedef double DATA_TYPE;

void kernel_gesummv(int n, double alpha, double beta, DATA_TYPE A[N][N], DATA_TYPE B[N][N],
                    DATA_TYPE tmp[N], DATA_TYPE x[N], DATA_TYPE y[N])
{
  int i, j;

  for (i = 0; i < n; i++)
    {
      tmp[i] = 0.0;
      y[i] = 0.0;
      for (j = 0; j < n; j++)
        {
          tmp[i] = A[i][j] * x[j] + tmp[i];
          y[i] = B[i][j] * x[j] + y[i];
        }
      y[i] = alpha * tmp[i] + beta * y[i];
    }
}
