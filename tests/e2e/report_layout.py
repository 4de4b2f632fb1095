"""How the HTML report reads in a browser, and whether every CSV opens as numbers.

report_layout.py --html NAME=FILE[:MAX_HEIGHT_PX] ... --csv FILE ...

For each page, loaded in headless Chromium (Selenium) at 1,300 x 900 px:
  - the answer (ul.answer) starts above the fold (its top inside the first 900 px);
  - with every <details> opened, no table ends right of the page's text column, no box scrolls
    sideways, and neither does the page;
  - nothing appears twice: no two headings, tables or figures (their captions and charts' own
    titles) with the same text, and no two marks of one chart with the same tooltip (two charts,
    say batch 64 and 128, may each have a bar "cpu0 bwd · 1 ReLU: 0.02418");
  - the page's height as first seen (folded tables closed) is printed, and must be at most
    MAX_HEIGHT_PX when given.
For each CSV, read with pandas: a cell is a plain number or text, never a number with a unit
or mark stuck to it (1.00x, 100%, 150+, 331 modeled*), an interval in one cell (0.367-0.892) or
exponent notation (2.38505e+07); no header says MJ meaning millijoules.
Prints one line per file; exits 1 listing what failed.
"""

import argparse
import re
import sys

import pandas as pd
from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service

WIDTH, FOLD = 1300, 900
problems = []

MEASURE = """
const out = {};
const answer = document.querySelector('ul.answer');
out.answerTop = answer ? answer.getBoundingClientRect().top + window.scrollY : null;
out.height = document.documentElement.scrollHeight;
document.querySelectorAll('details').forEach(d => d.open = true);
// The column the page's text runs in: the body's content box.
const body = document.body.getBoundingClientRect();
const bodyStyle = getComputedStyle(document.body);
const page = Math.round(body.right - parseFloat(bodyStyle.paddingRight));
out.page = page;
out.scrollWidth = document.documentElement.scrollWidth;
out.viewport = document.documentElement.clientWidth;
out.wide = [];
document.querySelectorAll('div, details, pre').forEach(d => {
  if (d.scrollWidth > d.clientWidth + 1 && getComputedStyle(d).overflowX !== 'visible')
    out.wide.push(d.tagName.toLowerCase() + (d.className ? '.' + d.className : '') + ' scrolls sideways (' +
                  d.scrollWidth + ' > ' + d.clientWidth + ' px)');
});
document.querySelectorAll('table').forEach((t, i) => {
  const r = t.getBoundingClientRect();
  if (r.right <= page + 1) return;
  let h = t, head = '';
  while (h && !head) { h = h.previousElementSibling || h.parentElement; if (h && /^H[1-4]$/.test(h.tagName)) head = h.textContent; }
  out.wide.push('table ' + i + (t.id ? ' #' + t.id : '') + ' under "' + head.slice(0, 40) + '" ends at ' + Math.round(r.right) + ' px');
});
const texts = sel => Array.from(document.querySelectorAll(sel)).map(e => (e.innerText || e.textContent || "").trim()).filter(t => t);
out.headings = texts('h1, h2, h3, h4');
out.tables = texts('table');
// Each figure once: its caption and its chart's own title (an svg's first <title>).
out.figures = texts('figure figcaption, figure svg > title:first-of-type');
// Each chart's marks: the tooltips inside one figure, checked within that figure only.
out.marks = Array.from(document.querySelectorAll('figure')).map(f =>
  Array.from(f.querySelectorAll('svg title')).slice(1).map(e => (e.textContent || "").trim()).filter(t => t));
out.openedHeight = document.documentElement.scrollHeight;
return out;
"""


def dupes(items):
    seen, twice = set(), []
    for t in items:
        if t in seen and t not in twice:
            twice.append(t)
        seen.add(t)
    return twice


def check_page(driver, name, path, max_height):
    driver.get("file://" + path)
    m = driver.execute_script(MEASURE)
    where = f"{name}"
    if m["answerTop"] is None:
        problems.append(f"{where}: no answer (ul.answer)")
    elif m["answerTop"] >= FOLD:
        problems.append(f"{where}: the answer starts at {m['answerTop']:.0f} px, below the {FOLD} px fold")
    for w in m["wide"]:
        problems.append(f"{where}: {w}, wider than the page's {m['page']} px column")
    if m["scrollWidth"] > m["viewport"] + 1:
        problems.append(f"{where}: the page scrolls sideways ({m['scrollWidth']} > {m['viewport']} px)")
    for kind in ("headings", "tables", "figures"):
        for t in dupes(m[kind]):
            problems.append(f"{where}: {kind[:-1]} shown twice: {t[:80]!r}")
    for i, marks in enumerate(m["marks"]):
        for t in dupes(marks):
            problems.append(f"{where}: figure {i + 1}: a mark shown twice in one chart: {t[:80]!r}")
    if max_height and m["height"] > max_height:
        problems.append(f"{where}: {m['height']} px tall, more than {max_height} px")
    print(f"layout {name}: {m['height']} px tall at {WIDTH} px ({m['openedHeight']} px with every table "
          f"unfolded); answer at {m['answerTop'] or 0:.0f} px; {len(m['tables'])} tables, "
          f"{len(m['wide'])} wider than the page's {m['page']} px column")


NUMBER_WITH_MARK = re.compile(r"^-?\d[\d.,]*\s*(x|%|\+|\*|modeled\*?)$")
INTERVAL = re.compile(r"^-?\d[\d.]*-\d[\d.]*$")
EXPONENT = re.compile(r"^-?\d(\.\d+)?[eE][+-]?\d+$")


def check_csv(path):
    df = pd.read_csv(path, dtype=str, keep_default_na=False)
    numeric = pd.read_csv(path)
    bad = []
    for col in df.columns:
        if re.search(r"\bMJ\b", col):
            bad.append(f"header {col!r} says MJ")
        for v in df[col]:
            v = v.strip()
            if NUMBER_WITH_MARK.match(v) or INTERVAL.match(v) or EXPONENT.match(v):
                bad.append(f"column {col!r} holds {v!r}")
                break
    n_numeric = sum(1 for c in numeric.columns if pd.api.types.is_numeric_dtype(numeric[c]))
    for b in bad:
        problems.append(f"{path}: {b}")
    print(f"csv {path.rsplit('/', 1)[-1]}: {len(df)} rows, {len(df.columns)} columns, {n_numeric} read as numbers"
          + ("" if not bad else f"; {len(bad)} problems"))


ap = argparse.ArgumentParser()
ap.add_argument("--html", nargs="*", default=[])
ap.add_argument("--csv", nargs="*", default=[])
args = ap.parse_args()

if args.html:
    opts = Options()
    opts.binary_location = "/usr/bin/chromium"
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", f"--window-size={WIDTH},{FOLD}",
              "--hide-scrollbars", "--disable-dev-shm-usage"):
        opts.add_argument(a)
    driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=opts)
    try:
        for spec in args.html:
            name, rest = spec.split("=", 1)
            path, _, cap = rest.partition(":")
            check_page(driver, name, path, int(cap) if cap else 0)
    finally:
        driver.quit()
for path in args.csv:
    check_csv(path)
for p in problems:
    print("PROBLEM", p)
sys.exit(1 if problems else 0)
