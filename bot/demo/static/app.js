// The demo workspace's client: sidebar, channel, thread pane, App Home, composer and
// the confirm dialog. The server holds every message; this draws what it is told.
import { inPage, mrkdwn, renderBlocks, setDirectory } from "./blockkit.js";

const state = { user: null, channel: "CDEMO", home: false, thread: null, config: null, version: -1 };
const $ = (id) => document.getElementById(id);

async function api(path, body) {
  const init = body === undefined ? {} : {
    method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body),
  };
  const answer = await fetch(path, init);
  return answer.json();
}

function channelLabel(id) {
  if (state.config.channels[id]) return `#${state.config.channels[id]}`;
  return "rl-bot";
}

function time(ts) {
  return new Date(Number(ts) * 1000).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });
}

function initials(name) {
  return (name || "?").slice(0, 1).toUpperCase();
}

// One message as an article: avatar, name, time, blocks (or text), files, and its notes.
function drawMessage(message, { inThread }) {
  const article = document.createElement("article");
  article.className = "message";
  const author = state.config.names[message.user] || message.user || "rl-bot";
  const isBot = !message.user || message.user === "UBOT" || message.bot_id;
  article.setAttribute("aria-label", `${isBot ? "rl-bot" : author} at ${time(message.ts)}`);
  article.dataset.ts = message.ts;
  if (message.ephemeral) article.classList.add("ephemeral");
  const avatar = document.createElement("div");
  avatar.className = `avatar${isBot ? " bot" : ""}`;
  avatar.textContent = isBot ? "🤖" : initials(author);
  avatar.setAttribute("aria-hidden", "true");
  const body = document.createElement("div");
  body.className = "message-body";
  const head = document.createElement("div");
  head.className = "message-head";
  // Text, never HTML: a name or a ts is whatever the workspace holds.
  const part = (className, text) => {
    const span = document.createElement("span");
    span.className = className;
    span.textContent = text;
    head.append(span);
  };
  part("author", isBot ? "rl-bot" : author);
  if (isBot) part("app-badge", "APP");
  part("ts", time(message.ts));
  body.append(head);
  // The buttons read the message through this: a redrawn article keeps its buttons.
  const context = { message, inThread };
  article.context = context;
  if (message.blocks && message.blocks.length) {
    body.append(renderBlocks(message.blocks, (element, block, node) => press(element, block, context, node)));
  } else if (message.text) {
    const text = document.createElement("div");
    text.className = "bk-text";
    text.innerHTML = mrkdwn(message.text);
    body.append(text);
  }
  for (const file of message.files || []) {
    const figure = document.createElement("figure");
    figure.className = "file";
    const img = document.createElement("img");
    img.addEventListener("load", () => stick(article.closest(".messages")));
    img.src = `/demo/files/${file.id}`;
    img.alt = file.title || file.name;
    figure.append(img);
    const caption = document.createElement("figcaption");
    caption.textContent = file.title || file.name;
    figure.append(caption);
    body.append(figure);
  }
  if (message.edited) {
    const edited = document.createElement("span");
    edited.className = "edited";
    edited.textContent = "(edited)";
    body.append(edited);
  }
  if (message.ephemeral) {
    const note = document.createElement("div");
    note.className = "only-you";
    note.innerHTML = "👁 Only visible to you ";
    const dismiss = document.createElement("button");
    dismiss.type = "button";
    dismiss.className = "link";
    dismiss.textContent = "Dismiss";
    dismiss.addEventListener("click", () => api("/demo/dismiss", { user: state.user, id: message.ephemeral }).then(refresh));
    note.append(dismiss);
    body.append(note);
  }
  if (!inThread && message.replies) {
    const open = document.createElement("button");
    open.type = "button";
    open.className = "replies";
    open.textContent = `${message.replies} ${message.replies === 1 ? "reply" : "replies"}`;
    open.addEventListener("click", () => openThread(message.ts));
    body.append(open);
  }
  article.append(avatar, body);
  return article;
}

// A list read to its end stays at its end as pictures load and messages arrive.
function stick(container) {
  if (container && container.dataset.atEnd !== "false") container.scrollTop = container.scrollHeight;
}

// Redraw a changed message in its old article, keeping the article and every button
// that is the same button (a root card redrawn for a new step keeps its buttons, so
// a click never lands on a node being replaced); the rest is drawn anew.
function redraw(article, fresh) {
  const kept = new Map();
  for (const button of article.querySelectorAll("button[data-element]")) {
    kept.set(button.dataset.element, [...(kept.get(button.dataset.element) || []), button]);
  }
  for (const button of fresh.querySelectorAll("button[data-element]")) {
    const same = kept.get(button.dataset.element);
    if (same && same.length) button.replaceWith(same.shift());
  }
  for (const name of fresh.getAttributeNames()) article.setAttribute(name, fresh.getAttribute(name));
  article.replaceChildren(...fresh.childNodes);
}

