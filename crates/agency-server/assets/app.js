// Agency's own script: fills in the pages from the JSON API (/api/...).
// Everything user-written reaches the page through textContent, never as HTML.
"use strict";

// ---- Helpers ----

function csrf() {
  const m = document.querySelector('meta[name="csrf-token"]');
  return m ? m.content : "";
}

/** Calls the JSON API; answers {ok, status, data, error}. */
async function api(method, path, body, contentType) {
  const headers = { "x-csrf-token": csrf() };
  let payload;
  if (body !== undefined) {
    headers["content-type"] = contentType || "application/json";
    payload = contentType ? body : JSON.stringify(body);
  }
  let res;
  try {
    res = await fetch(path, { method, headers, body: payload, credentials: "same-origin" });
  } catch {
    return { ok: false, status: 0, data: null, error: { message: "The server cannot be reached." } };
  }
  if (res.status === 401 && !path.startsWith("/api/agency/")) {
    window.location.href = "/login";
  }
  const text = await res.text();
  let data = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    data = text;
  }
  const error = !res.ok ? ((data && data.error) || { message: res.status + " " + res.statusText }) : null;
  return { ok: res.ok, status: res.status, data, error };
}

/** An element with attributes (`on…` functions become listeners) and children (strings become text). */
function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on") && typeof v === "function") e.addEventListener(k.slice(2), v);
    else if (k === "value") e.value = v;
    else if (v === true) e.setAttribute(k, "");
    else e.setAttribute(k, String(v));
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

function $(id) {
  return document.getElementById(id);
}

function when(s) {
  if (!s) return "—";
  const d = new Date(s);
  return isNaN(d) ? s : d.toLocaleString();
}

/** `agents[1].rules[0].send_to` → `agents-1-rules-0-send_to`, the ids of its control and error. */
function slug(path) {
  return path.replace(/\[(\d+)\]/g, "-$1").replace(/\./g, "-");
}

/** The path one level up, or null. */
function parent(path) {
  const up = path.replace(/(\.[^.[\]]+|\[\d+\])$/, "");
  return up === path || up === "" ? null : up;
}

function clearErrors(root) {
  root.querySelectorAll('.error[id^="e-"]').forEach((e) => {
    e.textContent = "";
    e.hidden = true;
  });
  root.querySelectorAll("[aria-invalid]").forEach((e) => e.removeAttribute("aria-invalid"));
  const g = $("general-error");
  if (g) {
    g.textContent = "";
    g.hidden = true;
  }
}

function showError(slot, message) {
  slot.textContent = slot.textContent ? slot.textContent + " " + message : message;
  slot.hidden = false;
}

function general(message) {
  const g = $("general-error");
  if (g) showError(g, message);
  else window.alert(message);
}

/** Shows each problem next to the field its path names (or the nearest enclosing one). */
function showFieldErrors(root, error, prefix) {
  prefix = prefix || "";
  const fields = (error && error.fields) || [];
  if (!fields.length) {
    general((error && error.message) || "Something went wrong.");
    return;
  }
  let first = null;
  for (const f of fields) {
    let path = f.path;
    let slot = null;
    while (path && !slot) {
      slot = root.querySelector("#e-" + CSS.escape(prefix + slug(path)));
      if (!slot) path = parent(path);
    }
    if (!slot) {
      general((f.path ? f.path + ": " : "") + f.message);
      continue;
    }
    showError(slot, f.message);
    const control = root.querySelector("#f-" + CSS.escape(prefix + slug(path)));
    if (control) {
      control.setAttribute("aria-invalid", "true");
      first = first || control;
    }
  }
  if (first) first.focus();
}

function status(id, text) {
  const s = $(id);
  if (s) s.textContent = text;
}

/** A turn's cost in dollars, or a dash when a model it called has no price. */
function cost(usd) {
  return usd === null || usd === undefined ? "cost —" : "$" + usd;
}

function tokens(u) {
  return u ? u.total_tokens + " tokens (" + u.prompt_tokens + " in, " + u.completion_tokens + " out)" : "";
}

// ---- Home: import an agency file ----

function initHome() {
  const form = $("import-form");
  if (!form) return;
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const slot = $("import-error");
    slot.hidden = true;
    slot.textContent = "";
    const file = $("import-file").files[0];
    const text = file ? await file.text() : $("import-text").value;
    if (!text.trim()) {
      showError(slot, "Choose a file or paste one.");
      return;
    }
    const r = await api("POST", "/api/agencies/import", text, "application/yaml");
    if (r.ok) {
      window.location.href = "/agencies/" + r.data.id;
      return;
    }
    const fields = (r.error && r.error.fields) || [];
    showError(slot, fields.length ? fields.map((f) => (f.path ? f.path + ": " : "") + f.message).join("\n") : r.error.message);
  });
}

// ---- The agency editor ----

const Editor = {
  id: null,
  draft: null, // the agency's fields other than agents (kept as loaded, edited in place)
  agents: [], // the agents' drafts, each with `_k`, a key that stays while names change
  manager: null, // a reference: `@k`
  next: 1,
  previewTimer: null,
  previewSeq: 0,
};

/** Names in the draft ↔ references that survive renaming (`@k`, `user`, `any`). */
function toRef(name) {
  const a = Editor.agents.find((a) => a.name === name);
  if (a) return "@" + a._k;
  if (name === "user" || name === "any") return name;
  return "?" + name;
}

function toName(ref) {
  if (ref && ref.startsWith("@")) {
    const a = Editor.agents.find((a) => "@" + a._k === ref);
    return a ? a.name : "";
  }
  if (ref && ref.startsWith("?")) return ref.slice(1);
  return ref || "";
}

