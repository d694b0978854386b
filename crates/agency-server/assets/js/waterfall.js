// @ts-check
// A turn's waterfall: an SVG with one lane per agent (and the user), each agent's model calls
// and tool calls as bars on a time axis from the turn's start, and the turn's hops (its trace
// entries) as arrows from the sender's lane to the receiver's at the time each was written.
// Drawn by hand from the trace's `at` and `latency_ms`: a model call is `[at - latency_ms, at]`
// on the lane of the agent that replied, a tool call `[at - latency_ms, at]` of its result on
// the calling agent's lane. The deliveries of one reply share its call: an agent calls its
// model again only after something reached it, so an entry from an agent that received nothing
// since its last call is that call's. `spent` sums the same calls for the per-agent table, so
// the two agree. A recorded turn's approvals add, on the calling agent's tool row, how long
// each call waited for a person (from when it was asked to when it was answered).

import { svg } from "./dom.js";
import { tokens } from "./format.js";

const W = 720;
const LABEL = 150;
const RIGHT = 20;
const LANE = 48;
const TOP = 8;
const AXIS = 54;
/** Each drawing's arrowhead has its own id: a page may show several turns. */
let drawn = 0;

/**
 * A trace entry, as the API and the conversation's `hop` events send it.
 * @typedef {{ from: string, to: string, kind: string, text: string, usage: import("./format.js").Usage | null,
 *   latency_ms: number | null, tool?: string, is_error?: boolean, at: string }} Hop
 */
/** @typedef {{ lane: string, start: number, end: number, ms: number, usage: import("./format.js").Usage | null, what: string }} Bar */
/** @typedef {{ agent: string, cost_usd: string | null }} AgentCost */
/**
 * An approval as a turn's record gives it (see approval.js), the parts drawn here.
 * @typedef {{ agent: number, agent_name: string | null, tool: string, state: string, asked_at: string,
 *   answered_at: string | null, answered_by: string | null }} Asked
 */

/**
 * When a hop was written, in milliseconds, to the microsecond the server gives (a `Date`
 * keeps only milliseconds, and a turn on the rules model takes a few).
 * @param {Hop} h
 */
function time(h) {
  const frac = /\.(\d+)/.exec(h.at);
  return new Date(h.at.replace(/\.\d+/, "")).getTime() + (frac ? Number("0." + frac[1]) * 1000 : 0);
}

/**
 * The turn's lanes (the user first, then each agent as it first appears), its model calls and
 * its tool calls.
 * @param {Hop[]} trace
 */
export function calls(trace) {
  /** @type {string[]} */
  const lanes = ["user"];
  /** @param {string} name */
  const lane = (name) => {
    if (!lanes.includes(name)) lanes.push(name);
  };
  for (const h of trace) {
    if (h.kind !== "tool_result") lane(h.from);
    if (h.kind !== "tool_call") lane(h.to);
  }
  /** @type {Bar[]} */
  const model = [];
  /** @type {Bar[]} */
  const tools = [];
  /** @type {Map<string, Bar>} each agent's last model call */
  const last = new Map();
  /** @type {Set<string>} agents something reached since their last call */
  const reached = new Set();
  for (const h of trace) {
    const end = time(h);
    if (h.kind === "tool_result") {
      if (h.latency_ms != null) tools.push({ lane: h.to, start: end - h.latency_ms, end, ms: h.latency_ms, usage: null, what: h.from });
    } else if (h.latency_ms != null) {
      // A correction carries the call whose reply could not be routed: the addressee's.
      const who = h.kind === "correction" ? h.to : h.from;
      if (who !== "user" && who !== "agency" && (!last.has(who) || reached.has(who))) {
        const bar = { lane: who, start: end - h.latency_ms, end, ms: h.latency_ms, usage: h.usage, what: "model call" };
        model.push(bar);
        last.set(who, bar);
        reached.delete(who);
      }
    }
    if (h.kind !== "tool_call") reached.add(h.to);
  }
  return { lanes, model, tools };
}

