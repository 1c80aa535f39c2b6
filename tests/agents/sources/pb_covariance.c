/* Covariance of m variables over n samples: means, centering, then a triangular nest
   whose inner loop reads two columns of data. */
#define M 1200
#define N 1400
typedef double DATA_TYPE;

void kernel_covariance(int m, int n, double float_n, DATA_TYPE data[N][M],
                       DATA_TYPE cov[M][M], DATA_TYPE mean[M])
{
  int i, j, k;

  for (j = 0; j < m; j++)
    {
      mean[j] = 0.0;
      for (i = 0; i < n; i++)
        mean[j] += data[i][j];
      mean[j] /= float_n;
    }

  for (i = 0; i < n; i++)
    for (j = 0; j < m; j++)
      data[i][j] -= mean[j];

  for (i = 0; i < m; i++)
    for (j = i; j < m; j++)
      {
        cov[i][j] = 0.0;
        for (k = 0; k < n; k++)
          cov[i][j] += data[k][i] * data[k][j];
        cov[i][j] /= (float_n - 1.0);
        cov[j][i] = cov[i][j];
      }
}