function load(draft) {
  const { agents, ...rest } = draft;
  Editor.draft = rest;
  Editor.agents = agents.map((a) => ({ ...a, rules: a.rules || [], _k: Editor.next++ }));
  for (const a of Editor.agents) {
    a.rules = a.rules.map((r) => ({ when: toRef(r.when), action: r.action, send_to: r.send_to.map(toRef) }));
  }
  Editor.manager = toRef(draft.manager);
}

function toDraft() {
  const d = { ...Editor.draft, manager: toName(Editor.manager) };
  d.agents = Editor.agents.map((a) => {
    const { _k, rules, ...rest } = a;
    const out = { ...rest };
    for (const k of ["role", "instructions"]) if (out[k] === "") delete out[k];
    out.rules = rules.map((r) => ({ when: toName(r.when), action: r.action, send_to: r.send_to.map(toName) }));
    return out;
  });
  return d;
}

function changed() {
  status("status", "Unsaved changes.");
  clearTimeout(Editor.previewTimer);
  Editor.previewTimer = setTimeout(preview, 300);
}

/** A labelled control with its error slot; `path` names it as the API does. */
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

function textInput(value, oninput, attrs) {
  return el("input", { type: "text", value: value || "", oninput: (e) => oninput(e.target.value), ...(attrs || {}) });
}

/** A picker of agents (by reference), plus `extra` choices such as `user` or `any`. */
function picker(current, extra, onchange) {
  const s = el("select", { onchange: (e) => onchange(e.target.value) });
  for (const a of Editor.agents) {
    s.append(el("option", { value: "@" + a._k, "data-agent": a._k }, a.name || "(unnamed)"));
  }
  for (const [value, label] of extra) s.append(el("option", { value }, label));
  if (current && current.startsWith("?")) s.append(el("option", { value: current }, current.slice(1) + " (unknown)"));
  s.value = current || "";
  return s;
}

function render(focusId) {
  const form = $("editor");
  const active = focusId || (document.activeElement && document.activeElement.id);
  form.replaceChildren();
  const d = Editor.draft;

  form.append(
    el(
      "fieldset",
      {},
      el("legend", {}, "Agency"),
      el(
        "div",
        { class: "row" },
        field("Name", "name", textInput(d.name, (v) => { d.name = v; changed(); }, { required: true })),
        field(
          "Protocol",
          "protocol",
          (() => {
            const s = el(
              "select",
              { onchange: (e) => { d.protocol = e.target.value; changed(); } },
              el("option", { value: "json" }, 'JSON ({"to": 143, "context": …})'),
              el("option", { value: "directives" }, "Directives (TO name: …)"),
            );
            s.value = d.protocol || "json";
            return s;
          })(),
        ),
        field("Manager (talks to the user)", "manager", picker(Editor.manager, [], (v) => { Editor.manager = v; changed(); })),
      ),
    ),
  );

  const list = el("div", { id: "agents" });
  Editor.agents.forEach((a, i) => list.append(agentBlock(a, i)));
  form.append(
    el("h2", {}, "Agents"),
    el("p", { class: "error", id: "e-agents", hidden: true }),
    list,
    el("button", { type: "button", id: "add-agent", onclick: addAgent }, "Add agent"),
    el(
      "div",
      { class: "actions" },
      el("button", { type: "submit", id: "save" }, "Save draft"),
      el("button", { type: "button", id: "publish", onclick: publish }, "Save and publish"),
    ),
  );
  if (active && $(active)) $(active).focus();
}

function agentBlock(a, i) {
  const p = "agents[" + i + "]";
  const n = Editor.agents.length;
  const legend = el("legend", { id: "legend-" + a._k }, "Agent " + (i + 1) + ": " + (a.name || "(unnamed)"));
  const rules = el("div", { class: "rules" });
  a.rules.forEach((r, j) => rules.append(ruleBlock(a, i, r, j)));
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
          changed();
        }, { required: true }),
      ),
      field("Role", p + ".role", textInput(a.role, (v) => { a.role = v; changed(); })),
      field("Model", p + ".model", textInput(a.model, (v) => { a.model = v; changed(); }, { list: "models" }), "provider/model, e.g. builtin/rules"),
    ),
    field(
      "Instructions",
      p + ".instructions",
      el("textarea", { rows: 3, oninput: (e) => { a.instructions = e.target.value; changed(); } }, a.instructions || ""),
    ),
    el("h3", {}, "Ad-lib rules"),
    el("p", { class: "error", id: "e-" + slug(p + ".rules"), hidden: true }),
    rules,
    el(
      "div",
      { class: "actions" },
      el("button", { type: "button", id: "add-rule-" + a._k, onclick: () => addRule(a) }, "Add rule"),
      el("button", { type: "button", id: "up-" + a._k, disabled: i === 0, "aria-label": "Move " + (a.name || "agent") + " up", onclick: () => move(i, -1, "up-" + a._k) }, "↑ Up"),
      el("button", { type: "button", id: "down-" + a._k, disabled: i === n - 1, "aria-label": "Move " + (a.name || "agent") + " down", onclick: () => move(i, 1, "down-" + a._k) }, "↓ Down"),
      el("button", { type: "button", class: "danger", id: "remove-" + a._k, onclick: () => removeEditorAgent(i) }, "Remove agent"),
    ),
    el("p", { class: "error", id: "e-" + slug(p), hidden: true }),
  );
}

