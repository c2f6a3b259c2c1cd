// The summary under each search result, cut from the text of the pages that the build writes
// (search-text.js, window.GPUBOOK_PAGE_TEXT) instead of fetching each page: a book opened from
// disk may fetch nothing. The summary is the one Sphinx would cut: 240 characters around the
// first word of the query found in the page, the query's words highlighted.
(() => {
  "use strict";
  const WIDTH = 240;

  function queryWords() {
    const q = new URLSearchParams(window.location.search).get("q") || "";
    const words = q.toLowerCase().split(/[^\p{L}\p{N}_]+/u).filter((w) => w.length > 0);
    const stem = typeof Stemmer === "function" ? new Stemmer() : null;
    const all = new Set(words);
    if (stem) words.forEach((w) => all.add(stem.stemWord(w)));
    return [...all].filter((w) => w.length > 1);
  }

  function docName(link) {
    const root = document.documentElement.dataset.content_root || "";
    let href = (link.getAttribute("href") || "").split("#")[0];
    if (root && href.startsWith(root)) href = href.slice(root.length);
    const suffix = (window.DOCUMENTATION_OPTIONS && DOCUMENTATION_OPTIONS.LINK_SUFFIX) || ".html";
    return href.endsWith(suffix) ? href.slice(0, -suffix.length) : href;
  }

  function summary(text, words) {
    const lower = text.toLowerCase();
    const at = words.map((w) => lower.indexOf(w)).filter((i) => i > -1);
    const start = Math.max((at.length ? Math.min(...at) : 0) - WIDTH / 2, 0);
    const p = document.createElement("p");
    p.className = "context";
    p.textContent = (start > 0 ? "..." : "") + text.substr(start, WIDTH).trim()
      + (start + WIDTH < text.length ? "..." : "");
    return p;
  }

  function fill(item, words) {
    if (item.dataset.gpubookSummary || item.querySelector("p.context")) return;
    const link = item.querySelector("a");
    const text = link && (window.GPUBOOK_PAGE_TEXT || {})[docName(link)];
    item.dataset.gpubookSummary = "1";
    if (!text) return;
    item.appendChild(summary(text, words));
    if (typeof _highlightText === "function") {
      words.forEach((w) => _highlightText(item.lastChild, w, "highlighted"));
    }
  }

  function start() {
    const results = document.getElementById("search-results");
    if (!results || !window.GPUBOOK_PAGE_TEXT) return;
    const words = queryWords();
    const scan = () => results.querySelectorAll("ul.search > li").forEach((li) => fill(li, words));
    new MutationObserver(scan).observe(results, { childList: true, subtree: true });
    scan();
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
