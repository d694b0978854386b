// @ts-check
// What a model field offers and warns about: the server's providers (`GET /api/providers`),
// each model as `provider/model` with the state of its provider's key.

import { api } from "./api.js";
import { el } from "./dom.js";

/** @typedef {{ name: string, kind: string | null, models: string[], key_state: string, your_key: boolean }} ProviderStatus */

/**
 * The server's providers, or none when they cannot be read (the fields still take any text).
 * @returns {Promise<ProviderStatus[]>}
 */
export async function loadProviders() {
  const r = await api("GET", "/api/providers");
  return r.ok ? r.data : [];
}

/**
 * Fills `list` (a `<datalist>`) with `provider/model` options, each saying whether its provider
 * has a key.
 * @param {HTMLElement} list
 * @param {ProviderStatus[]} providers
 */
export function fillModels(list, providers) {
  list.replaceChildren(
    ...providers.flatMap((p) => {
      const note = p.key_state === "present" ? "server key" : p.key_state === "missing" ? (p.your_key ? "your key (declare the provider)" : "no key") : "no key needed";
      const models = p.models.length ? p.models : [""];
      return models.map((m) => el("option", { value: p.name + "/" + m, "data-key": p.key_state }, p.name + (m ? "/" + m : "/…") + " · " + note));
    }),
  );
}

/**
 * What to warn about `model`: its provider has no key, so an agent on it fails on its first
 * message; "" when it has one, needs none, or is not one of the server's.
 * @param {ProviderStatus[]} providers
 * @param {string} model `provider/model`
 * @param {boolean} declared whether the agency file declares that provider itself (then the
 *   account's stored key of that name is used)
 */
export function keyWarning(providers, model, declared) {
  const name = (model || "").split("/")[0];
  const p = providers.find((x) => x.name === name);
  if (!p || p.key_state !== "missing" || (declared && p.your_key)) return "";
  return (
    "The provider " +
    name +
    " has no key on this server: an agent on it would fail on its first message. " +
    (p.your_key ? "Your stored key is used once an agency file declares " + name + " under providers." : "Store a key under Settings → Provider keys (and declare " + name + " under providers), or choose another provider.")
  );
}
