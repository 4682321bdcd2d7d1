// Block Kit and mrkdwn drawn as a Slack client draws them, into plain DOM elements.
// Buttons call `onButton(element, block)`; everything else is display only.
import { dataVisualization } from "./charts.js";

let names = {};
let channels = {};

// A link to a place in this page (`/#thread/…`), rather than to another page.
export function inPage(url) {
  return url.startsWith(`${window.location.origin}/#`);
}

export function setDirectory(people, rooms) {
  names = people;
  channels = rooms;
}

function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

function escapeHtml(text) {
  return text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");
}

function unescapeSlack(text) {
  return text.replace(/&lt;/g, "<").replace(/&gt;/g, ">").replace(/&amp;/g, "&");
}

// Slack's angle-bracket tokens: links, user and channel mentions, special mentions.
function token(inner) {
  if (inner.startsWith("@")) {
    const id = inner.slice(1).split("|")[0];
    return `<span class="mention">@${escapeHtml(names[id] || id)}</span>`;
  }
  if (inner.startsWith("#")) {
    const [id, label] = inner.slice(1).split("|");
    return `<span class="mention">#${escapeHtml(label || channels[id] || id)}</span>`;
  }
  if (inner.startsWith("!date^")) {
    const [, stamp, format] = inner.split("|")[0].split("^");
    return `<time>${escapeHtml(slackDate(Number(stamp), format || "{date_short}"))}</time>`;
  }
  if (inner.startsWith("!")) {
    const label = inner.slice(1).split("|")[0].replace(/^subteam\^\w+/, "team");
    return `<span class="mention">@${escapeHtml(label)}</span>`;
  }
  const [escaped, label] = inner.split("|");
  const url = unescapeSlack(escaped);
  const safe = /^(https?:|mailto:)/.test(url) ? url : "#";
  // A link into this page (a thread's permalink) opens here; any other in a new tab.
  const target = inPage(safe) ? "" : ' target="_blank" rel="noopener"';
  return `<a href="${escapeHtml(safe)}"${target}>${escapeHtml(unescapeSlack(label || url))}</a>`;
}

// `<!date^…>`: a time shown in the reader's own zone, in Slack's named formats.
function slackDate(seconds, format) {
  const when = new Date(seconds * 1000);
  const today = new Date();
  const sameDay = when.toDateString() === today.toDateString();
  const short = when.toLocaleDateString([], { month: "short", day: "numeric" });
  const long = when.toLocaleDateString([], { weekday: "long", month: "long", day: "numeric", year: "numeric" });
  const minutes = Math.round((today - when) / 60000);
  const parts = {
    date_num: when.toISOString().slice(0, 10),
    date: when.toLocaleDateString([], { month: "long", day: "numeric", year: "numeric" }),
    date_short: short,
    date_long: long,
    date_pretty: sameDay ? "Today" : when.toLocaleDateString([], { month: "long", day: "numeric" }),
    date_short_pretty: sameDay ? "Today" : short,
    date_long_pretty: sameDay ? "Today" : long,
    time: when.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" }),
    time_secs: when.toLocaleTimeString(),
    ago: minutes < 1 ? "just now" : minutes < 60 ? `${minutes} minutes ago` : `${Math.round(minutes / 60)} hours ago`,
  };
  return format.replace(/\{(\w+)\}/g, (m, name) => parts[name] || m);
}

