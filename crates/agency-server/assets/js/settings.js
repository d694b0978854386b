// @ts-check
// Settings: the password, the provider keys and the MCP servers' credentials the user stored.

import { api } from "./api.js";
import { $, el, status } from "./dom.js";
import { clearErrors, showError, showFieldErrors } from "./errors.js";
import { when } from "./format.js";

async function loadProviderKeys() {
  const r = await api("GET", "/api/provider-keys");
  if (!r.ok) return;
  /** @type {{ provider: string, masked: string, created_at: string }[]} */
  const keys = r.data;
  $("provider-keys").replaceChildren(
    ...keys.map((k) =>
      el(
        "li",
        {},
        el("strong", {}, k.provider),
        " ",
        el("code", {}, k.masked),
        " — stored " + when(k.created_at) + " ",
        el("button", { type: "button", class: "danger", "aria-label": "Delete the key for " + k.provider, onclick: async () => { await api("DELETE", "/api/provider-keys/" + encodeURIComponent(k.provider)); loadProviderKeys(); } }, "Delete"),
      ),
    ),
  );
  if (!keys.length) $("provider-keys").append(el("li", {}, "No stored keys."));
}

const pw = $("password-form", HTMLFormElement);
pw.addEventListener("submit", async (ev) => {
  ev.preventDefault();
  clearErrors(pw);
  status("password-status", "");
  const r = await api("POST", "/api/auth/password", {
    current_password: $("f-current_password", HTMLInputElement).value,
    new_password: $("f-new_password", HTMLInputElement).value,
  });
  if (r.ok) {
    pw.reset();
    status("password-status", "Password changed; your other sessions are logged out.");
  } else {
    showFieldErrors(pw, r.error);
  }
});
const pk = $("pk-form", HTMLFormElement);
pk.addEventListener("submit", async (ev) => {
  ev.preventDefault();
  clearErrors(pk);
  const provider = $("f-pk-provider", HTMLInputElement).value.trim();
  const r = await api("PUT", "/api/provider-keys/" + encodeURIComponent(provider), { key: $("f-pk-key", HTMLInputElement).value });
  if (!r.ok) {
    showError($("e-pk-provider"), r.error.message);
    return;
  }
  pk.reset();
  loadProviderKeys();
});
loadProviderKeys();

async function loadMcpCredentials() {
  const r = await api("GET", "/api/mcp-credentials");
  if (!r.ok) return;
  /** @type {{ server: string, headers: string[], created_at: string }[]} */
  const stored = r.data;
  $("mcp-credentials").replaceChildren(
    ...stored.map((c) =>
      el(
        "li",
        {},
        el("strong", {}, c.server),
        " ",
        el("code", {}, c.headers.join(", ")),
        " — stored " + when(c.created_at) + " ",
        el("button", { type: "button", class: "danger", "aria-label": "Delete the credentials for " + c.server, onclick: async () => { await api("DELETE", "/api/mcp-credentials/" + encodeURIComponent(c.server)); loadMcpCredentials(); } }, "Delete"),
      ),
    ),
  );
  if (!stored.length) $("mcp-credentials").append(el("li", {}, "No stored credentials."));
}

const mc = $("mc-form", HTMLFormElement);
mc.addEventListener("submit", async (ev) => {
  ev.preventDefault();
  clearErrors(mc);
  const server = $("f-mc-server", HTMLInputElement).value.trim();
  /** @type {Record<string, string>} */
  const headers = {};
  headers[$("f-mc-header", HTMLInputElement).value.trim()] = $("f-mc-value", HTMLInputElement).value;
  const r = await api("PUT", "/api/mcp-credentials/" + encodeURIComponent(server), { headers });
  if (!r.ok) {
    const field = (r.error.fields || [])[0];
    showError($("e-mc-server"), field ? field.path + ": " + field.message : r.error.message);
    return;
  }
  mc.reset();
  loadMcpCredentials();
});
loadMcpCredentials();
