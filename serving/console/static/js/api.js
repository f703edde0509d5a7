// HTTP helpers: every request carries the Basic credentials the user signed in with (if any).
const CRED_KEY = "radstack.credentials";

export class ApiError extends Error {
  constructor(status, body, text) {
    super((body && (body.errorMessage || body.error)) || text || `HTTP ${status}`);
    this.status = status;
    this.body = body; // Druid's error JSON when the server sent one
    this.text = text;
  }
}

export function credentials() {
  return sessionStorage.getItem(CRED_KEY);
}

export function setCredentials(name, password) {
  if (name == null) sessionStorage.removeItem(CRED_KEY);
  else sessionStorage.setItem(CRED_KEY, btoa(unescape(encodeURIComponent(`${name}:${password}`))));
}

export async function request(path, { method = "GET", body, signal, headers = {} } = {}) {
  const h = { ...headers };
  const cred = credentials();
  if (cred) h["Authorization"] = `Basic ${cred}`;
  if (body !== undefined && typeof body !== "string") {
    h["Content-Type"] = "application/json";
    body = JSON.stringify(body);
  }
  const res = await fetch(path, { method, body, headers: h, signal, credentials: "omit" });
  return res;
}

async function parse(res) {
  const text = await res.text();
  let json = null;
  try { json = text ? JSON.parse(text) : null; } catch { json = null; }
  if (!res.ok) {
    const err = new ApiError(res.status, json, text);
    err.retryAfter = Number(res.headers.get("Retry-After")) || null;
    throw err;
  }
  return json;
}

export async function getJSON(path, opts) {
  return parse(await request(path, opts));
}

export async function postJSON(path, body, opts = {}) {
  return parse(await request(path, { ...opts, method: "POST", body }));
}

export function newId() {
  if (globalThis.crypto && crypto.randomUUID) return crypto.randomUUID();
  const b = new Uint8Array(16);
  crypto.getRandomValues(b);
  return [...b].map((x) => x.toString(16).padStart(2, "0")).join("").replace(/(.{8})(.{4})(.{4})(.{4})(.{12})/, "$1-$2-$3-$4-$5");
}
