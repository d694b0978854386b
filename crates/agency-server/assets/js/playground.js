// @ts-check
// The playground: talk to an agency's draft or published version and watch each turn's hops
// arrive (the conversation's events, `ConversationEvent` in the API's document).

import { api } from "./api.js";
import { $, data, el, status, submitOnCtrlEnter } from "./dom.js";
import { chatInput, showError } from "./errors.js";
import { cost, tokens } from "./format.js";

/** @typedef {{ from: string, to: string, kind: string, text: string, usage: import("./format.js").Usage | null, latency_ms: number | null, tool?: string, is_error?: boolean }} Hop */
/**
 * The turn on the page: its parts, and when it was sent.
 * @typedef {{ title: HTMLElement, hops: HTMLElement, answer: HTMLElement, answerBox: HTMLElement, error: HTMLElement, usage: HTMLElement, started: number }} Turn
 */

const id = data("playground", "id");
/** The conversation the page talks in, and which version of the agency it runs on. */
const play = {
  /** @type {string | null} */
  conversation: null,
  /** @type {string | null} */
  on: null,
  /** @type {EventSource | null} */
  events: null,
  /** @type {Turn | null} */
  turn: null,
};

/**
 * Listens to the conversation's events; resolves once connected (or failed to).
 * @param {string} conversation
 * @returns {Promise<void>}
 */
function openEvents(conversation) {
  return new Promise((resolve) => {
    if (play.events) play.events.close();
    const es = new EventSource("/api/conversations/" + conversation + "/events");
    play.events = es;
    es.addEventListener("open", () => resolve(), { once: true });
    es.addEventListener("error", () => resolve(), { once: true });
    es.addEventListener("turn_started", (e) => {
      const d = JSON.parse(e.data);
      if (play.turn) play.turn.title.textContent = "Turn " + d.number;
    });
    es.addEventListener("agent_started", (e) => {
      const d = JSON.parse(e.data);
      status("chat-status", d.agent + " is working…");
    });
    es.addEventListener("hop", (e) => addHop(JSON.parse(e.data).hop));
    es.addEventListener("turn_finished", (e) => {
      const d = JSON.parse(e.data);
      status("chat-status", "Turn finished (" + d.stopped_by + ").");
    });
    es.addEventListener("turn_failed", (e) => {
      const d = JSON.parse(e.data);
      if (play.turn) showError(play.turn.error, d.error);
    });
  });
}

/** @param {Hop} h */
function addHop(h) {
  const t = play.turn;
  if (!t) return;
  const secs = ((performance.now() - t.started) / 1000).toFixed(2);
  t.hops.append(
    el(
      "li",
      { class: "hop kind-" + h.kind + (h.is_error ? " tool-error" : "") },
      el("p", { class: "hop-head" }, el("strong", { class: "hop-route" }, h.from + " → " + h.to), " ", el("span", { class: "badge" }, h.kind === "tool_result" && h.is_error ? "tool error" : h.kind), " ", el("span", { class: "hint" }, "+" + secs + " s" + (h.usage ? " · " + tokens(h.usage) : "") + (h.latency_ms != null ? (h.kind === "tool_result" ? " · tool " : " · model ") + h.latency_ms + " ms" : ""))),
      el("p", { class: "hop-text" }, h.text),
    ),
  );
  if (h.to === "user") setAnswer(t, h.text);
}

/**
 * @param {Turn} t
 * @param {string} text
 */
function setAnswer(t, text) {
  t.answer.textContent = text;
  t.answerBox.hidden = false;
}

/** @param {SubmitEvent} ev */
async function send(ev) {
  ev.preventDefault();
  const { msg, slot } = chatInput();
  const text = msg.value.trim();
  if (!text) {
    showError(slot, "Write a message first.");
    msg.setAttribute("aria-invalid", "true");
    msg.focus();
    return;
  }
  const checked = document.querySelector('input[name="on"]:checked');
  const on = checked instanceof HTMLInputElement ? checked.value : "";
  const button = $("send", HTMLButtonElement);
  button.disabled = true;
  try {
    if (!play.conversation || play.on !== on) {
      const c = await api("POST", "/api/agencies/" + id + "/conversations", { on });
      if (!c.ok) {
        showError(slot, c.error.message);
        return;
      }
      play.conversation = c.data.id;
      play.on = on;
      await openEvents(c.data.id);
      $("conversation-link").replaceChildren(
        "Conversation on the " + (on === "draft" ? "draft" : "published version") + ": ",
        el("a", { href: "/conversations/" + c.data.id, id: "open-conversation" }, "open it in the conversation browser"),
      );
    }
    const title = el("h3", {}, "Turn");
    const hops = el("ol", { class: "hops" });
    const answer = el("p", { class: "answer-text" });
    const answerBox = el("div", { class: "answer", hidden: true }, el("h4", {}, "Answer"), answer);
    const error = el("p", { class: "error", hidden: true });
    const usage = el("p", { class: "hint" });
    const block = el("article", { class: "turn" }, title, el("p", { class: "you" }, el("strong", {}, "You: "), text), hops, answerBox, error, usage);
    $("turns").prepend(block);
    play.turn = { title, hops, answer, answerBox, error, usage, started: performance.now() };
    status("chat-status", "Sent…");
    msg.value = "";
    const r = await api("POST", "/api/conversations/" + play.conversation + "/messages", { text });
    if (!r.ok) {
      showError(error, r.error.message);
      status("chat-status", "");
      return;
    }
    if (play.turn) setAnswer(play.turn, r.data.answer);
    usage.textContent = r.data.hops + " hops · " + tokens(r.data.usage) + " · " + cost(r.data.cost_usd) + " · ended by " + r.data.stopped_by;
    block.classList.add("done");
    status("chat-status", "Done.");
  } finally {
    button.disabled = false;
  }
}

const form = $("chat-form", HTMLFormElement);
form.addEventListener("submit", send);
submitOnCtrlEnter($("message"), form);
