// @ts-check
// The team as a graph: an SVG of the agents and the edges their rules allow (the preview API's
// `edges`), the manager and the user marked, fan-outs dashed and tool calls named. Drawn by
// hand: agents on a circle under the user, each edge a curve with an arrow; A → B and B → A
// bend to opposite sides, so both show. `light(from, to)` flashes an edge as a hop passes it.

import { svg } from "./dom.js";

const W = 420;
const H = 360;
const R = 30;

/** @typedef {{ from: string, to: string, fan_out: boolean, tool: string | null }} Edge */
/** @typedef {{ manager: string, agents: string[], edges: Edge[] }} Team */

export class TeamGraph {
  /**
   * @param {HTMLElement} box where the drawing goes
   * @param {string} label what the drawing is, for screen readers
   */
  constructor(box, label) {
    this.box = box;
    this.label = label;
    /** @type {Map<string, SVGElement>} edges by `from>to` */
    this.edges = new Map();
    /** @type {Map<string, SVGElement>} nodes by name */
    this.nodes = new Map();
    /** @type {Map<Element, ReturnType<typeof setTimeout>>} */
    this.timers = new Map();
  }

  /**
   * Draws `team` again from scratch.
   * @param {Team} team
   */
  draw(team) {
    this.edges.clear();
    this.nodes.clear();
    /** @type {Map<string, { x: number, y: number }>} */
    const at = new Map();
    at.set("user", { x: W / 2, y: 34 });
    // The manager first, right under the user; the others around the circle.
    const agents = [team.manager, ...team.agents.filter((a) => a !== team.manager)];
    const cx = W / 2;
    const cy = H / 2 + 40;
    const rx = W / 2 - 60;
    const ry = H / 2 - 75;
    agents.forEach((a, i) => {
      if (agents.length === 1) {
        at.set(a, { x: cx, y: cy });
        return;
      }
      const angle = -Math.PI / 2 + (2 * Math.PI * i) / agents.length;
      at.set(a, { x: cx + rx * Math.cos(angle), y: cy + ry * Math.sin(angle) });
    });
    const arrow = svg(
      "marker",
      { id: "arrow", viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 11, markerHeight: 11, markerUnits: "userSpaceOnUse", orient: "auto-start-reverse" },
      svg("path", { d: "M0,0 L10,5 L0,10 z", class: "arrowhead" }),
    );
    const root = svg("svg", { viewBox: "0 0 " + W + " " + H, role: "img", "aria-label": this.label, class: "team-graph" }, svg("defs", {}, arrow));
    const title = svg("title", {}, this.describe(team));
    root.append(title);
    const edges = svg("g", { class: "edges" });
    const labels = svg("g", { class: "edge-labels" });
    /** @type {Edge[]} */
    const all = [{ from: "user", to: team.manager, fan_out: false, tool: null }, ...team.edges];
    for (const e of all) {
      const a = at.get(e.from);
      const b = at.get(e.to);
      if (!a || !b || e.from === e.to) continue;
      // A curve bent to the left of its direction, ending at the nodes' rims.
      const dx = b.x - a.x;
      const dy = b.y - a.y;
      const len = Math.hypot(dx, dy) || 1;
      const nx = -dy / len;
      const ny = dx / len;
      const bend = Math.min(40, len / 4);
      const mx = (a.x + b.x) / 2 + nx * bend;
      const my = (a.y + b.y) / 2 + ny * bend;
      /** @param {{ x: number, y: number }} p */
      const rim = (p) => {
        const vx = mx - p.x;
        const vy = my - p.y;
        const l = Math.hypot(vx, vy) || 1;
        return { x: p.x + (vx / l) * (R + 2), y: p.y + (vy / l) * (R + 2) };
      };
      const s = rim(a);
      const t = rim(b);
      const kind = e.from === "user" ? " input" : e.to === "user" ? " answer" : "";
      const g = svg(
        "g",
        { class: "edge" + (e.fan_out ? " fan-out" : "") + kind, "data-from": e.from, "data-to": e.to, "data-lit": 0 },
        svg("title", {}, e.from + " → " + e.to + (e.fan_out ? " (fan-out: several at once)" : "") + (e.tool ? ", calling " + e.tool + " first" : "")),
        svg("path", { d: "M" + s.x + "," + s.y + " Q" + mx + "," + my + " " + t.x + "," + t.y, "marker-end": "url(#arrow)" }),
      );
      edges.append(g);
      this.edges.set(e.from + ">" + e.to, g);
      if (e.tool || e.fan_out) {
        labels.append(svg("text", { x: mx, y: my, class: "edge-label", "text-anchor": "middle" }, (e.fan_out ? "fan-out" : "") + (e.tool && e.fan_out ? " · " : "") + (e.tool || "")));
      }
    }
    const nodes = svg("g", { class: "nodes" });
    for (const [name, p] of at) {
      const manager = name === team.manager;
      const user = name === "user";
      const g = svg("g", { class: "node" + (manager ? " manager" : "") + (user ? " user" : ""), "data-node": name, "data-lit": 0 });
      if (user) g.append(svg("rect", { x: p.x - R * 1.4, y: p.y - R * 0.8, width: R * 2.8, height: R * 1.6, rx: 10 }));
      else {
        if (manager) g.append(svg("circle", { cx: p.x, cy: p.y, r: R + 4, class: "ring" }));
        g.append(svg("circle", { cx: p.x, cy: p.y, r: R }));
      }
      g.append(svg("text", { x: p.x, y: p.y + 4, "text-anchor": "middle", class: name.length > 8 ? "long" : "" }, name.length > 12 ? name.slice(0, 11) + "…" : name));
      if (manager) g.append(svg("text", { x: p.x + R + 6, y: p.y + R + 4, "text-anchor": "start", class: "node-note" }, "manager"));
      nodes.append(g);
      this.nodes.set(name, g);
    }
    root.append(edges, nodes, labels);
    this.box.replaceChildren(root);
  }

  /**
   * The graph in words (its `<title>`): each agent and whom its rules send to.
   * @param {Team} team
   */
  describe(team) {
    const lines = [this.label + ". The user talks to " + team.manager + " (the manager)."];
    for (const a of team.agents) {
      const to = team.edges.filter((e) => e.from === a).map((e) => e.to);
      lines.push(a + (to.length ? " sends to " + to.join(", ") : " has no rules that send") + ".");
    }
    return lines.join(" ");
  }

  /**
   * Flashes the edge `from` → `to` (and its ends) as a hop passes it; counts it in `data-lit`.
   * A hop along no drawn edge (an agent answering its sender without a rule) lights its ends.
   * @param {string} from
   * @param {string} to
   */
  light(from, to) {
    const parts = [this.edges.get(from + ">" + to), this.nodes.get(from), this.nodes.get(to)];
    for (const e of parts) {
      if (!e) continue;
      e.classList.add("lit");
      e.setAttribute("data-lit", String(Number(e.getAttribute("data-lit") || 0) + 1));
      clearTimeout(this.timers.get(e));
      this.timers.set(
        e,
        setTimeout(() => e.classList.remove("lit"), 1500),
      );
    }
  }
}
