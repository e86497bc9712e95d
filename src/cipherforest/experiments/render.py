"""A report as a list of blocks, rendered to Markdown and to one self-contained HTML page."""

from __future__ import annotations

import base64
import html
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["Report"]

_STYLE = ("body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;"
          "padding:0 1em;line-height:1.45}table{border-collapse:collapse;margin:1em 0;"
          "font-size:0.9em}th,td{border:1px solid #ccc;padding:3px 7px;text-align:right}"
          "th:first-child,td:first-child{text-align:left}img{max-width:100%}"
          "code{background:#f3f3f3;padding:0 3px}")


@dataclass
class Report:
    """Headings, paragraphs, bullet lists, tables and images, in order."""

    title: str
    blocks: list[tuple] = field(default_factory=list)

    def heading(self, text: str, level: int = 2) -> None:
        self.blocks.append(("heading", level, text))

    def paragraph(self, text: str) -> None:
        self.blocks.append(("paragraph", text))

    def bullets(self, items: list[str]) -> None:
        self.blocks.append(("bullets", list(items)))

    def table(self, header: list[str], rows: list[list], numeric: bool = True) -> None:
        """``numeric``: right-align every column but the first (Markdown)."""
        self.blocks.append(("table", list(header), [[str(c) for c in r] for r in rows],
                            numeric))

    def image(self, path: str, alt: str) -> None:
        """``path`` relative to the report folder."""
        self.blocks.append(("image", path, alt))

    def markdown(self) -> str:
        out = [f"# {self.title}", ""]
        for block in self.blocks:
            kind = block[0]
            if kind == "heading":
                out += ["#" * block[1] + " " + block[2], ""]
            elif kind == "paragraph":
                out += [block[1], ""]
            elif kind == "bullets":
                out += [f"- {item}" for item in block[1]] + [""]
            elif kind == "table":
                header, rows, numeric = block[1], block[2], block[3]
                out.append("| " + " | ".join(header) + " |")
                rest = "---:" if numeric else "---"
                out.append("|" + "|".join(["---"] + [rest] * (len(header) - 1)) + "|")
                out += ["| " + " | ".join(r) + " |" for r in rows] + [""]
            elif kind == "image":
                out += [f"![{block[2]}]({block[1]})", ""]
        return "\n".join(out)

    def html(self, folder: Path) -> str:
        """One page; images embedded as base64 PNG data so the file stands alone."""
        e = html.escape
        out = ["<!DOCTYPE html>", "<html><head><meta charset='utf-8'>",
               f"<title>{e(self.title)}</title><style>{_STYLE}</style></head><body>",
               f"<h1>{e(self.title)}</h1>"]
        for block in self.blocks:
            kind = block[0]
            if kind == "heading":
                out.append(f"<h{block[1]}>{e(block[2])}</h{block[1]}>")
            elif kind == "paragraph":
                out.append(f"<p>{_inline(block[1])}</p>")
            elif kind == "bullets":
                out.append("<ul>" + "".join(f"<li>{_inline(i)}</li>" for i in block[1])
                           + "</ul>")
            elif kind == "table":
                head = "".join(f"<th>{_inline(h)}</th>" for h in block[1])
                body = "".join("<tr>" + "".join(f"<td>{_inline(c)}</td>" for c in r)
                               + "</tr>" for r in block[2])
                out.append(f"<table><thead><tr>{head}</tr></thead><tbody>{body}"
                           "</tbody></table>")
            elif kind == "image":
                data = base64.b64encode((folder / block[1]).read_bytes()).decode("ascii")
                out.append(f"<p><img alt='{e(block[2])}' "
                           f"src='data:image/png;base64,{data}'></p>")
        out.append("</body></html>")
        return "\n".join(out)


def _inline(text: str) -> str:
    """Escape, then render `code` spans and **bold** (the only inline markup we emit)."""
    parts = html.escape(text).split("`")
    for i in range(1, len(parts), 2):
        parts[i] = f"<code>{parts[i]}</code>"
    text = "".join(parts)
    bold = text.split("**")
    for i in range(1, len(bold), 2):
        bold[i] = f"<b>{bold[i]}</b>"
    return "".join(bold)
