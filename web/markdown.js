// markdown.js — the model's text as HTML, safely: a small subset of Markdown (fenced and inline code, headings,
// bold and italic, lists, links, paragraphs).
//
// WHY: the page shows what a model wrote, and a model may write anything, "<script>" included. The text is escaped
// first — every <, >, &, " and ' becomes an entity — and only then are the Markdown marks turned into the few tags
// below, so no tag or attribute the model wrote survives. Links keep http(s) URLs only.
//
// INVARIANT: every character of the output that is not one of the tags written here came through escapeHtml.
// A text still streaming renders as well: an unclosed fence is a code block to the end.

export function escapeHtml(s) {
  return s.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]);
}

// Inline marks of one escaped line: code spans first (nothing inside them is a mark), then links, bold, italic.
function inline(line) {
  const spans = [];
  const keep = (html) => `\u0000${spans.push(html) - 1}\u0000`;
  let s = line.replace(/`([^`]+)`/g, (_, code) => keep(`<code>${code}</code>`));
  s = s.replace(/\[([^\]]+)\]\((https?:\/\/[^\s)]+)\)/g, (_, text, url) =>
    keep(`<a href="${url}" target="_blank" rel="noopener noreferrer">${text}</a>`));
  s = s.replace(/\*\*(\S(?:.*?\S)?)\*\*/g, '<strong>$1</strong>').replace(/__(\S(?:.*?\S)?)__/g, '<strong>$1</strong>');
  s = s.replace(/(^|[^*\w])\*(\S(?:.*?\S)?)\*(?!\*)/g, '$1<em>$2</em>').replace(/(^|\W)_(\S(?:.*?\S)?)_(?!\w)/g, '$1<em>$2</em>');
  const restore = (html) => html.replace(/\u0000(\d+)\u0000/g, (_, i) => restore(spans[Number(i)])); // a link's code
  return restore(s);
}

/** Markdown → HTML (a string for innerHTML: built from escaped text alone). */
export function renderMarkdown(text) {
  const lines = escapeHtml(text.replace(/\u0000/g, '')).split('\n');
  const out = [];
  let para = [];
  let list = null; // {tag: 'ul'|'ol', items: []}
  const flush = () => {
    if (para.length) out.push(`<p>${para.map(inline).join('<br>')}</p>`);
    para = [];
    if (list) out.push(`<${list.tag}>${list.items.map((i) => `<li>${inline(i)}</li>`).join('')}</${list.tag}>`);
    list = null;
  };
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i];
    const fence = /^\s*```\s*([\w+-]*)\s*$/.exec(line);
    if (fence) {
      flush();
      const code = [];
      for (i++; i < lines.length && !/^\s*```\s*$/.test(lines[i]); i++) code.push(lines[i]);
      const lang = fence[1] ? ` data-lang="${fence[1]}"` : '';
      out.push(`<pre${lang}><code>${code.join('\n')}</code></pre>`);
      continue;
    }
    const heading = /^(#{1,6})\s+(.*)$/.exec(line);
    const item = /^\s*(?:([-*+])|(\d+)[.)])\s+(.*)$/.exec(line);
    if (heading) {
      flush();
      const level = Math.min(heading[1].length + 2, 6); // a reply's "#" is a section, not the page's title
      out.push(`<h${level}>${inline(heading[2])}</h${level}>`);
    } else if (item) {
      const tag = item[1] ? 'ul' : 'ol';
      if (para.length || (list && list.tag !== tag)) flush();
      list = list || { tag, items: [] };
      list.items.push(item[3]);
    } else if (!line.trim()) {
      flush();
    } else if (list && /^\s+\S/.test(line)) {
      list.items[list.items.length - 1] += ` ${line.trim()}`; // a list item's continued line
    } else {
      if (list) flush();
      para.push(line);
    }
  }
  flush();
  return out.join('');
}
