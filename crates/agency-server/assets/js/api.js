// @ts-check
// The JSON API (/api/...), called with the session's CSRF token.

/** @typedef {{ path: string, message: string }} FieldError */
/** @typedef {{ message: string, status?: number, fields?: FieldError[] }} ApiError */
/**
 * What a call answers: the parsed body (`data`), and on failure the API's error.
 * @typedef {{ ok: true, status: number, data: any, error: null }
 *   | { ok: false, status: number, data: any, error: ApiError }} ApiResult
 */

/** The session's CSRF token, which the layout puts in `<meta name="csrf-token">`. */
function csrf() {
  const m = document.querySelector('meta[name="csrf-token"]');
  return m instanceof HTMLMetaElement ? m.content : "";
}

/**
 * Calls the JSON API. A body is sent as JSON unless `contentType` says otherwise (then as it is).
 * @param {string} method
 * @param {string} path
 * @param {unknown} [body]
 * @param {string} [contentType]
 * @returns {Promise<ApiResult>}
 */
export async function api(method, path, body, contentType) {
  /** @type {Record<string, string>} */
  const headers = { "x-csrf-token": csrf() };
  let payload;
  if (body !== undefined) {
    headers["content-type"] = contentType || "application/json";
    payload = contentType ? /** @type {BodyInit} */ (body) : JSON.stringify(body);
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
  /** @type {any} */
  let data = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    data = text;
  }
  if (res.ok) return { ok: true, status: res.status, data, error: null };
  const error = (data && data.error) || { message: res.status + " " + res.statusText };
  return { ok: false, status: res.status, data, error };
}
