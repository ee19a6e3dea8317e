// Sign in with an API key: checked with GET /api/v1/me, then kept in sessionStorage.

import { api, session } from "../api.js";
import { focusHeading, h } from "../dom.js";

export function signInPage(root, ctx) {
  ctx.setTitle("Sign in");
  const error = h("p.form-error#sign-in-error", { role: "alert" }, ctx.notice ?? "");
  const input = h("input#api-key", {
    type: "password",
    name: "api-key",
    autocomplete: "off",
    spellcheck: "false",
    required: true,
    "aria-describedby": "api-key-hint sign-in-error",
  });
  const button = h("button.button", { type: "submit" }, "Sign in");
  const form = h(
    "form.panel.sign-in",
    { novalidate: true, "aria-labelledby": "sign-in-title" },
    h("h1#sign-in-title", { tabindex: "-1" }, "Sign in to ranch"),
    h("p", {}, "Watch teams of agents work in your rooms, and talk to them."),
    h(
      "div.field",
      {},
      h("label", { for: "api-key" }, "API key"),
      input,
      h("p.hint#api-key-hint", {}, "ranch serve prints a key on its first start; the built-in demo's key is ",
        h("code", {}, "rk_demo"), "."),
    ),
    error,
    button,
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const key = input.value.trim();
    if (!key) {
      error.textContent = "Enter an API key.";
      input.setAttribute("aria-invalid", "true");
      input.focus();
      return;
    }
    button.disabled = true;
    error.textContent = "";
    try {
      const me = await api("/me", { key });
      session.signIn(key);
      ctx.signedIn(me);
      ctx.navigate(ctx.next || "/", { replace: true });
    } catch (failure) {
      error.textContent = failure.status === 401
        ? "The hub did not accept this key."
        : `Could not sign in: ${failure.message}`;
      input.setAttribute("aria-invalid", "true");
      input.focus();
    } finally {
      button.disabled = false;
    }
  });
  root.append(form);
  if (ctx.notice) focusHeading(root);
  else input.focus();
}
