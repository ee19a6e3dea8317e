// The hub's REST API (docs/api.md): the key from sign-in goes in X-API-Key on every call.

const KEY = "ranch.apiKey";
const BASE = "/api/v1";

/** The API key lives in sessionStorage: it ends with the tab, and other tabs never see it. */
export const session = {
  get key() {
    return sessionStorage.getItem(KEY);
  },
  signIn(key) {
    sessionStorage.setItem(KEY, key);
  },
  signOut() {
    sessionStorage.removeItem(KEY);
  },
};

/** An error answer: `{"error": {"code", "message", "field"}}` with its HTTP status. */
export class ApiError extends Error {
  constructor(status, body) {
    const error = body?.error ?? {};
    super(error.message || `the hub answered ${status}`);
    this.status = status;
    this.code = error.code ?? "unknown";
    this.field = error.field ?? null;
  }
}

const listeners = new Set();

/** Called with the ApiError whenever the hub refuses the key (401), wherever the call came from. */
export function onUnauthenticated(listener) {
  listeners.add(listener);
}

/** Tell the listeners the stored key was refused (the WebSocket learns it in an error frame). */
export function refused(error) {
  for (const listener of listeners) listener(error);
}

export async function api(path, options = {}) {
  try {
    return await request(path, options);
  } catch (error) {
    // an idle room's session ran out (docs/policies.md): the hub already dropped it; one retry starts a new one
    if (error instanceof ApiError && error.code === "SESSION_EXPIRED") return request(path, options);
    throw error;
  }
}

async function request(path, { method = "GET", body, key = session.key, signal } = {}) {
  const headers = { Accept: "application/json" };
  if (key) headers["X-API-Key"] = key;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const response = await fetch(`${BASE}${path}`, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
    signal,
  });
  if (response.status === 204) return null;
  let data = null;
  try {
    data = await response.json();
  } catch {
    data = null;
  }
  if (!response.ok) {
    const error = new ApiError(response.status, data);
    // a stored key that stops working ends the session; a key being tried at sign-in does not
    if (response.status === 401 && key === session.key && error.code !== "SESSION_EXPIRED") refused(error);
    throw error;
  }
  return data;
}

/** The bytes of a file kept on the hub (a file part's relative `url`, /api/v1/...), as a Blob. A link
 * the page cannot simply follow: the hub answers it only with the key header. */
export async function fileBlob(url, { key = session.key, signal } = {}) {
  if (!isHubFile(url)) throw new Error(`not a file on the hub: ${url}`);
  const headers = {};
  if (key) headers["X-API-Key"] = key;
  const response = await fetch(url, { headers, signal });
  if (!response.ok) {
    let data = null;
    try {
      data = await response.json();
    } catch {
      data = null;
    }
    throw new ApiError(response.status, data);
  }
  return response.blob();
}

/** A file part's `url` that is the hub's own link to its bytes: posted URLs are always http(s)://. */
export function isHubFile(url) {
  return typeof url === "string" && url.startsWith(`${BASE}/`);
}

/** Every page of a list: `cursor` paging, or `since` paging for room messages and events. */
export async function all(path, { since = null, limit = 200, signal } = {}) {
  const items = [];
  let cursor = since;
  for (let page = 0; page < 1000; page += 1) {
    const params = new URLSearchParams({ limit: String(limit) });
    if (cursor !== null && cursor !== undefined) params.set(since === null ? "cursor" : "since", cursor);
    const sep = path.includes("?") ? "&" : "?";
    const data = await api(`${path}${sep}${params}`, { signal });
    const batch = data?.items ?? [];
    items.push(...batch);
    if (!data?.next_cursor || batch.length === 0) break;
    cursor = data.next_cursor;
  }
  return items;
}

const ID = /^[a-z0-9][a-z0-9_-]*$/;

export const path = {
  room: (id) => `/rooms/${encodeURIComponent(id)}`,
  agent: (id) => `/agents/${encodeURIComponent(id)}`,
  isId: (id) => ID.test(id),
};