function ruleBlock(a, i, r, j) {
  const p = "agents[" + i + "].rules[" + j + "]";
  const w = picker(r.when, [["user", "the user"], ["any", "anyone"]], (v) => { r.when = v; changed(); });
  const action = textInput(r.action, (v) => { r.action = v; changed(); }, { placeholder: "what to do, e.g. Please review: {{message}}" });
  const path = (k) => p + ".send_to" + (k === 0 ? "" : "[" + k + "]");
  const where = (k) => "f-" + slug(path(k));
  // One picker per addressee: a rule may send its response to several (a fan-out rule).
  const rows = r.send_to.map((to, k) => {
    const pick = picker(to, [["user", "the user"]], (v) => { r.send_to[k] = v; changed(); });
    pick.id = where(k);
    pick.setAttribute("aria-describedby", "e-" + slug(path(k)));
    if (k > 0) pick.setAttribute("aria-label", "and to, addressee " + (k + 1));
    return el(
      "div",
      { class: "addressee" },
      pick,
      k > 0 ? el("button", { type: "button", class: "remove-addressee", "aria-label": "Remove addressee " + (k + 1) + " of rule " + (j + 1), onclick: () => { r.send_to.splice(k, 1); render(where(k - 1)); changed(); } }, "×") : null,
      el("p", { class: "error", id: "e-" + slug(path(k)), hidden: true }),
    );
  });
  const add = el("button", { type: "button", class: "add-addressee", "aria-label": "Send rule " + (j + 1) + "'s response to another addressee too", onclick: () => {
    const taken = new Set(r.send_to);
    const free = Editor.agents.map((b) => "@" + b._k).find((ref) => !taken.has(ref));
    r.send_to.push(free || "user");
    render(where(r.send_to.length - 1));
    changed();
  } }, "+ addressee");
  const addressees = el("div", { class: "field addressees" }, el("label", { for: where(0) }, "and send response to"), ...rows, add);
  return el(
    "div",
    { class: "rule" },
    field("When message is from", p + ".when", w),
    field("do", p + ".action", action),
    addressees,
    el("button", { type: "button", class: "danger", "aria-label": "Remove rule " + (j + 1) + " of " + (a.name || "agent"), onclick: () => { a.rules.splice(j, 1); render("add-rule-" + a._k); changed(); } }, "Remove rule"),
  );
}

function addAgent() {
  const k = Editor.next++;
  Editor.agents.push({ name: "agent" + (Editor.agents.length + 1), model: "builtin/rules", rules: [], _k: k });
  render("f-" + slug("agents[" + (Editor.agents.length - 1) + "].name"));
  changed();
}

function removeEditorAgent(i) {
  Editor.agents.splice(i, 1);
  render("add-agent");
  changed();
}

function move(i, by, focus) {
  const j = i + by;
  if (j < 0 || j >= Editor.agents.length) return;
  const [a] = Editor.agents.splice(i, 1);
  Editor.agents.splice(j, 0, a);
  render(focus);
  // At the top or bottom the button just pressed is disabled: the other one takes the focus.
  if ($(focus) && $(focus).disabled) {
    const other = $((focus.startsWith("up-") ? "down-" : "up-") + a._k);
    if (other) other.focus();
  }
  changed();
}

function addRule(a) {
  const other = Editor.agents.find((b) => b !== a);
  a.rules.push({ when: "user", action: "", send_to: [other ? "@" + other._k : "user"] });
  const i = Editor.agents.indexOf(a);
  render("f-" + slug("agents[" + i + "].rules[" + (a.rules.length - 1) + "].when"));
  changed();
}

async function preview() {
  const seq = ++Editor.previewSeq;
  const r = await api("POST", "/api/agencies/preview", toDraft());
  if (seq !== Editor.previewSeq) return; // a newer one is on its way
  const out = $("preview");
  clearErrors($("editor"));
  if (!r.ok) {
    out.replaceChildren(el("p", { class: "hint" }, "Fix the problems shown in the form to see the prompts."));
    showFieldErrors($("editor"), r.error);
    return;
  }
  out.replaceChildren(
    ...r.data.prompts.map((p) =>
      el("section", { class: "prompt" }, el("h3", {}, p.agent), el("pre", { class: "prompt-text" }, p.prompt)),
    ),
  );
}

async function save() {
  status("status", "Saving…");
  const r = await api("PUT", "/api/agencies/" + Editor.id, toDraft());
  clearErrors($("editor"));
  if (!r.ok) {
    status("status", "Not saved: see the problems below.");
    showFieldErrors($("editor"), r.error);
    return false;
  }
  // The server gives new agents their ids; keep them so that addresses stay.
  r.data.draft.agents.forEach((a, i) => {
    if (Editor.agents[i]) Editor.agents[i].id = a.id;
  });
  status("status", "Saved.");
  return true;
}

async function publish() {
  if (!(await save())) return;
  const r = await api("POST", "/api/agencies/" + Editor.id + "/publish");
  if (!r.ok) {
    general(r.error.message);
    return;
  }
  status("status", "Published version " + r.data.version + ".");
  loadVersions();
}

async function loadVersions() {
  const [a, v] = await Promise.all([
    api("GET", "/api/agencies/" + Editor.id),
    api("GET", "/api/agencies/" + Editor.id + "/versions"),
  ]);
  if (a.ok) {
    $("published-now").textContent = a.data.published_version
      ? "Its API serves version " + a.data.published_version + "."
      : "Draft only: publish it to make it reachable through its API.";
  }
  if (v.ok) {
    $("versions").replaceChildren(
      ...v.data.map((x) =>
        el(
          "li",
          {},
          el("a", { href: "/api/agencies/" + Editor.id + "/versions/" + x.version }, "Version " + x.version),
          " — published " + when(x.published_at),
        ),
      ),
    );
  }
}

