"""A real browser: open a generated report.html in headless Chromium and check it rendered.

Needs Debian's ``chromium`` (``apt-get install -y chromium``; .ci/run installs it). Set
``CHROMIUM=/path/to/binary`` to use another Chromium/Chrome. Skipped only when none is found.
"""

from __future__ import annotations

import os
import re
import shutil
import struct
import subprocess
import zlib
from pathlib import Path

import numpy as np
import pytest
from _views_fixtures import make_tiny_run

pytestmark = pytest.mark.browser

CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome")
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--disable-default-apps",
    "--hide-scrollbars",
    "--mute-audio",
]


def find_chromium() -> str | None:
    env = os.environ.get("CHROMIUM")
    if env:
        return env if Path(env).exists() or shutil.which(env) else None
    for name in CANDIDATES:
        path = shutil.which(name)
        if path:
            return path
    return None


@pytest.fixture(scope="module")
def chromium() -> str:
    path = find_chromium()
    if path is None:
        pytest.skip(
            "headless Chromium not found (tried $CHROMIUM and " + ", ".join(CANDIDATES) + "): "
            "install it with `apt-get install -y chromium`"
        )
    return path


def run_chromium(binary: str, tmp: Path, url: str, *extra: str) -> subprocess.CompletedProcess:
    profile = tmp / f"profile-{len(list(tmp.glob('profile-*')))}"
    cmd = [binary, *FLAGS, f"--user-data-dir={profile}", "--virtual-time-budget=15000", *extra, url]
    return subprocess.run(
        cmd, capture_output=True, timeout=180, env={**os.environ, "HOME": str(tmp)}
    )


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> Path:
    from interp_toolkit.reports.run_report import build_run_report

    run = make_tiny_run(tmp_path_factory.mktemp("browser") / "run", n_layers=2)
    return build_run_report(run)


