// A small markdown renderer for streamed assistant text.
//
// Safe by construction: every piece of source text is HTML-escaped before any
// markup is added, and the only markup added is a fixed set of tags; links
// keep only http(s) and mailto URLs. Model or tool output can therefore never
// inject a tag, an attribute or a script. Unclosed constructs (a code fence
// still streaming) render as what they will become.
(function () {
  "use strict";

  const ESCAPES = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };

  function escapeHtml(text) {
    return text.replace(/[&<>"']/g, (c) => ESCAPES[c]);
  }

  function unescapeHtml(html) {
    return html.replace(/&(amp|lt|gt|quot|#39);/g, (m, name) => ({ amp: "&", lt: "<", gt: ">", quot: '"', "#39": "'" })[name]);
  }

  function safeUrl(raw) {
    const url = raw.trim();
    return /^(https?:\/\/|mailto:)/i.test(url) ? url : null;
  }

  function inline(text) {
    // Code spans first, so nothing inside them is interpreted.
    return text
      .split(/(`[^`\n]+`)/)
      .map((part, i) => {
        if (i % 2 === 1) return "<code>" + escapeHtml(part.slice(1, -1)) + "</code>";
        let html = escapeHtml(part);
        html = html.replace(/\[([^\]\n]+)\]\(([^)\s]+)\)/g, (whole, label, href) => {
          const url = safeUrl(unescapeHtml(href));
          return url
            ? '<a href="' + escapeHtml(url) + '" rel="noopener noreferrer nofollow" target="_blank">' + label + "</a>"
            : whole;
        });
        html = html.replace(/\*\*([^*\n]+)\*\*/g, "<strong>$1</strong>");
        html = html.replace(/(^|[^*\w])\*([^*\s][^*\n]*?)\*(?!\w)/g, "$1<em>$2</em>");
        html = html.replace(/(^|[^_\w])_([^_\s][^_\n]*?)_(?!\w)/g, "$1<em>$2</em>");
        return html;
      })
      .join("");
  }

  function tableCells(line) {
    return line.trim().replace(/^\|/, "").replace(/\|$/, "").split("|").map((c) => c.trim());
  }

  function render(source) {
    const lines = source.replace(/\r\n?/g, "\n").split("\n");
    const out = [];
    let i = 0;
    while (i < lines.length) {
      const line = lines[i];
      const fence = line.match(/^\s*```(\S*)/);
      if (fence) {
        const body = [];
        i += 1;
        while (i < lines.length && !/^\s*```/.test(lines[i])) body.push(lines[i++]);
        i += 1;
        out.push("<pre><code>" + escapeHtml(body.join("\n")) + "</code></pre>");
        continue;
      }
      const heading = line.match(/^(#{1,6})\s+(.*)$/);
      if (heading) {
        const level = Math.min(heading[1].length + 2, 6); // stay below the page's own headings
        out.push("<h" + level + ">" + inline(heading[2]) + "</h" + level + ">");
        i += 1;
        continue;
      }
      if (/^\s*\|.*\|\s*$/.test(line) && i + 1 < lines.length && /^\s*\|?\s*:?-{3,}/.test(lines[i + 1])) {
        const head = tableCells(line);
        i += 2;
        const rows = [];
        while (i < lines.length && /^\s*\|.*\|\s*$/.test(lines[i])) rows.push(tableCells(lines[i++]));
        out.push(
          "<table><thead><tr>" + head.map((c) => "<th>" + inline(c) + "</th>").join("") + "</tr></thead><tbody>" +
            rows.map((r) => "<tr>" + r.map((c) => "<td>" + inline(c) + "</td>").join("") + "</tr>").join("") +
            "</tbody></table>"
        );
        continue;
      }
      const bullet = /^\s*([-*+]|\d+[.)])\s+/;
      if (bullet.test(line)) {
        const ordered = /^\s*\d/.test(line);
        const items = [];
        while (i < lines.length && bullet.test(lines[i])) items.push(lines[i++].replace(bullet, ""));
        const tag = ordered ? "ol" : "ul";
        out.push("<" + tag + ">" + items.map((t) => "<li>" + inline(t) + "</li>").join("") + "</" + tag + ">");
        continue;
      }
      if (/^\s*>/.test(line)) {
        const quoted = [];
        while (i < lines.length && /^\s*>/.test(lines[i])) quoted.push(lines[i++].replace(/^\s*>\s?/, ""));
        out.push("<blockquote>" + render(quoted.join("\n")) + "</blockquote>");
        continue;
      }
      if (line.trim() === "") {
        i += 1;
        continue;
      }
      const para = [];
      while (
        i < lines.length && lines[i].trim() !== "" &&
        !/^(\s*```|#{1,6}\s|\s*>|\s*([-*+]|\d+[.)])\s+)/.test(lines[i])
      ) {
        para.push(inline(lines[i++]));
      }
      if (para.length === 0) para.push(inline(lines[i++])); // never stall on an odd line
      out.push("<p>" + para.join("<br>") + "</p>");
    }
    return out.join("");
  }

  window.agentsiteMarkdown = { render, escapeHtml };
})();
