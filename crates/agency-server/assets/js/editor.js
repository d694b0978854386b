// @ts-check
// The agency editor: the draft as a form, its compiled prompts previewed as you type, saving
// and publishing. Agents are known by a key (`_k`) that stays while their names change, so
// rules and the manager keep pointing at them (as references: `@k`, `user`, `any`).

import { api } from "./api.js";
import { $, el, find, status } from "./dom.js";
import { clearErrors, general, showFieldErrors, slug } from "./errors.js";
import { TeamGraph } from "./graph.js";
import { fillModels, keyWarning, loadProviders } from "./models.js";

/** @typedef {{ when: string, do: string, send_to: string[], call?: string, with?: unknown }} Rule */
/**
 * An agent as the API sends it (other fields are kept as they are).
 * @typedef {{ id?: number, name: string, role?: string, model: string, instructions?: string, rules?: Rule[], tools?: string[],
 *   approve?: string[], approve_timeout_secs?: number, approve_on_timeout?: string, approve_edits?: boolean, [field: string]: unknown }} AgentDraft
 */
/** @typedef {{ name: string, tools: { name: string, description: string }[], error?: string }} ToolServer */
/** @typedef {{ name: string, protocol?: string, manager: string, agents: AgentDraft[], [field: string]: unknown }} AgencyDraft */
/** An agent in the editor: its rules' names are references, and `_k` is its key. */
/** @typedef {AgentDraft & { rules: Rule[], _k: number }} EditorAgent */

/**
 * A labelled control with its error slot; `path` names it as the API does.
 * @param {string} label
 * @param {string} path
 * @param {HTMLElement} control
 * @param {string} [hint]
 */
function field(label, path, control, hint) {
  control.id = "f-" + slug(path);
  control.setAttribute("aria-describedby", "e-" + slug(path));
  return el(
    "div",
    { class: "field" },
    el("label", { for: control.id }, label),
    control,
    hint ? el("p", { class: "hint" }, hint) : null,
    el("p", { class: "error", id: "e-" + slug(path), hidden: true }),
  );
}

/**
 * @param {string | undefined} value
 * @param {(value: string) => void} oninput
 * @param {Record<string, import("./dom.js").AttrValue>} [attrs]
 */
function textInput(value, oninput, attrs) {
  const input = el("input", { type: "text", value: value || "", ...(attrs || {}) });
  input.addEventListener("input", () => oninput(input.value));
  return input;
}

export class Editor {
  /**
   * @param {string} id the agency's
   * @param {AgencyDraft} draft as loaded
   * @param {() => void} published called after each publishing
   * @param {() => void} [saved] called after each save
   */
  constructor(id, draft, published, saved) {
    this.id = id;
    this.published = published;
    this.saved = saved || (() => {});
    this.form = $("editor", HTMLFormElement);
    /** @type {ReturnType<typeof setTimeout> | undefined} */
    this.previewTimer = undefined;
    this.previewSeq = 0;
    this.next = 1;
    const { agents, ...rest } = draft;
    /** The agency's fields other than agents (kept as loaded, edited in place). */
    this.draft = rest;
    /** @type {EditorAgent[]} */
    this.agents = agents.map((a) => ({ ...a, rules: a.rules || [], _k: this.next++ }));
    for (const a of this.agents) {
      a.rules = a.rules.map((r) => ({ ...r, when: this.toRef(r.when), send_to: r.send_to.map((n) => this.toRef(n)) }));
    }
    /** A reference: `@k`. */
    this.manager = this.toRef(draft.manager);
    this.form.addEventListener("submit", (ev) => {
      ev.preventDefault();
      this.save();
    });
    /** Whether the form holds changes not saved yet. */
    this.dirty = false;
    // Ctrl+S (⌘+S) saves the draft, wherever the focus is.
    document.addEventListener("keydown", (e) => {
      if ((e.ctrlKey || e.metaKey) && !e.altKey && e.key.toLowerCase() === "s") {
        e.preventDefault();
        this.save();
      }
    });
    // Leaving with unsaved changes asks first: the browser's own prompt for a reload or a
    // closed tab, ours for a link of the page.
    window.addEventListener("beforeunload", (e) => {
      if (this.dirty) e.preventDefault();
    });
    document.addEventListener("click", (e) => {
      const a = e.target instanceof Element ? e.target.closest("a[href]") : null;
      if (!this.dirty || !(a instanceof HTMLAnchorElement) || a.target || a.hasAttribute("download")) return;
      if (new URL(a.href, location.href).pathname === location.pathname) return;
      if (window.confirm("Your changes to this agency are not saved. Leave without saving them?")) this.dirty = false;
      else e.preventDefault();
    });
    /** Every tool the agency's servers list, offered as agents' tools and rules' calls. */
    /** The team's graph, redrawn with each preview. */
    this.graph = new TeamGraph($("graph"), "The team of this draft");
    this.toolList = el("datalist", { id: "tool-names" });
    document.body.append(this.toolList);
    this.loadTools();
    /** The server's providers, for the model fields' suggestions and warnings. */
    /** @type {import("./models.js").ProviderStatus[]} */
    this.providers = [];
    this.loadProviders();
  }

