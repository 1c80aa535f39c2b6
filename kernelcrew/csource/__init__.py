"""C and C++ source analysis shared by the profiler (`tools.observe`) and the moves
(`agents.transforms`): the tree-sitter syntax layer (`syntax`) and affine forms of
subscripts and loop bounds (`affine`, the one linearizer both read strides with). It sits
at the bottom of the layers: it imports nothing else of the package."""
