// Shared by the book's demos: follow the book's light/dark theme and size the embedding frame.
//
// Embedded in a page, the demo talks to it by postMessage only (the page's end is
// ../demo-frames.js): that works served over HTTP and opened from disk alike, where each file
// is an origin of its own and neither side may reach into the other. The demo asks the page
// for its colour mode when it loads, and the page sends it again at every switch; opened on its
// own page, it follows ?theme=light|dark, else the system.
//
// Sizing: the frame is exactly as tall as the demo's content. A ResizeObserver watches the
// content (not the frame's viewport, which would only ever grow) and tells the page its height
// whenever it changes — a narrower screen, a longer answer — and the page sets the frame to it.
// Demos keep their own height stable while the reader interacts (they reserve room for their
// largest state), so the page under the frame does not jump.
const embedded = window.parent !== window;
let pageTheme = null;  // the mode the page sent, once it has

function syncTheme() {
  let t = pageTheme;
  if (!t) t = new URLSearchParams(location.search).get("theme");
  if (t !== "light" && t !== "dark") t = matchMedia("(prefers-color-scheme: dark)").matches ? "dark" : "light";
  document.documentElement.dataset.theme = t;
}

/** Height of the demo's content in CSS pixels (the html element is as tall as its content). */
function contentHeight() {
  return Math.ceil(document.documentElement.getBoundingClientRect().height);
}

/** Tell the page the content's height (the demos call it after drawing a new state too). */
function fit() {
  if (embedded) window.parent.postMessage({ gpubook: "height", height: contentHeight() }, "*");
}

window.addEventListener("message", (event) => {
  const msg = event.data;
  if (!embedded || event.source !== window.parent || !msg || msg.gpubook !== "theme") return;
  if (msg.theme === "light" || msg.theme === "dark") {
    pageTheme = msg.theme;
    syncTheme();
  }
  fit();  // the page is listening now: it may have missed an earlier height
});

syncTheme();
if (embedded) window.parent.postMessage({ gpubook: "theme?" }, "*");
matchMedia("(prefers-color-scheme: dark)").addEventListener("change", syncTheme);
if (typeof ResizeObserver === "function") new ResizeObserver(fit).observe(document.documentElement);
window.addEventListener("resize", fit);
window.addEventListener("load", fit);
