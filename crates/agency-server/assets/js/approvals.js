// @ts-check
// Everything waiting for a person's approval in the account's agencies, oldest first: each with
// where it was asked and Approve / Deny. Read again every few seconds: a new call is added, one
// answered elsewhere (or whose turn ended) says so.

import { addNew, pending } from "./approval.js";
import { $ } from "./dom.js";
import { general } from "./errors.js";

/** How often the list is read again, in milliseconds. */
const EVERY = 5000;

async function refresh() {
  const r = await pending();
  if (!r.ok) {
    general(r.message);
    return;
  }
  const box = $("approvals");
  const now = new Set(r.list.map((a) => a.id));
  for (const card of box.querySelectorAll("[data-approval]")) {
    const controls = card.querySelector(".approval-controls");
    if (controls && !now.has(card.getAttribute("data-approval") || "")) {
      controls.remove();
      const outcome = card.querySelector(".approval-outcome");
      if (outcome) outcome.textContent = "It was answered elsewhere, or its turn ended: see its conversation.";
    }
  }
  addNew(box, r.list, { links: true });
  $("no-approvals").hidden = box.childElementCount > 0;
}

await refresh();
setInterval(() => refresh().catch((e) => general(String(e))), EVERY);
