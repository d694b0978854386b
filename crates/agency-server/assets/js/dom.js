// @ts-check
// Building and finding the page's elements (HTML and SVG). Everything user-written reaches the
// page through textContent, never as HTML.

/** @typedef {string | number | boolean | null | undefined | ((ev: Event) => void)} AttrValue */
/** @typedef {Node | string | number | null | undefined | false} Child */

/**
 * An element with attributes (`on…` functions become listeners) and children (strings become text).
 * @template {keyof HTMLElementTagNameMap} K
 * @param {K} tag
 * @param {Record<string, AttrValue> | null} [attrs]
 * @param {...(Child | Child[])} children
 * @returns {HTMLElementTagNameMap[K]}
 */
export function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on") && typeof v === "function") e.addEventListener(k.slice(2), v);
    else if (k === "value") Object.assign(e, { value: v });
    else if (v === true) e.setAttribute(k, "");
    else e.setAttribute(k, String(v));
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

/**
 * An SVG element with attributes and children (strings become text).
 * @param {string} tag
 * @param {Record<string, string | number>} [attrs]
 * @param {...(SVGElement | string)} children
 * @returns {SVGElement}
 */
export function svg(tag, attrs, ...children) {
  const e = /** @type {SVGElement} */ (document.createElementNS("http://www.w3.org/2000/svg", tag));
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, String(v));
  for (const c of children) e.append(c);
  return e;
}

/**
 * Fills the list `id` with an item for each of `items`, or with one item saying `none`.
 * @template T
 * @param {string} id
 * @param {T[]} items
 * @param {(item: T) => Child[]} item what an item holds
 * @param {string} none
 */
export function fillList(id, items, item, none) {
  const list = $(id);
  list.replaceChildren(...items.map((x) => el("li", {}, ...item(x))));
  if (!items.length) list.append(el("li", {}, none));
}

/**
 * The element with this id, which the page has (else an error names it), of `type` when given.
 * @template {HTMLElement} [T=HTMLElement]
 * @param {string} id
 * @param {new () => T} [type]
 * @returns {T}
 */
export function $(id, type) {
  const e = document.getElementById(id);
  if (!(e instanceof (type || HTMLElement))) throw new Error("the page has no " + (type ? type.name : "element") + " #" + id);
  return /** @type {T} */ (e);
}

/**
 * The element with this id, if the page has one.
 * @param {string} id
 * @returns {HTMLElement | null}
 */
export function find(id) {
  return document.getElementById(id);
}

/**
 * Sets the text of a status line, if the page has it.
 * @param {string} id
 * @param {string} text
 */
export function status(id, text) {
  const s = find(id);
  if (s) s.textContent = text;
}

/**
 * Submits `form` on Ctrl+Enter (or ⌘+Enter) in `field`.
 * @param {HTMLElement} field
 * @param {HTMLFormElement} form
 */
export function submitOnCtrlEnter(field, form) {
  field.addEventListener("keydown", (e) => {
    if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) form.requestSubmit();
  });
}

/**
 * The `data-` attribute `name` of the element `id`, which the page's template renders.
 * @param {string} id
 * @param {string} name in camelCase, as in `dataset`
 * @returns {string}
 */
export function data(id, name) {
  const v = $(id).dataset[name];
  if (v === undefined) throw new Error("#" + id + " has no data-" + name);
  return v;
}
