// @ts-check
// The home page: importing an agency file (the rest of the page is a plain form).

import { api } from "./api.js";
import { $ } from "./dom.js";
import { showError } from "./errors.js";

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
  const r = await api("POST", "/api/agencies/import", text, "application/yaml");
  if (r.ok) {
    window.location.href = "/agencies/" + r.data.id;
    return;
  }
  const fields = r.error.fields || [];
  showError(slot, fields.length ? fields.map((f) => (f.path ? f.path + ": " : "") + f.message).join("\n") : r.error.message);
});
