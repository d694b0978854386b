// @ts-check
// How the pages write dates, tokens and costs.

/**
 * A timestamp in the reader's locale, or a dash.
 * @param {string | null | undefined} s
 * @returns {string}
 */
export function when(s) {
  if (!s) return "—";
  const d = new Date(s);
  return Number.isNaN(d.getTime()) ? s : d.toLocaleString();
}

/**
 * A turn's cost in dollars, or a dash when a model it called has no price.
 * @param {string | null | undefined} usd
 * @returns {string}
 */
export function cost(usd) {
  return usd === null || usd === undefined ? "cost —" : "$" + usd;
}

/** @typedef {{ prompt_tokens: number, completion_tokens: number, total_tokens: number }} Usage */

/**
 * @param {Usage | null | undefined} u
 * @returns {string}
 */
export function tokens(u) {
  return u ? u.total_tokens + " tokens (" + u.prompt_tokens + " in, " + u.completion_tokens + " out)" : "";
}
