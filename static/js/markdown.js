// Markdown for streamed assistant text, on markdown-it (static/vendor/markdown-it.min.js).
//
// Safe by construction: raw HTML is never passed through (markdown-it escapes
// it), links keep only http(s) and mailto URLs, images are not rendered, and
// every attribute value is escaped by markdown-it's renderer. Model or tool
// output can therefore never inject a tag, an attribute or a script.
//
// markdown-it parses in linear time, applies emphasis to text only (never to a
// link's URL or to the markup around it), and stops nesting at MAX_NESTING
// levels, so neither a long nor a deep input can stall or overflow the page.
//
// A streaming bubble renders incrementally (stream()): a top-level block
// followed by another complete block can no longer change, so it is rendered
// once and kept; only the open tail (the last block, still growing) is
// rendered again on each delta.
(function () {
  "use strict";

  const MAX_NESTING = 20;
  const ESCAPES = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };

  function escapeHtml(text) {
    return text.replace(/[&<>"']/g, (c) => ESCAPES[c]);
  }

  const md = window.markdownit({ html: false, linkify: false, typographer: false, breaks: true });
  md.set({ maxNesting: MAX_NESTING });
  // A definition later in the text would change a link above it: no block is then
  // ever final while streaming, so reference-style links stay plain text. Images
  // would load whatever the model names.
  md.disable(["reference", "image"]);
  md.validateLink = (url) => /^(https?:\/\/|mailto:)/i.test(url.trim());
  // Keep the URL as written (markdown-it's default percent-encodes it); the
  // renderer escapes it into the attribute.
  md.normalizeLink = (url) => url.trim();

  // markdown-it drops what lies deeper than maxNesting; show it as text instead,
  // one level above the limit.
  md.block.ruler.before("table", "deep_as_text", (state, startLine, endLine, silent) => {
    if (silent || state.level < MAX_NESTING - 2) return false;
    const open = state.push("paragraph_open", "p", 1);
    open.map = [startLine, endLine];
    const inline = state.push("inline", "", 0);
    inline.content = state.getLines(startLine, endLine, state.blkIndent, false).trim();
    inline.map = [startLine, endLine];
    inline.children = [];
    state.push("paragraph_close", "p", -1);
    state.line = endLine;
    return true;
  });

  const rules = md.renderer.rules;
  rules.link_open = (tokens, idx, options, env, self) => {
    tokens[idx].attrSet("rel", "noopener noreferrer nofollow");
    tokens[idx].attrSet("target", "_blank");
    return self.renderToken(tokens, idx, options);
  };
  // Stay below the page's own headings.
  const shiftHeading = (tokens, idx, options, env, self) => {
    const level = Math.min(Number(tokens[idx].tag.slice(1)) + 2, 6);
    tokens[idx].tag = "h" + level;
    return self.renderToken(tokens, idx, options);
  };
  rules.heading_open = shiftHeading;
  rules.heading_close = shiftHeading;

  function render(source) {
    return md.render(source);
  }

  // Index of the first token of each top-level block.
  function blockStarts(tokens) {
    const starts = [];
    tokens.forEach((token, i) => {
      if (token.level === 0 && token.nesting >= 0 && token.map) starts.push(i);
    });
    return starts;
  }

  // Renders one growing text into `container`. update(text) takes the whole text
  // so far; when it does not extend what was rendered, everything starts again.
  function stream(container) {
    const tail = document.createElement("div");
    tail.className = "md-tail";
    let done = ""; // the source of the blocks rendered for good
    // The work done so far, inspected by the browser tests: blocks rendered for
    // good, and characters parsed (which stays linear in the text's length).
    const counts = { committed: 0, parsedChars: 0 };

    function reset() {
      container.replaceChildren(tail);
      done = "";
    }
    reset();

    function commitFinishedBlocks(text) {
      // Only complete lines decide where a block ends: a partial line such as
      // "***" may yet become "***bold***".
      const rest = text.slice(done.length);
      const complete = rest.slice(0, rest.lastIndexOf("\n") + 1);
      if (!complete) return;
      const env = {};
      const tokens = md.parse(complete, env);
      counts.parsedChars += complete.length;
      const starts = blockStarts(tokens);
      if (starts.length < 2) return;
      const last = starts[starts.length - 1];
      const lines = complete.split("\n").slice(0, tokens[last].map[0]);
      const source = lines.map((line) => line + "\n").join("");
      tail.insertAdjacentHTML("beforebegin", md.renderer.render(tokens.slice(0, last), md.options, env));
      done += source;
      counts.committed += starts.length - 1;
    }

    function update(text) {
      if (!text.startsWith(done)) reset();
      commitFinishedBlocks(text);
      const open = text.slice(done.length);
      tail.innerHTML = md.render(open);
      counts.parsedChars += open.length;
    }

    return { update, counts };
  }

  window.agentsiteMarkdown = { render, stream, escapeHtml, MAX_NESTING };
})();