  /** Fills the list of tools from the servers the agency may use. */
  async loadTools() {
    const r = await api("GET", "/api/agencies/" + this.id + "/tools");
    if (!r.ok) return;
    /** @type {ToolServer[]} */
    const servers = r.data;
    this.toolList.replaceChildren(
      ...servers.flatMap((s) => [
        el("option", { value: s.name + "/*" }, "every tool of " + s.name + (s.error ? " (cannot be listed now: " + s.error + ")" : "")),
        ...s.tools.map((t) => el("option", { value: t.name }, t.description)),
      ]),
    );
  }

  /** Offers `provider/model` for the model fields, each marked with its key, and checks them. */
  async loadProviders() {
    this.providers = await loadProviders();
    fillModels($("models"), this.providers);
    this.agents.forEach((a, i) => this.checkModel(a, i));
  }

  /**
   * Warns at agent `i`'s model field when its provider has no key: the agent would fail on its
   * first message. (Saving is not refused: a key may be stored before the agency is used.)
   * @param {EditorAgent} a
   * @param {number} i
   */
  checkModel(a, i) {
    const slot = find("w-" + slug("agents[" + i + "].model"));
    if (!slot) return;
    const name = (a.model || "").split("/")[0];
    // The agency's own providers (`providers:` in its file), by name.
    const providers = this.draft.providers;
    const own = typeof providers === "object" && providers !== null && Object.hasOwn(providers, name);
    slot.textContent = keyWarning(this.providers, a.model, own);
    slot.hidden = !slot.textContent;
  }

  /**
   * A name in the draft → a reference that survives renaming (`@k`, `user`, `any`).
   * @param {string} name
   */
  toRef(name) {
    const a = this.agents.find((a) => a.name === name);
    if (a) return "@" + a._k;
    if (name === "user" || name === "any") return name;
    return "?" + name;
  }

  /**
   * @param {string} ref
   * @returns {string}
   */
  toName(ref) {
    if (ref && ref.startsWith("@")) {
      const a = this.agents.find((a) => "@" + a._k === ref);
      return a ? a.name : "";
    }
    if (ref && ref.startsWith("?")) return ref.slice(1);
    return ref || "";
  }

