// The official MCP TypeScript SDK (pinned in package.json) as a client of station-sandbox's MCP
// server, for test/integration/test-mcp-sdk.sh. Prints one JSON document on stdout; the caller
// asserts on it. Every wait is bounded and says what it saw when it gives up.
//
//   node sdk-client.mjs list CLI SOCKET [MCP-FLAG...]
//       tools/list over stdio (the SDK starts `CLI --socket SOCKET mcp MCP-FLAG...`)
//   node sdk-client.mjs calls CLI SOCKET CALLS-JSON [MCP-FLAG...]
//       tools/call over stdio, one client, for each [TOOL, ARGS] of CALLS-JSON in turn; prints
//       the results (isError, content, structuredContent) in an array
//   node sdk-client.mjs http-cancel URL TOKEN WORKSPACE MARK
//       two clients over Streamable HTTP each start an exec (the same JSON-RPC id in each);
//       the first is cancelled through the SDK's AbortSignal; prints what the API then says
//       of both runs
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

const LONG = { timeout: 600000 }; // the SDK's own request timeout (60 s) is not under test

function stdioClient(cli, socket, flags) {
	const transport = new StdioClientTransport({
		command: cli,
		args: ['--socket', socket, 'mcp', ...flags],
		stderr: 'inherit',
	});
	return connect(transport);
}

async function connect(transport) {
	const client = new Client({ name: 'station-sandbox-test', version: '1' });
	await client.connect(transport);
	return client;
}

async function list([cli, socket, ...flags]) {
	const client = await stdioClient(cli, socket, flags);
	const res = await client.listTools();
	await client.close();
	return res;
}

async function calls([cli, socket, list, ...flags]) {
	const client = await stdioClient(cli, socket, flags);
	const results = [];
	for (const [name, args] of JSON.parse(list))
		results.push(await client.callTool({ name, arguments: args }, undefined, LONG));
	await client.close();
	return results;
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// Polls fn until it returns something other than undefined; throws what it last saw after ms.
async function waitFor(what, ms, fn) {
	const end = Date.now() + ms;
	let seen;
	for (;;) {
		const v = await fn((s) => (seen = s));
		if (v !== undefined)
			return v;
		if (Date.now() > end)
			throw new Error(`timed out after ${ms} ms waiting for ${what}; saw ${JSON.stringify(seen)}`);
		await sleep(50);
	}
}

async function httpCancel([url, token, ws, mark]) {
	const base = new URL(url);
	const api = async (path) => {
		const r = await fetch(new URL(path, base), { headers: { Authorization: `Bearer ${token}` } });
		if (r.status !== 200)
			throw new Error(`GET ${path}: ${r.status} ${await r.text()}`);
		return r.json();
	};
	const runOf = async (command) => {
		const list = await api(`/v1/workspaces/${ws}/commands`);
		return list.commands.find((run) => run.command === command);
	};
	const http = () => new StreamableHTTPClientTransport(base, {
		requestInit: { headers: { Authorization: `Bearer ${token}` } },
	});
	const a = await connect(http());
	const b = await connect(http());
	const cmdA = `sleep 60.${mark}1`;
	const cmdB = `sleep 3.${mark}2; echo b-done`;
	const abort = new AbortController();
	const exec = (client, command, signal) => client.callTool(
		{ name: 'exec', arguments: { workspaceId: ws, command, waitMs: 120000, timeoutMs: 300000 } },
		undefined, { ...LONG, signal });
	const callA = exec(a, cmdA, abort.signal).then(
		(res) => ({ resolved: res }), (err) => ({ rejected: String(err) }));
	const callB = exec(b, cmdB);
	const running = (command) => waitFor(`'${command}' to run`, 30000, async (saw) => {
		const run = await runOf(command);
		saw(run ?? 'no such run');
		return run?.status === 'running' ? run : undefined;
	});
	const runA = await running(cmdA);
	await running(cmdB);
	const cancelledAt = Date.now();
	abort.abort('the test cancels it');
	const outcomeA = await callA;
	let statusA;
	try {
		statusA = await waitFor(`run ${runA.id} to end`, 30000, async (saw) => {
			const run = await runOf(cmdA);
			saw(run?.status);
			return run?.status !== 'running' ? run?.status : undefined;
		});
	} catch (e) {
		statusA = `still ${(await runOf(cmdA))?.status}: ${e.message}`;
	}
	const endedMs = Date.now() - cancelledAt;
	const resB = await callB;
	const statusB = (await runOf(cmdB))?.status;
	await a.close();
	await b.close();
	return {
		runA: runA.id,
		statusA,
		endedMs,
		callA: outcomeA,
		resultB: resB.structuredContent,
		statusB,
	};
}

const modes = { list, calls, 'http-cancel': httpCancel };
const [mode, ...rest] = process.argv.slice(2);
if (!modes[mode]) {
	console.error(`usage: sdk-client.mjs ${Object.keys(modes).join('|')} ...`);
	process.exit(2);
}
try {
	process.stdout.write(JSON.stringify(await modes[mode](rest)) + '\n');
	process.exit(0);
} catch (e) {
	console.error(`sdk-client ${mode}: ${e.stack ?? e}`);
	process.exit(1);
}
