// Shared by the book's demos: follow the book's light/dark theme and size the embedding frame.
function syncTheme() {
  let t = null;
  try { if (window.parent !== window) t = window.parent.document.documentElement.dataset.theme; } catch (e) { t = null; }
  if (!t) t = new URLSearchParams(location.search).get("theme");
  if (t !== "light" && t !== "dark") t = matchMedia("(prefers-color-scheme: dark)").matches ? "dark" : "light";
  document.documentElement.dataset.theme = t;
}
function fit() {
  try { if (window.frameElement) window.frameElement.style.height = document.documentElement.scrollHeight + "px"; } catch (e) { /* cross-origin */ }
}
syncTheme();
try {
  new MutationObserver(syncTheme).observe(window.parent.document.documentElement, { attributes: true, attributeFilter: ["data-theme"] });
} catch (e) { /* opened on its own */ }
matchMedia("(prefers-color-scheme: dark)").addEventListener("change", syncTheme);
window.addEventListener("resize", fit);
