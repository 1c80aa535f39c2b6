"""Theoretical occupancy against hand-computed cases (the occupancy calculator's rules)."""

from __future__ import annotations

import pytest

from kernelcrew.errors import InputError
from kernelcrew.tools.backends.occupancy import sm_limits, theoretical_occupancy


# (arch, threads, regs, smem) -> (blocks/SM, warps/SM, limiter); worked by hand:
@pytest.mark.parametrize(("args", "want"), [
    # 8 warps/block; 32 regs = 1024/warp -> 16 warps per 16K-register sub-partition
    # -> 64 warps = 8 blocks; the warp slots also allow 8: full, limited by warps
    (("sm_90", 256, 32, 0), (8, 64, "warps")),
    # 64 regs = 2048/warp -> 8 per sub-partition -> 32 warps -> 4 blocks (50%)
    (("sm_90", 256, 64, 0), (4, 32, "registers")),
    # 40 regs = 1280/warp -> 12 per sub-partition -> 48 warps -> 12 blocks of 4 (75%)
    (("sm_90", 128, 40, 0), (12, 48, "registers")),
    # 33 regs round up to 1280/warp -> 48 warps -> one 32-warp block (50%)
    (("sm_90", 1024, 33, 0), (1, 32, "registers")),
    # 72 regs x 32 warps = 73728 > 65536: the block cannot launch
    (("sm_90", 1024, 72, 0), (0, 0, "registers")),
    # 48 KB + 1 KB reserved = 50176 B per block; 228 KB / 50176 = 4 blocks of 4 warps
    (("sm_90", 128, 16, 48 * 1024), (4, 16, "shared memory")),
    # 1-warp blocks: the 32 block slots bind first (50%)
    (("sm_90", 32, 16, 0), (32, 32, "blocks")),
    # sm_89: 48 warp slots -> 6 blocks of 8 warps = 100% of 48
    (("sm_89", 256, 32, 0), (6, 48, "warps")),
    # sm_80: 164 KB per SM; 100 KB + 1 KB per block -> 1 block
    (("sm_80", 256, 32, 100 * 1024), (1, 8, "shared memory")),
])
def test_hand_computed_cases(args, want) -> None:
    arch, threads, regs, smem = args
    occ = theoretical_occupancy(arch, block_threads=threads, registers_per_thread=regs,
                                shared_bytes_per_block=smem)
    assert (occ.blocks_per_sm, occ.warps_per_sm, occ.limiter) == want
    assert occ.occupancy == pytest.approx(want[1] / sm_limits(arch).max_warps)


def test_unlaunchable_blocks_say_why() -> None:
    occ = theoretical_occupancy("sm_90", block_threads=1024, registers_per_thread=72)
    assert occ.blocks_per_sm == 0 and "registers" in occ.reason
    occ = theoretical_occupancy("sm_90", block_threads=128, registers_per_thread=16,
                                shared_bytes_per_block=228 * 1024)
    assert occ.blocks_per_sm == 0 and "shared memory" in occ.reason
    occ = theoretical_occupancy("sm_90", block_threads=2048, registers_per_thread=16)
    assert occ.blocks_per_sm == 0 and "2048 threads" in occ.reason


def test_odd_block_sizes_round_up_to_whole_warps() -> None:
    occ = theoretical_occupancy("sm_90", block_threads=33, registers_per_thread=16)
    assert occ.warps_per_block == 2 and occ.blocks_per_sm == 32


def test_arch_variants_and_unknown_arch() -> None:
    assert sm_limits("sm_90a").arch == "sm_90"
    with pytest.raises(InputError, match="no occupancy table"):
        sm_limits("sm_61")