// Redraw a list in place: a message keeps its element (and place) unless it changed.
function drawList(container, messages, options) {
  const old = new Map([...container.querySelectorAll(":scope > article")].map((a) => [a.dataset.key, a]));
  if (!container.dataset.listening) {
    container.dataset.listening = "1";
    container.addEventListener("scroll", () => {
      container.dataset.atEnd = String(container.scrollHeight - container.scrollTop - container.clientHeight < 80);
    });
  }
  const nearBottom = old.size === 0 || container.dataset.atEnd !== "false";
  const keep = new Set();
  let place = container.firstElementChild;
  for (const message of messages) {
    const key = message.ephemeral || message.ts;
    // What the reader sees: an edit that changed nothing (a new edited.ts) is no change.
    const drawn = JSON.stringify({ ...message, edited: Boolean(message.edited) });
    let article = old.get(key);
    if (!article || article.dataset.drawn !== drawn) {
      const fresh = drawMessage(message, options);
      fresh.dataset.key = key;
      fresh.dataset.drawn = drawn;
      if (article) {
        redraw(article, fresh);
        article.context.message = message;
      } else {
        article = fresh;
      }
    }
    // Moved only when out of place: a node moved is a node a click can miss.
    if (article !== place) container.insertBefore(article, place);
    place = article.nextElementSibling;
    keep.add(key);
  }
  for (const [key, article] of old) if (!keep.has(key)) article.remove();
  if (nearBottom) container.scrollTop = container.scrollHeight;
}

async function drawChannel() {
  const asked = { channel: state.channel, user: state.user };
  const { messages } = await api(`/demo/conversation?channel=${asked.channel}&user=${asked.user}`);
  // An answer asked for before a switch of person or channel is not this view's.
  if (state.home || asked.channel !== state.channel || asked.user !== state.user) return;
  const replies = {};
  for (const m of messages) {
    if (m.thread_ts && m.thread_ts !== m.ts && !m.ephemeral) replies[m.thread_ts] = (replies[m.thread_ts] || 0) + 1;
  }
  const top = messages
    .filter((m) => !m.thread_ts || m.thread_ts === m.ts || m.subtype === "thread_broadcast")
    .map((m) => ({ ...m, replies: replies[m.ts] || 0 }));
  drawList($("messages"), top, { inThread: false });
  $("messages").dataset.viewer = asked.user;
  if (state.thread) {
    const root = messages.find((m) => m.ts === state.thread);
    const thread = messages.filter((m) => m.thread_ts === state.thread && m.ts !== state.thread);
    drawList($("thread-messages"), root ? [root, ...thread] : thread, { inThread: true });
  }
}

async function drawHome() {
  const asked = state.user;
  const { view } = await api(`/demo/home?user=${asked}`);
  if (!state.home || asked !== state.user) return;
  const container = $("home");
  container.replaceChildren();
  if (!view) {
    container.textContent = "Loading App Home…";
    return;
  }
  container.append(renderBlocks(view.blocks, (element, block, node) => press(element, block, { home: view }, node)));
}

async function refresh() {
  if (!state.config) return;
  if (state.home) await drawHome();
  else await drawChannel();
}

// A button: its confirm dialog first, if it has one, then a signed block_actions.
async function press(element, block, context, node) {
  if (element.confirm && !(await confirmDialog(element.confirm))) return;
  if (element.url && inPage(element.url)) window.location.hash = new URL(element.url).hash;
  else if (element.url) window.open(element.url, "_blank", "noopener");
  node.disabled = true;
  const message = context.message || {};
  await api("/demo/click", {
    user: state.user,
    action_id: element.action_id || "",
    value: element.value || "",
    block_id: block.block_id || "",
    text: (element.text && element.text.text) || "",
    channel: context.home ? null : state.channel,
    message_ts: message.ephemeral ? null : message.ts,
    ephemeral: message.ephemeral || null,
    thread_ts: message.thread_ts || (context.inThread ? state.thread : null),
    blocks: context.home ? context.home.blocks : message.blocks || [],
  });
  node.disabled = false;
  await refresh();
}

function confirmDialog(confirm) {
  const dialog = $("confirm");
  $("confirm-title").textContent = (confirm.title && confirm.title.text) || "Are you sure?";
  $("confirm-text").innerHTML = confirm.text ? mrkdwn(confirm.text.text || "") : "";
  $("confirm-yes").textContent = (confirm.confirm && confirm.confirm.text) || "Yes";
  $("confirm-no").textContent = (confirm.deny && confirm.deny.text) || "Cancel";
  $("confirm-yes").className = `bk-button ${confirm.style === "danger" ? "bk-danger" : "bk-primary"}`;
  dialog.showModal();
  return new Promise((resolve) => {
    dialog.addEventListener("close", () => resolve(dialog.returnValue === "yes"), { once: true });
  });
}

