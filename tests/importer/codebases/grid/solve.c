/* Dense solves for the implicit steps: factor in place, no pivoting (the solver's
   matrices are diagonally dominant). */
#include "thermal.h"

void lu_inplace(temp_t *m, int n)
{
    for (int p = 0; p < n; p++) {
        temp_t *row_p = m + p * n;
        for (int i = p + 1; i < n; i++) {
            temp_t *row_i = m + i * n;
            temp_t f = row_i[p] / row_p[p];
            row_i[p] = f;
            for (int j = p + 1; j < n; j++)
                row_i[j] -= f * row_p[j];
        }
    }
}
