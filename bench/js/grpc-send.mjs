// The official @a2a-js/sdk client over gRPC: one SendMessage to a ranch agent, its card's GRPC interface
// (and that interface's tenant). Usage: node grpc-send.mjs <agent URL> <text> [api key]; prints the answer.
import { randomUUID } from "node:crypto";
import { ClientFactory, ClientFactoryOptions } from "@a2a-js/sdk/client";
import { GrpcTransportFactory } from "@a2a-js/sdk/client/grpc";
import { Role } from "@a2a-js/sdk";

const [url, text, key] = process.argv.slice(2);
const options = ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
  transports: [new GrpcTransportFactory()],
  preferredTransports: ["GRPC"],
});
const factory = new ClientFactory(options);
const card = await (await fetch(`${url}/.well-known/agent-card.json`)).json();
const grpc = card.supportedInterfaces.find((i) => i.protocolBinding === "GRPC");
const client = await factory.createFromAgentCard(card);
const context = key ? { serviceParameters: { "x-api-key": key } } : undefined;
const part = { content: { $case: "text", value: text }, metadata: undefined, filename: "", mediaType: "" };
const message = {
  messageId: randomUUID(), contextId: "", taskId: "", role: Role.ROLE_USER, parts: [part],
  metadata: undefined, extensions: [], referenceTaskIds: [],
};
const answer = await client.sendMessage({ tenant: grpc.tenant, message }, context);
console.log(JSON.stringify({ interface: grpc, answer }));
