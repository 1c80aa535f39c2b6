#ifndef DSP_H
#define DSP_H
#define SAMPLES 4096
#define TAPS 32
#define ROWS 64
#define COLS 96
#endif
