// @ts-check
// A roundtable room: its agents as pills, its messages live (the room's events, `RoomEvent` in
// the API's document), writing, replying, including messages in the agents' contexts.

import { api } from "./api.js";
import { $, data, el, find, status, submitOnCtrlEnter } from "./dom.js";
import { chatInput, clearErrors, general, showError, showFieldErrors } from "./errors.js";
import { fillModels, keyWarning, loadProviders } from "./models.js";

/**
 * A message as the API sends it.
 * @typedef {{ id: string, seq: number, kind: string, agent_id: string | null, agent: string | null, text: string,
 *   command: boolean, included: boolean, reply_to: string | null, tagged: string[], created_at: string }} Message
 */
/**
 * An agent in the room (a model's, or a webhook bot).
 * @typedef {{ id: string, name: string, kind: string, model: string | null, role: string | null, enabled: boolean,
 *   colour: string, bot: { endpoint: string, emulates: string | null } | null }} Participant
 */

/** The room's state: its agents, and each message's element by id (rendered once, then appended to). */
const room = {
  id: data("room", "id"),
  /** @type {Map<string, Participant>} */
  agents: new Map(),
  /** @type {Map<string, { li: HTMLElement, box: HTMLInputElement | null }>} */
  shown: new Map(),
  /** Agents answering, by id: their element and the text streamed so far. */
  /** @type {Map<string, { li: HTMLElement, text: HTMLElement, doing: HTMLElement }>} */
  pending: new Map(),
  /** @type {Map<string, Message>} */
  messages: new Map(),
  /** The id of the message the next one replies to. */
  /** @type {string | null} */
  replyTo: null,
  /** The agents the status line says are answering the last message, by id. */
  /** @type {Set<string>} */
  answering: new Set(),
};

/**
 * Whether agent `id` already answered (or failed) after the message `seq`.
 * @param {string} id
 * @param {number} seq
 */
function answeredEarly(id, seq) {
  return [...room.messages.values()].some((m) => m.agent_id === id && m.seq > seq && (m.kind === "agent" || m.kind === "error"));
}

/**
 * An agent's answer (or failure) arrived: the status line stops naming it, and says so once
 * everyone asked has answered.
 * @param {string | null} agentId
 */
function answered(agentId) {
  if (agentId === null || !room.answering.delete(agentId)) return;
  const left = [...room.answering].map((id) => (room.agents.get(id) || { name: "?" }).name);
  status("chat-status", left.length ? "Answering: " + left.join(", ") + "." : "Everyone answered.");
}

/** The longest message the server takes, in characters: its rule, rendered by the template. */
const LIMIT = Number(data("message", "maxChars"));

/**
 * A participant's colour if it is one (`#rgb` … `#rrggbbaa`), else the muted one.
 * @param {string | null} agentId
 */
function colourOf(agentId) {
  const p = agentId === null ? undefined : room.agents.get(agentId);
  return p && /^#[0-9a-fA-F]{3,8}$/.test(p.colour) ? p.colour : "var(--muted)";
}

/**
 * The text colour that reads on `colour` (a `#rgb` or `#rrggbb` agent colour): white or near
 * black, whichever contrasts more (WCAG's relative luminance).
 * @param {string} colour
 */
