// @ts-check
// Approvals (docs/approvals.md): a tool call that waits for a person, shown with its arguments
// and answered here — Approve (with changed arguments where the agent's policy allows it) or
// Deny (with why, which the agent reads). The playground, the conversation browser and the list
// of everything pending (/approvals) show them alike.

import { api } from "./api.js";
import { el } from "./dom.js";
import { general } from "./errors.js";
import { when } from "./format.js";

/**
 * An approval as `/api/approvals` answers it.
 * @typedef {{ id: string, agency_id: string, agency_name: string | null, conversation_id: string, turn_id: string,
 *   agent: number, agent_name: string | null, tool: string, arguments: string, state: string, asked_at: string,
 *   expires_at: string, on_timeout: string, edits: boolean, answered_by: string | null, answered_at: string | null,
 *   reason: string | null, started_at: string | null, failed: boolean | null }} Approval
 */

/**
 * The approvals pending in the account's agencies, oldest first: those of `conversation` when
 * it is given.
 * @param {string} [conversation]
 * @returns {Promise<{ ok: true, list: Approval[] } | { ok: false, message: string }>}
 */
export async function pending(conversation) {
  const r = await api("GET", "/api/approvals");
  if (!r.ok) return { ok: false, message: r.error.message };
  /** @type {Approval[]} */
  const all = r.data;
  return { ok: true, list: conversation ? all.filter((a) => a.conversation_id === conversation) : all };
}

/**
 * JSON text as a person reads it: indented, when it is JSON.
 * @param {string} text
 */
function pretty(text) {
  try {
    return JSON.stringify(JSON.parse(text), null, 2);
  } catch {
    return text;
  }
}

/**
 * Who answered, when, and why; or what happens when nobody does.
 * @param {Approval} a
 */
function outcome(a) {
  if (a.state === "pending") {
    return "Unanswered, it is " + (a.on_timeout === "approve" ? "approved" : "denied") + " at " + when(a.expires_at) + ".";
  }
  const what = a.state === "approved" ? "Approved" : "Denied";
  return what + " by " + (a.answered_by || "—") + " at " + when(a.answered_at) + (a.reason ? ". Why: " + a.reason : ".");
}

/**
 * A card for an approval: who calls which tool with what, and while it is pending, Approve and
 * Deny. `links` adds where it was asked (the list of everything pending shows it).
 * @param {Approval} a
 * @param {{ links?: boolean, answered?: (a: Approval) => void }} [options] `answered` is told
 *   the approval as it is once this card answered it
 * @returns {HTMLElement}
 */
