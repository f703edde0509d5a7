// The console's shell: capabilities, sign-in, navigation between the views.
import { getJSON, setCredentials, credentials } from "./api.js";
import { el, hideModal, showModal, errorBox } from "./util.js";
import { datasourcesView } from "./view-datasources.js";
import { timelineView } from "./view-timeline.js";
import { queryView } from "./view-query.js";
import { ingestionView } from "./view-ingestion.js";
import { liveView } from "./view-live.js";
import { correctionsView } from "./view-corrections.js";

const VIEWS = { datasources: datasourcesView, timeline: timelineView, query: queryView, live: liveView, ingestion: ingestionView, corrections: correctionsView };
export const session = { capabilities: null, user: null, isAdmin: true };
let cleanup = null;

function parseHash() {
  const h = location.hash.replace(/^#\/?/, "");
  const [path, qs] = h.split("?");
  const [view, ...rest] = path.split("/");
  return { view: VIEWS[view] ? view : "datasources", arg: rest.map(decodeURIComponent).join("/"), params: new URLSearchParams(qs || "") };
}

async function route() {
  const { view, arg, params } = parseHash();
  for (const a of document.querySelectorAll("#nav a")) a.classList.toggle("active", a.dataset.view === view);
  if (cleanup) { try { cleanup(); } catch { /* view already gone */ } cleanup = null; }
  const main = document.getElementById("main");
  main.replaceChildren();
  main.dataset.view = view;
  try {
    cleanup = (await VIEWS[view](main, { arg, params, session })) || null;
  } catch (e) {
    main.append(errorBox(e));
  }
}

function renderUser() {
  const box = document.getElementById("user");
  box.replaceChildren();
  document.body.classList.toggle("role-read", !session.isAdmin);
  if (!session.capabilities?.auth) return;
  if (session.user) {
    box.append(el("span", { id: "user-name" }, `${session.user.name} (${session.user.role})`),
      el("button", { class: "ghost", style: "color:#e5e7eb", onclick: () => { setCredentials(null); location.reload(); } }, "Sign out"));
  }
}

function signIn(message) {
  return new Promise((resolve) => {
    const err = el("div", { class: "error-box", style: message ? "" : "display:none" }, message || "");
    const name = el("input", { type: "text", id: "signin-name", autocomplete: "username" });
    const pw = el("input", { type: "password", id: "signin-password", autocomplete: "current-password" });
    const form = el("form", { class: "signin", id: "signin" },
      el("p", { class: "muted" }, "This server requires HTTP Basic credentials."),
      el("label", {}, "User", el("br"), name), el("label", {}, "Password", el("br"), pw), err,
      el("button", { type: "submit" }, "Sign in"));
    form.addEventListener("submit", async (e) => {
      e.preventDefault();
      setCredentials(name.value, pw.value);
      const me = await whoami();
      if (me.authenticated) { hideModal(); document.querySelector(".modal-box").classList.remove("narrow"); resolve(me); } else {
        setCredentials(null);
        err.textContent = me.retryAfter ? `Too many failed sign-ins: try again in ${me.retryAfter} s.` : "Wrong user name or password.";
        err.style.display = "";
      }
    });
    document.getElementById("modal-close").style.display = "none";
    showModal("Sign in to radstack", form);
    document.querySelector(".modal-box").classList.add("narrow");
    name.focus();
  });
}

// The signed-in user; 401 (no or wrong credentials) and 429 (too many failed sign-ins) are answers here.
async function whoami() {
  try {
    return await getJSON("/radstack/v1/whoami");
  } catch (e) {
    if (e.status === 401) return { authenticated: false };
    if (e.status === 429) return { authenticated: false, retryAfter: e.retryAfter || 60 };
    throw e;
  }
}

async function start() {
  document.getElementById("modal-close").addEventListener("click", hideModal);
  document.getElementById("modal").addEventListener("click", (e) => { if (e.target.id === "modal" && session.user !== undefined && document.getElementById("modal-close").style.display !== "none") hideModal(); });
  document.addEventListener("keydown", (e) => { if (e.key === "Escape" && document.getElementById("modal-close").style.display !== "none") hideModal(); });
  session.capabilities = await getJSON("/radstack/v1/capabilities");
  if (session.capabilities.auth) {
    let me = credentials() ? await whoami() : { authenticated: false };
    if (!me.authenticated) me = await signIn(credentials() ? "Your saved credentials were refused." : null);
    document.getElementById("modal-close").style.display = "";
    session.user = me;
    session.isAdmin = me.role === "admin";
  }
  renderUser();
  window.addEventListener("hashchange", route);
  await route();
  document.body.dataset.ready = "1";
}

start().catch((e) => document.getElementById("main").replaceChildren(errorBox(e)));
