// @ts-check
// An agency's page: the editor, its published versions, its API keys and its conversations.

import { api } from "./api.js";
import { $, data, el, fillList, status } from "./dom.js";
import { Editor } from "./editor.js";
import { clearErrors, general, showError, showFieldErrors } from "./errors.js";
import { when } from "./format.js";

const id = data("agency", "id");
/** The agency's name as the page was rendered (the model name clients give `/v1`). */
const agencyName = data("agency", "name");

/**
 * The lines of `a` and `b` as a diff: each line with `-` (only in a), `+` (only in b) or ` `.
 * A longest common subsequence, which files of an agency's size afford.
 * @param {string[]} a
 * @param {string[]} b
 * @returns {[string, string][]}
 */
function diff(a, b) {
  const n = a.length;
  const m = b.length;
  /** @type {Uint32Array[]} */
  const lcs = Array.from({ length: n + 1 }, () => new Uint32Array(m + 1));
  for (let i = n - 1; i >= 0; i--) for (let j = m - 1; j >= 0; j--) lcs[i][j] = a[i] === b[j] ? lcs[i + 1][j + 1] + 1 : Math.max(lcs[i + 1][j], lcs[i][j + 1]);
  /** @type {[string, string][]} */
  const out = [];
  let i = 0;
  let j = 0;
  while (i < n || j < m) {
    if (i < n && j < m && a[i] === b[j]) {
      out.push([" ", a[i]]);
      i++;
      j++;
    } else if (i < n && (j === m || lcs[i + 1][j] >= lcs[i][j + 1])) out.push(["-", a[i++]]);
    else out.push(["+", b[j++]]);
  }
  return out;
}

/** Says whether the saved draft differs from the published version, and shows how. */
async function compareDraft() {
  const a = await api("GET", "/api/agencies/" + id);
  const badge = $("draft-state");
  const box = $("draft-diff");
  if (!a.ok || !a.data.published_version) {
    badge.hidden = false;
    badge.className = "badge";
    badge.textContent = "draft only";
    box.hidden = true;
    return;
  }
  const v = a.data.published_version;
  const [draft, published] = await Promise.all([api("GET", "/api/agencies/" + id + "/export"), api("GET", "/api/agencies/" + id + "/versions/" + v)]);
  if (!draft.ok || !published.ok || typeof draft.data !== "string") return;
  const lines = diff(published.data.file.split("\n"), draft.data.split("\n"));
  const changed = lines.filter(([k]) => k !== " ").length;
  badge.hidden = false;
  if (!changed) {
    badge.className = "badge ok";
    badge.textContent = "draft is v" + v;
    box.hidden = true;
    return;
  }
  badge.className = "badge warn";
  badge.textContent = "draft differs from v" + v;
  box.hidden = false;
  // The changed lines with two lines of context around each.
  const near = (/** @type {number} */ i) => lines.slice(Math.max(0, i - 2), i + 3).some(([k]) => k !== " ");
  $("draft-diff-lines").replaceChildren(
    ...lines.flatMap(([k, text], i) => (near(i) ? [el("span", { class: k === "+" ? "add" : k === "-" ? "del" : "same" }, k + " " + text + "\n")] : i > 0 && near(i - 1) ? [el("span", { class: "gap" }, "…\n")] : [])),
  );
}

/**
 * Copies the text of the element `from` (a key or a snippet), and says so on `button`.
 * @param {HTMLButtonElement} button
 * @param {string} from
 */
async function copy(button, from) {
  const text = $(from).textContent || "";
  const label = button.textContent;
  try {
    await navigator.clipboard.writeText(text);
    button.textContent = "Copied";
  } catch {
    // No clipboard (an insecure origin): select it for Ctrl+C.
    const range = document.createRange();
    range.selectNodeContents($(from));
    const sel = window.getSelection();
    if (sel) {
      sel.removeAllRanges();
      sel.addRange(range);
    }
    button.textContent = "Selected: press Ctrl+C";
  }
  setTimeout(() => (button.textContent = label), 2000);
}