  /** @returns {AgencyDraft} */
  toDraft() {
    /** @type {AgencyDraft} */
    const d = { ...this.draft, manager: this.toName(this.manager), agents: [] };
    d.agents = this.agents.map((a) => {
      const { _k, rules, ...rest } = a;
      /** @type {AgentDraft} */
      const out = { ...rest };
      for (const k of ["role", "instructions"]) if (out[k] === "") delete out[k];
      out.rules = rules.map((r) => ({ ...r, when: this.toName(r.when), send_to: r.send_to.map((ref) => this.toName(ref)) }));
      if (!out.tools || out.tools.length === 0) delete out.tools;
      // The approval policy as the file writes it: only what differs from the defaults.
      if (!out.approve || out.approve.length === 0) delete out.approve;
      if (out.approve_timeout_secs == null || Number.isNaN(out.approve_timeout_secs)) delete out.approve_timeout_secs;
      if (out.approve_on_timeout !== "approve") delete out.approve_on_timeout;
      if (out.approve_edits !== true) delete out.approve_edits;
      return out;
    });
    return d;
  }

  changed() {
    this.dirty = true;
    status("status", "Unsaved changes.");
    clearTimeout(this.previewTimer);
    this.previewTimer = setTimeout(() => this.preview(), 300);
  }

  /**
   * A picker of agents (by reference), plus `extra` choices such as `user` or `any`.
   * @param {string} current
   * @param {[string, string][]} extra
   * @param {(value: string) => void} onchange
   */
  picker(current, extra, onchange) {
    const s = el("select");
    s.addEventListener("change", () => onchange(s.value));
    for (const a of this.agents) {
      s.append(el("option", { value: "@" + a._k, "data-agent": a._k }, a.name || "(unnamed)"));
    }
    for (const [value, label] of extra) s.append(el("option", { value }, label));
    if (current && current.startsWith("?")) s.append(el("option", { value: current }, current.slice(1) + " (unknown)"));
    s.value = current || "";
    return s;
  }

  /**
   * Draws the whole form again, the focus on `focusId` (else where it was).
   * @param {string} [focusId]
   */
  render(focusId) {
    const form = this.form;
    const active = focusId || (document.activeElement && document.activeElement.id);
    form.replaceChildren();
    const d = this.draft;

    const protocol = el(
      "select",
      {},
      el("option", { value: "json" }, 'JSON ({"to": 143, "context": …})'),
      el("option", { value: "directives" }, "Directives (TO name: …)"),
    );
    protocol.addEventListener("change", () => {
      d.protocol = protocol.value;
      this.changed();
    });
    protocol.value = d.protocol || "json";
    form.append(
      el(
        "fieldset",
        {},
        el("legend", {}, "Agency"),
        el(
          "div",
          { class: "row" },
          field("Name", "name", textInput(d.name, (v) => { d.name = v; this.changed(); }, { required: true })),
          field("Protocol", "protocol", protocol),
          field("Manager (talks to the user)", "manager", this.picker(this.manager, [], (v) => { this.manager = v; this.changed(); })),
        ),
      ),
    );

    const list = el("div", { id: "agents" });
    this.agents.forEach((a, i) => list.append(this.agentBlock(a, i)));
    form.append(
      el("h2", {}, "Agents"),
      el("p", { class: "error", id: "e-agents", hidden: true }),
      list,
      el("button", { type: "button", id: "add-agent", onclick: () => this.addAgent() }, "Add agent"),
      el(
        "div",
        { class: "actions" },
        el("button", { type: "submit", id: "save", "aria-keyshortcuts": "Control+S", title: "Save the draft (Ctrl+S)" }, "Save draft"),
        el("button", { type: "button", id: "publish", onclick: () => this.publish() }, "Save and publish"),
      ),
    );
    const again = active && find(active);
    if (again) again.focus();
  }

