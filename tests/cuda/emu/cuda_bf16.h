// The emulation's stand-in for CUDA's <cuda_bf16.h>: kc_emu_ext.h defines what it declares.
#pragma once