function textOn(colour) {
  const hex = colour.length === 4 ? colour.replace(/^#(.)(.)(.)$/, "#$1$1$2$2$3$3") : colour;
  const m = /^#([0-9a-f]{2})([0-9a-f]{2})([0-9a-f]{2})/i.exec(hex);
  if (!m) return "var(--card)";
  const [r, g, b] = [m[1], m[2], m[3]].map((x) => {
    const c = parseInt(x, 16) / 255;
    return c <= 0.04045 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4;
  });
  const l = 0.2126 * r + 0.7152 * g + 0.0722 * b;
  return 1.05 / (l + 0.05) >= (l + 0.05) / 0.0561 ? "#fff" : "#111";
}

function renderPills() {
  const pills = [...room.agents.values()].map((p) => {
    const toggle = el(
      "button",
      { type: "button", class: "pill" + (p.enabled ? " on" : ""), "data-agent": p.name, "aria-pressed": p.enabled ? "true" : "false", title: (p.enabled ? "Enabled" : "Disabled") + " · " + (p.kind === "bot" && p.bot ? "bot at " + p.bot.endpoint + (p.bot.emulates ? ", emulating " + p.bot.emulates : "") + " (answers when tagged or replied to)" : p.model) + (p.role ? " · " + p.role : "") + " · click to " + (p.enabled ? "disable" : "enable"), onclick: () => setEnabled(p, !p.enabled) },
      p.name,
      ...(p.kind === "bot" ? [" ", el("small", { class: "pill-kind" }, "bot")] : []),
    );
    toggle.style.setProperty("--agent", colourOf(p.id));
    toggle.style.setProperty("--on-agent", textOn(colourOf(p.id)));
    const remove = el("button", { type: "button", class: "pill-remove", "data-agent": p.name, "aria-label": "Remove " + p.name, title: "Remove " + p.name, onclick: () => removeParticipant(p) }, "×");
    return el("li", {}, toggle, remove);
  });
  if (!pills.length) pills.push(el("li", { class: "hint" }, "No agents yet: add one, or talk alone."));
  $("pills").replaceChildren(...pills);
}

/**
 * @param {Participant} p
 * @param {boolean} enabled
 */
async function setEnabled(p, enabled) {
  const r = await api("PATCH", "/api/rooms/" + room.id + "/participants/" + p.id, { enabled });
  if (!r.ok) {
    general(r.error.message);
    return;
  }
  room.agents.set(r.data.id, r.data);
  renderPills();
  const pill = $("pills").querySelector('button.pill[data-agent="' + CSS.escape(r.data.name) + '"]');
  if (pill instanceof HTMLElement) pill.focus();
}

/** @param {Participant} p */
async function removeParticipant(p) {
  if (!window.confirm("Remove " + p.name + " from the room? Its messages stay.")) return;
  const r = await api("DELETE", "/api/rooms/" + room.id + "/participants/" + p.id);
  if (!r.ok) {
    general(r.error.message);
    return;
  }
  room.agents.delete(p.id);
  renderPills();
}

/**
 * Shows a message, once: in its place by `seq` (answers may be stored out of arrival order).
 * @param {Message} m
 */
function showMessage(m) {
  if (m.kind === "agent" || m.kind === "error") answered(m.agent_id);
  if (room.shown.has(m.id)) {
    setIncluded(m.id, m.included);
    return;
  }
  const li = buildMessage(m);
  const list = $("room-messages");
  // Follow the conversation only if the reader is at its end (not reading back).
  const atEnd = list.scrollHeight - list.scrollTop - list.clientHeight < 40;
  let after = list.lastElementChild;
  while (after instanceof HTMLElement && Number(after.dataset.seq) > m.seq) after = after.previousElementSibling;
  if (after) after.after(li);
  else list.prepend(li);
  if (atEnd || m.kind === "person") list.scrollTop = list.scrollHeight;
  if (m.kind !== "person" && m.agent_id) donePending(m.agent_id);
}

/**
 * Who wrote a message, as the room shows it.
 * @param {Message} m
 */
function authorOf(m) {
  return m.kind === "person" ? "You" : m.agent || "agent";
}

/**
 * A message's element: the author (you, or the agent in its colour), what it replies to and
 * tags, its text, the checkbox, Reply or Retry.
 * @param {Message} m
 */
function buildMessage(m) {
  room.messages.set(m.id, m);
  const agent = m.agent || "agent";
  const author = el("strong", { class: "author" }, authorOf(m));
  const head = el("p", { class: "msg-head" }, author);
  const body = el("p", { class: "msg-text" }, m.text);
  const parts = [head];
  const parent = m.reply_to && room.messages.get(m.reply_to);
  if (m.reply_to) parts.push(el("p", { class: "reply-to" }, "↪ replying to " + (parent ? authorOf(parent) + ": “" + parent.text.slice(0, 80) + (parent.text.length > 80 ? "…" : "") + "”" : "an earlier message")));
  const tagged = (m.tagged || []).map((id) => (room.agents.get(id) || { name: undefined }).name).filter(Boolean);
  if (tagged.length && m.kind !== "person") parts.push(el("p", { class: "tags" }, "tags " + tagged.map((n) => "@" + n).join(" ")));
  parts.push(body);
  const li = el("li", { class: "room-msg kind-" + m.kind + (m.included || m.kind === "error" || m.kind === "utility" ? "" : " excluded"), "data-id": m.id, "data-seq": m.seq }, ...parts);
  if (m.kind === "agent" || m.kind === "error") li.style.setProperty("--agent", colourOf(m.agent_id));
  /** @type {HTMLInputElement | null} */
  let box = null;
  if (m.kind === "utility" || m.command) {
    // Commands and the utility bot's answers are never in a context.
  } else if (m.kind === "error") {
    head.append(" ", el("span", { class: "badge danger" }, "failed"));
    body.classList.add("error");
    const failed = m.agent_id;
    if (failed) head.append(" ", el("button", { type: "button", class: "retry", "data-agent": agent, onclick: () => retry(failed) }, "Retry"));
  } else {
    const checkbox = el("input", { type: "checkbox", class: "included", checked: m.included, "aria-label": "Include in the agents' context", onchange: () => toggleIncluded(m.id, checkbox) });
    box = checkbox;
    head.prepend(el("label", { class: "include", title: "Include in the agents' context" }, box));
    head.append(el("button", { type: "button", class: "reply", "aria-label": "Reply to this message of " + authorOf(m), onclick: () => replyTo(m) }, "Reply"));
  }
  room.shown.set(m.id, { li, box });
  return li;
}

/**
 * @param {string} id
 * @param {boolean} included
 */
function setIncluded(id, included) {
  const m = room.shown.get(id);
  if (!m || !m.box) return; // failures are never in a context
  m.box.checked = included;
  m.li.classList.toggle("excluded", !included);
}

/**
 * @param {string} id
 * @param {HTMLInputElement} box
 */
async function toggleIncluded(id, box) {
  const included = box.checked;
  box.disabled = true;
  const r = await api("PATCH", "/api/rooms/" + room.id + "/messages/" + id, { included });
  box.disabled = false;
  if (!r.ok) {
    box.checked = !included;
    general(r.error.message);
    return;
  }
  setIncluded(id, included);
}

/**
 * Makes the next message a reply to `m` (its author is asked to answer it).
 * @param {Message | null} m
 */
function replyTo(m) {
  room.replyTo = m ? m.id : null;
  $("replying").hidden = !m;
  $("replying-to").textContent = m ? authorOf(m) + ": “" + m.text.slice(0, 60) + (m.text.length > 60 ? "…" : "") + "”" : "";
  if (m) $("message").focus();
}

/**
 * A bot's caller key, from the answer to `/register`: shown until dismissed, never again.
 * @param {string} bot
 * @param {string} key
 */
function showCallerKey(bot, key) {
  $("caller-key-bot").textContent = "@" + bot;
  $("caller-key-value").textContent = key;
  $("caller-key").hidden = false;
}

/** @param {string} agentId */
async function retry(agentId) {
  const r = await api("POST", "/api/rooms/" + room.id + "/participants/" + agentId + "/retry");
  if (!r.ok) general(r.error.message);
  else status("chat-status", "Asked " + (room.agents.get(agentId) || { name: "the agent" }).name + " again.");
}

/**
 * An agent answering: shown from `agent_started` until its message, with its streamed text.
 * @param {string} agentId
 */
function startPending(agentId) {
  const shown = room.pending.get(agentId);
  if (shown) return shown;
  const p = room.agents.get(agentId);
  const name = p ? p.name : "An agent";
  const text = el("span", { class: "msg-text" });
  const author = el("strong", { class: "author" }, name);
  const doing = el("span", { class: "hint" }, "is answering…");
  const li = el("li", { class: "pending-agent", "data-agent": name }, author, " ", doing, " ", text);
  li.style.setProperty("--agent", colourOf(agentId));
  $("pending").append(li);
  const entry = { li, text, doing };
  room.pending.set(agentId, entry);
  return entry;
}

/** @param {string} agentId */
function donePending(agentId) {
  const p = room.pending.get(agentId);
  if (!p) return;
  p.li.remove();
  room.pending.delete(agentId);
}

/**
 * Reads the room again: its agents, and any message not shown yet (after a reconnect).
 * @returns {Promise<boolean>} whether it could
 */
async function syncRoom() {
  const r = await api("GET", "/api/rooms/" + room.id);
  if (!r.ok) {
    general(r.error.message);
    return false;
  }
  /** @type {{ room: { name: string }, participants: Participant[], messages: Message[] }} */
  const detail = r.data;
  $("room-name").textContent = detail.room.name;
  document.title = detail.room.name + " · Agency";
  room.agents = new Map(detail.participants.map((p) => [p.id, p]));
  renderPills();
  const fresh = detail.messages.filter((m) => !room.shown.has(m.id));
  if (room.shown.size === 0) {
    // First load: build the whole list off the page and attach it once.
    const frag = document.createDocumentFragment();
    for (const m of fresh) frag.append(buildMessage(m));
    $("room-messages").append(frag);
  } else {
    for (const m of detail.messages) showMessage(m);
  }
  return true;
}

/**
 * Listens to the room's events; resolves once connected (or failed to).
 * @returns {Promise<void>}
 */
function openRoomEvents() {
  return new Promise((resolve) => {
    const es = new EventSource("/api/rooms/" + room.id + "/events");
    let opened = false;
    es.addEventListener("open", () => {
      if (opened) syncRoom(); // reconnected: catch up on what was missed
      opened = true;
      resolve();
    });
    es.addEventListener("error", () => resolve(), { once: true });
    es.addEventListener("message", (e) => showMessage(JSON.parse(e.data)));
    es.addEventListener("agent_started", (e) => startPending(JSON.parse(e.data).agent));
    es.addEventListener("delta", (e) => {
      const d = JSON.parse(e.data);
      startPending(d.agent).text.append(d.text);
    });
    es.addEventListener("tool_called", (e) => {
      const d = JSON.parse(e.data);
      startPending(d.agent).doing.textContent = "is calling " + d.tool + "…";
    });
    es.addEventListener("tool_done", (e) => {
      const d = JSON.parse(e.data);
      startPending(d.agent).doing.textContent = (d.is_error ? d.tool + " failed; " : "used " + d.tool + "; ") + "is answering…";
    });
    es.addEventListener("included", (e) => {
      const d = JSON.parse(e.data);
      setIncluded(d.message, d.included);
    });
    es.addEventListener("participants", () => syncRoom());
  });
}

/**
 * Characters as the server counts them (code points, not UTF-16 units).
 * @param {string} text
 */
function chars(text) {
  let n = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c < 0xdc00 || c > 0xdfff) n++; // a low surrogate ends a character already counted
  }
  return n;
}