def read_png(data: bytes) -> np.ndarray:
    """Decode an 8-bit RGB/RGBA PNG (what Chromium writes) to an (h, w, channels) array."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat = 8, b""
    while pos < len(data):
        (n,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + n]
        pos += 12 + n
        if kind == b"IHDR":
            w, h, depth, ctype, _, _, interlace = struct.unpack(">IIBBBBB", body)
            assert depth == 8 and ctype in (2, 6) and interlace == 0, "unsupported PNG"
        elif kind == b"IDAT":
            idat += body
    bpp = 3 if ctype == 2 else 4
    raw = np.frombuffer(zlib.decompress(idat), dtype=np.uint8).reshape(h, 1 + w * bpp)
    out = np.zeros((h, w * bpp), dtype=np.uint8)
    prev = np.zeros(w * bpp, dtype=np.int32)
    for y in range(h):
        f, line = raw[y, 0], raw[y, 1:].astype(np.int32)
        if f == 0:
            cur = line
        elif f == 1:  # Sub: running sum per channel
            cur = np.cumsum(line.reshape(w, bpp), axis=0).reshape(-1) % 256
        elif f == 2:  # Up
            cur = (line + prev) % 256
        else:  # Average / Paeth: sequential along the row (plain ints are faster than numpy here)
            cur = _unfilter_row(int(f), raw[y, 1:].tolist(), prev.tolist(), bpp)
        out[y] = cur
        prev = cur.astype(np.int32)
    return out.reshape(h, w, bpp)


def _unfilter_row(f: int, line: list[int], prev: list[int], bpp: int) -> np.ndarray:
    for x in range(len(line)):
        a = line[x - bpp] if x >= bpp else 0
        b = prev[x]
        if f == 3:
            line[x] = (line[x] + ((a + b) >> 1)) & 255
        else:
            c = prev[x - bpp] if x >= bpp else 0
            pa, pb, pc = abs(b - c), abs(a - c), abs(a + b - 2 * c)
            line[x] = (line[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
    return np.asarray(line, dtype=np.int32)


def test_report_renders_in_chromium(chromium, report, tmp_path):
    source = report.read_text(encoding="utf-8")
    n_plots = source.count('class="plotly-graph-div"')
    n_views = source.count("CircuitsVis.render(")
    assert n_plots >= 5 and n_views >= 1

    done = run_chromium(chromium, tmp_path, report.as_uri(), "--dump-dom")
    dom = done.stdout.decode("utf-8", "replace")
    assert done.returncode == 0 and "</html>" in dom, done.stderr.decode()[-2000:]
    dom = re.sub(r"<script\b.*?</script>", "", dom, flags=re.S)  # the rendered page, not the JS

    # plotly: every figure div became a rendered plot with its SVG layers
    assert dom.count("js-plotly-plot") >= n_plots, "plotly figures did not render"
    assert dom.count('class="main-svg"') >= n_plots
    assert "plot-container" in dom
    assert re.search(r'<g class="heatmaplayer', dom) and re.search(r'class="scatterlayer', dom)
    # circuitsvis: each view's div was filled by React (head selector, zoomed pattern on a canvas)
    filled = re.findall(r'<div id="circuits-vis-[^"]+"[^>]*><div', dom)
    assert len(filled) == n_views, "circuitsvis views did not render"
    assert dom.count("Head Selector") == n_views and "<canvas" in dom
    assert (
        "&lt;|endoftext|&gt;" in dom or "<|endoftext|>" in dom
    )  # token labels made it to the page

    shot = tmp_path / "report.png"
    done = run_chromium(
        chromium, tmp_path, report.as_uri(), f"--screenshot={shot}", "--window-size=1200,2200"
    )
    assert shot.is_file(), done.stderr.decode()[-2000:]
    pixels = read_png(shot.read_bytes())[..., :3]
    assert pixels.shape[:2] == (2200, 1200)
    colours = np.unique(pixels.reshape(-1, 3), axis=0)
    assert len(colours) > 200, f"screenshot looks blank: {len(colours)} distinct colours"
    background = np.all(pixels == pixels[-1, -1], axis=-1).mean()
    assert background < 0.9, f"screenshot is {background:.0%} background"
    keep = os.environ.get("VIEWS_SCREENSHOT")
    if keep:
        shutil.copy(shot, keep)


def _study_page(tmp: Path) -> Path:
    """A study page of two settings from hand-made measurements (no model): the first screen
    is laid out the same whatever the numbers."""
    from findings_helpers import depth

    from interp_toolkit.measures.claims import over_seeds, verdicts
    from interp_toolkit.measures.seeds import Held
    from interp_toolkit.reports.study_page import SettingPage, lede, study_page
    from interp_toolkit.reports.study_report import depth_section

    ds = (depth(1), depth(2))
    claims = over_seeds((0,), [verdicts(ds)])
    pages = [
        SettingPage(title, ds, claims, Held((0,), (0,)), (depth_section(ds, curves={}),))
        for title in ("Natural text (bytes)", "Curriculum")
    ]
    html = study_page(pages, title="Induction heads: the original post's claims, checked",
                      lede=lede([0], "a CPU, 1 thread", 9.5))  # fmt: skip
    probe = (
        "<script>window.addEventListener('load',function(){setTimeout(function(){"
        "var t=document.querySelector('table.claims').getBoundingClientRect();"
        "var f=document.querySelector('.first .js-plotly-plot').getBoundingClientRect();"
        "document.body.setAttribute('data-first',[t.bottom,t.right,f.bottom,f.right,f.height,"
        "window.innerWidth,window.innerHeight].join(','))},500)})</script></body>"
    )
    page = tmp / "study.html"
    page.write_text(html.replace("</body>", probe), encoding="utf-8")
    return page


def test_the_study_page_first_screen_holds_the_claims_table_and_a_figure(chromium, tmp_path):
    """At 1400 x 900 px the claims table and the copier figure are both wholly on the first
    screen, side by side."""
    page = _study_page(tmp_path)
    done = run_chromium(chromium, tmp_path, page.as_uri(), "--dump-dom", "--window-size=1400,900")
    dom = done.stdout.decode("utf-8", "replace")
    found = re.search(r'data-first="([^"]+)"', dom)
    assert found, f"the page's probe did not run: {done.stderr.decode()[-500:]}"
    t_bottom, t_right, f_bottom, f_right, f_height, width, _ = map(float, found[1].split(","))
    assert width == 1400  # (headless Chromium's dumped window is shorter than asked: 900 is read)
    assert f_height > 200, "the figure did not draw"
    assert t_bottom <= 900 and f_bottom <= 900, (t_bottom, f_bottom)
    assert t_right <= 1400 and f_right <= 1400, (t_right, f_right)
