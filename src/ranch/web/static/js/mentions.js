// @mention completion for the composer. Typing "@" and the start of an id or name opens a
// list of the room's agents and teams; ArrowDown/ArrowUp move, Enter or Tab picks, Escape
// closes. The textarea keeps focus throughout (aria-activedescendant names the option).

import { h, replace } from "./dom.js";

const TOKEN = /(?:^|\s)@([a-z0-9_.-]*)$/i;
const MAX = 8;

export class MentionCompleter {
  /**
   * @param {HTMLTextAreaElement} input
   * @param {HTMLElement} list    an empty <ul>; becomes the listbox
   * @param {HTMLElement} status  a polite live region announcing how many suggestions there are
   * @param {() => {id: string, name: string, kind: string}[]} candidates
   */
  constructor(input, list, status, candidates) {
    this.input = input;
    this.list = list;
    this.status = status;
    this.candidates = candidates;
    this.matches = [];
    this.active = -1;
    list.id ||= `mentions-${Math.random().toString(36).slice(2)}`;
    list.setAttribute("role", "listbox");
    list.setAttribute("aria-label", "Mention suggestions");
    list.hidden = true;
    input.setAttribute("aria-autocomplete", "list");
    input.setAttribute("aria-controls", list.id);
    input.addEventListener("input", () => this.update());
    input.addEventListener("click", () => this.update());
    input.addEventListener("blur", () => this.close());
  }

  get isOpen() {
    return !this.list.hidden;
  }

  query() {
    const before = this.input.value.slice(0, this.input.selectionStart ?? 0);
    const match = before.match(TOKEN);
    return match ? match[1].toLowerCase() : null;
  }

  update() {
    const query = this.query();
    if (query === null) return this.close();
    this.matches = this.candidates()
      .filter((c) => c.id.toLowerCase().startsWith(query) || c.name.toLowerCase().startsWith(query))
      .slice(0, MAX);
    if (this.matches.length === 0) return this.close();
    this.active = 0;
    this.render();
    this.status.textContent = `${this.matches.length} suggestion${this.matches.length === 1 ? "" : "s"}: `
      + "use the arrow keys, then Enter or Tab to pick.";
  }

  render() {
    const options = this.matches.map((c, i) =>
      h(
        "li.mention-option",
        {
          id: `${this.list.id}-${i}`,
          role: "option",
          "aria-selected": i === this.active ? "true" : "false",
          dataset: { id: c.id },
          // mousedown, not click: the textarea must keep focus
          onmousedown: (event) => {
            event.preventDefault();
            this.pick(i);
          },
        },
        h("span.mention-id", {}, `@${c.id}`),
        c.name && c.name !== c.id ? h("span.mention-name", {}, c.name) : null,
        h("span.mention-kind", {}, c.kind),
      ),
    );
    replace(this.list, options);
    this.list.hidden = false;
    this.input.setAttribute("aria-activedescendant", `${this.list.id}-${this.active}`);
  }

  /** Handles the completion keys while the list is open; answers whether it did. */
  keydown(event) {
    if (!this.isOpen) return false;
    const n = this.matches.length;
    switch (event.key) {
      case "ArrowDown":
        this.active = (this.active + 1) % n;
        break;
      case "ArrowUp":
        this.active = (this.active - 1 + n) % n;
        break;
      case "Enter":
      case "Tab":
        if (event.shiftKey) return false;
        this.pick(this.active);
        break;
      case "Escape":
        this.close();
        break;
      default:
        return false;
    }
    event.preventDefault();
    if (this.isOpen) this.render();
    return true;
  }

  pick(index) {
    const choice = this.matches[index];
    if (!choice) return;
    const caret = this.input.selectionStart ?? this.input.value.length;
    const before = this.input.value.slice(0, caret).replace(/@([a-z0-9_.-]*)$/i, `@${choice.id} `);
    const after = this.input.value.slice(caret).replace(/^\s+/, "");
    this.input.value = before + after;
    this.input.setSelectionRange(before.length, before.length);
    this.close();
    this.status.textContent = `Mentioned ${choice.name || choice.id}.`;
  }

  close() {
    this.list.hidden = true;
    this.matches = [];
    this.active = -1;
    this.input.removeAttribute("aria-activedescendant");
  }
}