function updateCounter() {
  const n = chars($("message", HTMLTextAreaElement).value);
  const c = $("counter");
  c.textContent = n + " / " + LIMIT;
  c.classList.toggle("over", n > LIMIT);
  if (n > LIMIT) c.textContent += " — " + (n - LIMIT) + " too many";
}

/** @param {SubmitEvent} ev */
async function sendToRoom(ev) {
  ev.preventDefault();
  const { msg, slot } = chatInput();
  const text = msg.value;
  const problem = !text.trim() ? "Write a message first." : chars(text) > LIMIT ? "At most " + LIMIT + " characters: shorten it by " + (chars(text) - LIMIT) + "." : null;
  if (problem) {
    showError(slot, problem);
    msg.setAttribute("aria-invalid", "true");
    msg.focus();
    return;
  }
  const button = $("send", HTMLButtonElement);
  button.disabled = true;
  status("chat-status", "Sending…");
  try {
    /** @type {{ text: string, reply_to?: string }} */
    const body = { text };
    if (room.replyTo) body.reply_to = room.replyTo;
    const r = await api("POST", "/api/rooms/" + room.id + "/messages", body);
    if (!r.ok) {
      showError(slot, r.error.message);
      msg.setAttribute("aria-invalid", "true");
      status("chat-status", "");
      return;
    }
    /** @type {{ message: Message, answering: string[], caller_key?: string }} */
    const posted = r.data;
    showMessage(posted.message);
    msg.value = "";
    updateCounter();
    replyTo(null);
    if (posted.caller_key) showCallerKey(text.trim().split(/\s+/)[1].replace(/^@/, ""), posted.caller_key);
    // Those whose answers came before this reply are answered already.
    room.answering = new Set(posted.answering.filter((id) => !answeredEarly(id, posted.message.seq)));
    const names = [...room.answering].map((id) => (room.agents.get(id) || { name: "?" }).name);
    status("chat-status", posted.message.command ? "The utility bot answered." : names.length ? "Answering: " + names.join(", ") + "." : posted.answering.length ? "Everyone answered." : "No agent is asked: your message is stored.");
  } finally {
    button.disabled = false;
  }
}

