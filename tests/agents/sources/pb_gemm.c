/* C = alpha A B + beta C on 2D arrays (i-k-j as the suite writes it). */
#define NI 1000
#define NJ 1100
#define NK 1200
typedef double DATA_TYPE;

void kernel_gemm(int ni, int nj, int nk, double alpha, double beta,
                 DATA_TYPE C[NI][NJ], DATA_TYPE A[NI][NK], DATA_TYPE B[NK][NJ])
{
  int i, j, k;

  for (i = 0; i < ni; i++) {
    for (j = 0; j < nj; j++)
      C[i][j] *= beta;
    for (k = 0; k < nk; k++) {
      for (j = 0; j < nj; j++)
        C[i][j] += alpha * A[i][k] * B[k][j];
    }
  }
}
