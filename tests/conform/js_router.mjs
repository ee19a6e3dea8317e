// A client-routing v1 agent on the @a2a-js/sdk server stack (pinned in bench/js), written from
// docs/extension/client-routing-v1.md with no ranch code: `ranch conform` should pass it.
// Run from a directory whose node_modules is bench/js's: node js_router.mjs PORT
import express from "express";
import { AgentEvent, DefaultRequestHandler, InMemoryTaskStore } from "@a2a-js/sdk/server";
import { jsonRpcHandler, agentCardHandler, UserBuilder } from "@a2a-js/sdk/server/express";
import { Role } from "@a2a-js/sdk";

const URI = "https://ranch.woi.dev/extensions/client-routing/v1";
const port = Number(process.argv[2]);
const base = `http://127.0.0.1:${port}`;
const card = {
  name: "js router", description: "Routes with client-routing v1", version: "1",
  supportedInterfaces: [{ url: `${base}/`, protocolBinding: "JSONRPC", protocolVersion: "1.0", tenant: "" }],
  capabilities: {
    streaming: false, pushNotifications: false,
    extensions: [{ uri: URI, description: "Answers with the next recipient.", required: false, params: undefined }],
  },
  defaultInputModes: ["text/plain"], defaultOutputModes: ["text/plain"],
  skills: [{ id: "route", name: "route", description: "route", tags: ["route"], examples: [], inputModes: [], outputModes: [], securityRequirements: [] }],
  securitySchemes: {}, securityRequirements: [], signatures: [],
};

function choose(text, data) {
  if (!data) return undefined; // not negotiated: a plain answer
  if (data.hopsRemaining === 1) return { recipient: "user", reason: "no hop left" };
  if (text.toLowerCase().includes("back to whoever sent it") && data.sender !== "user") {
    return { recipient: "sender", reason: "returning the work" };
  }
  const words = new Set(text.toLowerCase().match(/[a-z]+/g) || []);
  for (const peer of data.agentCards || []) {
    const names = [String(peer.name || "").toLowerCase(), ...(peer.capabilities || []).map((c) => String(c).toLowerCase())];
    if (names.some((name) => words.has(name))) return { recipient: peer.id, reason: `${peer.name} handles it` };
  }
  return { recipient: "user", reason: "no peer offered fits" };
}

class Router {
  async execute(context, bus) {
    const message = context.userMessage;
    const text = message.parts.map((p) => (p.content?.$case === "text" ? p.content.value : "")).join("\n");
    const negotiated = Array.from(context.context?.requestedExtensions || []).includes(URI);
    const decision = choose(text, negotiated ? message.metadata?.[URI] : undefined);
    if (decision) context.context.addActivatedExtension(URI);
    bus.publish(AgentEvent.message({
      messageId: crypto.randomUUID(), contextId: context.contextId, taskId: "", role: Role.ROLE_AGENT,
      parts: [{ content: { $case: "text", value: decision ? "routed" : "answered" } }],
      metadata: decision ? { [URI]: decision } : undefined, extensions: decision ? [URI] : [], referenceTaskIds: [],
    }));
    bus.finished();
  }
  async cancelTask() {}
}

const handler = new DefaultRequestHandler(card, new InMemoryTaskStore(), new Router());
const app = express();
app.use("/.well-known/agent-card.json", agentCardHandler({ agentCardProvider: async () => card }));
app.use("/", jsonRpcHandler({ requestHandler: handler, userBuilder: UserBuilder.noAuthentication }));
app.listen(port, "127.0.0.1", () => console.log(`js router on ${base}`));