async function loadKeys() {
  const r = await api("GET", "/api/agencies/" + Editor.id + "/keys");
  if (!r.ok) return;
  const body = $("keys").querySelector("tbody");
  body.replaceChildren(
    ...r.data.map((k) =>
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
  if (!r.data.length) body.append(el("tr", {}, el("td", { colspan: 7 }, "No keys yet.")));
}

async function revoke(name) {
  const r = await api("DELETE", "/api/agencies/" + Editor.id + "/keys/" + encodeURIComponent(name));
  if (!r.ok) general(r.error.message);
  status("status", r.ok ? "Key " + name + " revoked." : "");
  loadKeys();
}

async function createKey(ev) {
  ev.preventDefault();
  const form = $("key-form");
  clearErrors(form);
  $("new-key").hidden = true;
  const name = $("f-key-name").value.trim();
  const expires = $("f-key-expires").value.trim();
  if (!name) {
    showError($("e-key-name"), "Give the key a name.");
    $("f-key-name").setAttribute("aria-invalid", "true");
    $("f-key-name").focus();
    return;
  }
  const r = await api("POST", "/api/agencies/" + Editor.id + "/keys", { name, expires_in: expires || null });
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
  const r = await api("GET", "/api/agencies/" + Editor.id + "/conversations");
  if (!r.ok) return;
  $("conversations").replaceChildren(
    ...r.data.map((c) =>
      el(
        "li",
        {},
        el("a", { href: "/conversations/" + c.id }, when(c.created_at)),
        " — " + (c.version === null ? "on the draft" : "on version " + c.version),
      ),
    ),
  );
  if (!r.data.length) $("conversations").append(el("li", {}, "None yet: try the playground."));
}

async function initAgency() {
  const root = $("agency");
  Editor.id = root.dataset.id;
  const form = $("editor");
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    save();
  });
  $("key-form").addEventListener("submit", createKey);
  const r = await api("GET", "/api/agencies/" + Editor.id);
  if (!r.ok) {
    general(r.error.message);
    return;
  }
  load(r.data.draft);
  render();
  status("status", "");
  preview();
  loadVersions();
  loadKeys();
  loadConversations();
}

// ---- The playground ----

const Play = { id: null, conversation: null, on: null, events: null, turn: null };

function openEvents(conversation) {
  return new Promise((resolve) => {
    if (Play.events) Play.events.close();
    const es = new EventSource("/api/conversations/" + conversation + "/events");
    Play.events = es;
    es.addEventListener("open", () => resolve(), { once: true });
    es.addEventListener("error", () => resolve(), { once: true });
    es.addEventListener("turn_started", (e) => {
      const d = JSON.parse(e.data);
      if (Play.turn) Play.turn.title.textContent = "Turn " + d.number;
    });
    es.addEventListener("agent_started", (e) => {
      const d = JSON.parse(e.data);
      status("chat-status", d.agent + " is working…");
    });
    es.addEventListener("hop", (e) => addHop(JSON.parse(e.data).hop));
    es.addEventListener("turn_finished", (e) => {
      const d = JSON.parse(e.data);
      status("chat-status", "Turn finished (" + d.stopped_by + ").");
    });
    es.addEventListener("turn_failed", (e) => {
      const d = JSON.parse(e.data);
      if (Play.turn) showError(Play.turn.error, d.error);
    });
  });
}

function addHop(h) {
  const t = Play.turn;
  if (!t) return;
  const secs = ((performance.now() - t.started) / 1000).toFixed(2);
  t.hops.append(
    el(
      "li",
      { class: "hop kind-" + h.kind },
      el("p", { class: "hop-head" }, el("strong", { class: "hop-route" }, h.from + " → " + h.to), " ", el("span", { class: "badge" }, h.kind), " ", el("span", { class: "hint" }, "+" + secs + " s" + (h.usage ? " · " + tokens(h.usage) : "") + (h.latency_ms != null ? " · model " + h.latency_ms + " ms" : ""))),
      el("p", { class: "hop-text" }, h.text),
    ),
  );
  if (h.to === "user") setAnswer(t, h.text);
}

function setAnswer(t, text) {
  t.answer.textContent = text;
  t.answerBox.hidden = false;
}

async function send(ev) {
  ev.preventDefault();
  const msg = $("message");
  const slot = $("chat-error");
  slot.hidden = true;
  slot.textContent = "";
  msg.removeAttribute("aria-invalid");
  const text = msg.value.trim();
  if (!text) {
    showError(slot, "Write a message first.");
    msg.setAttribute("aria-invalid", "true");
    msg.focus();
    return;
  }
  const on = document.querySelector('input[name="on"]:checked').value;
  const button = $("send");
  button.disabled = true;
  try {
    if (!Play.conversation || Play.on !== on) {
      const c = await api("POST", "/api/agencies/" + Play.id + "/conversations", { on });
      if (!c.ok) {
        showError(slot, c.error.message);
        return;
      }
      Play.conversation = c.data.id;
      Play.on = on;
      await openEvents(c.data.id);
      $("conversation-link").replaceChildren(
        "Conversation on the " + (on === "draft" ? "draft" : "published version") + ": ",
        el("a", { href: "/conversations/" + c.data.id, id: "open-conversation" }, "open it in the conversation browser"),
      );
    }
    const title = el("h3", {}, "Turn");
    const hops = el("ol", { class: "hops" });
    const answer = el("p", { class: "answer-text" });
    const answerBox = el("div", { class: "answer", hidden: true }, el("h4", {}, "Answer"), answer);
    const error = el("p", { class: "error", hidden: true });
    const usage = el("p", { class: "hint" });
    const block = el("article", { class: "turn" }, title, el("p", { class: "you" }, el("strong", {}, "You: "), text), hops, answerBox, error, usage);
    $("turns").prepend(block);
    Play.turn = { title, hops, answer, answerBox, error, usage, started: performance.now() };
    status("chat-status", "Sent…");
    msg.value = "";
    const r = await api("POST", "/api/conversations/" + Play.conversation + "/messages", { text });
    if (!r.ok) {
      showError(error, r.error.message);
      status("chat-status", "");
      return;
    }
    setAnswer(Play.turn, r.data.answer);
    usage.textContent = r.data.hops + " hops · " + tokens(r.data.usage) + " · " + cost(r.data.cost_usd) + " · ended by " + r.data.stopped_by;
    block.classList.add("done");
    status("chat-status", "Done.");
  } finally {
    button.disabled = false;
  }
}

