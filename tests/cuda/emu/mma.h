// The emulation's stand-in for CUDA's <mma.h>: kc_emu_ext.h defines what it declares.
#pragma once