/** The saved roles and personalities, as choices of the add-agent form; picking one hides the field for its own text. */
async function loadSavedPersonas() {
  const r = await api("GET", "/api/definitions");
  if (!r.ok) return;
  /** @type {{ id: string, kind: string, name: string, text: string }[]} */
  const all = r.data;
  for (const kind of ["role", "personality"]) {
    const pick = $("f-" + kind + "-id", HTMLSelectElement);
    for (const d of all.filter((d) => d.kind === kind)) pick.append(el("option", { value: d.id, title: d.text }, d.name));
    const own = $("f-" + kind, HTMLInputElement);
    pick.addEventListener("change", () => {
      own.hidden = !!pick.value;
      if (pick.value) own.value = "";
    });
  }
}

/** @param {SubmitEvent} ev */
async function addAgentToRoom(ev) {
  ev.preventDefault();
  const form = $("agent-form", HTMLFormElement);
  clearErrors(form);
  /** @type {Record<string, string | string[]>} */
  const body = { name: $("f-name", HTMLInputElement).value.trim(), model: $("f-model", HTMLInputElement).value.trim() };
  const tools = $("f-tools", HTMLInputElement)
    .value.split(",")
    .map((t) => t.trim())
    .filter((t) => t);
  if (tools.length) body.tools = tools;
  for (const k of ["role", "personality", "instructions"]) {
    const saved = find("f-" + k + "-id");
    if (saved instanceof HTMLSelectElement && saved.value) {
      body[k + "_id"] = saved.value;
      continue;
    }
    const own = $("f-" + k);
    const v = own instanceof HTMLInputElement || own instanceof HTMLTextAreaElement ? own.value.trim() : "";
    if (v) body[k] = v;
  }
  const r = await api("POST", "/api/rooms/" + room.id + "/participants", body);
  if (!r.ok) {
    showFieldErrors(form, r.error);
    return;
  }
  room.agents.set(r.data.id, r.data);
  renderPills();
  form.reset();
  $("f-role").hidden = false;
  $("f-personality").hidden = false;
  $("f-name").focus();
}