function initPlayground() {
  Play.id = $("playground").dataset.id;
  $("chat-form").addEventListener("submit", send);
  $("message").addEventListener("keydown", (e) => {
    if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) $("chat-form").requestSubmit();
  });
}

// ---- The conversation browser ----

async function initConversation() {
  const id = $("conversation").dataset.id;
  const [c, m] = await Promise.all([api("GET", "/api/conversations/" + id), api("GET", "/api/conversations/" + id + "/messages")]);
  if (!c.ok) {
    general(c.error.message);
    return;
  }
  $("conversation-meta").replaceChildren(
    "Started " + when(c.data.created_at) + ", " + (c.data.version === null ? "on the draft. " : "on version " + c.data.version + ". "),
    el("a", { href: "/agencies/" + c.data.agency_id }, "Its agency"),
  );
  const body = $("c-turns").querySelector("tbody");
  body.replaceChildren(
    ...c.data.turns.map((t) =>
      el(
        "tr",
        {},
        el("td", {}, t.number),
        el("td", {}, when(t.started_at)),
        el("td", {}, t.hops),
        el("td", {}, t.usage.prompt_tokens),
        el("td", {}, t.usage.completion_tokens),
        el("td", {}, t.usage.total_tokens),
        el("td", { title: t.cost_usd === null ? "A model it called has no price: set prices on its provider in the agency file." : "" }, t.cost_usd === null ? "—" : "$" + t.cost_usd),
        el("td", {}, t.error ? "error: " + t.error : t.stopped_by || "running"),
      ),
    ),
  );
  if (!m.ok) return;
  const groups = new Map();
  for (const msg of m.data) {
    const who = msg.agent === null ? "The user's transcript" : msg.agent;
    if (!groups.has(who)) groups.set(who, []);
    groups.get(who).push(msg);
  }
  $("contexts").replaceChildren(
    ...[...groups].map(([who, list]) =>
      el(
        "section",
        { class: "card context", "data-agent": who },
        el("h3", {}, who),
        el(
          "ol",
          { class: "messages" },
          ...list.map((x) =>
            el(
              "li",
              { class: "msg role-" + x.role + (x.included ? "" : " excluded") },
              el(
                "p",
                { class: "msg-head" },
                el("span", { class: "badge" }, x.role),
                " ",
                x.kind,
                x.role !== "system" && (x.from || x.to) ? " · " + (x.from || "user") + " → " + (x.to || "user") : "",
                x.usage ? " · " + tokens(x.usage) : "",
                x.latency_ms !== null && x.latency_ms !== undefined ? " · " + x.latency_ms + " ms" : "",
              ),
              x.role === "system"
                ? el("details", {}, el("summary", {}, "System prompt"), el("pre", { class: "msg-text" }, x.text))
                : el("pre", { class: "msg-text" }, x.text),
            ),
          ),
        ),
      ),
    ),
  );
}

// ---- Settings ----

async function loadProviderKeys() {
  const r = await api("GET", "/api/provider-keys");
  if (!r.ok) return;
  $("provider-keys").replaceChildren(
    ...r.data.map((k) =>
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
  if (!r.data.length) $("provider-keys").append(el("li", {}, "No stored keys."));
}

function initSettings() {
  const pw = $("password-form");
  pw.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    clearErrors(pw);
    status("password-status", "");
    const r = await api("POST", "/api/auth/password", {
      current_password: $("f-current_password").value,
      new_password: $("f-new_password").value,
    });
    if (r.ok) {
      pw.reset();
      status("password-status", "Password changed; your other sessions are logged out.");
    } else {
      showFieldErrors(pw, r.error);
    }
  });
  const pk = $("pk-form");
  pk.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    clearErrors(pk);
    const provider = $("f-pk-provider").value.trim();
    const r = await api("PUT", "/api/provider-keys/" + encodeURIComponent(provider), { key: $("f-pk-key").value });
    if (!r.ok) {
      showError($("e-pk-provider"), r.error.message);
      return;
    }
    pk.reset();
    loadProviderKeys();
  });
  loadProviderKeys();
}

// ---- Roundtable rooms ----

async function initRooms() {
  const [rooms, agencies] = await Promise.all([api("GET", "/api/rooms"), api("GET", "/api/agencies")]);
  if (!rooms.ok) {
    general(rooms.error.message);
    return;
  }
  const list = $("rooms");
  list.replaceChildren(...rooms.data.map((r) => el("li", { class: "card" }, el("h2", {}, el("a", { href: "/rooms/" + r.id }, r.name)), el("p", { class: "hint" }, "Made " + when(r.created_at)))));
  $("no-rooms").hidden = rooms.data.length > 0;
  if (agencies.ok) {
    const pick = $("f-agency");
    for (const a of agencies.data) pick.append(el("option", { value: a.id }, a.draft.name));
  }
  initDefinitions();
  $("room-form").addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const form = ev.currentTarget;
    clearErrors(form);
    const body = { name: $("f-name").value.trim() };
    if ($("f-agency").value) body.agency = $("f-agency").value;
    if (!body.name) {
      showFieldErrors(form, { fields: [{ path: "name", message: "Give the room a name." }] });
      return;
    }
    const r = await api("POST", "/api/rooms", body);
    if (r.ok) window.location.href = "/rooms/" + r.data.room.id;
    else showFieldErrors(form, r.error);
  });
}