async function loadVersions() {
  const [a, v] = await Promise.all([api("GET", "/api/agencies/" + id), api("GET", "/api/agencies/" + id + "/versions")]);
  if (a.ok) {
    $("published-now").textContent = a.data.published_version
      ? "Its API serves version " + a.data.published_version + "."
      : "Draft only: publish it to make it reachable through its API.";
  }
  if (v.ok) {
    $("versions").replaceChildren(
      .../** @type {{ version: number, published_at: string }[]} */ (v.data).map((x) =>
        el(
          "li",
          {},
          el("a", { href: "/agencies/" + id + "/versions/" + x.version }, "Version " + x.version),
          " — published " + when(x.published_at),
        ),
      ),
    );
  }
}

/** @typedef {{ name: string, prefix: string, created_at: string, expires_at: string | null, last_used_at: string | null, state: string, budget_usd: number | null, budget_period: string, user_budget_usd: number | null, spent_usd: number | null }} Key */

/** @param {number} usd */
function dollars(usd) {
  return "$" + (usd < 1 ? usd.toFixed(4) : usd.toFixed(2));
}

/** A key's budgets and what it spent this period. @param {Key} k */
function budgetText(k) {
  const parts = [];
  if (k.budget_usd !== null) parts.push(dollars(k.spent_usd || 0) + " of " + dollars(k.budget_usd) + " a " + k.budget_period);
  if (k.user_budget_usd !== null) parts.push(dollars(k.user_budget_usd) + " a " + k.budget_period + " per end user");
  return parts.length ? parts.join("; ") : "none";
}

/** What the agency spent against its budget, this period. */
async function loadAgencySpend() {
  const r = await api("GET", "/api/agencies/" + id + "/spend");
  if (!r.ok) return;
  /** @type {{ period_start: string, spent_usd: number }[]} */
  const periods = r.data;
  $("agency-spend").textContent = periods.length
    ? "The agency spent " + dollars(periods[0].spent_usd) + " against its budget since " + when(periods[0].period_start) + "."
    : "";
}