/**
 * What each agent spent in a turn, from its calls: messages sent, tokens, model time, tool time
 * (agents in the order they first sent something).
 * @param {Hop[]} trace
 */
export function spent(trace) {
  /** @type {Map<string, { messages: number, prompt: number, completion: number, ms: number, toolMs: number }>} */
  const by = new Map();
  /** @param {string} name */
  const of = (name) => {
    let x = by.get(name);
    if (!x) {
      x = { messages: 0, prompt: 0, completion: 0, ms: 0, toolMs: 0 };
      by.set(name, x);
    }
    return x;
  };
  for (const h of trace) {
    if (h.from === "user" || h.from === "agency" || !["delivery", "answer", "tool_call"].includes(h.kind)) continue;
    of(h.from).messages++;
  }
  const { model, tools } = calls(trace);
  for (const c of model) {
    const x = of(c.lane);
    if (c.usage) {
      x.prompt += c.usage.prompt_tokens;
      x.completion += c.usage.completion_tokens;
    }
    x.ms += c.ms;
  }
  for (const t of tools) of(t.lane).toolMs += t.ms;
  return by;
}

/**
 * An agent's cost in a turn, as the pages write it.
 * @param {AgentCost[]} costs
 * @param {string} name
 */
export function agentCost(costs, name) {
  const c = costs.find((x) => x.agent === name);
  return !c ? "—" : c.cost_usd === null ? "no price" : "$" + c.cost_usd;
}

/**
 * A duration on the axis.
 * @param {number} ms
 */
function span(ms) {
  return ms >= 2000 ? (ms / 1000).toFixed(ms >= 20000 ? 0 : 1) + " s" : Math.round(ms) + " ms";
}

export class Waterfall {
  /**
   * @param {HTMLElement} box where the drawing goes
   * @param {string} label what the drawing is, for screen readers
   */
  constructor(box, label) {
    this.box = box;
    this.label = label;
    /** @type {Hop[]} */
    this.trace = [];
    /** @type {AgentCost[]} */
    this.costs = [];
    /** @type {Bar[]} how long calls waited for a person */
    this.waits = [];
    this.marker = "wf-arrow-" + ++drawn;
    /** Whether it shows the turn's record: hops that trail it are in it already. */
    this.recorded = false;
  }

  /**
   * A hop as it happens: drawn at once.
   * @param {Hop} h
   */
  add(h) {
    if (this.recorded) return;
    this.trace.push(h);
    this.draw();
  }

  /**
   * The turn as recorded, with what each agent's calls cost and the approvals it asked for.
   * @param {Hop[]} trace
   * @param {AgentCost[]} costs
   * @param {Asked[]} [approvals]
   */
  show(trace, costs, approvals) {
    this.trace = [...trace];
    this.costs = costs;
    this.waits = (approvals || [])
      .filter((a) => a.answered_at)
      .map((a) => {
        const start = new Date(a.asked_at).getTime();
        const end = new Date(a.answered_at || a.asked_at).getTime();
        const who = a.state + (a.answered_by ? " by " + a.answered_by : "");
        return { lane: a.agent_name || "agent " + a.agent, start, end, ms: end - start, usage: null, what: a.tool + ", " + who };
      })
      .filter((w) => !Number.isNaN(w.ms));
    this.recorded = true;
    this.draw();
  }