const LIMIT = 5000;

/** Saved roles and personalities on the rooms page: listed, written, edited, deleted. */
async function initDefinitions() {
  const form = $("definition-form");
  let editing = null;
  const stopEditing = () => {
    editing = null;
    form.reset();
    $("d-kind").disabled = false;
    $("cancel-definition").hidden = true;
    $("save-definition").textContent = "Save";
  };
  const render = async () => {
    const r = await api("GET", "/api/definitions");
    if (!r.ok) {
      general(r.error.message);
      return;
    }
    $("no-definitions").hidden = r.data.length > 0;
    $("definitions").replaceChildren(
      ...r.data.map((d) =>
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
            $("d-kind").value = d.kind;
            $("d-kind").disabled = true;
            $("d-name").value = d.name;
            $("d-text").value = d.text;
            $("cancel-definition").hidden = false;
            $("save-definition").textContent = "Save changes";
            $("d-name").focus();
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
    const body = { name: $("d-name").value.trim(), text: $("d-text").value.trim() };
    const r = editing ? await api("PUT", "/api/definitions/" + editing.id, body) : await api("POST", "/api/definitions", { kind: $("d-kind").value, ...body });
    if (!r.ok) {
      showFieldErrors(form, r.error, "d-");
      return;
    }
    stopEditing();
    render();
  });
  render();
}

/** The room page's state: its agents, and each message's element by id (rendered once, then appended to). */
const Room = { id: null, agents: new Map(), shown: new Map(), pending: new Map(), events: null, messages: new Map(), replyTo: null };

/** A participant's colour if it is one (`#rgb` … `#rrggbbaa`), else the muted one. */
function colourOf(agentId) {
  const p = Room.agents.get(agentId);
  return p && /^#[0-9a-fA-F]{3,8}$/.test(p.colour) ? p.colour : "var(--muted)";
}

function renderPills() {
  const pills = [...Room.agents.values()].map((p) => {
    const toggle = el(
      "button",
      { type: "button", class: "pill" + (p.enabled ? " on" : ""), "data-agent": p.name, "aria-pressed": p.enabled ? "true" : "false", title: (p.enabled ? "Enabled" : "Disabled") + " · " + (p.kind === "bot" ? "bot at " + p.bot.endpoint + (p.bot.emulates ? ", emulating " + p.bot.emulates : "") + " (answers when tagged or replied to)" : p.model) + (p.role ? " · " + p.role : "") + " · click to " + (p.enabled ? "disable" : "enable"), onclick: () => setEnabled(p, !p.enabled) },
      p.name,
      ...(p.kind === "bot" ? [" ", el("small", { class: "pill-kind" }, "bot")] : []),
    );
    toggle.style.setProperty("--agent", colourOf(p.id));
    const remove = el("button", { type: "button", class: "pill-remove", "data-agent": p.name, "aria-label": "Remove " + p.name, title: "Remove " + p.name, onclick: () => removeParticipant(p) }, "×");
    return el("li", {}, toggle, remove);
  });
  if (!pills.length) pills.push(el("li", { class: "hint" }, "No agents yet: add one, or talk alone."));
  $("pills").replaceChildren(...pills);
}

async function setEnabled(p, enabled) {
  const r = await api("PATCH", "/api/rooms/" + Room.id + "/participants/" + p.id, { enabled });
  if (!r.ok) {
    general(r.error.message);
    return;
  }
  Room.agents.set(r.data.id, r.data);
  renderPills();
  const pill = $("pills").querySelector('button.pill[data-agent="' + CSS.escape(r.data.name) + '"]');
  if (pill) pill.focus();
}

async function removeParticipant(p) {
  if (!window.confirm("Remove " + p.name + " from the room? Its messages stay.")) return;
  const r = await api("DELETE", "/api/rooms/" + Room.id + "/participants/" + p.id);
  if (!r.ok) {
    general(r.error.message);
    return;
  }
  Room.agents.delete(p.id);
  renderPills();
}

/** Shows a message, once: in its place by `seq` (answers may be stored out of arrival order). */
function showMessage(m) {
  if (Room.shown.has(m.id)) {
    setIncluded(m.id, m.included);
    return;
  }
  const li = buildMessage(m);
  const list = $("room-messages");
  // Follow the conversation only if the reader is at its end (not reading back).
  const atEnd = list.scrollHeight - list.scrollTop - list.clientHeight < 40;
  let after = list.lastElementChild;
  while (after && Number(after.dataset.seq) > m.seq) after = after.previousElementSibling;
  if (after) after.after(li);
  else list.prepend(li);
  if (atEnd || m.kind === "person") list.scrollTop = list.scrollHeight;
  if (m.kind !== "person" && m.agent_id) donePending(m.agent_id);
}

/** A command for the room's utility bot (`/register ...`), as the server reads one. */
function isCommand(m) {
  return m.kind === "person" && /^\s*\/\p{L}/u.test(m.text);
}

/** Who wrote a message, as the room shows it. */
function authorOf(m) {
  return m.kind === "person" ? "You" : m.agent || "agent";
}

/** A message's element: the author (you, or the agent in its colour), what it replies to and tags, its text, the checkbox, Reply or Retry. */
function buildMessage(m) {
  Room.messages.set(m.id, m);
  const agent = m.agent || "agent";
  const author = el("strong", { class: "author" }, authorOf(m));
  if (m.kind === "agent" || m.kind === "error") author.style.color = colourOf(m.agent_id);
  const head = el("p", { class: "msg-head" }, author);
  const body = el("p", { class: "msg-text" }, m.text);
  const parts = [head];
  const parent = m.reply_to && Room.messages.get(m.reply_to);
  if (m.reply_to) parts.push(el("p", { class: "reply-to" }, "↪ replying to " + (parent ? authorOf(parent) + ": “" + parent.text.slice(0, 80) + (parent.text.length > 80 ? "…" : "") + "”" : "an earlier message")));
  const tagged = (m.tagged || []).map((id) => (Room.agents.get(id) || {}).name).filter(Boolean);
  if (tagged.length && m.kind !== "person") parts.push(el("p", { class: "tags" }, "tags " + tagged.map((n) => "@" + n).join(" ")));
  parts.push(body);
  const li = el("li", { class: "room-msg kind-" + m.kind + (m.included || m.kind === "error" || m.kind === "utility" ? "" : " excluded"), "data-id": m.id, "data-seq": m.seq }, ...parts);
  if (m.kind === "agent" || m.kind === "error") li.style.setProperty("--agent", colourOf(m.agent_id));
  let box = null;
  if (m.kind === "utility" || isCommand(m)) {
    // Commands and the utility bot's answers are never in a context.
  } else if (m.kind === "error") {
    head.append(" ", el("span", { class: "badge danger" }, "failed"));
    body.classList.add("error");
    if (m.agent_id) head.append(" ", el("button", { type: "button", class: "retry", "data-agent": agent, onclick: () => retry(m.agent_id) }, "Retry"));
  } else {
    box = el("input", { type: "checkbox", class: "included", checked: m.included, "aria-label": "Include in the agents' context", onchange: () => toggleIncluded(m.id, box) });
    head.prepend(el("label", { class: "include", title: "Include in the agents' context" }, box));
    head.append(el("button", { type: "button", class: "reply", "aria-label": "Reply to this message of " + authorOf(m), onclick: () => replyTo(m) }, "Reply"));
  }
  Room.shown.set(m.id, { li, box });
  return li;
}

function setIncluded(id, included) {
  const m = Room.shown.get(id);
  if (!m || !m.box) return; // failures are never in a context
  m.box.checked = included;
  m.li.classList.toggle("excluded", !included);
}

async function toggleIncluded(id, box) {
  const included = box.checked;
  box.disabled = true;
  const r = await api("PATCH", "/api/rooms/" + Room.id + "/messages/" + id, { included });
  box.disabled = false;
  if (!r.ok) {
    box.checked = !included;
    general(r.error.message);
    return;
  }
  setIncluded(id, included);
}

/** Makes the next message a reply to `m` (its author is asked to answer it). */
function replyTo(m) {
  Room.replyTo = m ? m.id : null;
  $("replying").hidden = !m;
  $("replying-to").textContent = m ? authorOf(m) + ": “" + m.text.slice(0, 60) + (m.text.length > 60 ? "…" : "") + "”" : "";
  if (m) $("message").focus();
}

/** A bot's caller key, from the answer to `/register`: shown until dismissed, never again. */
function showCallerKey(bot, key) {
  $("caller-key-bot").textContent = "@" + bot;
  $("caller-key-value").textContent = key;
  $("caller-key").hidden = false;
}

async function retry(agentId) {
  const r = await api("POST", "/api/rooms/" + Room.id + "/participants/" + agentId + "/retry");
  if (!r.ok) general(r.error.message);
  else status("chat-status", "Asked " + (Room.agents.get(agentId) || { name: "the agent" }).name + " again.");
}

/** An agent answering: shown from `agent_started` until its message, with its streamed text. */
function startPending(agentId) {
  if (Room.pending.has(agentId)) return Room.pending.get(agentId);
  const p = Room.agents.get(agentId);
  const name = p ? p.name : "An agent";
  const text = el("span", { class: "msg-text" });
  const li = el("li", { class: "pending-agent", "data-agent": name }, el("strong", { class: "author" }, name), " ", el("span", { class: "hint" }, "is answering…"), " ", text);
  li.querySelector(".author").style.color = colourOf(agentId);
  li.style.setProperty("--agent", colourOf(agentId));
  $("pending").append(li);
  const entry = { li, text };
  Room.pending.set(agentId, entry);
  return entry;
}

function donePending(agentId) {
  const p = Room.pending.get(agentId);
  if (!p) return;
  p.li.remove();
  Room.pending.delete(agentId);
}

/** Reads the room again: its agents, and any message not shown yet (after a reconnect). */
async function syncRoom() {
  const r = await api("GET", "/api/rooms/" + Room.id);
  if (!r.ok) {
    general(r.error.message);
    return false;
  }
  $("room-name").textContent = r.data.room.name;
  document.title = r.data.room.name + " · Agency";
  Room.agents = new Map(r.data.participants.map((p) => [p.id, p]));
  renderPills();
  const fresh = r.data.messages.filter((m) => !Room.shown.has(m.id));
  if (Room.shown.size === 0) {
    // First load: build the whole list off the page and attach it once.
    const frag = document.createDocumentFragment();
    for (const m of fresh) frag.append(buildMessage(m));
    $("room-messages").append(frag);
  } else {
    for (const m of r.data.messages) showMessage(m);
  }
  return true;
}

function openRoomEvents() {
  return new Promise((resolve) => {
    const es = new EventSource("/api/rooms/" + Room.id + "/events");
    Room.events = es;
    let opened = false;
    es.addEventListener("open", () => {
      if (opened) syncRoom(); // reconnected: catch up on what was missed
      opened = true;
      resolve();
    });
    es.addEventListener("error", () => resolve(), { once: true });
    es.addEventListener("message", (e) => showMessage(JSON.parse(e.data)));
    es.addEventListener("agent_started", (e) => startPending(JSON.parse(e.data).agent));
    es.addEventListener("delta", (e) => {
      const d = JSON.parse(e.data);
      startPending(d.agent).text.append(d.text);
    });
    es.addEventListener("included", (e) => {
      const d = JSON.parse(e.data);
      setIncluded(d.message, d.included);
    });
    es.addEventListener("participants", () => syncRoom());
  });
}

function chars(text) {
  let n = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c < 0xdc00 || c > 0xdfff) n++; // a low surrogate ends a character already counted
  }
  return n;
}

