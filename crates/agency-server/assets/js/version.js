// @ts-check
// A published version, rendered: its agents, its team's graph and its agency file.

import { api } from "./api.js";
import { $, data, el } from "./dom.js";
import { general } from "./errors.js";
import { when } from "./format.js";
import { TeamGraph } from "./graph.js";

const id = data("version", "id");
const n = data("version", "version");
const r = await api("GET", "/api/agencies/" + id + "/versions/" + n);
if (!r.ok) {
  general(r.error.message);
} else {
  /** @type {{ version: number, published_at: string, file: string, agency: import("./editor.js").AgencyDraft }} */
  const v = r.data;
  $("version-meta").textContent = "Published " + when(v.published_at) + ". The manager is " + v.agency.manager + "; protocol " + (v.agency.protocol || "json") + ".";
  $("version-agents", HTMLTableElement).tBodies[0].replaceChildren(
    ...v.agency.agents.map((a) =>
      el(
        "tr",
        {},
        el("th", { scope: "row" }, a.name + (a.name === v.agency.manager ? " (manager)" : "")),
        el("td", {}, a.role || ""),
        el("td", {}, el("code", {}, a.model)),
        el("td", {}, ...(a.rules || []).map((x) => el("p", { class: "rule-text" }, "When from " + x.when + (x.call ? ", call " + x.call : "") + ": " + x.do + " → " + x.send_to.join(", ")))),
        el("td", {}, (a.tools || []).join(", ")),
      ),
    ),
  );
  $("version-file").textContent = v.file;
  const p = await api("POST", "/api/agencies/preview", v.agency);
  if (p.ok) {
    new TeamGraph($("graph"), "The team of version " + v.version).draw({ manager: p.data.manager, agents: v.agency.agents.map((a) => a.name), edges: p.data.edges });
  }
}
