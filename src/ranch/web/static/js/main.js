// The page: History-API routing between the views, the signed-in header, and sign-out.
//
//   /                 rooms          /rooms/{id}    one room, live
//   /agents           agents         /agents/{id}   an agent's card and skills
//   /signin           sign in (any path shows it while signed out, then comes back)

import { api, onUnauthenticated, session } from "./api.js";
import { focusHeading, h } from "./dom.js";
import { agentPage, agentsPage } from "./views/agents.js";
import { roomsPage } from "./views/rooms.js";
import { roomPage } from "./views/room.js";
import { signInPage } from "./views/signin.js";

const ROUTES = [
  [/^\/(?:rooms\/?)?$/, roomsPage],
  [/^\/rooms\/([^/]+)\/?$/, roomPage],
  [/^\/agents\/?$/, agentsPage],
  [/^\/agents\/([^/]+)\/?$/, agentPage],
];

const main = document.getElementById("main");
const nav = document.getElementById("main-nav");
const sessionBar = document.getElementById("session");
const who = document.getElementById("who");
const liveStatus = document.getElementById("live-status");

let me = null;
let current = null; // {controller, cleanup}
let notice = "";
let returnTo = "/"; // where a refused session goes back to after signing in again

export function navigate(to, { replace = false } = {}) {
  if (replace) history.replaceState(null, "", to);
  else history.pushState(null, "", to);
  render();
}

const LIVE_TEXT = {
  connecting: "Connecting…",
  live: "Live",
  reconnecting: "Reconnecting…",
  error: "Live updates stopped",
  "": "",
};

function setLive(state, detail) {
  liveStatus.textContent = detail ? `${LIVE_TEXT[state] ?? state}: ${detail}` : LIVE_TEXT[state] ?? state;
  liveStatus.dataset.state = state;
}

function showSession() {
  const signedIn = Boolean(me);
  nav.hidden = !signedIn;
  sessionBar.hidden = !signedIn;
  who.textContent = signedIn ? `${me.name || me.id} · ${me.org?.name ?? me.org?.id ?? ""}` : "";
  for (const link of nav.querySelectorAll("a")) {
    const here = link.pathname === "/" ? /^\/(rooms)?/.test(location.pathname) && !location.pathname.startsWith("/agents")
      : location.pathname.startsWith(link.pathname);
    if (here) link.setAttribute("aria-current", "page");
    else link.removeAttribute("aria-current");
  }
}

function mount(view, params, extra = {}) {
  current?.controller.abort();
  current?.cleanup?.();
  const controller = new AbortController();
  const root = h("div.view");
  main.replaceChildren(root);
  setLive("");
  current = { controller, cleanup: null };
  const state = current;
  const ctx = {
    me,
    params,
    signal: controller.signal,
    navigate,
    setLive,
    setTitle: (title) => {
      document.title = title ? `${title} · ranch` : "ranch";
    },
    signedIn: (who) => {
      me = who;
    },
    ...extra,
  };
  Promise.resolve(view(root, ctx))
    .then((cleanup) => {
      if (typeof cleanup !== "function") return;
      if (state === current) state.cleanup = cleanup;
      else cleanup(); // navigated away while it loaded
    })
    .catch((error) => {
      if (controller.signal.aborted || error?.status === 401) return;
      root.replaceChildren(
        h("h1", { tabindex: "-1" }, "Something went wrong"),
        h("p.form-error", { role: "alert" }, error?.message ?? String(error)),
      );
      focusHeading(root);
    });
}

async function render() {
  const path = location.pathname;
  if (!session.key) {
    me = null;
    showSession();
    const next = path === "/signin" ? returnTo : path + location.search;
    return mount(signInPage, [], { next, notice: takeNotice() });
  }
  if (!me) {
    try {
      me = await api("/me");
    } catch (error) {
      if (error.status === 401) return; // onUnauthenticated took over
      main.replaceChildren(h("div.view", {}, h("h1", { tabindex: "-1" }, "The hub cannot be reached"),
        h("p.form-error", { role: "alert" }, error.message)));
      return;
    }
  }
  showSession();
  if (path === "/signin") return navigate("/", { replace: true });
  for (const [pattern, view] of ROUTES) {
    const match = path.match(pattern);
    if (match) return mount(view, match.slice(1).map(decodeURIComponent));
  }
  mount(notFound, []);
}

function takeNotice() {
  const text = notice;
  notice = "";
  return text;
}

function notFound(root, ctx) {
  ctx.setTitle("Not found");
  root.append(h("h1", { tabindex: "-1" }, "Not found"), h("p", {}, "Nothing lives at this address. ", h("a", { href: "/" }, "Back to the rooms")));
  focusHeading(root);
}

function signOut(message = "", { comeBack = false } = {}) {
  returnTo = comeBack ? location.pathname + location.search : "/";
  current?.controller.abort();
  current?.cleanup?.();
  current = null;
  session.signOut();
  me = null;
  notice = message;
  navigate("/signin");
}

onUnauthenticated(() => signOut("The hub no longer accepts this key. Sign in again.", { comeBack: true }));
document.getElementById("sign-out").addEventListener("click", () => signOut("You are signed out."));

// Same-origin links to the page's own paths change the view without a reload.
document.addEventListener("click", (event) => {
  if (event.defaultPrevented || event.button !== 0) return;
  if (event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) return;
  const link = event.target.closest?.("a[href]");
  if (!link || link.target || link.hasAttribute("download") || link.origin !== location.origin) return;
  if (link.getAttribute("href").startsWith("#")) return;
  if (/^\/(api|a2a|static)\//.test(link.pathname)) return;
  event.preventDefault();
  if (link.pathname + link.search !== location.pathname + location.search) navigate(link.pathname + link.search);
});

window.addEventListener("popstate", render);
render();