function updateCounter() {
  const n = chars($("message").value);
  const c = $("counter");
  c.textContent = n + " / " + LIMIT;
  c.classList.toggle("over", n > LIMIT);
  if (n > LIMIT) c.textContent += " — " + (n - LIMIT) + " too many";
}

async function sendToRoom(ev) {
  ev.preventDefault();
  const msg = $("message");
  const slot = $("chat-error");
  slot.hidden = true;
  slot.textContent = "";
  msg.removeAttribute("aria-invalid");
  const text = msg.value;
  const problem = !text.trim() ? "Write a message first." : chars(text) > LIMIT ? "At most " + LIMIT + " characters: shorten it by " + (chars(text) - LIMIT) + "." : null;
  if (problem) {
    showError(slot, problem);
    msg.setAttribute("aria-invalid", "true");
    msg.focus();
    return;
  }
  const button = $("send");
  button.disabled = true;
  status("chat-status", "Sending…");
  try {
    const body = { text };
    if (Room.replyTo) body.reply_to = Room.replyTo;
    const r = await api("POST", "/api/rooms/" + Room.id + "/messages", body);
    if (!r.ok) {
      showError(slot, r.error.message);
      msg.setAttribute("aria-invalid", "true");
      status("chat-status", "");
      return;
    }
    showMessage(r.data.message);
    msg.value = "";
    updateCounter();
    replyTo(null);
    if (r.data.caller_key) showCallerKey(text.trim().split(/\s+/)[1].replace(/^@/, ""), r.data.caller_key);
    const command = isCommand({ kind: "person", text });
    const names = r.data.answering.map((id) => (Room.agents.get(id) || { name: "?" }).name);
    status("chat-status", command ? "The utility bot answered." : names.length ? "Answering: " + names.join(", ") + "." : "No agent is asked: your message is stored.");
  } finally {
    button.disabled = false;
  }
}

