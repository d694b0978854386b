// @ts-check
// The conversation browser: a conversation's turns, each turn's waterfall (from its stored
// trace) and the approvals it asked for, each agent's context as it saw it, and the tool calls
// waiting for a person's approval (answered here, and followed as they are answered elsewhere).

import { api } from "./api.js";
import { approvalCard, follow, showPending } from "./approval.js";
import { $, data, el } from "./dom.js";
import { general } from "./errors.js";
import { tokens, when } from "./format.js";
import { Waterfall } from "./waterfall.js";

/**
 * @typedef {{ number: number, started_at: string, hops: number, usage: import("./format.js").Usage,
 *   cost_usd: string | null, error: string | null, stopped_by: string | null, face: string | null }} Turn
 */
/**
 * @typedef {{ seq: number, agent: string | null, role: string, kind: string, from: string | null, to: string | null,
 *   text: string, included: boolean, usage: import("./format.js").Usage | null, latency_ms: number | null,
 *   tool_calls?: { id: string, name: string, arguments: string }[], tool_result?: { call_id: string, name: string, is_error: boolean } }} Message
 */

/** How each face a turn can come by is named. @type {Record<string, string>} */
const FACES = {
  chat_completions: "Chat Completions",
  responses: "Responses API",
  playground: "Playground",
  mqtt: "MQTT",
  cli: "CLI",
  mcp: "MCP",
  a2a: "A2A",
};

/**
 * @param {{ created_at: string, version: number | null, agency_id: string, turns: Turn[] }} conversation
 * @param {Message[] | null} messages null when they could not be read
 */
function show(conversation, messages) {
  $("conversation-meta").replaceChildren(
    "Started " + when(conversation.created_at) + ", " + (conversation.version === null ? "on the draft. " : "on version " + conversation.version + ". "),
    el("a", { href: "/agencies/" + conversation.agency_id }, "Its agency"),
  );
  const body = $("c-turns", HTMLTableElement).tBodies[0];
  body.replaceChildren(
    ...conversation.turns.map((t) =>
      el(
        "tr",
        {},
        el("td", {}, t.number),
        el("td", {}, when(t.started_at)),
        el("td", { title: "The face the turn's request came by" }, FACES[t.face || ""] || t.face || "—"),
        el("td", {}, t.hops),
        el("td", {}, t.usage.prompt_tokens),
        el("td", {}, t.usage.completion_tokens),
        el("td", {}, t.usage.total_tokens),
        el("td", { title: t.cost_usd === null ? "A model it called has no price: set prices on its provider in the agency file." : "" }, t.cost_usd === null ? "—" : "$" + t.cost_usd),
        el("td", {}, t.error ? "error: " + t.error : t.stopped_by || "running"),
      ),
    ),
  );
  if (!messages) return;
  /** @type {Map<string, Message[]>} */
  const groups = new Map();
  const transcript = "The user's transcript";
  /** @param {string} who */
  const group = (who) => {
    const g = groups.get(who) || [];
    if (!groups.has(who)) groups.set(who, g);
    return g;
  };
  for (const msg of messages) {
    group(msg.agent === null ? transcript : msg.agent).push(msg);
    // The user's own messages are in the manager's context; the transcript shows them too,
    // in their place among the answers (`seq` orders the whole conversation).
    if (msg.agent !== null && msg.kind === "input") group(transcript).push({ ...msg, agent: null });
  }
  const t = groups.get(transcript);
  if (t) t.sort((a, b) => a.seq - b.seq);
  $("contexts").replaceChildren(
    ...[...groups].map(([who, list]) =>
      el(
        "section",
        { class: "card context", "data-agent": who },
        el("h3", {}, who),
        el(
          "ol",
          { class: "messages" },
          ...list.map((x) =>
            el(
              "li",
              { class: "msg role-" + x.role + (x.included ? "" : " excluded") },
              el(
                "p",
                { class: "msg-head" },
                el("span", { class: "badge" }, x.role),
                " ",
                x.kind,
                x.tool_result
                  ? " · " + x.tool_result.name + (x.tool_result.is_error ? " failed" : " answered")
                  : x.role !== "system" && (x.from || x.to)
                    ? " · " + (x.from || "user") + " → " + (x.to || "user")
                    : "",
                x.usage ? " · " + tokens(x.usage) : "",
                x.latency_ms !== null && x.latency_ms !== undefined ? " · " + x.latency_ms + " ms" : "",
              ),
              x.role === "system"
                ? el("details", {}, el("summary", {}, "System prompt"), el("pre", { class: "msg-text" }, x.text))
                : el("pre", { class: "msg-text" }, x.text),
              ...(x.tool_calls || []).map((c) => el("p", { class: "tool-call" }, el("span", { class: "badge" }, "calls"), " ", el("code", {}, c.name + " " + c.arguments))),
            ),
          ),
        ),
      ),
    ),
  );
}

/**
 * Draws each turn's waterfall from its stored trace, in turn order.
 * @param {string} conversation
 * @param {Turn[]} turns
 */
async function waterfalls(conversation, turns) {
  const box = $("waterfalls");
  box.replaceChildren();
  for (const t of turns) {
    const r = await api("GET", "/api/conversations/" + conversation + "/turns/" + t.number);
    if (!r.ok) continue;
    const chart = el("div", { class: "waterfall-box" });
    box.append(el("section", { class: "turn-waterfall", "data-turn": t.number }, el("h3", {}, "Turn " + t.number), chart));
    new Waterfall(chart, "Turn " + t.number + "'s waterfall: each agent's model calls and tool calls over time, and the hops between them").show(r.data.trace, r.data.agent_costs, r.data.approvals);
    // Its approvals as answered: who, when, why (the pending ones wait above).
    /** @type {import("./approval.js").Approval[]} */
    const answered = (r.data.approvals || []).filter((/** @type {{ state: string }} */ a) => a.state !== "pending");
    if (answered.length) {
      chart.after(el("div", { class: "approvals", "data-turn-approvals": t.number }, el("h4", {}, "Approvals"), ...answered.map((a) => approvalCard(a))));
    }
  }
}

/**
 * Shows the calls of this conversation waiting for a person, and follows them: a new one is
 * added, one answered elsewhere shows its answer.
 * @param {string} conversation
 */
async function approvals(conversation) {
  const section = $("approvals-section");
  const box = $("pending-approvals");
  if (await showPending(box, conversation)) section.hidden = false;
  const es = new EventSource("/api/conversations/" + conversation + "/events");
  follow(es, box, conversation, () => {
    section.hidden = false;
  });
}

const id = data("conversation", "id");
const [c, m] = await Promise.all([api("GET", "/api/conversations/" + id), api("GET", "/api/conversations/" + id + "/messages")]);
if (!c.ok) {
  general(c.error.message);
} else {
  show(c.data, m.ok ? m.data : null);
  await approvals(id);
  await waterfalls(id, c.data.turns);
}