  /**
   * @param {EditorAgent} a
   * @param {number} i
   */
  agentBlock(a, i) {
    const p = "agents[" + i + "]";
    const n = this.agents.length;
    const legend = el("legend", { id: "legend-" + a._k }, "Agent " + (i + 1) + ": " + (a.name || "(unnamed)"));
    const rules = el("div", { class: "rules" });
    a.rules.forEach((r, j) => rules.append(this.ruleBlock(a, i, r, j)));
    const instructions = el("textarea", { rows: 3 }, a.instructions || "");
    instructions.addEventListener("input", () => { a.instructions = instructions.value; this.changed(); });
    return el(
      "fieldset",
      { class: "agent", "data-agent": a._k },
      legend,
      el(
        "div",
        { class: "row" },
        field(
          "Name",
          p + ".name",
          textInput(a.name, (v) => {
            a.name = v;
            legend.textContent = "Agent " + (i + 1) + ": " + (v || "(unnamed)");
            document.querySelectorAll('option[data-agent="' + a._k + '"]').forEach((o) => (o.textContent = v || "(unnamed)"));
            this.changed();
          }, { required: true }),
        ),
        field("Role", p + ".role", textInput(a.role, (v) => { a.role = v; this.changed(); })),
        this.modelField(a, i),
      ),
      field("Instructions", p + ".instructions", instructions),
      field(
        "Tools",
        p + ".tools",
        textInput((a.tools || []).join(", "), (v) => {
          a.tools = v.split(",").map((t) => t.trim()).filter((t) => t);
          this.changed();
        }, { list: "tool-names", placeholder: "e.g. builtin/calculate, files/*" }),
        "server/tool, separated by commas; server/* for every tool of a server",
      ),
      this.approvalFields(a, p),
      el("h3", {}, "Ad-lib rules"),
      el("p", { class: "error", id: "e-" + slug(p + ".rules"), hidden: true }),
      rules,
      el(
        "div",
        { class: "actions" },
        el("button", { type: "button", id: "add-rule-" + a._k, onclick: () => this.addRule(a) }, "Add rule"),
        el("button", { type: "button", id: "up-" + a._k, disabled: i === 0, "aria-label": "Move " + (a.name || "agent") + " up", onclick: () => this.move(i, -1, "up-" + a._k) }, "↑ Up"),
        el("button", { type: "button", id: "down-" + a._k, disabled: i === n - 1, "aria-label": "Move " + (a.name || "agent") + " down", onclick: () => this.move(i, 1, "down-" + a._k) }, "↓ Down"),
        el("button", { type: "button", class: "danger", id: "remove-" + a._k, onclick: () => this.removeAgent(i) }, "Remove agent"),
      ),
      el("p", { class: "error", id: "e-" + slug(p), hidden: true }),
    );
  }

  /**
   * The agent's approval policy, beside its tools: which of them wait for a person, how long,
   * what an unanswered call gets, and whether the person may change the arguments.
   * @param {EditorAgent} a
   * @param {string} p the agent's path
   */
  approvalFields(a, p) {
    const timeout = el("input", { type: "number", min: 1, step: 1, value: a.approve_timeout_secs == null ? "" : String(a.approve_timeout_secs), placeholder: "the server's default" });
    timeout.addEventListener("input", () => {
      a.approve_timeout_secs = timeout.value === "" ? undefined : Number(timeout.value);
      this.changed();
    });
    const unanswered = el("select", {}, el("option", { value: "deny" }, "denied"), el("option", { value: "approve" }, "approved"));
    unanswered.value = a.approve_on_timeout === "approve" ? "approve" : "deny";
    unanswered.addEventListener("change", () => {
      a.approve_on_timeout = unanswered.value;
      this.changed();
    });
    const edits = el("input", { type: "checkbox", checked: a.approve_edits === true });
    edits.addEventListener("change", () => {
      a.approve_edits = edits.checked;
      this.changed();
    });
    return el(
      "div",
      { class: "row approval-policy" },
      field(
        "Needs a person's approval",
        p + ".approve",
        textInput((a.approve || []).join(", "), (v) => {
          a.approve = v.split(",").map((t) => t.trim()).filter((t) => t);
          this.changed();
        }, { list: "tool-names", placeholder: "e.g. files/write_file" }),
        "tools of its own whose every call waits for a person to approve it first",
      ),
      field("Waits for an answer (seconds)", p + ".approve_timeout_secs", timeout),
      field("Unanswered, the call is", p + ".approve_on_timeout", unanswered),
      field("The person may change the arguments", p + ".approve_edits", edits),
    );
  }

