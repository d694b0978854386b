// @ts-check
// The home page: the gallery of examples ("Use this" imports one), and importing an agency
// file (the rest of the page is a plain form).

import { api } from "./api.js";
import { $, el } from "./dom.js";
import { general, showError } from "./errors.js";

/** @typedef {{ name: string, title: string, summary: string, manager: string, agents: string[], file: string }} Example */

/**
 * Imports an agency file and opens its playground (`to`) or editor.
 * @param {string} text
 * @param {HTMLElement} slot where its problems go
 * @param {string} [to] what to open after the agency's page, e.g. `/playground`
 */
async function importFile(text, slot, to) {
  const r = await api("POST", "/api/agencies/import", text, "application/yaml");
  if (r.ok) {
    window.location.href = "/agencies/" + r.data.id + (to || "");
    return;
  }
  const fields = r.error.fields || [];
  showError(slot, fields.length ? fields.map((f) => (f.path ? f.path + ": " : "") + f.message).join("\n") : r.error.message);
}

async function loadGallery() {
  const [ex, mine] = await Promise.all([api("GET", "/api/examples"), api("GET", "/api/agencies")]);
  const gallery = $("gallery");
  if (!ex.ok) {
    gallery.replaceChildren(el("li", { class: "card" }, "The examples cannot be shown: " + ex.error.message));
    return;
  }
  /** @type {Map<string, string>} name → id of the account's agencies */
  const have = new Map(mine.ok ? /** @type {{ id: string, draft: { name: string } }[]} */ (mine.data).map((a) => [a.draft.name, a.id]) : []);
  /** @type {Example[]} */
  const list = ex.data;
  gallery.replaceChildren(
    ...list.map((x) => {
      const error = el("p", { class: "error", id: "use-error-" + x.name, hidden: true });
      const yours = have.get(x.name);
      return el(
        "li",
        { class: "card example", "data-example": x.name },
        el("h3", {}, x.title, " ", el("code", {}, x.name)),
        el("p", {}, x.summary),
        el("p", { class: "hint" }, "Agents: ", ...x.agents.flatMap((a, i) => [i ? ", " : "", a === x.manager ? el("strong", {}, a + " (manager)") : a])),
        yours
          ? el("p", {}, el("a", { href: "/agencies/" + yours + "/playground", id: "open-" + x.name }, "Open your " + x.name), " (already in your agencies)")
          : el(
              "button",
              {
                type: "button",
                id: "use-" + x.name,
                "aria-describedby": error.id,
                onclick: (/** @type {Event} */ ev) => {
                  const b = /** @type {HTMLButtonElement} */ (ev.currentTarget);
                  b.disabled = true;
                  error.hidden = true;
                  error.textContent = "";
                  importFile(x.file, error, "/playground").finally(() => (b.disabled = false));
                },
              },
              "Use this",
            ),
        error,
      );
    }),
  );
}

const form = $("import-form");
form.addEventListener("submit", async (ev) => {
  ev.preventDefault();
  const slot = $("import-error");
  slot.hidden = true;
  slot.textContent = "";
  const files = $("import-file", HTMLInputElement).files;
  const file = files && files[0];
  const text = file ? await file.text() : $("import-text", HTMLTextAreaElement).value;
  if (!text.trim()) {
    showError(slot, "Choose a file or paste one.");
    return;
  }
  await importFile(text, slot);
});
loadGallery().catch((e) => general(String(e)));
