// Wake Ledger's observer for an OpenClaw Gateway: model-free, never in a turn's way.
//
// Every hook hands a few facts to a local `wakeledger hook openclaw` process
// (JSON on stdin) and waits for it at most `timeoutMs` (4 s): that process
// admits the turn, binds the session to a goal and reads how a run ended with
// the product's own classifier, so a provider's error text is parsed on this
// machine and never sent to the server (docs/agents.md §2). A server that is
// down, a slow answer or a crash is one log line; the turn goes on.
import { spawn } from "node:child_process";
import { definePluginEntry } from "openclaw/plugin-sdk/plugin-entry";

type Facts = Record<string, unknown>;

const REMEMBERED = 500;
// Whether the hook admitted each run as an owner's turn (before_prompt_build
// sees the message; agent_end does not).
const owners = new Map<string, boolean>();
// A generic 429 is retried inside one run (2, 4, 8 s apart by default), and
// every attempt fires agent_end with the same runId: the hook holds a failed
// attempt, and this timer tells it the run has ended when no other attempt
// came within settleMs. A later clean attempt cancels it: the run recovered.
const settling = new Map<string, ReturnType<typeof setTimeout>>();
// Runs whose end was reported (a clean attempt, or the settle): a later
// agent_end of the same run is dropped, as a second report of one run would
// read as a turn finished by hand (SESSION_ACTIVITY).
const ended = new Set<string>();
// The outcome of each run's latest model call (model_call_ended: "completed"
// or "error", no conversation text): the run-end signal. After a provider 429
// agent_end says success: true, so without this the failure is only in the
// last assistant message.
const calls = new Map<string, string>();
// The one line the person must read when the hook would not track their chat
// (a refusal, no server): written into the session's chat when the run ends.
const notices = new Map<string, { text: string; ctx: Facts }>();

function remember<V>(map: Map<string, V>, key: string, value: V): void {
  map.delete(key);
  map.set(key, value);
  if (map.size > REMEMBERED) map.delete(map.keys().next().value as string);
}

function end(runId: string): void {
  ended.add(runId);
  if (ended.size > REMEMBERED) ended.delete(ended.values().next().value as string);
}

function lastAssistant(messages: unknown): Facts | undefined {
  if (!Array.isArray(messages)) return undefined;
  for (let i = messages.length - 1; i >= 0; i--) {
    const m = messages[i] as Facts | undefined;
    if (m && m.role === "assistant") return m;
  }
  return undefined;
}

