// The hub's WebSocket (/api/v1/ws): subscribe to rooms, and on any close reconnect and
// subscribe again from the last cursor seen in each room (each room counts its own events),
// so nothing is missed and nothing is shown twice. A refused key ends the session instead.

import { ApiError, refused } from "./api.js";

const FIRST_RETRY_MS = 500;
const MAX_RETRY_MS = 8000;
const PING_MS = 25000;

export class LiveSocket {
  /**
   * @param {object} options
   * @param {string} options.key       the API key, sent as ?token=
   * @param {Object<string, number>} options.rooms   room id -> replay its events after this cursor
   * @param {(frame: object) => void} options.onEvent   each event frame, in its room's cursor order
   * @param {(state: string, detail?: string) => void} options.onState
   *        "connecting" | "live" | "reconnecting" | "error"
   */
  constructor({ key, rooms, onEvent, onState = () => {} }) {
    this.key = key;
    this.cursors = { ...rooms }; // room id -> the cursor of its last event seen
    this.onEvent = onEvent;
    this.onState = onState;
    this.ws = null;
    this.closed = false;
    this.retries = 0;
    this.timer = null;
    this.pinger = null;
  }

  url() {
    const scheme = location.protocol === "https:" ? "wss" : "ws";
    return `${scheme}://${location.host}/api/v1/ws?token=${encodeURIComponent(this.key)}`;
  }

  connect() {
    if (this.closed) return;
    this.onState(this.retries === 0 ? "connecting" : "reconnecting");
    const ws = new WebSocket(this.url());
    this.ws = ws;
    ws.addEventListener("open", () => {
      ws.send(JSON.stringify({ type: "subscribe", rooms: this.cursors }));
      this.pinger = setInterval(() => this.send({ type: "ping" }), PING_MS);
    });
    ws.addEventListener("message", (message) => this.receive(message.data));
    ws.addEventListener("close", () => this.dropped(ws));
  }

  receive(raw) {
    let frame;
    try {
      frame = JSON.parse(raw);
    } catch {
      return;
    }
    if (frame.type === "subscribed") {
      this.retries = 0;
      this.onState("live");
      return;
    }
    if (frame.type === "error") {
      if (frame.error?.code === "UNAUTHENTICATED") {
        this.close();
        refused(new ApiError(401, frame));
        return;
      }
      this.onState("error", frame.error?.message ?? "the hub refused a request");
      return;
    }
    if (frame.type === "pong" || frame.type === "delivery") return;
    if (typeof frame.cursor === "number") {
      const seen = this.cursors[frame.room_id] ?? 0;
      if (frame.cursor <= seen) return; // already seen (a replay overlapping what we had)
      this.cursors[frame.room_id] = frame.cursor;
    }
    this.onEvent(frame);
  }

  dropped(ws) {
    clearInterval(this.pinger);
    if (ws !== this.ws || this.closed) return;
    const delay = Math.min(MAX_RETRY_MS, FIRST_RETRY_MS * 2 ** this.retries);
    this.retries += 1;
    this.onState("reconnecting");
    this.timer = setTimeout(() => this.connect(), delay);
  }

  send(frame) {
    if (this.ws?.readyState === WebSocket.OPEN) this.ws.send(JSON.stringify(frame));
  }

  close() {
    this.closed = true;
    clearTimeout(this.timer);
    clearInterval(this.pinger);
    this.ws?.close(1000, "leaving");
  }
}
