"""Evaluation on top of the crew: the eval suite, its peers and `make bench`.

Layer: the top, with the CLI. May import every other layer; nothing imports it.
(Run timelines and reports moved to `kernelcrew.report`; `kernelcrew.evals.timeline`
re-exports the old names.)
"""