/** The saved roles and personalities, as choices of the add-agent form; picking one hides the field for its own text. */
async function loadSavedPersonas() {
  const r = await api("GET", "/api/definitions");
  if (!r.ok) return;
  for (const kind of ["role", "personality"]) {
    const pick = $("f-" + kind + "-id");
    for (const d of r.data.filter((d) => d.kind === kind)) pick.append(el("option", { value: d.id, title: d.text }, d.name));
    const own = $("f-" + kind);
    pick.addEventListener("change", () => {
      own.hidden = !!pick.value;
      if (pick.value) own.value = "";
    });
  }
}

async function addAgentToRoom(ev) {
  ev.preventDefault();
  const form = ev.currentTarget;
  clearErrors(form);
  const body = { name: $("f-name").value.trim(), model: $("f-model").value.trim() };
  for (const k of ["role", "personality", "instructions"]) {
    const saved = $("f-" + k + "-id");
    if (saved && saved.value) {
      body[k + "_id"] = saved.value;
      continue;
    }
    const v = $("f-" + k).value.trim();
    if (v) body[k] = v;
  }
  const r = await api("POST", "/api/rooms/" + Room.id + "/participants", body);
  if (!r.ok) {
    showFieldErrors(form, r.error);
    return;
  }
  Room.agents.set(r.data.id, r.data);
  renderPills();
  form.reset();
  $("f-role").hidden = false;
  $("f-personality").hidden = false;
  $("f-name").focus();
}

async function initRoom() {
  Room.id = $("room").dataset.id;
  $("room-chat").addEventListener("submit", sendToRoom);
  loadSavedPersonas();
  $("replying-cancel").addEventListener("click", () => replyTo(null));
  $("delete-room").addEventListener("click", async () => {
    if (!window.confirm("Delete this room with all its messages? This cannot be undone.")) return;
    const r = await api("DELETE", "/api/rooms/" + Room.id);
    if (r.ok) window.location.href = "/rooms";
    else general(r.error.message);
  });
  $("caller-key-done").addEventListener("click", () => {
    $("caller-key").hidden = true;
    $("caller-key-value").textContent = "";
  });
  $("agent-form").addEventListener("submit", addAgentToRoom);
  const msg = $("message");
  msg.addEventListener("input", updateCounter);
  msg.addEventListener("keydown", (e) => {
    if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) $("room-chat").requestSubmit();
  });
  // Listen first, then read: nothing said in between is lost (messages are shown once, by id).
  await openRoomEvents();
  if (await syncRoom()) {
    const list = $("room-messages");
    list.scrollTop = list.scrollHeight;
    $("room").dataset.ready = "true";
  }
}

// ---- Start ----

document.addEventListener("DOMContentLoaded", () => {
  const page = document.body.dataset.page;
  const init = { home: initHome, agency: initAgency, playground: initPlayground, conversation: initConversation, settings: initSettings, rooms: initRooms, room: initRoom }[page];
  if (init) init();
});
