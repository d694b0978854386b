// @ts-check
// An agency's page: the editor, its published versions, its API keys and its conversations.

import { api } from "./api.js";
import { $, data, el, status } from "./dom.js";
import { Editor } from "./editor.js";
import { clearErrors, general, showError, showFieldErrors } from "./errors.js";
import { when } from "./format.js";

const id = data("agency", "id");

async function loadVersions() {
  const [a, v] = await Promise.all([api("GET", "/api/agencies/" + id), api("GET", "/api/agencies/" + id + "/versions")]);
  if (a.ok) {
    $("published-now").textContent = a.data.published_version
      ? "Its API serves version " + a.data.published_version + "."
      : "Draft only: publish it to make it reachable through its API.";
  }
  if (v.ok) {
    $("versions").replaceChildren(
      .../** @type {{ version: number, published_at: string }[]} */ (v.data).map((x) =>
        el(
          "li",
          {},
          el("a", { href: "/api/agencies/" + id + "/versions/" + x.version }, "Version " + x.version),
          " — published " + when(x.published_at),
        ),
      ),
    );
  }
}

/** @typedef {{ name: string, prefix: string, created_at: string, expires_at: string | null, last_used_at: string | null, state: string }} Key */

async function loadKeys() {
  const r = await api("GET", "/api/agencies/" + id + "/keys");
  if (!r.ok) return;
  /** @type {Key[]} */
  const keys = r.data;
  const body = $("keys", HTMLTableElement).tBodies[0];
  body.replaceChildren(
    ...keys.map((k) =>
      el(
        "tr",
        { "data-key": k.name },
        el("td", {}, k.name),
        el("td", {}, el("code", {}, k.prefix + "…")),
        el("td", {}, when(k.created_at)),
        el("td", {}, k.expires_at ? when(k.expires_at) : "never"),
        el("td", {}, k.last_used_at ? when(k.last_used_at) : "never"),
        el("td", { class: "state-" + k.state }, k.state),
        el(
          "td",
          {},
          k.state === "active"
            ? el("button", { type: "button", class: "danger", id: "revoke-" + k.name, "aria-label": "Revoke key " + k.name, onclick: () => revoke(k.name) }, "Revoke")
            : "",
        ),
      ),
    ),
  );
  if (!keys.length) body.append(el("tr", {}, el("td", { colspan: 7 }, "No keys yet.")));
}

/** @param {string} name */
async function revoke(name) {
  const r = await api("DELETE", "/api/agencies/" + id + "/keys/" + encodeURIComponent(name));
  if (!r.ok) general(r.error.message);
  status("status", r.ok ? "Key " + name + " revoked." : "");
  loadKeys();
}

/** @param {SubmitEvent} ev */
async function createKey(ev) {
  ev.preventDefault();
  const form = $("key-form", HTMLFormElement);
  clearErrors(form);
  $("new-key").hidden = true;
  const name = $("f-key-name", HTMLInputElement).value.trim();
  const expires = $("f-key-expires", HTMLInputElement).value.trim();
  if (!name) {
    showError($("e-key-name"), "Give the key a name.");
    $("f-key-name").setAttribute("aria-invalid", "true");
    $("f-key-name").focus();
    return;
  }
  const r = await api("POST", "/api/agencies/" + id + "/keys", { name, expires_in: expires || null });
  if (!r.ok) {
    if (r.error.fields) {
      showFieldErrors(form, r.error, "key-");
    } else {
      const which = /duration/.test(r.error.message) ? "expires" : "name";
      showError($("e-key-" + which), r.error.message);
      $("f-key-" + which).setAttribute("aria-invalid", "true");
      $("f-key-" + which).focus();
    }
    return;
  }
  $("new-key-value").textContent = r.data.key;
  $("new-key").hidden = false;
  form.reset();
  loadKeys();
}

async function loadConversations() {
  const r = await api("GET", "/api/agencies/" + id + "/conversations");
  if (!r.ok) return;
  /** @type {{ id: string, created_at: string, version: number | null }[]} */
  const list = r.data;
  $("conversations").replaceChildren(
    ...list.map((c) =>
      el(
        "li",
        {},
        el("a", { href: "/conversations/" + c.id }, when(c.created_at)),
        " — " + (c.version === null ? "on the draft" : "on version " + c.version),
      ),
    ),
  );
  if (!list.length) $("conversations").append(el("li", {}, "None yet: try the playground."));
}

$("key-form").addEventListener("submit", createKey);
const r = await api("GET", "/api/agencies/" + id);
if (!r.ok) {
  general(r.error.message);
} else {
  const editor = new Editor(id, r.data.draft, loadVersions);
  editor.render();
  status("status", "");
  editor.preview();
  loadVersions();
  loadKeys();
  loadConversations();
}
