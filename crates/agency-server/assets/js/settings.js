// @ts-check
// Settings: the password, and the provider keys the user stored.

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
