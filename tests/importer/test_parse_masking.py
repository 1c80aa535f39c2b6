"""What the parser reads in place of a C file (kernelcrew/csource/masking.py): the same
bytes at the same offsets, with qualifier macros and `#if` fragments blanked, and nothing
else touched."""

from __future__ import annotations

from kernelcrew.csource.masking import mask, qualifier_macros
from kernelcrew.csource.syntax import Source, find_function

SRC = """#define MY_INLINE static inline
#define MY_ALIGN __attribute__((aligned(16)))
#define SCALE 2.0f
#ifdef WIDE
typedef double real;
#else
typedef float real;
#endif

MY_INLINE real twice(real v) { return SCALE * v; }

#ifdef HAS_RESULT
int
#else
void
#endif
scale(const real *x, real *y, int n
#ifdef HAS_STRIDE
      , int stride
#endif
      )
{
   int i;
   for (i = 0; i < n; i++) {
#if defined(CHECKED)
      if (i >= 0) {
#endif
      y[i] = twice(x[i]);
#if defined(CHECKED)
      }
#endif
   }
#ifdef HAS_RESULT
   return n;
#endif
}
"""


def test_the_mask_keeps_offsets_and_blanks_only_what_the_grammar_cannot_read():
    assert qualifier_macros(SRC) == {"MY_INLINE", "MY_ALIGN"}  # SCALE has a value
    m = mask(SRC)
    assert len(m.text.encode()) == len(SRC.encode())
    assert [ln.strip() == "" for ln in m.text.split("\n")].count(True) > \
        [ln.strip() == "" for ln in SRC.split("\n")].count(True)
    # a group of whole declarations stays for the parser (it reads #if groups of those)
    assert "#ifdef WIDE" in m.text and "typedef float real;" in m.text
    # the split return type and argument: first branch kept, directives blanked
    assert "\nint\n" in m.text and "void" not in m.text and "#ifdef HAS_RESULT\nint" not in m.text
    assert ", int stride" in m.text and "#ifdef HAS_STRIDE" not in m.text
    # the block opened under one #if and closed under another: both kept, balanced
    assert m.text.count("{") == m.text.count("}")
    # the #if group of a whole statement inside the body is left to the parser
    assert "#ifdef HAS_RESULT\n   return n;" in m.text
    # with the build's lines: the branch it compiles is the one kept
    rows = SRC.split("\n")
    void_row = rows.index("void") + 1
    built = mask(SRC, active=lambda ln: ln != void_row - 2)  # `int` not compiled
    assert "\nvoid\n" in built.text and "\nint\n" not in built.text
    # a declaration beginning inside a blanked group is copied from its #if
    start = SRC.index("#ifdef HAS_RESULT\nint")
    assert m.fragment_start(SRC.index("\nint\n") + 1) == start


def test_the_moves_parser_finds_the_function_the_mask_makes_readable():
    s = Source(SRC)
    assert not s.has_errors()
    assert find_function(s, "scale") is not None and find_function(s, "twice") is not None
    assert s.text == SRC  # the text every edit is made on is the original
