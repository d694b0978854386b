// @ts-check
// The rooms page: the user's rooms, a new room, and the saved roles and personalities.

import { api } from "./api.js";
import { $, el } from "./dom.js";
import { clearErrors, general, showFieldErrors } from "./errors.js";
import { when } from "./format.js";

/** @typedef {{ id: string, kind: string, name: string, text: string }} Definition */

/** Saved roles and personalities: listed, written, edited, deleted. */
function initDefinitions() {
  const form = $("definition-form", HTMLFormElement);
  const kind = $("d-kind", HTMLSelectElement);
  const name = $("d-name", HTMLInputElement);
  const text = $("d-text", HTMLTextAreaElement);
  /** @type {Definition | null} */
  let editing = null;
  const stopEditing = () => {
    editing = null;
    form.reset();
    kind.disabled = false;
    $("cancel-definition").hidden = true;
    $("save-definition").textContent = "Save";
  };
  const render = async () => {
    const r = await api("GET", "/api/definitions");
    if (!r.ok) {
      general(r.error.message);
      return;
    }
    /** @type {Definition[]} */
    const all = r.data;
    $("no-definitions").hidden = all.length > 0;
    $("definitions").replaceChildren(
      ...all.map((d) =>
        el(
          "li",
          { "data-definition": d.kind + ":" + d.name },
          el("span", { class: "badge" }, d.kind),
          " ",
          el("strong", {}, d.name),
          " ",
          el("span", { class: "hint" }, d.text.length > 120 ? d.text.slice(0, 120) + "…" : d.text),
          " ",
          el("button", { type: "button", class: "edit", "aria-label": "Edit " + d.kind + " " + d.name, onclick: () => {
            editing = d;
            kind.value = d.kind;
            kind.disabled = true;
            name.value = d.name;
            text.value = d.text;
            $("cancel-definition").hidden = false;
            $("save-definition").textContent = "Save changes";
            name.focus();
          } }, "Edit"),
          " ",
          el("button", { type: "button", class: "delete", "aria-label": "Delete " + d.kind + " " + d.name, onclick: async () => {
            if (!window.confirm("Delete the " + d.kind + " " + d.name + "? Agents pointing to it keep its text.")) return;
            const gone = await api("DELETE", "/api/definitions/" + d.id);
            if (!gone.ok) general(gone.error.message);
            if (editing && editing.id === d.id) stopEditing();
            render();
          } }, "Delete"),
        ),
      ),
    );
  };
  $("cancel-definition").addEventListener("click", stopEditing);
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    clearErrors(form);
    const body = { name: name.value.trim(), text: text.value.trim() };
    const r = editing ? await api("PUT", "/api/definitions/" + editing.id, body) : await api("POST", "/api/definitions", { kind: kind.value, ...body });
    if (!r.ok) {
      showFieldErrors(form, r.error, "d-");
      return;
    }
    stopEditing();
    render();
  });
  render();
}

const [rooms, agencies] = await Promise.all([api("GET", "/api/rooms"), api("GET", "/api/agencies")]);
if (!rooms.ok) {
  general(rooms.error.message);
} else {
  /** @type {{ id: string, name: string, created_at: string }[]} */
  const list = rooms.data;
  $("rooms").replaceChildren(...list.map((r) => el("li", { class: "card" }, el("h2", {}, el("a", { href: "/rooms/" + r.id }, r.name)), el("p", { class: "hint" }, "Made " + when(r.created_at)))));
  $("no-rooms").hidden = list.length > 0;
  if (agencies.ok) {
    const pick = $("f-agency", HTMLSelectElement);
    for (const a of /** @type {{ id: string, draft: { name: string } }[]} */ (agencies.data)) pick.append(el("option", { value: a.id }, a.draft.name));
  }
  initDefinitions();
  const form = $("room-form", HTMLFormElement);
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    clearErrors(form);
    /** @type {{ name: string, agency?: string }} */
    const body = { name: $("f-name", HTMLInputElement).value.trim() };
    const agency = $("f-agency", HTMLSelectElement).value;
    if (agency) body.agency = agency;
    if (!body.name) {
      showFieldErrors(form, { fields: [{ path: "name", message: "Give the room a name." }] });
      return;
    }
    const r = await api("POST", "/api/rooms", body);
    if (r.ok) window.location.href = "/rooms/" + r.data.room.id;
    else showFieldErrors(form, r.error);
  });
}
