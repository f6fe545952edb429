#!/usr/bin/env python3
"""book/check_browser.py: opens every page of the built book in headless Chromium, the way a
reader without a network meets it (file://, a 1280 x 800 window), and fails when a page

  - is wider than the window, or has a table, code box or figure that overflows its column
    (sticks out of the column, or needs a horizontal scroll bar of its own: tables must fit);
  - wraps a preformatted block (diagrams lose their alignment: they scroll inside their box);
  - shows a figure whose text would be smaller than 11 px at the size the page draws it;
  - requests anything outside the book's folder (or a file of the folder that is missing), or
    shows an image that did not load;
  - (with --pictures FILE) leaves out a picture FILE lists: every .svg named there (the book's
    generated pictures, book/pictures.py) must be drawn on some page;
  - folds a stage's own lines (a write-it exercise's answer) as flowing text, not as a code box;
  - shows raw markup: a Markdown table rule (|---|), a Doxygen command (\\snippet, \\ref,
    \\include, \\f$), bold ** or formula delimiters left as typed, a MathJax error, or an HTML tag
    printed as text.

    check_browser.py --html <book>/html [--chromium chromium] [--page NAME.html ...]
                     [--pictures FILE]     (each .svg FILE lists must be drawn on some page)
                     [--expect TEXT ...]   (succeed only if every TEXT is found: the self-test)

It drives Chromium through its DevTools protocol (python3-websocket, Debian's package); one browser
runs every page. Exit status 0: every page is clean; 1: a finding (each is printed); 2: the
browser could not be started or driven.
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.parse

try:
    import websocket  # python3-websocket (websocket-client)
except ImportError:
    sys.exit("check_browser.py: needs the Python module websocket (Debian: apt-get install "
             "python3-websocket, or tests/install-deps.sh --book)")

WIDTH, HEIGHT = 1280, 800
MIN_FIGURE_TEXT_PX = 11.0
PAGE_TIMEOUT_S = 30.0

# Runs in each page once it has loaded and MathJax has typeset it; returns a list of findings.
PAGE_CHECK = r"""
(() => {
  const out = [];
  const say = (what, el) => {
    let where = '';
    if (el) {
      const t = (el.textContent || el.getAttribute('src') || '').replace(/\s+/g, ' ').trim();
      where = ' at "' + t.slice(0, 70) + '"';
    }
    out.push(what + where);
  };
  const doc = document.documentElement;
  if (doc.scrollWidth > window.innerWidth + 1)
    say('the page is ' + doc.scrollWidth + ' px wide, wider than the ' + window.innerWidth +
        ' px window (a horizontal scroll bar)');
  const column = document.querySelector('div.contents') || document.body;
  const right = column.getBoundingClientRect().right;
  const px = (v) => Math.round(v);

  // Tables: inside the column, and no scroll bar of their own or of a wrapper.
  for (const t of column.querySelectorAll('table')) {
    const r = t.getBoundingClientRect();
    if (r.width === 0) continue;  // not displayed (a folded answer)
    if (r.right > right + 1)
      say('a table overflows its column by ' + px(r.right - right) + ' px', t);
    // doxygen-awesome lets a table's body scroll (tbody: inline-block, overflow-x: auto).
    const boxes = [...t.querySelectorAll('tbody, thead, div')];
    for (let e = t; e && e !== column.parentElement; e = e.parentElement) boxes.push(e);
    for (const e of boxes) {
      if (e.scrollWidth > e.clientWidth + 1 &&
          ['auto', 'scroll', 'hidden'].includes(getComputedStyle(e).overflowX)) {
        say('a table needs a horizontal scroll bar (' + px(e.scrollWidth) + ' px in ' +
            px(e.clientWidth) + ' px)', t);
        break;
      }
    }
  }
  // Preformatted text and code boxes: never wrapped, never out of the column (they may scroll
  // inside their own box).
  for (const p of column.querySelectorAll('pre, div.fragment')) {
    const r = p.getBoundingClientRect();
    if (r.width === 0) continue;
    if (r.right > right + 1)
      say('a preformatted block overflows its column by ' + px(r.right - right) + ' px', p);
    const lines = p.matches('div.fragment') ? p.querySelectorAll('div.line') : [p];
    for (const l of lines) {
      const ws = getComputedStyle(l).whiteSpace;
      if (!['pre', 'nowrap'].includes(ws)) {
        say('a preformatted block wraps its lines (white-space: ' + ws + ')', p);
        break;
      }
    }
  }
  // A folded block of a stage's own lines (a write-it exercise's answer) is code: a code box,
  // not its lines run together as flowing text.
  for (const d of column.querySelectorAll('details')) {
    const s = d.querySelector('summary');
    if (s && /own lines/i.test(s.textContent) && !d.querySelector('pre, div.fragment'))
      say('a folded block of code ("' + s.textContent.trim() + '") shown as flowing text', d);
  }
  // Figures: inside the column, and their text (checked per file) drawn at a readable scale.
  const figures = [];
  for (const f of column.querySelectorAll('img, object, svg, iframe')) {
    const r = f.getBoundingClientRect();
    if (f.tagName.toLowerCase() === 'img' && f.complete && f.naturalWidth === 0) {
      say('an image that did not load', f);
      continue;
    }
    if (r.width === 0 || f.closest('svg') !== f && f.tagName.toLowerCase() === 'svg') continue;
    if (f.closest('.MathJax, .MathJax_Display, .MathJax_SVG')) continue;
    if (r.right > right + 1)
      say('a figure overflows its column by ' + px(r.right - right) + ' px', f);
    const src = f.src || f.data || '';  // img and object (Doxygen shows an SVG as an object)
    if (src) figures.push({src: src, width: r.width});
  }
  // Raw markup: the column's text without code, scripts and typeset formulas.
  const copy = column.cloneNode(true);
  for (const e of copy.querySelectorAll(
           'pre, code, div.fragment, script, style, .MathJax, .MathJax_Display, .MathJax_Preview'))
    e.remove();
  const text = copy.textContent;
  const raw = [
    [/\|\s*:?-{3,}:?\s*\|/, 'a Markdown table rule'],
    [/[\\@](snippet|include|ref|subpage|section|note|code|endcode|htmlonly|f\$|f\[)\b/,
     'a Doxygen command'],
    [/\*\*/, 'bold ** left as asterisks'],
    [/\\\(|\\\[|\$\$/, 'formula delimiters left as typed'],
    [/<\/?(div|span|details|summary|table|tr|td|th|br|p|b|i|em|strong|a|img|pre|code)\b[^>]*>/i,
     'an HTML tag printed as text'],
  ];
  for (const [re, what] of raw) {
    const m = text.match(re);
    if (m) {
      const at = Math.max(0, m.index - 40);
      out.push(what + ' shown as text: "' + text.slice(at, m.index + 40).replace(/\s+/g, ' ') +
               '"');
    }
  }
  for (const e of column.querySelectorAll('.MathJax_Error, merror'))
    say('a formula MathJax could not typeset', e);
  return {findings: out, figures: figures};
})()
"""

# Runs in an SVG file opened on its own: the smallest font size of its text, in the file's units.
SVG_TEXT = r"""
(() => {
  let min = Infinity;
  for (const t of document.querySelectorAll('text, tspan')) {
    if (!t.textContent.trim()) continue;
    const s = parseFloat(getComputedStyle(t).fontSize);
    if (s < min) min = s;
  }
  const root = document.documentElement;
  return {min: min === Infinity ? null : min,
          width: root.width && root.width.baseVal ? root.width.baseVal.value : null};
})()
"""

# Waits for MathJax 2 (when the page loads it) to finish typesetting, then for the fonts.
SETTLE = r"""
new Promise((done) => {
  const fonts = () => (document.fonts ? document.fonts.ready : Promise.resolve()).then(
      () => done(true));
  if (window.MathJax && MathJax.Hub && MathJax.Hub.Queue) MathJax.Hub.Queue(fonts);
  else fonts();
})
"""


class Browser:
    """One headless Chromium and one tab, driven over the DevTools protocol."""

    def __init__(self, chromium):
        self.profile = tempfile.mkdtemp(prefix="fs-book-browser-")
        args = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                "--no-default-browser-check", "--disable-extensions", "--mute-audio",
                "--disable-background-networking", "--disable-component-update",
                "--disable-sync", "--disable-features=Translate,MediaRouter",
                "--allow-file-access-from-files",
                # No network: every host name fails to resolve, and no proxy is reachable.
                "--host-resolver-rules=MAP * ~NOTFOUND", "--proxy-server=127.0.0.1:9",
                "--user-data-dir=" + self.profile, "--remote-debugging-port=0",
                f"--window-size={WIDTH},{HEIGHT}", "about:blank"]
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                     text=True)
        url = None
        deadline = time.time() + 60
        seen = []
        while time.time() < deadline:
            line = self.proc.stderr.readline()
            if not line:
                break
            seen.append(line)
            m = re.search(r"DevTools listening on (ws://\S+)", line)
            if m:
                url = m.group(1)
                break
        if not url:
            self.close()
            raise RuntimeError("Chromium did not start its DevTools endpoint:\n" + "".join(seen))
        self.ws = websocket.create_connection(url, timeout=PAGE_TIMEOUT_S, suppress_origin=True)
        self.next_id = 0
        self.events = []
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.session = self.call("Target.attachToTarget",
                                 {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Page", "Network", "Runtime"):
            self.call(domain + ".enable", session=True)
        self.call("Emulation.setDeviceMetricsOverride",
                  {"width": WIDTH, "height": HEIGHT, "deviceScaleFactor": 1, "mobile": False},
                  session=True)

    def call(self, method, params=None, session=False, timeout=PAGE_TIMEOUT_S):
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = self.session
        self.ws.send(json.dumps(msg))
        deadline = time.time() + timeout
        while time.time() < deadline:
            reply = json.loads(self.ws.recv())
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            if "method" in reply:
                self.events.append(reply)
        raise RuntimeError(f"{method}: no reply in {timeout} s")

    def wait_event(self, method, timeout=PAGE_TIMEOUT_S):
        deadline = time.time() + timeout
        while True:
            for e in self.events:
                if e["method"] == method:
                    return e
            if time.time() > deadline:
                raise RuntimeError(f"no {method} in {timeout} s")
            self.ws.settimeout(max(0.1, deadline - time.time()))
            self.events.append(json.loads(self.ws.recv()))

    def evaluate(self, expression, promise=False):
        r = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                           "awaitPromise": promise}, session=True)
        if "exceptionDetails" in r:
            raise RuntimeError("script failed: " + json.dumps(r["exceptionDetails"])[:400])
        return r["result"].get("value")

    def open(self, url):
        """Loads url; returns the network events the load caused."""
        self.events = []
        self.call("Page.navigate", {"url": url}, session=True)
        self.wait_event("Page.loadEventFired")
        self.evaluate(SETTLE, promise=True)
        time.sleep(0.05)
        # Collect what is left on the wire without blocking.
        self.ws.settimeout(0.05)
        try:
            while True:
                self.events.append(json.loads(self.ws.recv()))
        except websocket.WebSocketTimeoutException:
            pass
        self.ws.settimeout(PAGE_TIMEOUT_S)
        return [e for e in self.events if e["method"].startswith("Network.")]

    def close(self):
        try:
            if getattr(self, "ws", None):
                self.ws.close()
        finally:
            if self.proc.poll() is None:
                self.proc.terminate()
                try:
                    self.proc.wait(10)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
            shutil.rmtree(self.profile, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--html", required=True, help="the book's html folder")
    ap.add_argument("--chromium", default="chromium", help="the browser (default: chromium)")
    ap.add_argument("--page", action="append", help="check only this page (repeatable)")
    ap.add_argument("--pictures", help="a list of picture files, one a line (the book's "
                    "generated pictures.txt): each .svg in it must be drawn on some page")
    ap.add_argument("--expect", action="append", default=[],
                    help="the check's own test: succeed only when some finding holds this text "
                         "(repeatable; tests/book/planted)")
    opts = ap.parse_args()

    root = os.path.realpath(opts.html)
    pages = opts.page or sorted(p for p in os.listdir(root) if p.endswith(".html"))
    if not pages:
        print(f"check_browser.py: no HTML pages in {root}", file=sys.stderr)
        return 2
    prefix = "file://" + urllib.parse.quote(root) + "/"
    chromium = shutil.which(opts.chromium) or opts.chromium
    started = time.time()
    try:
        browser = Browser(chromium)
    except (OSError, RuntimeError) as e:
        print(f"check_browser.py: cannot drive {opts.chromium}: {e}", file=sys.stderr)
        return 2

    findings = []
    svg_scale = {}  # SVG file -> the smallest scale a page draws it at
    drawn_names = set()  # the file names of every figure some page draws
    try:
        for page in pages:
            url = prefix + urllib.parse.quote(page)
            net = browser.open(url)
            urls = {e["params"]["requestId"]: e["params"]["request"]["url"] for e in net
                    if e["method"] == "Network.requestWillBeSent"}
            for e in net:
                if e["method"] == "Network.requestWillBeSent":
                    req = e["params"]["request"]["url"]
                    if not (req.startswith(prefix) or req.startswith(("data:", "blob:", "about:"))):
                        findings.append(f"{page}: requests {req[:120]}, outside the book's folder")
                elif e["method"] == "Network.loadingFailed" and not e["params"].get("canceled"):
                    what = urls.get(e["params"]["requestId"], "?")
                    if what.startswith("about:"):
                        continue  # the blank page a navigation starts from
                    findings.append(f"{page}: a request failed ({e['params'].get('errorText')}):"
                                    f" {what[:120]}")
            result = browser.evaluate(PAGE_CHECK)
            findings += [f"{page}: {f}" for f in result["findings"]]
            for fig in result["figures"]:
                if fig["width"] > 0:
                    drawn_names.add(urllib.parse.unquote(fig["src"]).rsplit("/", 1)[-1])
                if fig["src"].lower().endswith(".svg"):
                    w = svg_scale.get(fig["src"])  # the narrowest it is drawn, in px
                    svg_scale[fig["src"]] = fig["width"] if w is None else min(w, fig["width"])
        for src, drawn in sorted(svg_scale.items()):
            browser.open(src)
            svg = browser.evaluate(SVG_TEXT)
            name = urllib.parse.unquote(src[len(prefix):])
            if svg["min"] is None or not svg["width"]:
                continue
            scale = drawn / svg["width"]
            shown = svg["min"] * scale
            if shown < MIN_FIGURE_TEXT_PX - 0.05:
                findings.append(f"{name}: its smallest text is {svg['min']:.1f} px, drawn at "
                                f"{scale:.2f}x: {shown:.1f} px, under {MIN_FIGURE_TEXT_PX:g} px")
    except (RuntimeError, websocket.WebSocketException, OSError) as e:
        print(f"check_browser.py: driving the browser failed: {e}", file=sys.stderr)
        return 2
    finally:
        browser.close()
    if opts.pictures:
        try:
            with open(opts.pictures, encoding="utf-8") as f:
                wanted = [w.strip() for w in f if w.strip().lower().endswith(".svg")]
        except OSError as e:
            print(f"check_browser.py: cannot read --pictures {opts.pictures}: {e}", file=sys.stderr)
            return 2
        for w in wanted:
            if w not in drawn_names:
                findings.append(f"the picture {w} ({opts.pictures}) is drawn on no page")

    took = time.time() - started
    if opts.expect:
        for f in findings:
            print("  found: " + f)
        missing = [e for e in opts.expect if not any(e in f for f in findings)]
        for e in missing:
            print(f"check_browser.py: NOT FOUND: a finding with '{e}'")
        if not missing:
            print(f"check_browser.py: each of the {len(opts.expect)} planted fault(s) found")
        return 1 if missing else 0
    if findings:
        print(f"check_browser.py: {len(findings)} finding(s) in {len(pages)} page(s) at "
              f"{WIDTH}x{HEIGHT}:")
        for f in findings:
            print("  " + f)
        return 1
    print(f"check_browser.py: {len(pages)} page(s) and {len(svg_scale)} SVG figure(s) clean at "
          f"{WIDTH}x{HEIGHT}, no request outside {root} ({took:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