export function mrkdwn(text) {
  const kept = [];
  const keep = (html) => `\u0000${kept.push(html) - 1}\u0000`;
  let out = text
    .replace(/```([\s\S]*?)```/g, (_, code) => keep(`<pre>${escapeHtml(unescapeSlack(code))}</pre>`))
    .replace(/`([^`\n]+)`/g, (_, code) => keep(`<code>${escapeHtml(unescapeSlack(code))}</code>`))
    .replace(/<([^<>\n]+)>/g, (_, inner) => keep(token(inner)));
  out = escapeHtml(unescapeSlack(out))
    .replace(/(^|[\s(])\*([^*\n]+)\*(?=$|[\s).,!?:;])/g, "$1<b>$2</b>")
    .replace(/(^|[\s(])_([^_\n]+)_(?=$|[\s).,!?:;])/g, "$1<i>$2</i>")
    .replace(/(^|[\s(])~([^~\n]+)~(?=$|[\s).,!?:;])/g, "$1<s>$2</s>")
    .replace(/^&gt; ?(.*)$/gm, '<span class="quote">$1</span>')
    .replace(/:([a-z0-9_+-]+):/g, (m, name) => EMOJI[name] || m)
    .replace(/\n/g, "<br>");
  return out.replace(/\u0000(\d+)\u0000/g, (_, i) => kept[Number(i)]);
}

const EMOJI = {
  warning: "⚠️", rotating_light: "🚨", white_check_mark: "✅", x: "❌", red_circle: "🔴",
  large_green_circle: "🟢", large_yellow_circle: "🟡", hourglass_flowing_sand: "⏳",
  chart_with_upwards_trend: "📈", bell: "🔔", no_bell: "🔕", zzz: "💤", moneybag: "💰",
  octagonal_sign: "🛑", arrows_counterclockwise: "🔄", package: "📦", mag: "🔍", bust_in_silhouette: "👤",
  stopwatch: "⏱️", hourglass: "⌛", heavy_check_mark: "✔️", information_source: "ℹ️", eyes: "👀",
  fire: "🔥", snail: "🐌", sleeping: "😴", memo: "📝", link: "🔗", money_with_wings: "💸",
  construction: "🚧", checkered_flag: "🏁", stop_button: "⏹️", bar_chart: "📊", robot_face: "🤖",
  large_blue_circle: "🔵", white_circle: "⚪", black_circle: "⚫", grey_question: "❔", question: "❓",
  arrow_right: "➡️", new: "🆕", sparkles: "✨", skull: "💀", thumbsup: "👍", clock1: "🕐",
  no_entry_sign: "🚫", double_vertical_bar: "⏸️", black_square_for_stop: "⏹️", arrow_forward: "▶️",
  zipper_mouth_face: "🤐", wave: "👋", wastebasket: "🗑️", thinking_face: "🤔", loud_sound: "🔊",
  floppy_disk: "💾", alarm_clock: "⏰",
};

function textObject(obj, className) {
  const node = el("div", className);
  if (!obj) return node;
  if (obj.type === "mrkdwn") node.innerHTML = mrkdwn(obj.text || "");
  else node.innerHTML = escapeHtml(obj.text || "").replace(/:([a-z0-9_+-]+):/g, (m, n) => EMOJI[n] || m);
  return node;
}

function plain(obj) {
  return obj && obj.text ? unescapeSlack(obj.text).replace(/:([a-z0-9_+-]+):/g, (m, n) => EMOJI[n] || m) : "";
}

function button(element, block, onButton) {
  const node = el("button", "bk-button", plain(element.text));
  node.type = "button";
  // what the button sends: a redraw keeps a button only where it would send the same
  node.dataset.element = JSON.stringify([block.block_id || "", element]);
  if (element.style) node.classList.add(`bk-${element.style}`);
  node.addEventListener("click", () => onButton(element, block, node));
  return node;
}

function image(element, className) {
  const node = el("img", className);
  node.src = element.image_url || "";
  node.alt = element.alt_text || "";
  node.loading = "lazy";
  return node;
}

function accessory(element, block, onButton) {
  if (!element) return null;
  if (element.type === "button") return button(element, block, onButton);
  if (element.type === "image") return image(element, "bk-accessory-image");
  if (element.type === "overflow" || element.type === "static_select") {
    const wrap = el("div", "bk-options");
    for (const option of element.options || []) {
      wrap.append(button({ ...element, text: option.text, value: option.value, type: "button" }, block, onButton));
    }
    return wrap;
  }
  return null;
}

export function renderBlocks(blocks, onButton) {
  const root = el("div", "blocks");
  for (const block of blocks || []) {
    let node = null;
    switch (block.type) {
      case "header":
        node = el("h3", "bk-header", plain(block.text));
        break;
      case "section": {
        node = el("div", "bk-section");
        const body = el("div", "bk-section-body");
        if (block.text) body.append(textObject(block.text, "bk-text"));
        if (block.fields && block.fields.length) {
          const grid = el("div", "bk-fields");
          for (const field of block.fields) grid.append(textObject(field, "bk-field"));
          body.append(grid);
        }
        node.append(body);
        const side = accessory(block.accessory, block, onButton);
        if (side) node.append(side);
        break;
      }
      case "context":
        node = el("div", "bk-context");
        for (const element of block.elements || []) {
          node.append(element.type === "image" ? image(element, "bk-context-image") : textObject(element, "bk-context-text"));
        }
        break;
      case "divider":
        node = el("hr", "bk-divider");
        break;
      case "actions":
        node = el("div", "bk-actions");
        for (const element of block.elements || []) {
          const control = accessory(element, block, onButton);
          if (control) node.append(control);
        }
        break;
      case "image": {
        node = el("figure", "bk-image");
        if (block.title) node.append(el("figcaption", "", plain(block.title)));
        node.append(image(block, ""));
        break;
      }
      case "data_visualization":
        node = dataVisualization(block);
        break;
      default:
        if (block.text) node = textObject(block.text, "bk-text");
    }
    if (node) root.append(node);
  }
  return root;
}
