// One conversation with an AG-UI server through the official client (@ag-ui/client's HttpAgent), as a frontend
// runs it: run the agent on a user message; while the run ends in interrupts, answer each from ANSWERS and resume.
// Usage: node run_agent.mjs URL KEY THREAD MESSAGE ANSWERS_JSON [OPEN_INTERRUPTS_JSON]
//   ANSWERS_JSON: a list, one answer per interrupt, in order;
//   OPEN_INTERRUPTS_JSON: interrupts a frontend kept from an earlier page (then MESSAGE is not sent: it resumes).
// Prints one JSON object: every event the client let through (it validates them) per run, the interrupts each run
// ended in, the client's messages at the end and, if the client refused the stream, its error.
import { HttpAgent, buildResumeArray } from "@ag-ui/client";

const [url, key, threadId, message, answersJson, openJson] = process.argv.slice(2);
const answers = JSON.parse(answersJson);
const agent = new HttpAgent({ url, threadId, headers: { Authorization: `Bearer ${key}` } });
const runs = [];

function answer() {
  const open = agent.pendingInterrupts;
  if (answers.length < open.length) throw new Error(`no answer left for ${open.length} interrupt(s)`);
  return buildResumeArray(open, Object.fromEntries(open.map((i) => [i.id, { status: "resolved", payload: answers.shift() }])));
}

let resume;
if (openJson === undefined) agent.addMessage({ id: "m-user-1", role: "user", content: message });
else {
  agent.pendingInterrupts = JSON.parse(openJson);
  resume = answer();
}
try {
  for (;;) {
    const events = [];
    await agent.runAgent(resume === undefined ? {} : { resume }, { onEvent: ({ event }) => { events.push(event); } });
    const interrupts = agent.pendingInterrupts.map((i) => ({ ...i }));
    runs.push({ events, interrupts });
    if (interrupts.length === 0 || answers.length === 0) break;
    resume = answer();
  }
  console.log(JSON.stringify({ runs, messages: agent.messages }));
} catch (error) {
  console.log(JSON.stringify({ runs, messages: agent.messages, error: String(error?.message ?? error) }));
}