  /**
   * Agent `i`'s model field, with its warning slot (`#w-<path>`) beside the error's.
   * @param {EditorAgent} a
   * @param {number} i
   */
  modelField(a, i) {
    const path = "agents[" + i + "].model";
    const input = textInput(a.model, (v) => {
      a.model = v;
      this.checkModel(a, i);
      this.changed();
    }, { list: "models" });
    const f = field("Model", path, input, "provider/model, e.g. builtin/rules");
    input.setAttribute("aria-describedby", "e-" + slug(path) + " w-" + slug(path));
    f.append(el("p", { class: "warning", id: "w-" + slug(path), hidden: true }));
    queueMicrotask(() => this.checkModel(a, i));
    return f;
  }

  /**
   * @param {EditorAgent} a
   * @param {number} i
   * @param {Rule} r
   * @param {number} j
   */
  ruleBlock(a, i, r, j) {
    const p = "agents[" + i + "].rules[" + j + "]";
    const w = this.picker(r.when, [["user", "the user"], ["any", "anyone"]], (v) => { r.when = v; this.changed(); });
    const action = textInput(r.do, (v) => { r.do = v; this.changed(); }, { placeholder: "what to do, e.g. Please review: {{message}}" });
    /** @param {number} k */
    const path = (k) => p + ".send_to" + (k === 0 ? "" : "[" + k + "]");
    /** @param {number} k */
    const where = (k) => "f-" + slug(path(k));
    // One picker per addressee: a rule may send its response to several (a fan-out rule).
    const rows = r.send_to.map((to, k) => {
      const pick = this.picker(to, [["user", "the user"]], (v) => { r.send_to[k] = v; this.changed(); });
      pick.id = where(k);
      pick.setAttribute("aria-describedby", "e-" + slug(path(k)));
      if (k > 0) pick.setAttribute("aria-label", "and to, addressee " + (k + 1));
      return el(
        "div",
        { class: "addressee" },
        pick,
        k > 0 ? el("button", { type: "button", class: "remove-addressee", "aria-label": "Remove addressee " + (k + 1) + " of rule " + (j + 1), onclick: () => { r.send_to.splice(k, 1); this.render(where(k - 1)); this.changed(); } }, "×") : null,
        el("p", { class: "error", id: "e-" + slug(path(k)), hidden: true }),
      );
    });
    const add = el("button", { type: "button", class: "add-addressee", "aria-label": "Send rule " + (j + 1) + "'s response to another addressee too", onclick: () => {
      const taken = new Set(r.send_to);
      const free = this.agents.map((b) => "@" + b._k).find((ref) => !taken.has(ref));
      r.send_to.push(free || "user");
      this.render(where(r.send_to.length - 1));
      this.changed();
    } }, "+ addressee");
    const addressees = el("div", { class: "field addressees" }, el("label", { for: where(0) }, "and send response to"), ...rows, add);
    const call = textInput(r.call, (v) => {
      if (v.trim()) r.call = v.trim();
      else delete r.call;
      this.changed();
    }, { list: "tool-names", placeholder: "optional: a tool, e.g. builtin/now" });
    const withText = r.with === undefined ? "" : JSON.stringify(r.with);
    const args = textInput(withText, (v) => {
      if (!v.trim()) delete r.with;
      else {
        try {
          r.with = JSON.parse(v);
          args.removeAttribute("aria-invalid");
        } catch {
          // Sent as text: the server says what is wrong with it, at this field.
          r.with = v;
          args.setAttribute("aria-invalid", "true");
        }
      }
      this.changed();
    }, { placeholder: '{"expression": "{{message}}"}' });
    return el(
      "div",
      { class: "rule" },
      field("When message is from", p + ".when", w),
      field("call tool", p + ".call", call),
      field("with arguments (JSON)", p + ".with", args),
      field("do", p + ".do", action, r.call ? "{{result}} is the tool's answer" : undefined),
      addressees,
      el("button", { type: "button", class: "danger", "aria-label": "Remove rule " + (j + 1) + " of " + (a.name || "agent"), onclick: () => { a.rules.splice(j, 1); this.render("add-rule-" + a._k); this.changed(); } }, "Remove rule"),
    );
  }

