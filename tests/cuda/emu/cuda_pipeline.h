// The emulation's stand-in for CUDA's <cuda_pipeline.h>: kc_emu_ext.h defines what it declares.
#pragma once
