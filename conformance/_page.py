"""A report's Markdown as a self-contained HTML page: the nightly report's and a campaign's
(``nightly.py``, ``campaign.py``), one look for both."""

from __future__ import annotations

import html
import re


def render_html(markdown: str, title: str = "fx-conformance nightly") -> str:
    """A self-contained page from the Markdown (headings, quotes, lists, tables, images, fenced code)."""
    out, table = [], []
    code: list | None = None  # the lines of an open ``` block

    def flush():
        if table:
            head, *body = [r for r in table if not set(r.replace("|", "").strip()) <= {"-"}]
            cells = lambda r: [c.strip().replace("\\|", "|")  # noqa: E731 - a cell's own pipes are escaped
                               for c in re.split(r"(?<!\\)\|", r.strip()[1:-1])]
            out.append("<table><tr>" + "".join(f"<th>{html.escape(c)}</th>" for c in cells(head)) + "</tr>"
                       + "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in cells(r)) + "</tr>"
                                 for r in body) + "</table>")
            table.clear()

    def close_code():
        out.append(f"<pre>{html.escape(chr(10).join(code))}</pre>")

    for line in markdown.splitlines():
        if code is not None:
            if line.startswith("```"):
                close_code()
                code = None
            else:
                code.append(line)
            continue
        if line.startswith("```"):
            flush()
            code = []
            continue
        if line.startswith("|"):
            table.append(line)
            continue
        flush()
        if line.startswith("# "):
            out.append(f"<h1>{html.escape(line[2:])}</h1>")
        elif line.startswith("## "):
            out.append(f"<h2>{html.escape(line[3:])}</h2>")
        elif line.startswith("### "):
            out.append(f"<h3>{html.escape(line[4:])}</h3>")
        elif line.startswith("> "):
            out.append(f"<blockquote>{html.escape(line[2:].strip('*'))}</blockquote>")
        elif line.startswith("- "):
            out.append(f"<p>&bull; {html.escape(line[2:]).replace('**', '')}</p>")
        elif (img := re.fullmatch(r"!\[(.*)\]\((.*)\)", line)):
            out.append(f'<p><img src="{html.escape(img.group(2))}" alt="{html.escape(img.group(1))}"></p>')
        elif line.strip():
            out.append(f"<p>{html.escape(line)}</p>")
    flush()
    if code is not None:  # a block the Markdown left open
        close_code()
    style = ("body{font-family:sans-serif;max-width:1100px;margin:2em auto}table{border-collapse:collapse;"
             "font-size:12px}td,th{border:1px solid #ccc;padding:2px 6px}blockquote{background:#fff3cd;padding:8px}"
             "pre{background:#f6f8fa;padding:8px;font-size:12px;overflow-x:auto}")
    return f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>" \
           f"<style>{style}</style></head><body>\n" + "\n".join(out) + "\n</body></html>\n"