  addAgent() {
    const k = this.next++;
    this.agents.push({ name: "agent" + (this.agents.length + 1), model: "builtin/rules", rules: [], _k: k });
    this.render("f-" + slug("agents[" + (this.agents.length - 1) + "].name"));
    this.changed();
  }

  /** @param {number} i */
  removeAgent(i) {
    this.agents.splice(i, 1);
    this.render("add-agent");
    this.changed();
  }

  /**
   * Moves agent `i` by `by` places, keeping the focus on the button pressed.
   * @param {number} i
   * @param {number} by
   * @param {string} focus
   */
  move(i, by, focus) {
    const j = i + by;
    if (j < 0 || j >= this.agents.length) return;
    const [a] = this.agents.splice(i, 1);
    this.agents.splice(j, 0, a);
    this.render(focus);
    // At the top or bottom the button just pressed is disabled: the other one takes the focus.
    const pressed = find(focus);
    if (pressed instanceof HTMLButtonElement && pressed.disabled) {
      const other = find((focus.startsWith("up-") ? "down-" : "up-") + a._k);
      if (other) other.focus();
    }
    this.changed();
  }

  /** @param {EditorAgent} a */
  addRule(a) {
    const other = this.agents.find((b) => b !== a);
    a.rules.push({ when: "user", do: "", send_to: [other ? "@" + other._k : "user"] });
    const i = this.agents.indexOf(a);
    this.render("f-" + slug("agents[" + i + "].rules[" + (a.rules.length - 1) + "].when"));
    this.changed();
  }

  /** Shows the compiled system prompts of the draft as it is (the latest answer wins). */
  async preview() {
    const seq = ++this.previewSeq;
    const r = await api("POST", "/api/agencies/preview", this.toDraft());
    if (seq !== this.previewSeq) return; // a newer one is on its way
    const out = $("preview");
    clearErrors(this.form);
    if (!r.ok) {
      out.replaceChildren(el("p", { class: "hint" }, "Fix the problems shown in the form to see the prompts."));
      showFieldErrors(this.form, r.error);
      return;
    }
    this.graph.draw({ manager: r.data.manager, agents: this.agents.map((a) => a.name), edges: r.data.edges });
    out.replaceChildren(
      .../** @type {{ agent: string, prompt: string }[]} */ (r.data.prompts).map((p) =>
        el("section", { class: "prompt" }, el("h3", {}, p.agent), el("pre", { class: "prompt-text" }, p.prompt)),
      ),
    );
  }

  /** @returns {Promise<boolean>} whether it was saved */
  async save() {
    status("status", "Saving…");
    const r = await api("PUT", "/api/agencies/" + this.id, this.toDraft());
    clearErrors(this.form);
    if (!r.ok) {
      status("status", "Not saved: see the problems below.");
      showFieldErrors(this.form, r.error);
      return false;
    }
    // The server gives new agents their ids; keep them so that addresses stay.
    /** @type {AgentDraft[]} */ (r.data.draft.agents).forEach((a, i) => {
      if (this.agents[i]) this.agents[i].id = a.id;
    });
    this.dirty = false;
    status("status", "Saved.");
    this.saved();
    return true;
  }

  async publish() {
    if (!(await this.save())) return;
    const r = await api("POST", "/api/agencies/" + this.id + "/publish");
    if (!r.ok) {
      general(r.error.message);
      return;
    }
    status("status", "Published version " + r.data.version + ".");
    this.published();
  }
}
