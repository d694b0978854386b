// @ts-check
// The playground: a chat with an agency's draft or published version. Turns read oldest first,
// the input at the bottom; each answer has its turn folded beneath it (the hops as a
// conversation between the agents, tool calls included, its waterfall drawn as the hops arrive,
// and what each agent spent), and the
// team's graph beside lights its edges as the hops arrive (the conversation's events,
// `ConversationEvent` in the API's document).

import { api } from "./api.js";
import { follow, showPending } from "./approval.js";
import { $, data, el, status, submitOnCtrlEnter } from "./dom.js";
import { chatInput, general, showError } from "./errors.js";
import { cost, tokens } from "./format.js";
import { TeamGraph } from "./graph.js";
import { agentCost, spent, Waterfall } from "./waterfall.js";

/** @typedef {import("./waterfall.js").Hop} Hop */
/**
 * A turn on the page: its parts, and when it was sent.
 * @typedef {{ block: HTMLElement, hops: HTMLElement, answer: HTMLElement, error: HTMLElement, summary: HTMLElement, agents: HTMLElement, details: HTMLDetailsElement, waterfall: Waterfall, started: number, seen: number }} Turn
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
  /** @type {TeamGraph | null} */
  graph: null,
};

/**
 * A hue for each name, so an agent's messages look alike.
 * @param {string} name
 */
function hue(name) {
  let h = 0;
  for (const c of name) h = (h * 31 + (c.codePointAt(0) || 0)) % 360;
  return h;
}

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
    es.addEventListener("agent_started", (e) => {
      const d = JSON.parse(e.data);
      status("chat-status", d.agent + " is working…");
    });
    es.addEventListener("hop", (e) => {
      const h = /** @type {Hop} */ (JSON.parse(e.data).hop);
      if (play.graph) play.graph.light(h.from, h.to);
      // Once the turn is closed its record is shown: a hop that trails it is in it already.
      if (play.turn && !play.turn.block.classList.contains("done")) {
        addHop(play.turn, h, ((performance.now() - play.turn.started) / 1000).toFixed(2));
        play.turn.waterfall.add(h);
      }
    });
    // A tool call waits for a person: asked here, beside the chat, until it is answered (here,
    // in the list of approvals, or through the API).
    follow(es, $("pending-approvals"), conversation, () => status("chat-status", "Waiting for your approval…"));
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

/**
 * Adds a hop to the turn's conversation between agents.
 * @param {Turn} t
 * @param {Hop} h
 * @param {string | null} secs since the message was sent, when watched live
 */
