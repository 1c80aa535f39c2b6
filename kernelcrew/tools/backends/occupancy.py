"""Theoretical occupancy from a kernel's resources, without a device.

The arithmetic of NVIDIA's occupancy calculator (cuda_occupancy.h): resident blocks
per SM are limited by the warp slots, the block slots, the register file (allocated
per warp in units of 256 registers, split over 4 sub-partitions) and shared memory
(allocated per block in units of 128 bytes, plus 1 KB the system reserves per block).
With a device, `cudaOccupancyMaxActiveBlocksPerMultiprocessor` gives the same number;
this module exists so compile-only runs (and agents) can reason about occupancy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from kernelcrew.errors import InputError


@dataclass(frozen=True)
class SMLimits:
    """Per-SM limits of one compute capability."""

    arch: str
    max_warps: int  # resident warps per SM
    max_blocks: int  # resident blocks per SM
    registers: int = 65536  # 32-bit registers per SM (and per block)
    max_registers_per_thread: int = 255
    register_unit: int = 256  # registers are allocated per warp in units of this
    sub_partitions: int = 4  # the register file is split over the SM's schedulers
    shared_per_sm: int = 0  # bytes of shared memory per SM at the largest carveout
    max_shared_per_block: int = 0  # bytes a block may opt in to (dynamic + static)
    shared_reserved_per_block: int = 1024  # the system's share per resident block
    shared_unit: int = 128  # shared memory allocation granularity, bytes
    max_threads_per_block: int = 1024
    warp_size: int = 32


KB = 1024
ARCHS: dict[str, SMLimits] = {
    "sm_80": SMLimits("sm_80", max_warps=64, max_blocks=32, shared_per_sm=164 * KB,
                      max_shared_per_block=163 * KB),
    "sm_86": SMLimits("sm_86", max_warps=48, max_blocks=16, shared_per_sm=100 * KB,
                      max_shared_per_block=99 * KB),
    "sm_89": SMLimits("sm_89", max_warps=48, max_blocks=24, shared_per_sm=100 * KB,
                      max_shared_per_block=99 * KB),
    "sm_90": SMLimits("sm_90", max_warps=64, max_blocks=32, shared_per_sm=228 * KB,
                      max_shared_per_block=227 * KB),
}


@dataclass(frozen=True)
class Occupancy:
    arch: str
    block_threads: int
    warps_per_block: int
    blocks_per_sm: int  # resident blocks per SM (0: the block cannot launch)
    warps_per_sm: int
    max_warps_per_sm: int
    limiter: str  # "warps" | "blocks" | "registers" | "shared memory"
    limits: dict[str, int]  # blocks per SM each resource allows
    reason: str = ""  # why blocks_per_sm is 0

    @property
    def occupancy(self) -> float:
        """Resident warps / the SM's warp slots, 0..1."""
        return self.warps_per_sm / self.max_warps_per_sm


def sm_limits(arch: str) -> SMLimits:
    key = arch.rstrip("af") if arch.rstrip("af") in ARCHS else arch  # sm_90a -> sm_90
    if key not in ARCHS:
        raise InputError(f"no occupancy table for {arch!r}; known: {', '.join(ARCHS)}")
    return ARCHS[key]