function openThread(ts) {
  state.thread = ts;
  $("thread").hidden = false;
  $("thread-messages").replaceChildren();
  $("thread-input").setAttribute("aria-label", `Reply in thread`);
  refresh();
}

// A link into the page, `#thread/<channel>/<ts>` (the demo's permalinks): that
// channel, with the thread open.
function follow() {
  const found = /^#thread\/([A-Z0-9]+)\/(\d+\.\d+)$/.exec(window.location.hash);
  if (!found || !state.config) return;
  history.replaceState(null, "", window.location.pathname);
  const [, channel, ts] = found;
  if (state.home || channel !== state.channel) go(channel);
  openThread(ts);
}

function closeThread() {
  state.thread = null;
  $("thread").hidden = true;
}

function go(channel, home = false) {
  state.channel = channel;
  state.home = home;
  closeThread();
  for (const item of document.querySelectorAll("#nav button")) {
    item.setAttribute("aria-current", String(home ? item.dataset.home === "1" : item.dataset.channel === channel && !item.dataset.home));
  }
  $("title").textContent = home ? "rl-bot · Home" : channelLabel(channel);
  $("messages").hidden = home;
  $("home").hidden = !home;
  $("composer").hidden = home;
  $("messages").replaceChildren();
  delete $("messages").dataset.viewer;
  $("input").setAttribute("aria-label", `Message ${channelLabel(channel)}`);
  $("input").placeholder = `Message ${channelLabel(channel)}`;
  if (home) api("/demo/home/open", { user: state.user }).then(refresh);
  else refresh();
}

function drawNav() {
  const nav = $("nav");
  nav.replaceChildren();
  const section = (title, items) => {
    const heading = document.createElement("h2");
    heading.textContent = title;
    const list = document.createElement("ul");
    for (const [label, channel, home] of items) {
      const li = document.createElement("li");
      const b = document.createElement("button");
      b.type = "button";
      b.textContent = label;
      b.dataset.channel = channel;
      if (home) b.dataset.home = "1";
      b.addEventListener("click", () => go(channel, home));
      li.append(b);
      list.append(li);
    }
    nav.append(heading, list);
  };
  section("Channels", Object.entries(state.config.channels).map(([id, name]) => [`# ${name}`, id, false]));
  section("Direct messages", [["rl-bot", state.user, false]]);
  section("Apps", [["rl-bot · Home", state.user, true]]);
}

async function send(input, threadTs) {
  // Untrimmed: as in Slack, a space before "/" makes a message, not a command.
  const text = input.value.trimEnd();
  if (!text.trim()) return;
  input.value = "";
  await api("/demo/command", { user: state.user, channel: state.channel, text, thread_ts: threadTs });
  await refresh();
}

async function start() {
  state.config = await api("/demo/config");
  setDirectory(state.config.names, state.config.channels);
  const person = $("person");
  for (const p of state.config.people) {
    const option = document.createElement("option");
    option.value = p.id;
    option.textContent = `${p.name} (${p.role})`;
    person.append(option);
  }
  state.user = state.config.people[0].id;
  person.addEventListener("change", () => {
    state.user = person.value;
    drawNav();
    go(state.home ? state.user : (state.config.channels[state.channel] ? state.channel : "CDEMO"), state.home);
  });
  drawNav();
  $("composer").addEventListener("submit", (e) => { e.preventDefault(); send($("input"), null); });
  $("thread-composer").addEventListener("submit", (e) => { e.preventDefault(); send($("thread-input"), state.thread); });
  $("close-thread").addEventListener("click", closeThread);
  $("plus1").addEventListener("click", () => api("/demo/clock", { minutes: 1 }));
  $("speed").addEventListener("change", () => api("/demo/clock", { speed: Number($("speed").value) }));
  go("CDEMO");
  window.addEventListener("hashchange", follow);
  follow();
  const events = new EventSource("/demo/events");
  events.onmessage = (event) => {
    const data = JSON.parse(event.data);
    const seconds = Math.floor(data.seconds);
    $("clock").textContent = `${Math.floor(seconds / 60)}:${String(seconds % 60).padStart(2, "0")} real time`;
    $("story").textContent = `Story at minute ${data.minute.toFixed(1)}`;
    if ($("speed").value !== String(data.speed)) $("speed").value = String(data.speed);
    if (data.version !== state.version) {
      state.version = data.version;
      refresh();
    }
  };
}

start();
