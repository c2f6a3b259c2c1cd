/* Code that wraps keeps Python's shape (book.css, "pre.gpubook-lines").

   Each line of a code block or a diff becomes its own box whose wrapped continuation hangs
   under the line's own indentation plus a column or more (book.css, from the box's --indent, its
   count of leading spaces, and --mark, 1 for a diff line's marker column); a line breaks at a space, before the "."
   of an attribute or a backslash, or after an opening bracket, a comma, "=" or ":" (a <wbr>), never inside a
   name or a number. Only elements are added: the text, and so what a copy button copies, is
   unchanged. Output blocks (a cell's printed text) are left as they are. */
(function () {
  "use strict";
  const OPENERS = "([{,=:";             // a line may break after one of these ...
  const STARTS = /[\w"'`\-]/;           // ... when a name, a number, a quote or a sign follows

  // Offsets in `text` (one source line) where a break may fall besides its spaces.
  function breakOffsets(text) {
    const out = [];
    for (let i = 1; i < text.length; i++) {
      const before = text[i - 1], c = text[i];
      if (c === "." && /[\w)\]]/.test(before) && /[A-Za-z_]/.test(text[i + 1] || "")) out.push(i);
      else if (c === "\\" && /\S/.test(before)) out.push(i);   // an escape inside a string or pattern
      else if (OPENERS.includes(before) && STARTS.test(c)) out.push(i);
    }
    return out;
  }

  // The text node and offset holding character `pos` of the block (nodes: [node, start] in order).
  function locate(nodes, pos) {
    let k = 0;
    while (k + 1 < nodes.length && nodes[k + 1][1] <= pos) k++;
    const [node, start] = nodes[k];
    return [node, Math.min(pos - start, node.data.length)];
  }

  function addBreaks(line) {
    const texts = [];
    const walk = document.createTreeWalker(line, NodeFilter.SHOW_TEXT);
    let text = "";
    for (let n = walk.nextNode(); n; n = walk.nextNode()) { texts.push([n, text.length]); text += n.data; }
    if (!texts.length) return;
    for (const pos of breakOffsets(text).reverse()) {   // from the end: earlier offsets stay valid
      const [node, off] = locate(texts, pos);
      const wbr = document.createElement("wbr");
      if (off === 0) node.parentNode.insertBefore(wbr, node);
      else if (off >= node.data.length) node.parentNode.insertBefore(wbr, node.nextSibling);
      else node.parentNode.insertBefore(wbr, node.splitText(off));
    }
  }

  // Put characters [from, to) of the line's box (its indentation) in a span of their own, whose
  // spaces the stylesheet may draw narrower on a small screen.
  function wrapIndent(box, from, to) {
    const texts = [];
    const walk = document.createTreeWalker(box, NodeFilter.SHOW_TEXT);
    let n = 0;
    for (let t = walk.nextNode(); t; t = walk.nextNode()) { texts.push([t, n]); n += t.data.length; }
    const range = document.createRange();
    range.setStart(...locate(texts, from));
    range.setEnd(...locate(texts, to));
    const span = document.createElement("span");
    span.className = "gpubook-indent";
    span.appendChild(range.extractContents());
    range.insertNode(span);
  }

  function hangLines(pre) {
    if (pre.classList.contains("gpubook-lines")) return;
    const diff = !!pre.closest(".highlight-diff");
    const nodes = [];
    const walk = document.createTreeWalker(pre, NodeFilter.SHOW_TEXT);
    let text = "";
    for (let n = walk.nextNode(); n; n = walk.nextNode()) { nodes.push([n, text.length]); text += n.data; }
    if (!nodes.length) return;
    const lines = text.split("\n");
    if (lines.length > 1 && lines[lines.length - 1] === "") lines.pop();
    const out = document.createDocumentFragment();
    let start = 0, deep = 1;
    lines.forEach((line, k) => {
      const end = start + line.length;
      const range = document.createRange();
      range.setStart(...locate(nodes, start));
      range.setEnd(...locate(nodes, end));
      const box = document.createElement("span");
      box.className = "gpubook-line";
      const mark = diff ? Math.min(line.length, 1) : 0;   // a diff line's first column is its marker
      const body = line.slice(mark);
      const indent = body.length - body.trimStart().length;
      if (indent < body.length && indent % 4 === 0) deep = Math.max(deep, indent);   // a block's level, not an alignment
      box.style.setProperty("--mark", mark);
      box.style.setProperty("--indent", indent);
      box.appendChild(range.cloneContents());
      if (indent && indent < body.length) wrapIndent(box, mark, mark + indent);
      addBreaks(box);
      out.appendChild(box);
      if (end < text.length) out.appendChild(document.createTextNode(text.slice(end, end + 1)));
      start = end + 1;
    });
    if (start < text.length) out.appendChild(document.createTextNode(text.slice(start)));
    pre.replaceChildren(out);
    pre.style.setProperty("--deep", deep);   // the block's deepest nesting, in spaces
    pre.classList.add("gpubook-lines");
  }

  function run() {
    for (const pre of document.querySelectorAll("article div.highlight > pre")) {
      if (pre.closest(".cell_output") && !pre.closest(".highlight-diff")) continue;   // printed output
      hangLines(pre);
    }
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", run);
  else run();
})();
