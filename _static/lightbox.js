// Every figure of a chapter opens full size: the image is wrapped in a link to itself (which
// works without this script too), and a click, a tap or Enter shows it at its natural size in
// a dialog that scrolls where the image is larger than the screen. Escape, the close button or
// a click outside the image closes it. Nothing is fetched that the page did not already load.
(() => {
  "use strict";
  const FIGURES = "article .cell_output img, article figure img";
  let dialog = null;

  function build() {
    dialog = document.createElement("dialog");
    dialog.className = "gpubook-lightbox";
    dialog.setAttribute("aria-label", "Figure at full size");
    const close = document.createElement("button");
    close.type = "button";
    close.className = "gpubook-lightbox-close";
    close.setAttribute("aria-label", "Close the full-size figure");
    close.textContent = "×";
    close.addEventListener("click", () => dialog.close());
    const frame = document.createElement("div");
    frame.className = "gpubook-lightbox-frame";
    const img = document.createElement("img");
    img.className = "gpubook-lightbox-img";
    const caption = document.createElement("p");
    caption.className = "gpubook-lightbox-caption";
    frame.append(img);
    dialog.append(close, frame, caption);
    // a click on the backdrop or the empty space around the image closes; on the image it does not
    dialog.addEventListener("click", (e) => { if (e.target === dialog || e.target === frame) dialog.close(); });
    dialog.addEventListener("close", () => {
      document.documentElement.classList.remove("gpubook-lightbox-open");
      if (dialog.opener) dialog.opener.focus();
    });
    document.body.append(dialog);
  }

  function open(link, source) {
    if (!dialog) build();
    const img = dialog.querySelector("img");
    img.src = source.currentSrc || source.src;
    img.alt = source.alt;
    // natural size, in CSS pixels: the image as it was drawn, not scaled to the column
    img.width = source.naturalWidth;
    img.height = source.naturalHeight;
    const fig = source.closest("figure");
    const cap = fig && fig.querySelector("figcaption");
    let text = "";
    if (cap) {  // the caption's words, without its permalink sign
      const copy = cap.cloneNode(true);
      copy.querySelectorAll(".headerlink").forEach((h) => h.remove());
      text = copy.textContent.trim();
    }
    dialog.querySelector(".gpubook-lightbox-caption").textContent = text;
    dialog.opener = link;
    document.documentElement.classList.add("gpubook-lightbox-open");
    dialog.showModal();
    dialog.querySelector(".gpubook-lightbox-frame").scrollTo(0, 0);
  }

  function wrap(img) {
    if (img.closest("a")) return;
    const link = document.createElement("a");
    link.className = "gpubook-zoom";
    link.href = img.getAttribute("src");
    link.title = "Show the figure at full size";
    img.replaceWith(link);
    link.append(img);
    const hint = document.createElement("span");
    hint.className = "gpubook-visually-hidden";
    hint.textContent = " (opens at full size)";
    link.append(hint);
    link.addEventListener("click", (e) => {
      if (e.button !== 0 || e.ctrlKey || e.metaKey || e.shiftKey || e.altKey) return;  // new tab etc.
      if (typeof HTMLDialogElement !== "function") return;  // old browsers follow the link
      e.preventDefault();
      open(link, img);
    });
  }

  function init() { document.querySelectorAll(FIGURES).forEach(wrap); }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
  else init();
})();