export function approvalCard(a, options) {
  const opts = options || {};
  const who = a.agent_name || "Agent " + a.agent;
  const args = a.edits
    ? el("textarea", { class: "approval-args", rows: Math.min(12, pretty(a.arguments).split("\n").length + 1), "aria-label": "The call's arguments (JSON; you may change them)", value: pretty(a.arguments) })
    : el("pre", { class: "approval-args" }, pretty(a.arguments));
  const state = el("p", { class: "approval-outcome hint" }, outcome(a));
  const error = el("p", { class: "error", role: "alert", hidden: true });
  const card = el(
    "article",
    { class: "approval state-" + a.state, "data-approval": a.id, "data-agent-name": a.agent_name, "aria-label": who + " asks to call " + a.tool },
    el("p", { class: "approval-head" }, el("span", { class: "badge" }, a.state === "pending" ? "needs your approval" : a.state), " ", el("strong", {}, who), " asks to call ", el("code", {}, a.tool)),
    opts.links
      ? el(
          "p",
          { class: "hint" },
          a.agency_name ? el("a", { href: "/agencies/" + a.agency_id }, a.agency_name) : null,
          a.agency_name ? " · " : null,
          el("a", { href: "/conversations/" + a.conversation_id }, "its conversation"),
          " · asked " + when(a.asked_at),
        )
      : null,
    a.edits ? el("p", { class: "hint" }, "Its arguments, which you may change before you approve:") : null,
    args,
    state,
    error,
  );
  if (a.state !== "pending") return card;

  const reason = el("input", { type: "text", class: "approval-reason", maxlength: 2000, "aria-label": "Why you deny it (the agent reads it)", placeholder: "Why (if you deny it; the agent reads it)" });
  const approve = el("button", { type: "button", class: "approve" }, "Approve");
  const deny = el("button", { type: "button", class: "deny danger" }, "Deny");
  const controls = el("div", { class: "approval-controls" }, reason, approve, deny);
  card.append(controls);

  /**
   * @param {"approve" | "deny"} verb
   * @param {Record<string, unknown>} body
   */
  async function answer(verb, body) {
    error.hidden = true;
    approve.disabled = deny.disabled = true;
    const r = await api("POST", "/api/approvals/" + a.id + "/" + verb, body);
    if (!r.ok) {
      approve.disabled = deny.disabled = false;
      error.textContent = r.status === 409 ? "It was answered already (the first answer stands): " + r.error.message : r.error.message;
      error.hidden = false;
      return;
    }
    /** @type {Approval} */
    const done = r.data;
    controls.remove();
    if (args instanceof HTMLTextAreaElement) args.readOnly = true;
    card.className = "approval state-" + done.state;
    const badge = card.querySelector(".badge");
    if (badge) badge.textContent = done.state;
    state.textContent = outcome(done);
    if (opts.answered) opts.answered(done);
  }

  approve.addEventListener("click", () => {
    /** @type {Record<string, unknown>} */
    const body = {};
    if (args instanceof HTMLTextAreaElement && args.value.trim() !== pretty(a.arguments).trim()) {
      let changed;
      try {
        changed = JSON.parse(args.value);
      } catch {
        changed = null;
      }
      if (!changed || typeof changed !== "object" || Array.isArray(changed)) {
        error.textContent = "The arguments must be a JSON object, such as {\"path\": \"notes.txt\"}.";
        error.hidden = false;
        args.setAttribute("aria-invalid", "true");
        args.focus();
        return;
      }
      args.removeAttribute("aria-invalid");
      body.arguments = changed;
    }
    answer("approve", body);
  });
  deny.addEventListener("click", () => {
    const why = reason.value.trim();
    answer("deny", why ? { reason: why } : {});
  });
  return card;
}

/**
 * Shows in `box` the approvals pending in `conversation`: a card for each new one, while the
 * cards already there (being edited, or just answered) stay as they are. Answers whether any is
 * pending.
 * @param {HTMLElement} box
 * @param {string} conversation
 * @returns {Promise<boolean>}
 */
export async function showPending(box, conversation) {
  const r = await pending(conversation);
  if (!r.ok) {
    box.append(el("p", { class: "error", role: "alert" }, "Cannot read the approvals: " + r.message));
    return false;
  }
  addNew(box, r.list);
  return r.list.length > 0;
}

/**
 * Adds to `box` a card for each of `list` it does not show yet: the cards already there
 * (being edited, or just answered) stay as they are.
 * @param {HTMLElement} box
 * @param {Approval[]} list
 * @param {{ links?: boolean }} [options]
 */
export function addNew(box, list, options) {
  const shown = new Set([...box.querySelectorAll("[data-approval]")].map((e) => e.getAttribute("data-approval")));
  for (const a of list) if (!shown.has(a.id)) box.append(approvalCard(a, options));
}

/**
 * Follows the approvals of `conversation` in `box`, from its event stream `events`: a call
 * that starts waiting is added (and `asked` told), one answered elsewhere shows its answer.
 * @param {EventSource} events
 * @param {HTMLElement} box
 * @param {string} conversation
 * @param {() => void} asked
 */
export function follow(events, box, conversation, asked) {
  events.addEventListener("approval", (e) => {
    const a = JSON.parse(e.data);
    if (a.state !== "pending") {
      settle(box, a);
      return;
    }
    asked();
    showPending(box, conversation).catch((err) => general(String(err)));
  });
}

/**
 * Shows in `box` that an approval was answered (elsewhere: the card that answered it shows it
 * already), as the conversation's `approval` event tells it.
 * @param {HTMLElement} box
 * @param {Approval} a
 */
export function settle(box, a) {
  const card = box.querySelector('[data-approval="' + CSS.escape(a.id) + '"]');
  if (!(card instanceof HTMLElement) || !card.querySelector(".approval-controls")) return;
  card.replaceWith(approvalCard({ ...a, agent_name: a.agent_name || card.dataset.agentName || null }));
}