const chat = $("room-chat", HTMLFormElement);
chat.addEventListener("submit", sendToRoom);
loadSavedPersonas();
$("replying-cancel").addEventListener("click", () => replyTo(null));
$("delete-room").addEventListener("click", async () => {
  if (!window.confirm("Delete this room with all its messages? This cannot be undone.")) return;
  const r = await api("DELETE", "/api/rooms/" + room.id);
  if (r.ok) window.location.href = "/rooms";
  else general(r.error.message);
});
$("caller-key-done").addEventListener("click", () => {
  $("caller-key").hidden = true;
  $("caller-key-value").textContent = "";
});
$("agent-form").addEventListener("submit", addAgentToRoom);
// The model field offers the server's providers, and warns at once about one without a key.
loadProviders().then((providers) => {
  fillModels($("models"), providers);
  const model = $("f-model", HTMLInputElement);
  const check = () => {
    const w = $("w-model");
    w.textContent = keyWarning(providers, model.value, false);
    w.hidden = !w.textContent;
  };
  model.addEventListener("input", check);
  check();
});
$("message").addEventListener("input", updateCounter);
submitOnCtrlEnter($("message"), chat);
// Listen first, then read: nothing said in between is lost (messages are shown once, by id).
await openRoomEvents();
if (await syncRoom()) {
  const list = $("room-messages");
  list.scrollTop = list.scrollHeight;
  $("room").dataset.ready = "true";
}
