"""The judge: is a kernel correct, and is it faster?

Owns the worker process (`worker`, run confined, judging nothing), the comparison with
the float64 reference (`verify`), the parent side of every run (`harness`), the
regression gate (`gate`), the graph's evaluation step (`evaluate`) and the
`kernelcrew check` command (`check`).

May import: everything `backends` may, and `kernelcrew.tools.backends`. Not `observe`.
"""
