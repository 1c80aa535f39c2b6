/* A small heat-diffusion solver: explicit steps over a grid stored row by row. */
#include <assert.h>

#include "thermal.h"

/* One step, tile by tile. Cells on the grid's border keep their temperature; tiles that
   touch the border take the slow path, the others the plain five-point update. */
void thermal_step(temp_t *next, const temp_t *cur, const temp_t *heat, int rows, int cols,
                  temp_t k)
{
    assert(rows % TILE == 0 && cols % TILE == 0);
    int tiles_x = cols / TILE;
    int tiles = (rows / TILE) * tiles_x;
    for (int t = 0; t < tiles; t++) {
        int r0 = TILE * (t / tiles_x);
        int c0 = TILE * (t % tiles_x);
        if (r0 == 0 || c0 == 0 || r0 + TILE == rows || c0 + TILE == cols) {
            for (int r = r0; r < r0 + TILE; r++) {
                for (int c = c0; c < c0 + TILE; c++) {
                    int i = r * cols + c;
                    if (r == 0 || c == 0 || r == rows - 1 || c == cols - 1)
                        next[i] = cur[i];
                    else
                        next[i] = cur[i] + k * (cur[i - 1] + cur[i + 1] + cur[i - cols]
                                                + cur[i + cols] - 4.0f * cur[i]) + heat[i];
                }
            }
            continue;
        }
        for (int r = r0; r < r0 + TILE; r++) {
            for (int c = c0; c < c0 + TILE; c++) {
                int i = r * cols + c;
                next[i] = cur[i] + k * (cur[i - 1] + cur[i + 1] + cur[i - cols]
                                        + cur[i + cols] - 4.0f * cur[i]) + heat[i];
            }
        }
    }
}

/* Temperatures at probe cells; a probe index must be a cell of the grid. */
void thermal_probe(temp_t *out, const temp_t *grid, const int *probe, int probes, int cells)
{
    for (int p = 0; p < probes; p++) {
        assert(probe[p] >= 0 && probe[p] < cells);
        out[p] = grid[probe[p]];
    }
}

/* Copies of whole grid rows, in the order `pick` gives. */
void thermal_pick_rows(temp_t *out, const temp_t *grid, const int *pick, int picks, int rows,
                       int cols)
{
    for (int p = 0; p < picks; p++) {
        int r = pick[p];
        for (int c = 0; c < cols; c++)
            out[p * cols + c] = grid[r * cols + c];
    }
}

/* Each cell averaged with `reach[c]` cells to each side (at least one) within the row. */
void thermal_blur(temp_t *out, const temp_t *row, const int *reach, int cols)
{
    for (int c = 0; c < cols; c++) {
        assert(reach[c] >= 1);
        temp_t s = 0;
        int n = 0;
        for (int d = -reach[c]; d <= reach[c]; d++) {
            int k = c + d;
            if (k >= 0 && k < cols) {
                s += row[k];
                n++;
            }
        }
        out[c] = s / n;
    }
}
