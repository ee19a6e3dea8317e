// The @a2a-js/sdk's own server stack serving an echo agent: the peer a user would pick for speed.
import express from "express";
import { AgentEvent, DefaultRequestHandler, InMemoryTaskStore } from "@a2a-js/sdk/server";
import { jsonRpcHandler, UserBuilder } from "@a2a-js/sdk/server/express";
import { Role } from "@a2a-js/sdk";

const port = Number(process.argv[2] || 9999);
const base = `http://127.0.0.1:${port}`;
const card = {
  name: "echo", description: "echo", version: "1",
  supportedInterfaces: [{ url: `${base}/`, protocolBinding: "JSONRPC", protocolVersion: "1.0", tenant: "" }],
  capabilities: { streaming: true, pushNotifications: false, extensions: [] },
  defaultInputModes: ["text/plain"], defaultOutputModes: ["text/plain"],
  skills: [{ id: "echo", name: "echo", description: "echo", tags: ["echo"], examples: [], inputModes: [], outputModes: [], securityRequirements: [] }],
  securitySchemes: {}, securityRequirements: [], signatures: [],
};
class EchoExecutor {
  async execute(context, bus) {
    const text = context.userMessage.parts.map((p) => (p.content?.$case === "text" ? p.content.value : "")).join("\n");
    bus.publish(AgentEvent.message({
      messageId: "reply", contextId: context.contextId, taskId: "", role: Role.ROLE_AGENT,
      parts: [{ content: { $case: "text", value: text } }], metadata: undefined, extensions: [], referenceTaskIds: [],
    }));
    bus.finished();
  }
  async cancelTask() {}
}
const handler = new DefaultRequestHandler(card, new InMemoryTaskStore(), new EchoExecutor());
const app = express();
app.get("/healthz", (req, res) => res.json({ status: "ok" }));
app.use("/", jsonRpcHandler({ requestHandler: handler, userBuilder: UserBuilder.noAuthentication }));
app.listen(port, "127.0.0.1", () => console.log(`echo on ${base}`));
