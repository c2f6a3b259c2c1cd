// Shared by the book's demos: follow the book's light/dark theme and size the embedding frame.
//
// Sizing: the frame is exactly as tall as the demo's content. A ResizeObserver watches the
// content (not the frame's viewport, which would only ever grow), so the frame follows every
// change of layout — a narrower screen, a longer answer — and stays put when nothing changed.
// Demos keep their own height stable while the reader interacts (they reserve room for their
// largest state), so the page under the frame does not jump.
function syncTheme() {
  let t = null;
  try { if (window.parent !== window) t = window.parent.document.documentElement.dataset.theme; } catch (e) { t = null; }
  if (!t) t = new URLSearchParams(location.search).get("theme");
  if (t !== "light" && t !== "dark") t = matchMedia("(prefers-color-scheme: dark)").matches ? "dark" : "light";
  document.documentElement.dataset.theme = t;
}

/** Height of the demo's content in CSS pixels (the html element is as tall as its content). */
function contentHeight() {
  return Math.ceil(document.documentElement.getBoundingClientRect().height);
}

let fittedHeight = 0;
function fit() {
  let frame = null;
  try { frame = window.frameElement; } catch (e) { return; /* cross-origin */ }
  if (!frame) return;
  const h = contentHeight();
  if (h === fittedHeight) return;
  fittedHeight = h;
  frame.style.boxSizing = "content-box";  // the height set is the viewport's, borders come on top
  frame.style.height = h + "px";
  frame.dataset.fitted = String(h);
}

syncTheme();
try {
  new MutationObserver(syncTheme).observe(window.parent.document.documentElement, { attributes: true, attributeFilter: ["data-theme"] });
} catch (e) { /* opened on its own */ }
matchMedia("(prefers-color-scheme: dark)").addEventListener("change", syncTheme);
if (typeof ResizeObserver === "function") new ResizeObserver(fit).observe(document.documentElement);
window.addEventListener("resize", fit);
window.addEventListener("load", fit);