function addHop(t, h, secs) {
  t.seen++;
  const tool = h.kind === "tool_call" || h.kind === "tool_result";
  const meta = [
    secs !== null ? "+" + secs + " s" : "",
    h.usage ? tokens(h.usage) : "",
    h.latency_ms != null ? (h.kind === "tool_result" ? "tool " : "model ") + h.latency_ms + " ms" : "",
  ].filter((x) => x);
  t.hops.append(
    el(
      "li",
      { class: "hop kind-" + h.kind + (h.is_error ? " tool-error" : ""), style: "--agent-hue: " + hue(tool && h.kind === "tool_result" ? h.to : h.from) },
      el(
        "p",
        { class: "hop-head" },
        el("strong", { class: "hop-route" }, h.from + " → " + h.to),
        " ",
        el("span", { class: "badge" }, h.kind === "tool_result" && h.is_error ? "tool error" : h.kind.replace("_", " ")),
        meta.length ? el("span", { class: "hint" }, " " + meta.join(" · ")) : null,
      ),
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
  t.answer.classList.remove("pending");
}

/**
 * What each agent spent in a turn: messages sent, tokens, cost, model time, tool time.
 * @param {Hop[]} trace
 * @param {{ agent: string, cost_usd: string | null }[]} costs
 */
function perAgent(trace, costs) {
  // The same calls the waterfall draws: a reply's deliveries share one model call.
  const by = spent(trace);
  return el(
    "table",
    { class: "per-agent" },
    el("caption", { class: "sr-only" }, "What each agent spent in this turn"),
    el("thead", {}, el("tr", {}, el("th", { scope: "col" }, "Agent"), el("th", { scope: "col" }, "Messages"), el("th", { scope: "col" }, "Tokens in / out"), el("th", { scope: "col" }, "Cost"), el("th", { scope: "col" }, "Model time"), el("th", { scope: "col" }, "Tool time"))),
    el(
      "tbody",
      {},
      ...[...by].map(([name, x]) =>
        el("tr", { "data-agent": name }, el("th", { scope: "row" }, name), el("td", {}, x.messages), el("td", {}, x.prompt + " / " + x.completion), el("td", {}, agentCost(costs, name)), el("td", {}, x.ms + " ms"), el("td", {}, x.toolMs ? x.toolMs + " ms" : "—")),
      ),
    ),
  );
}

/**
 * A new turn at the bottom of the chat: the user's message, and the team's answer to come.
 * @param {string} text
 * @returns {Turn}
 */
function newTurn(text) {
  const hops = el("ol", { class: "hops" });
  const answer = el("p", { class: "answer-text pending" }, "The team is working…");
  const error = el("p", { class: "error", hidden: true });
  const summary = el("span", { class: "turn-usage" }, "live");
  const agents = el("div", { class: "scroll", tabindex: 0, role: "region", "aria-label": "What each agent spent" });
  const chart = el("div", { class: "waterfall-box" });
  const details = el("details", { class: "turn-details", open: true }, el("summary", {}, "How the team answered ", summary), chart, hops, agents);
  const block = el(
    "article",
    { class: "turn" },
    el("div", { class: "bubble you" }, el("p", { class: "who" }, "You"), el("p", { class: "you-text" }, text)),
    el("div", { class: "bubble team" }, el("p", { class: "who" }, "The team"), answer, error, details),
  );
  $("turns").append(block);
  block.scrollIntoView({ block: "nearest" });
  const waterfall = new Waterfall(chart, "The turn's waterfall: each agent's model calls and tool calls over time, and the hops between them");
  return { block, hops, answer, error, summary, agents, details, waterfall, started: performance.now(), seen: 0 };
}

/** Where the page keeps its conversation across reloads (this tab only). */
const KEPT = "playground:" + id;

/**
 * Talks in `conversation` from now on: listens to its events, links it, and keeps it for a
 * reload.
 * @param {string} conversation
 * @param {string} on `draft` or `published`
 */
async function join(conversation, on) {
  play.conversation = conversation;
  play.on = on;
  sessionStorage.setItem(KEPT, JSON.stringify({ conversation, on }));
  await openEvents(conversation);
  // Asked before the page listened (a reload while the turn waits).
  await showPending($("pending-approvals"), conversation);
  $("conversation-link").replaceChildren(
    "A conversation with the " + (on === "draft" ? "draft" : "published version") + ": ",
    el("a", { href: "/conversations/" + conversation, id: "open-conversation" }, "open it in the conversation browser"),
  );
}

/**
 * Closes a turn: its hops as recorded, what each agent spent, the summary, folded.
 * @param {Turn} t
 * @param {Hop[]} trace
 * @param {{ hops: number, usage: import("./format.js").Usage, cost_usd: string | null, stopped_by: string | null, agent_costs?: { agent: string, cost_usd: string | null }[] }} d
 * @param {string} secs how long it took
 */
function finish(t, trace, d, secs) {
  if (t.seen !== trace.length) {
    t.hops.replaceChildren();
    t.seen = 0;
    for (const h of trace) addHop(t, h, null);
  }
  t.agents.replaceChildren(perAgent(trace, d.agent_costs || []));
  t.waterfall.show(trace, d.agent_costs || []);
  t.summary.textContent = "· " + d.hops + " hops · " + tokens(d.usage) + " · " + cost(d.cost_usd) + " · " + secs + " s · ended by " + d.stopped_by;
  t.details.open = false;
  t.block.classList.add("done");
}

/** Shows again the conversation this tab was in before a reload, turn by turn. */
async function restore() {
  const kept = sessionStorage.getItem(KEPT);
  if (!kept) return;
  const { conversation, on } = JSON.parse(kept);
  const c = await api("GET", "/api/conversations/" + conversation);
  if (!c.ok) {
    sessionStorage.removeItem(KEPT);
    return;
  }
  for (const turn of /** @type {{ number: number, started_at: string, finished_at: string | null }[]} */ (c.data.turns)) {
    const r = await api("GET", "/api/conversations/" + conversation + "/turns/" + turn.number);
    if (!r.ok) continue;
    /** @type {Hop[]} */
    const trace = r.data.trace;
    const input = trace.find((h) => h.kind === "input");
    const t = newTurn(input ? input.text : "");
    const answer = [...trace].reverse().find((h) => h.to === "user");
    if (answer) setAnswer(t, answer.text);
    else t.answer.textContent = r.data.turn.error ? "No answer: " + r.data.turn.error : "No answer.";
    const took = turn.finished_at ? (new Date(turn.finished_at).getTime() - new Date(turn.started_at).getTime()) / 1000 : 0;
    finish(t, trace, { ...r.data.turn, agent_costs: r.data.agent_costs }, took.toFixed(2));
  }
  const radio = document.querySelector('input[name="on"][value="' + on + '"]');
  if (radio instanceof HTMLInputElement && !radio.disabled) radio.checked = true;
  await join(conversation, on);
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
  const on = talkingTo();
  const button = $("send", HTMLButtonElement);
  button.disabled = true;
  try {
    if (!play.conversation || play.on !== on) {
      const c = await api("POST", "/api/agencies/" + id + "/conversations", { on });
      if (!c.ok) {
        showError(slot, c.error.message);
        return;
      }
      if (play.conversation) {
        $("turns").replaceChildren();
        $("pending-approvals").replaceChildren();
      }
      await join(c.data.id, on);
    }
    const t = newTurn(text);
    play.turn = t;
    status("chat-status", "Sent…");
    msg.value = "";
    const r = await api("POST", "/api/conversations/" + play.conversation + "/messages", { text });
    if (!r.ok) {
      showError(t.error, r.error.message);
      t.answer.textContent = "No answer.";
      status("chat-status", "");
      return;
    }
    setAnswer(t, r.data.answer);
    // The turn as the server recorded it, whatever the live view caught.
    finish(t, r.data.trace, r.data, ((performance.now() - t.started) / 1000).toFixed(2));
    status("chat-status", "Done.");
  } finally {
    button.disabled = false;
  }
}

/** Forgets the conversation: the next message starts a new one. */
function newConversation() {
  if (play.events) play.events.close();
  play.events = null;
  play.conversation = null;
  play.turn = null;
  sessionStorage.removeItem(KEPT);
  $("turns").replaceChildren();
  $("pending-approvals").replaceChildren();
  $("conversation-link").textContent = "A new conversation: say something to the team.";
  status("chat-status", "");
  $("message").focus();
}

/**
 * Draws the team the page talks to: the draft, or the published version (what the preview API
 * says its rules allow).
 * @param {string} on `draft` or `published`
 */
async function drawTeam(on) {
  const a = await api("GET", "/api/agencies/" + id);
  if (!a.ok) return;
  let draft = a.data.draft;
  if (on === "published" && a.data.published_version) {
    const v = await api("GET", "/api/agencies/" + id + "/versions/" + a.data.published_version);
    if (v.ok) draft = v.data.agency;
  }
  const p = await api("POST", "/api/agencies/preview", draft);
  if (!p.ok) {
    $("graph").replaceChildren(el("p", { class: "hint" }, "The draft has problems: fix them in the editor to see the team."));
    return;
  }
  const which = on === "published" ? "the published version" : "the draft";
  play.graph = new TeamGraph($("graph"), "The team of " + which + " of " + draft.name);
  play.graph.draw({ manager: p.data.manager, agents: /** @type {{ name: string }[]} */ (draft.agents).map((x) => x.name), edges: p.data.edges });
  $("graph").dataset.on = on;
}

/** Which version the form talks to. */
function talkingTo() {
  const checked = document.querySelector('input[name="on"]:checked');
  return checked instanceof HTMLInputElement ? checked.value : "draft";
}

const form = $("chat-form", HTMLFormElement);
form.addEventListener("submit", send);
submitOnCtrlEnter($("message"), form);
$("new-conversation").addEventListener("click", newConversation);
for (const radio of document.querySelectorAll('input[name="on"]')) {
  radio.addEventListener("change", () => drawTeam(talkingTo()).catch((e) => general(String(e))));
}
restore()
  .then(() => drawTeam(talkingTo()))
  .catch((e) => general(String(e)));
