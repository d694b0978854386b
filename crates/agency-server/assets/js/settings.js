// @ts-check
// Settings: the password, the provider keys and the MCP servers' credentials the user stored.

import { api } from "./api.js";
import { $, el, fillList, status } from "./dom.js";
import { clearErrors, showError, showFieldErrors } from "./errors.js";
import { when } from "./format.js";

/**
 * Lists what the user stored under `path` (provider keys, MCP servers' credentials) in the list
 * `id`: each by its name and what may be shown of it, with a button that deletes it.
 * @template {{ created_at: string }} T
 * @param {string} id
 * @param {string} path
 * @param {(x: T) => [string, string]} shown its name and what is shown of it
 * @param {string} what what one is, for the delete button's label
 * @param {string} none
 */
async function loadStored(id, path, shown, what, none) {
  const r = await api("GET", path);
  if (!r.ok) return;
  /** @type {T[]} */
  const stored = r.data;
  const again = () => loadStored(id, path, shown, what, none);
  fillList(
    id,
    stored,
    (x) => {
      const [name, value] = shown(x);
      const remove = async () => {
        await api("DELETE", path + "/" + encodeURIComponent(name));
        again();
      };
      return [
        el("strong", {}, name),
        " ",
        el("code", {}, value),
        " — stored " + when(x.created_at) + " ",
        el("button", { type: "button", class: "danger", "aria-label": "Delete " + what + " for " + name, onclick: remove }, "Delete"),
      ];
    },
    none,
  );
}

const loadProviderKeys = () =>
  loadStored(
    "provider-keys",
    "/api/provider-keys",
    /** @param {{ provider: string, masked: string, created_at: string }} k */ (k) => [k.provider, k.masked],
    "the key",
    "No stored keys.",
  );
const loadMcpCredentials = () =>
  loadStored(
    "mcp-credentials",
    "/api/mcp-credentials",
    /** @param {{ server: string, headers: string[], created_at: string }} c */ (c) => [c.server, c.headers.join(", ")],
    "the credentials",
    "No stored credentials.",
  );

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
