"""The one place that adapts circuitsvis output for offline pages (circuitsvis 1.43).

What circuitsvis gives (``RenderedHTML``): ``str(obj)`` loads the JS from a CDN; ``obj.local_src``
is self-contained: ``<div id="circuits-vis-…" style="margin: 15px 0;"/>`` then a ``<script>``
holding the whole ~1.3 MB bundle and a ``CircuitsVis.render(id, component, props)`` call.
What we change, and why:

1. ``<div … />`` is not a closed div in HTML: it swallows everything after it (and React then
   wipes it), so it is closed properly (:func:`local_html`);
2. a page inlines the bundle once, however many views it holds, so each view's copy is removed
   (:func:`page_fragment`), and the page adds :func:`bundle` once;
3. ``<`` in the render call's JSON props (token labels such as ``</script>`` or ``<!--``) would end
   or break the script (circuitsvis writes them raw), so it is written ``\\u003c``.

``tests/unit/views/test_cv.py`` holds a snapshot of circuitsvis's output: it fails when upstream changes
the shape these steps rely on.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

import circuitsvis
from circuitsvis.utils.render import RenderedHTML

_SELF_CLOSED_DIV = 'style="margin: 15px 0;"/>'
_RENDER = re.compile(r"CircuitsVis\.render\(")


@lru_cache(maxsize=1)
def bundle() -> str:
    """The circuitsvis JS exactly as ``local_src`` inlines it (its ``</script>`` removed)."""
    path = Path(circuitsvis.__file__).parent / "dist" / "cdn" / "iife.js"
    return path.read_text(encoding="utf-8").replace("</script>", "")


def local_html(view: RenderedHTML | str) -> str:
    """A view's self-contained HTML (``local_src``, never the CDN form) with its div closed."""
    src = view if isinstance(view, str) else view.local_src
    return src.replace(_SELF_CLOSED_DIV, 'style="margin: 15px 0;"></div>', 1)


def page_fragment(src: str) -> tuple[str, bool]:
    """One view's HTML as it goes into a page that inlines :func:`bundle` once: div closed,
    bundle removed, ``<`` escaped in the render call. Returns (html, uses circuitsvis)."""
    src = local_html(src)
    if "CircuitsVis" not in src:
        return src, False
    src = src.replace(bundle(), "")
    # Each render call runs to the last </script> before the next call (a label may hold one).
    starts = [m.start() for m in _RENDER.finditer(src)]
    out, last = [], 0
    for start, nxt in zip(starts, [*starts[1:], len(src)], strict=True):
        end = src.rfind("</script>", start, nxt)
        if end < 0:
            break
        out.append(src[last:start])
        out.append(src[start:end].replace("<", "\\u003c"))
        last = end
    out.append(src[last:])
    return "".join(out), True
