"""Write a run's reports: report.md and report.html, next to its trace.

`write_reports(run_dir)` is called by the finalize node and by `kernelcrew report RUN`.
"""

from __future__ import annotations

from pathlib import Path

from kernelcrew.report.build import build_report
from kernelcrew.report.html import render_html
from kernelcrew.report.markdown import render_markdown
from kernelcrew.trace import write_text_atomic


def write_reports(run_dir: str | Path) -> tuple[Path, Path]:
    """(Re)build report.md and report.html in the run directory; return their paths."""
    rep = build_report(run_dir)
    md, html = rep.run.dir / "report.md", rep.run.dir / "report.html"
    write_text_atomic(md, render_markdown(rep))
    write_text_atomic(html, render_html(rep))
    return md, html
