/* s = A^T r and q = A p in one sweep over A (two mat-vecs sharing the matrix). */
#define M 1900
#define N 2100
typedef double DATA_TYPE;

void kernel_bicg(int m, int n, DATA_TYPE A[N][M], DATA_TYPE s[M], DATA_TYPE q[N],
                 DATA_TYPE p[M], DATA_TYPE r[N])
{
  int i, j;

  for (i = 0; i < m; i++)
    s[i] = 0;
  for (i = 0; i < n; i++)
    {
      q[i] = 0.0;
      for (j = 0; j < m; j++)
        {
          s[j] = s[j] + r[i] * A[i][j];
          q[i] = q[i] + A[i][j] * p[j];
        }
    }
}