async function loadKeys() {
  const r = await api("GET", "/api/agencies/" + id + "/keys");
  if (!r.ok) return;
  /** @type {Key[]} */
  const keys = r.data;
  const body = $("keys", HTMLTableElement).tBodies[0];
  body.replaceChildren(
    ...keys.map((k) =>
      el(
        "tr",
        { "data-key": k.name },
        el("td", {}, k.name),
        el("td", {}, el("code", {}, k.prefix + "…")),
        el("td", {}, when(k.created_at)),
        el("td", {}, k.expires_at ? when(k.expires_at) : "never"),
        el("td", {}, k.last_used_at ? when(k.last_used_at) : "never"),
        el("td", {}, budgetText(k)),
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
  if (!keys.length) body.append(el("tr", {}, el("td", { colspan: 8 }, "No keys yet.")));
}

/** @param {string} name */
async function revoke(name) {
  if (!window.confirm("Revoke the key " + name + "? Clients using it are refused from now on; this cannot be undone.")) return;
  const r = await api("DELETE", "/api/agencies/" + id + "/keys/" + encodeURIComponent(name));
  if (!r.ok) general(r.error.message);
  status("status", r.ok ? "Key " + name + " revoked." : "");
  loadKeys();
}

/** @param {SubmitEvent} ev */
async function createKey(ev) {
  ev.preventDefault();
  const form = $("key-form", HTMLFormElement);
  clearErrors(form);
  $("new-key").hidden = true;
  const name = $("f-key-name", HTMLInputElement).value.trim();
  const expires = $("f-key-expires", HTMLInputElement).value.trim();
  if (!name) {
    showError($("e-key-name"), "Give the key a name.");
    $("f-key-name").setAttribute("aria-invalid", "true");
    $("f-key-name").focus();
    return;
  }
  const budget = $("f-key-budget_usd", HTMLInputElement).value.trim();
  const userBudget = $("f-key-user_budget_usd", HTMLInputElement).value.trim();
  const r = await api("POST", "/api/agencies/" + id + "/keys", {
    name,
    expires_in: expires || null,
    budget_usd: budget || null,
    budget_period: $("f-key-budget_period", HTMLSelectElement).value,
    user_budget_usd: userBudget || null,
  });
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
  const base = location.origin + "/v1";
  $("snippet-python").textContent = [
    "from openai import OpenAI",
    "",
    'client = OpenAI(base_url="' + base + '", api_key="' + r.data.key + '")',
    'reply = client.chat.completions.create(model="' + agencyName + '", messages=[{"role": "user", "content": "Hello"}])',
    "print(reply.choices[0].message.content)",
  ].join("\n");
  $("snippet-curl").textContent = [
    "curl " + base + "/chat/completions \\",
    '  -H "Authorization: Bearer ' + r.data.key + '" \\',
    "  -H 'content-type: application/json' \\",
    "  -d '" + JSON.stringify({ model: agencyName, messages: [{ role: "user", content: "Hello" }] }).replace(/'/g, "'\\''") + "'",
  ].join("\n");
  const mcpServer = { type: "http", url: location.origin + "/api/agency/" + encodeURIComponent(agencyName) + "/mcp", headers: { Authorization: "Bearer " + r.data.key } };
  $("snippet-mcp").textContent = JSON.stringify({ mcpServers: { [agencyName]: mcpServer } }, null, 2);
  a2aSnippets(r.data.key);
  await mqttSnippet(r.data.key);
  $("new-key").hidden = false;
  form.reset();
  loadKeys();
}

/**
 * The A2A snippets beside the OpenAI ones: the agency as an A2A agent.
 * @param {string} key
 */
function a2aSnippets(key) {
  const a2a = location.origin + "/api/agency/" + encodeURIComponent(agencyName) + "/a2a";
  $("a2a-card").textContent = a2a + "/.well-known/agent-card.json";
  $("snippet-a2a-python").textContent = [
    "import asyncio, httpx",
    "from a2a.client import ClientConfig, create_client",
    "from a2a.types import a2a_pb2 as a2a",
    "",
    'AUTH = {"Authorization": "Bearer ' + key + '"}',
    "",
    "async def main():",
    "    config = ClientConfig(httpx_client=httpx.AsyncClient(headers=AUTH, timeout=120))",
    '    client = await create_client("' + a2a + '", client_config=config, resolver_http_kwargs={"headers": AUTH})',
    '    message = a2a.Message(message_id="1", role=a2a.ROLE_USER, parts=[a2a.Part(text="Hello")])',
    "    async for event in client.send_message(a2a.SendMessageRequest(message=message)):",
    "        print(event)",
    "",
    "asyncio.run(main())",
  ].join("\n");
  const body = {
    jsonrpc: "2.0",
    id: 1,
    method: "SendMessage",
    params: { message: { messageId: "1", role: "ROLE_USER", parts: [{ text: "Hello" }] } },
  };
  $("snippet-a2a-curl").textContent = [
    "curl " + a2a + " \\",
    '  -H "Authorization: Bearer ' + key + '" \\',
    "  -H 'A2A-Version: 1.0' -H 'content-type: application/json' \\",
    "  -d '" + JSON.stringify(body).replace(/'/g, "'\\''") + "'",
  ].join("\n");
}

/**
 * The MQTT snippet: a conversation with the manager on the agency's XMAGS topics, with
 * Mosquitto's clients; the key logs in (the embedded broker) and goes with each message.
 * @param {string} key
 */
async function mqttSnippet(key) {
  const a = await api("GET", "/api/agencies/" + id);
  if (!a.ok) return;
  /** @type {{ manager: string, agents: { name: string, handle?: string | null }[] }} */
  const draft = a.data.draft;
  const manager = draft.agents.find((g) => g.name === draft.manager);
  const agent = manager?.handle || draft.manager;
  const team = a.data.mqtt_team;
  // A UUID (crypto.randomUUID is only on https and localhost).
  const hex = Array.from(crypto.getRandomValues(new Uint8Array(16)), (b) => b.toString(16).padStart(2, "0")).join("");
  const cid = [hex.slice(0, 8), hex.slice(8, 12), "4" + hex.slice(13, 16), "8" + hex.slice(17, 20), hex.slice(20)].join("-");
  const q = (/** @type {string} */ s) => "'" + s.replace(/'/g, "'\\''") + "'";
  const login = "-V mqttv5 -h " + location.hostname + " -p 1883 -u key -P " + q(key);
  const pub = "mosquitto_pub " + login + " -D publish user-property authorization " + q("Bearer " + key);
  $("mqtt-team").textContent = team;
  $("snippet-mqtt").textContent = [
    "mosquitto_sub " + login + " -t " + q("XMAGS/" + team + "/EVT/#") + " -v &",
    pub + " -t " + q("XMAGS/" + team + "/CMD/chat_new/" + agent) + " -m " + q(JSON.stringify({ agent_id: agent, conversation_id: cid, content: " " })),
    pub + " -t " + q("XMAGS/" + team + "/DATA/chat/" + agent + "/" + cid) + " -m " + q(JSON.stringify({ agent_id: agent, conversation_id: cid, content: "Hello" })),
  ].join("\n");
}

async function loadConversations() {
  const r = await api("GET", "/api/agencies/" + id + "/conversations");
  if (!r.ok) return;
  /** @type {{ id: string, created_at: string, version: number | null }[]} */
  const list = r.data;
  fillList(
    "conversations",
    list,
    (c) => [el("a", { href: "/conversations/" + c.id }, when(c.created_at)), " — " + (c.version === null ? "on the draft" : "on version " + c.version)],
    "None yet: try the playground.",
  );
}

/** Shows where the agency's approvals are announced, if anywhere. */
async function loadWebhook() {
  const r = await api("GET", "/api/agencies/" + id + "/approval-webhook");
  const input = $("f-webhook-url", HTMLInputElement);
  if (r.ok) {
    $("webhook-now").textContent = "Announced at " + r.data.url + " since " + when(r.data.created_at) + ".";
    input.value = r.data.url;
    $("remove-webhook").hidden = false;
  } else {
    $("webhook-now").textContent = "None: calls waiting for approval are asked in the web UI, the API and the faces that ask their clients.";
    $("remove-webhook").hidden = true;
  }
}

/**
 * Sets the webhook's URL; its new signing secret is shown, this once.
 * @param {SubmitEvent} ev
 */
async function setWebhook(ev) {
  ev.preventDefault();
  const input = $("f-webhook-url", HTMLInputElement);
  const slot = $("e-webhook-url");
  slot.hidden = true;
  input.removeAttribute("aria-invalid");
  const r = await api("PUT", "/api/agencies/" + id + "/approval-webhook", { url: input.value.trim() });
  if (!r.ok) {
    slot.textContent = r.error.message;
    slot.hidden = false;
    input.setAttribute("aria-invalid", "true");
    input.focus();
    return;
  }
  $("webhook-secret").textContent = r.data.secret;
  $("new-webhook-secret").hidden = false;
  await loadWebhook();
}

async function removeWebhook() {
  const r = await api("DELETE", "/api/agencies/" + id + "/approval-webhook");
  if (!r.ok) {
    general(r.error.message);
    return;
  }
  $("new-webhook-secret").hidden = true;
  $("f-webhook-url", HTMLInputElement).value = "";
  await loadWebhook();
}

$("key-form").addEventListener("submit", createKey);
$("webhook-form").addEventListener("submit", setWebhook);
$("remove-webhook").addEventListener("click", removeWebhook);
for (const b of document.querySelectorAll("button.copy")) {
  if (b instanceof HTMLButtonElement) b.addEventListener("click", () => copy(b, b.dataset.copy || ""));
}
const r = await api("GET", "/api/agencies/" + id);
if (!r.ok) {
  general(r.error.message);
} else {
  const editor = new Editor(
    id,
    r.data.draft,
    () => {
      loadVersions();
      compareDraft();
    },
    compareDraft,
  );
  compareDraft();
  editor.render();
  status("status", "");
  editor.preview();
  loadVersions();
  loadKeys();
  loadAgencySpend();
  loadConversations();
  loadWebhook();
}
