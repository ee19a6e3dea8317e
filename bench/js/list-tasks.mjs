// The official @a2a-js/sdk client's ListTasks on one context: what a JS caller of ranch runs.
// Usage: node list-tasks.mjs <agent URL> <JSONRPC|HTTP+JSON> <contextId>; prints {"tasks": [ids]}.
import { ClientFactory, ClientFactoryOptions } from "@a2a-js/sdk/client";

const [url, binding, contextId] = process.argv.slice(2);
const options = ClientFactoryOptions.createFrom(ClientFactoryOptions.default, { preferredTransports: [binding] });
const client = await new ClientFactory(options).createFromUrl(`${url}/.well-known/agent-card.json`, "");
const listed = await client.listTasks({ contextId });
console.log(JSON.stringify({ tasks: listed.tasks.map((task) => task.id) }));
