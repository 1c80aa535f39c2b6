#ifndef THERMAL_H
#define THERMAL_H

/* The solver works on whole tiles: grids are a multiple of TILE cells on each side. */
#define TILE 16

typedef float temp_t;

#endif
