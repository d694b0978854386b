// @ts-check
// Problems shown where they belong: each field's under it (`#e-<path>`, its control `#f-<path>`),
// the rest in the page's `#general-error`.

import { $, find } from "./dom.js";

/** @typedef {import("./api.js").ApiError} ApiError */

/**
 * `agents[1].rules[0].send_to` → `agents-1-rules-0-send_to`, the ids of its control and error.
 * @param {string} path
 */
export function slug(path) {
  return path.replace(/\[(\d+)\]/g, "-$1").replace(/\./g, "-");
}

/**
 * The path one level up, or null.
 * @param {string} path
 * @returns {string | null}
 */
function parent(path) {
  const up = path.replace(/(\.[^.[\]]+|\[\d+\])$/, "");
  return up === path || up === "" ? null : up;
}

/**
 * Hides every field's error in `root`, and the page's general one.
 * @param {ParentNode} root
 */
export function clearErrors(root) {
  root.querySelectorAll('.error[id^="e-"]').forEach((e) => {
    e.textContent = "";
    if (e instanceof HTMLElement) e.hidden = true;
  });
  root.querySelectorAll("[aria-invalid]").forEach((e) => e.removeAttribute("aria-invalid"));
  const g = find("general-error");
  if (g) {
    g.textContent = "";
    g.hidden = true;
  }
}

/**
 * The chat's input and its error slot, ready for a send: the slot emptied, the input unmarked.
 * @returns {{ msg: HTMLTextAreaElement, slot: HTMLElement }}
 */
export function chatInput() {
  const msg = $("message", HTMLTextAreaElement);
  const slot = $("chat-error");
  slot.hidden = true;
  slot.textContent = "";
  msg.removeAttribute("aria-invalid");
  return { msg, slot };
}

/**
 * Shows `message` in `slot`, after what it already says.
 * @param {HTMLElement} slot
 * @param {string} message
 */
export function showError(slot, message) {
  slot.textContent = slot.textContent ? slot.textContent + " " + message : message;
  slot.hidden = false;
}

/**
 * A problem that belongs to no field: in the page's general error, else an alert.
 * @param {string} message
 */
export function general(message) {
  const g = find("general-error");
  if (g) showError(g, message);
  else window.alert(message);
}

/**
 * Shows each problem next to the field its path names (or the nearest enclosing one).
 * @param {ParentNode} root
 * @param {ApiError | { fields: import("./api.js").FieldError[], message?: string } | null} error
 * @param {string} [prefix] what the page's ids put before the path's slug
 */
export function showFieldErrors(root, error, prefix) {
  prefix = prefix || "";
  const fields = (error && error.fields) || [];
  if (!fields.length) {
    general((error && error.message) || "Something went wrong.");
    return;
  }
  /** @type {HTMLElement | null} */
  let first = null;
  for (const f of fields) {
    /** @type {string | null} */
    let path = f.path;
    /** @type {Element | null} */
    let slot = null;
    while (path && !slot) {
      slot = root.querySelector("#e-" + CSS.escape(prefix + slug(path)));
      if (!slot) path = parent(path);
    }
    if (!(slot instanceof HTMLElement) || !path) {
      general((f.path ? f.path + ": " : "") + f.message);
      continue;
    }
    showError(slot, f.message);
    const control = root.querySelector("#f-" + CSS.escape(prefix + slug(path)));
    if (control instanceof HTMLElement) {
      control.setAttribute("aria-invalid", "true");
      first = first || control;
    }
  }
  if (first) first.focus();
}
