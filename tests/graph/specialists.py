"""Specialists defined outside the package, registered by the tests."""

from __future__ import annotations

from typing import ClassVar

from kernelcrew.agents.proposal import Change, Proposal
from kernelcrew.kernels.kernelfile import parse_kernel_text

BROKEN = "\n#error this candidate does not compile\n"


def _proposal(author: str, kind: str, text: str, plan: str) -> Proposal:
    return Proposal(author=author, bottleneck="Test bottleneck.", plan=plan,
                    change=Change(type="source", kind=kind, kernel=text, regions=[kind]),
                    expected_gain=1.2, risks="none", confidence=0.5)


class UnrollFlagsSpecialist:
    """Proposes -funroll-loops: a plain flags change (compiles, stays correct)."""

    name = "unroll_flags"
    field = "loop unrolling by the compiler"

    def propose(self, ctx):
        kf = parse_kernel_text(ctx.kernel, ctx.backend)
        if "-funroll-loops" in kf.meta.flags:
            return []
        flags = [*kf.meta.flags, "-funroll-loops"]
        p = _proposal(self.name, "flags:unroll", kf.with_changes(flags=flags).text,
                      "let the compiler unroll the loops")
        p.change.type, p.change.flags, p.change.regions = "flags", flags, []
        return [p]

    def revise(self, ctx, failed):
        return None


class FlakyCompilerSpecialist:
    """First writes code that does not compile, then fixes it after reading the errors."""

    name = "flaky"
    field = "tests the compile-error loop"
    feedback_seen: ClassVar[list[str]] = []

    def propose(self, ctx):
        if "flaky-fixed" in ctx.kernel:
            return []
        return [_proposal(self.name, "flaky", ctx.kernel + BROKEN, "a change that breaks")]

    def revise(self, ctx, failed):
        type(self).feedback_seen.append(ctx.feedback.message)
        fixed = failed.change.kernel.replace(BROKEN, "\n// flaky-fixed\n")
        return _proposal(self.name, "flaky", fixed, "remove the #error line")


class AlwaysBrokenSpecialist:
    """Never compiles: after three failures in a row the crew must plan first."""

    name = "always_broken"
    field = "tests plan-first"
    plans: ClassVar[list[int]] = []

    def plan(self, ctx):
        type(self).plans.append(ctx.iteration)
        return "re-plan: stop emitting #error"

    def propose(self, ctx):
        return [_proposal(self.name, f"broken{ctx.iteration}", ctx.kernel + BROKEN, "break it")]

    def revise(self, ctx, failed):
        return failed  # same mistake again


class LearnsFromPlanSpecialist:
    """Broken code until it has planned: the crew must re-plan each candidate after its
    compile errors, then plan first with the crew's errors in hand, then reset the flag
    once a candidate compiles."""

    name = "learns_from_plan"
    field = "tests re-planning"
    plans: ClassVar[list[tuple[int, str, bool]]] = []  # iteration, feedback kind, errors seen
    replans: ClassVar[list[bool]] = []  # Feedback.replan of each revision asked for
    fixed: ClassVar[bool] = False

    def plan(self, ctx):
        fb = ctx.feedback
        type(self).plans.append((ctx.iteration, fb.kind if fb else "",
                                 bool(fb and "#error this candidate" in fb.message)))
        type(self).fixed = True
        return "stop emitting #error"

    def propose(self, ctx):
        if not type(self).fixed:
            return [_proposal(self.name, "broken", ctx.kernel + BROKEN, "break it")]
        return [_proposal(self.name, f"fine{ctx.iteration}",
                          ctx.kernel + f"\n// planned change {ctx.iteration}\n", "a comment")]

    def revise(self, ctx, failed):
        type(self).replans.append(ctx.feedback.replan)
        return failed  # same mistake again
