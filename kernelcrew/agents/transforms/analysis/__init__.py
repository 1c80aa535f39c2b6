"""What the moves read: dependence and reductions (may a loop's iterations run in any
order), which helpers are in reach, OpenMP pragmas, dot-product nests, prefix sums; and
the helpers the moves share (finishing edits, copies of loop bodies, small-size paths,
fresh names). Nothing here imports a move."""