def theoretical_occupancy(arch: str, *, block_threads: int, registers_per_thread: int,
                          shared_bytes_per_block: int = 0) -> Occupancy:
    """Occupancy of one kernel launch configuration.

    `shared_bytes_per_block` is static (ptxas `smem`) plus dynamic (launch
    `shared_bytes`); registers per thread as ptxas reports them.
    """
    hw = sm_limits(arch)
    if block_threads <= 0:
        raise InputError(f"block of {block_threads} threads; it must be at least 1")
    warps = math.ceil(block_threads / hw.warp_size)
    limits: dict[str, int] = {
        "warps": hw.max_warps // warps,
        "blocks": hw.max_blocks,
    }
    reason = ""
    if block_threads > hw.max_threads_per_block:
        reason = f"{block_threads} threads per block exceed {hw.max_threads_per_block}"
        limits["warps"] = 0

    # registers: per warp, rounded up to the allocation unit; a block must fit the file
    # with its warps rounded up to the sub-partitions (the hardware's launch check)
    if registers_per_thread > hw.max_registers_per_thread:
        limits["registers"] = 0
        reason = reason or (f"{registers_per_thread} registers per thread exceed "
                            f"{hw.max_registers_per_thread}")
    elif registers_per_thread > 0:
        per_warp = _round_up(registers_per_thread * hw.warp_size, hw.register_unit)
        assumed = per_warp * _round_up(warps, hw.sub_partitions)
        if assumed > hw.registers or per_warp * warps > hw.registers:
            limits["registers"] = 0
            reason = reason or (f"{registers_per_thread} registers x {block_threads} threads "
                                f"need more than the {hw.registers} registers of an SM")
        else:
            warps_per_sub = (hw.registers // hw.sub_partitions) // per_warp
            limits["registers"] = warps_per_sub * hw.sub_partitions // warps
    else:
        limits["registers"] = hw.max_blocks

    smem = _round_up(shared_bytes_per_block + hw.shared_reserved_per_block, hw.shared_unit)
    if shared_bytes_per_block > hw.max_shared_per_block:
        limits["shared memory"] = 0
        reason = reason or (f"{shared_bytes_per_block} bytes of shared memory per block exceed "
                            f"{hw.max_shared_per_block}")
    else:
        limits["shared memory"] = hw.shared_per_sm // smem

    blocks = min(limits.values())
    # name the tightest limit; on a tie the hardware's own slots (a full SM is not
    # "limited by registers")
    order = ["warps", "blocks", "registers", "shared memory"]
    limiter = min(order, key=lambda k: (limits[k], order.index(k)))
    return Occupancy(arch=hw.arch, block_threads=block_threads, warps_per_block=warps,
                     blocks_per_sm=blocks, warps_per_sm=blocks * warps,
                     max_warps_per_sm=hw.max_warps, limiter=limiter, limits=limits,
                     reason=reason if blocks == 0 else "")


def _round_up(x: int, unit: int) -> int:
    return -(-x // unit) * unit


# -- register pressure (the three choices of a register-limited kernel) -----------------
def register_limit_for(arch: str, block_threads: int, min_blocks: int) -> int:
    """The registers per thread ptxas may use under `__launch_bounds__(block, min_blocks)`:
    min_blocks blocks of block_threads must fit the register file (allocation units)."""
    hw = sm_limits(arch)
    warps = math.ceil(block_threads / hw.warp_size) * min_blocks
    per_warp = hw.registers // max(1, _round_up(warps, hw.sub_partitions))
    per_warp -= per_warp % hw.register_unit
    return max(16, min(hw.max_registers_per_thread, per_warp // hw.warp_size))


@dataclass(frozen=True)
class RegisterChoice:
    """One way to relieve register pressure, with what ptxas made of it."""

    label: str  # "smaller blocks (128)" | "__launch_bounds__(256, 3)" | "-maxrregcount=80"
    how: str  # "block" | "launch_bounds" | "maxrregcount"
    value: int  # the new block size, the min-blocks value, or the register cap
    registers: int
    spill_bytes: int
    block_threads: int
    shared_bytes: int = 0
    measured_ms: float | None = None  # a device measurement of this choice, when there is one


def rank_register_choices(arch: str, choices: list[RegisterChoice]
                          ) -> list[tuple[RegisterChoice, float, str]]:
    """Best first: (choice, occupancy 0..1, why). With a measurement for every choice the
    fastest wins; otherwise no spills first (local memory costs more than the occupancy
    it buys), then the highest theoretical occupancy, then fewer registers."""
    scored = []
    for c in choices:
        occ = theoretical_occupancy(arch, block_threads=c.block_threads,
                                    registers_per_thread=c.registers,
                                    shared_bytes_per_block=c.shared_bytes)
        why = (f"{c.label}: {c.registers} regs, {c.spill_bytes} B spilled, "
               f"{occ.occupancy:.0%} theoretical occupancy ({occ.limiter})"
               + (f", {c.measured_ms:.4f} ms measured" if c.measured_ms is not None else ""))
        scored.append((c, occ.occupancy, why))
    if scored and all(c.measured_ms is not None for c, _, _ in scored):
        return sorted(scored, key=lambda t: t[0].measured_ms)
    return sorted(scored, key=lambda t: (t[0].spill_bytes > 0, -t[1], t[0].registers))
