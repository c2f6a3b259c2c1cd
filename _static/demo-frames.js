// The page's end of the demo frames (the frame's end is demos/frame.js). A frame tells its
// content's height and the page sets the frame to it; the page tells each frame the book's
// colour mode, at the frame's asking and at every switch. They talk by postMessage only, which
// works served over HTTP and opened from disk alike (there each file is an origin of its own,
// and neither side may reach into the other).
(() => {
  "use strict";
  const FRAMES = ".gpubook-demo iframe";

  function theme() {
    const t = document.documentElement.dataset.theme;
    if (t === "light" || t === "dark") return t;
    return window.matchMedia("(prefers-color-scheme: dark)").matches ? "dark" : "light";
  }

  function frames() { return [...document.querySelectorAll(FRAMES)]; }

  function tell(frame) {
    if (frame.contentWindow) frame.contentWindow.postMessage({ gpubook: "theme", theme: theme() }, "*");
  }

  function fit(frame, height) {
    if (!(height > 0) || frame.dataset.fitted === String(height)) return;
    frame.style.boxSizing = "content-box";  // the height set is the frame's viewport, borders come on top
    frame.style.height = height + "px";
    frame.dataset.fitted = String(height);
  }

  window.addEventListener("message", (event) => {
    const msg = event.data;
    if (!msg || typeof msg !== "object" || typeof msg.gpubook !== "string") return;
    const frame = frames().find((f) => f.contentWindow === event.source);
    if (!frame) return;
    if (msg.gpubook === "height") fit(frame, Math.ceil(Number(msg.height)));
    else if (msg.gpubook === "theme?") tell(frame);
  });

  function start() {
    // a frame that loaded before this script asked in vain: each is told now, and on every load
    frames().forEach((f) => { f.addEventListener("load", () => tell(f)); tell(f); });
    new MutationObserver(() => frames().forEach(tell))
      .observe(document.documentElement, { attributes: true, attributeFilter: ["data-theme"] });
    window.matchMedia("(prefers-color-scheme: dark)").addEventListener("change", () => frames().forEach(tell));
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