  draw() {
    const trace = this.trace.filter((h) => !Number.isNaN(time(h)));
    if (!trace.length) {
      this.box.replaceChildren();
      return;
    }
    const { lanes, model, tools } = calls(trace);
    const waits = this.waits;
    for (const w of waits) if (!lanes.includes(w.lane)) lanes.push(w.lane);
    const by = spent(trace);
    const bars = [...model, ...tools, ...waits];
    const origin = Math.min(...trace.map(time), ...bars.map((b) => b.start));
    const last = Math.max(...trace.map(time), ...bars.map((b) => b.end));
    const total = Math.max(last - origin, 1);
    const plot = W - LABEL - RIGHT;
    /** @param {number} t */
    const x = (t) => LABEL + ((t - origin) / total) * plot;
    /** @param {string} name */
    const top = (name) => TOP + lanes.indexOf(name) * LANE;
    const H = TOP + lanes.length * LANE + AXIS + (waits.length ? 20 : 0);
    const arrow = svg(
      "marker",
      { id: this.marker, viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 8, markerHeight: 8, markerUnits: "userSpaceOnUse", orient: "auto-start-reverse" },
      svg("path", { d: "M0,0 L10,5 L0,10 z", class: "wf-arrowhead" }),
    );
    const root = svg("svg", { viewBox: "0 0 " + W + " " + H, role: "img", "aria-label": this.label, class: "waterfall" }, svg("defs", {}, arrow));
    root.append(svg("title", {}, this.describe(lanes, model, tools, total)));
    const laneGroup = svg("g", { class: "wf-lanes" });
    lanes.forEach((name) => {
      const y = top(name);
      const x0 = by.get(name);
      const note = name === "user" ? "" : x0 ? tokens({ prompt_tokens: x0.prompt, completion_tokens: x0.completion, total_tokens: x0.prompt + x0.completion }).replace(/ \(.*/, "") : "";
      const cost = name === "user" || !this.costs.length ? "" : agentCost(this.costs, name);
      laneGroup.append(
        svg(
          "g",
          { class: "wf-lane", "data-lane": name },
          svg("rect", { x: 0, y: y, width: W, height: LANE, class: "wf-lane-bg" }),
          svg("text", { x: 6, y: y + 18, class: "wf-lane-name" }, name.length > 20 ? name.slice(0, 19) + "…" : name),
          svg("text", { x: 6, y: y + 34, class: "wf-lane-note" }, [note, cost].filter((s) => s).join(" · ")),
        ),
      );
    });
    // The axis: from the turn's start, a few round ticks.
    const axis = svg("g", { class: "wf-axis" });
    const yAxis = TOP + lanes.length * LANE;
    axis.append(svg("line", { x1: LABEL, y1: yAxis, x2: W - RIGHT, y2: yAxis }));
    const step = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000, 60000, 120000].find((s) => total / s <= 5) || 300000;
    for (let t = 0; t <= total + 0.001; t += step) {
      const tx = LABEL + (t / total) * plot;
      axis.append(svg("line", { x1: tx, y1: TOP, x2: tx, y2: yAxis + 4, class: "wf-grid" }));
      axis.append(svg("text", { x: tx, y: yAxis + 18, "text-anchor": t === 0 ? "start" : "middle", class: "wf-tick" }, span(t)));
    }
    const barGroup = svg("g", { class: "wf-bars" });
    /**
     * A call's bar on its lane: model calls on the upper row, tool calls on the lower.
     * @param {Bar} b
     * @param {boolean} tool
     */
    const bar = (b, tool) => {
      const what = tool ? " called " + b.what + ": " + span(b.ms) : ": model call, " + span(b.ms) + (b.usage ? ", " + tokens(b.usage) : "");
      const [dy, height, least] = tool ? [28, 12, 2] : [6, 18, 3];
      return svg(
        "rect",
        { x: x(b.start), y: top(b.lane) + dy, width: Math.max(x(b.end) - x(b.start), least), height, rx: 2, class: tool ? "wf-tool" : "wf-call", "data-lane": b.lane },
        svg("title", {}, b.lane + what + ", from +" + span(b.start - origin)),
      );
    };
    barGroup.append(...model.map((b) => bar(b, false)), ...tools.map((b) => bar(b, true)));
    // Waits for a person: on the tool row, behind the call they held.
    barGroup.prepend(
      ...waits.map((w) =>
        svg(
          "rect",
          { x: x(w.start), y: top(w.lane) + 26, width: Math.max(x(w.end) - x(w.start), 2), height: 16, rx: 2, class: "wf-wait", "data-lane": w.lane },
          svg("title", {}, w.lane + " waited for a person's approval of " + w.what + ": " + span(w.ms) + ", from +" + span(w.start - origin)),
        ),
      ),
    );
    // The hops: arrows between lanes (a tool call from the agent's model row down to its tool
    // row, the result back up). Arrows written in the same millisecond are set a few pixels
    // apart, in their order, so each shows.
    const hopGroup = svg("g", { class: "wf-hops" });
    let prev = -Infinity;
    for (const h of trace) {
      const hx = Math.max(x(time(h)), prev + 5);
      prev = hx;
      let y1;
      let y2;
      if (h.kind === "tool_call") {
        y1 = top(h.from) + 15;
        y2 = top(h.from) + 30;
      } else if (h.kind === "tool_result") {
        y1 = top(h.to) + 38;
        y2 = top(h.to) + 22;
      } else {
        const a = top(h.from);
        const b = top(h.to);
        y1 = a + (b > a ? 24 : 6);
        y2 = b + (b > a ? 6 : 24);
      }
      hopGroup.append(
        svg(
          "g",
          { class: "wf-hop kind-" + h.kind, "data-from": h.from, "data-to": h.to },
          svg("title", {}, h.from + " → " + h.to + " (" + h.kind.replace("_", " ") + ") at +" + span(time(h) - origin)),
          svg("line", { x1: hx, y1, x2: hx, y2, "marker-end": "url(#" + this.marker + ")" }),
        ),
      );
    }
    // A key to the marks, under the axis.
    const ky = yAxis + 38;
    const key = svg(
      "g",
      { class: "wf-key", "aria-hidden": "true" },
      svg("rect", { x: LABEL, y: ky - 10, width: 18, height: 12, rx: 3, class: "wf-call" }),
      svg("text", { x: LABEL + 24, y: ky, class: "wf-tick" }, "model call"),
      svg("rect", { x: LABEL + 110, y: ky - 9, width: 18, height: 10, rx: 2, class: "wf-tool" }),
      svg("text", { x: LABEL + 134, y: ky, class: "wf-tick" }, "tool call"),
      svg("line", { x1: LABEL + 212, y1: ky - 11, x2: LABEL + 212, y2: ky + 1, class: "wf-key-hop", "marker-end": "url(#" + this.marker + ")" }),
      svg("text", { x: LABEL + 222, y: ky, class: "wf-tick" }, "hop (sender → receiver)"),
      svg("text", { x: W - RIGHT, y: ky, "text-anchor": "end", class: "wf-tick" }, "time from the turn's start"),
    );
    if (waits.length) {
      key.append(
        svg("rect", { x: LABEL, y: ky + 8, width: 18, height: 12, rx: 2, class: "wf-wait" }),
        svg("text", { x: LABEL + 24, y: ky + 18, class: "wf-tick" }, "waiting for a person's approval"),
      );
    }
    root.append(laneGroup, axis, barGroup, hopGroup, key);
    this.box.replaceChildren(root);
  }

  /**
   * The waterfall in words (its `<title>`): each agent's calls and what they took.
   * @param {string[]} lanes
   * @param {Bar[]} model
   * @param {Bar[]} tools
   * @param {number} total
   */
  describe(lanes, model, tools, total) {
    const lines = [this.label + ", over " + span(total) + "."];
    for (const name of lanes) {
      if (name === "user") continue;
      const m = model.filter((b) => b.lane === name);
      const t = tools.filter((b) => b.lane === name);
      const w = this.waits.filter((b) => b.lane === name);
      lines.push(
        name +
          ": " +
          m.length +
          " model call" +
          (m.length === 1 ? "" : "s") +
          (t.length ? ", " + t.map((b) => b.what + " (" + span(b.ms) + ")").join(", ") : "") +
          (w.length ? ", waited for approval of " + w.map((b) => b.what + " (" + span(b.ms) + ")").join(", ") : "") +
          ".",
      );
    }
    return lines.join(" ");
  }
}
