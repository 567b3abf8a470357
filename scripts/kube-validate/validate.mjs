// Validates Kubernetes manifests against the Kubernetes API's OpenAPI schemas, as packaged by
// kubernetes-models (one JSON schema per kind, checked with ajv).
// Usage: node validate.mjs FILE.yaml...   (each file may hold several documents)
// Prints one line per document ("ok FILE[i] Kind/name" or "error FILE[i] …" with each schema
// error) and exits 1 when any document is invalid, is of an unknown kind or does not parse.
import { readFileSync } from "node:fs";
import { parseAllDocuments } from "yaml";

async function modelFor(apiVersion, kind) {
	if (typeof apiVersion !== "string" || typeof kind !== "string" || !/^[A-Za-z0-9]+$/.test(kind))
		throw new Error(`apiVersion and kind must be strings (got ${JSON.stringify(apiVersion)}, ${JSON.stringify(kind)})`);
	const parts = apiVersion.split("/");
	if (parts.length > 2 || parts.some((p) => !/^[a-z0-9.-]+$/.test(p)))
		throw new Error(`apiVersion ${JSON.stringify(apiVersion)} is not GROUP/VERSION or VERSION`);
	let mod;
	try {
		mod = await import(`kubernetes-models/${apiVersion}/${kind}`);
	} catch {
		throw new Error(`no schema for ${kind} in ${apiVersion} (unknown kind or API version)`);
	}
	if (typeof mod[kind] !== "function")
		throw new Error(`no schema for ${kind} in ${apiVersion}`);
	return mod[kind];
}

let failed = 0;
for (const file of process.argv.slice(2)) {
	let docs;
	try {
		docs = parseAllDocuments(readFileSync(file, "utf8"), { prettyErrors: true });
	} catch (err) {
		console.log(`error ${file}: ${err.message}`);
		failed++;
		continue;
	}
	if (!Array.isArray(docs)) docs = [docs];
	let i = 0;
	for (const doc of docs) {
		const where = `${file}[${i++}]`;
		if (doc.errors.length) {
			console.log(`error ${where}: YAML: ${doc.errors.map((e) => e.message).join("; ")}`);
			failed++;
			continue;
		}
		const obj = doc.toJS();
		if (obj === null) continue; // an empty document (a trailing ---)
		try {
			const Model = await modelFor(obj.apiVersion, obj.kind);
			new Model(obj).validate();
			console.log(`ok ${where} ${obj.kind}/${obj.metadata?.name ?? "?"}`);
		} catch (err) {
			const details = (err.errors ?? []).map(
				(e) => `${e.instancePath || "/"} ${e.message}${e.params?.additionalProperty ? ` (${e.params.additionalProperty})` : ""}`
			);
			console.log(`error ${where} ${obj?.kind ?? "?"}/${obj?.metadata?.name ?? "?"}: ${details.length ? details.join("; ") : err.message}`);
			failed++;
		}
	}
}
process.exit(failed ? 1 : 0);