export default definePluginEntry({
  id: "wakeledger",
  name: "Wake Ledger",
  description: "Admits owner turns and reports how each run ended (class and reset only).",
  register(api) {
    const config = (api.pluginConfig ?? {}) as {
      url?: string; command?: string[]; timeoutMs?: number; dispatch?: string;
      settleMs?: number;
    };
    const timeoutMs = config.timeoutMs ?? 4000;
    const settleMs = config.settleMs ?? 30000;
    const log = api.logger ?? console;

    // Run the local hook; answer its JSON output, or undefined after timeoutMs.
    function hook(facts: Facts): Promise<Facts | undefined> {
      const argv = config.command;
      if (!argv?.length || !config.url) return Promise.resolve(undefined);
      return new Promise((resolve) => {
        let out = "";
        let done = false;
        const finish = (value: Facts | undefined) => {
          if (!done) { done = true; clearTimeout(timer); resolve(value); }
        };
        let child;
        try {
          child = spawn(argv[0], [...argv.slice(1), "hook", "openclaw"], {
            env: {
              ...process.env, WAKELEDGER_URL: config.url,
              ...(config.dispatch ? { WAKELEDGER_DISPATCH: config.dispatch } : {}),
            },
            stdio: ["pipe", "pipe", "pipe"],
          });
        } catch (error) {
          log.warn?.(`wakeledger: cannot start the hook: ${String(error)}`);
          return finish(undefined);
        }
        const timer = setTimeout(() => {
          log.warn?.(`wakeledger: the hook took over ${timeoutMs} ms; the turn goes on`);
          child.kill("SIGKILL");
          finish(undefined);
        }, timeoutMs);
        child.on("error", (error: Error) => { log.warn?.(`wakeledger: ${error.message}`); finish(undefined); });
        child.stdout.on("data", (chunk: Buffer) => { out += chunk.toString(); });
        child.stderr.on("data", (chunk: Buffer) => {
          const line = chunk.toString().trim();
          if (line) log.info?.(line);
        });
        child.on("close", () => {
          try { finish(out.trim() ? JSON.parse(out) : undefined); } catch { finish(undefined); }
        });
        child.stdin.on("error", () => {});
        child.stdin.end(JSON.stringify(facts));
      });
    }

    function session(ctx: Facts): Facts {
      const provider = ctx.modelProviderId ?? ctx.provider;
      const model = ctx.modelId ?? ctx.model;
      return {
        sessionKey: ctx.sessionKey, sessionId: ctx.sessionId, agentId: ctx.agentId,
        runId: ctx.runId, trigger: ctx.trigger, jobId: ctx.jobId,
        provenance: (ctx.inputProvenance as Facts | undefined)?.kind,
        model: provider && model ? `${provider}/${model}` : model,
        workspace: ctx.workspaceDir,
      };
    }

    api.on("before_prompt_build", async (event: Facts, ctx: Facts) => {
      const answer = await hook({ hook: "before_prompt_build", ...session(ctx), prompt: event.prompt });
      if (ctx.runId) {
        remember(owners, String(ctx.runId), answer?.owner === true);
        if (typeof answer?.notice === "string" && answer.notice) {
          remember(notices, String(ctx.runId), { text: answer.notice, ctx });
        }
      }
      const context = answer?.context;
      return typeof context === "string" && context ? { prependContext: context } : undefined;
    });

    // Written after the run, when the transcript is no longer the run's: an
    // assistant entry the chat shows, no model call. Failing that, the log.
    async function tell(runId: string): Promise<void> {
      const notice = notices.get(runId);
      if (!notice) return;
      notices.delete(runId);
      try {
        const transcripts = await import("openclaw/plugin-sdk/session-transcript-runtime");
        const written = await transcripts.appendAssistantMirrorMessageByIdentity({
          agentId: notice.ctx.agentId, sessionKey: notice.ctx.sessionKey,
          sessionId: notice.ctx.sessionId, text: notice.text,
          config: api.runtime?.config?.current?.() ?? api.config,
        });
        if (!written?.ok) log.warn?.(`wakeledger: ${notice.text} (not written: ${written?.reason})`);
      } catch (error) {
        log.warn?.(`wakeledger: ${notice.text} (not written: ${String(error)})`);
      }
    }

    api.on("model_call_ended", (event: Facts, ctx: Facts) => {
      const runId = String(event.runId ?? ctx.runId ?? "");
      if (runId && typeof event.outcome === "string") remember(calls, runId, event.outcome);
    });

    api.on("agent_end", (event: Facts, ctx: Facts) => {
      const runId = String(event.runId ?? ctx.runId ?? "");
      if (!runId || ended.has(runId)) return;
      void tell(runId);
      const last = lastAssistant(event.messages);
      const callOutcome = calls.get(runId);
      clearTimeout(settling.get(runId));
      settling.delete(runId);
      const failed = callOutcome ? callOutcome === "error" : last?.stopReason === "error";
      if (failed) {
        // Held by the hook until the run ends: reported then, unless a later
        // attempt of the same run ends cleanly first.
        settling.set(runId, setTimeout(() => {
          settling.delete(runId);
          end(runId);
          void hook({ hook: "run_settled", ...session(ctx), runId });
        }, settleMs));
      } else {
        end(runId);
      }
      // Not awaited: the report never holds up the end of a turn.
      void hook({
        hook: "agent_end", ...session(ctx), runId, owner: owners.get(runId) === true,
        callOutcome, stopReason: last?.stopReason, errorMessage: last?.errorMessage,
        errorCode: last?.errorCode, errorType: last?.errorType,
      });
    });
  },
});
